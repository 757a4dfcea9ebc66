//! Diagnostics: declaration and observation rules.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::num::NonZeroU64;

use wattline_diagnostics::{
    BuiltinDiagnosticCode, ComponentDeclaration, ComponentState, DeclarationProblem,
    DiagnosticCode, DiagnosticError, DiagnosticOutcome, FailureClass, Observation,
    ObservationProblem, PipelineCode,
};

use diagnostics_support::*;

// ---------------------------------------------------------------- declaration and observation rules

#[test]
fn failure_without_class_is_rejected() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let error = component
        .try_record_lazy(|| {
            let mut observation =
                Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN);
            observation.failure_class = None;
            observation
        })
        .expect_err("missing class");
    assert_eq!(error.reason(), "invalid_observation");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::MissingFailureClass { code: 1 })
    );
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_failed"), 0);
}

#[test]
fn failure_with_disallowed_class_is_rejected() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let error = component
        .try_record_lazy(|| Observation::failure(1, FailureClass::Timeout, "x", NonZeroU64::MIN))
        .expect_err("timeout not allowed");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::DisallowedFailureClass {
            code: 1,
            class: FailureClass::Timeout
        })
    );
    // Both declared classes are accepted.
    receipt(
        component.try_record_lazy(|| {
            Observation::failure(1, FailureClass::NotFound, "x", NonZeroU64::MIN)
        }),
    );
    receipt(component.try_record_lazy(|| {
        Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN)
    }));
}

#[test]
fn success_with_class_is_rejected() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let error = component
        .try_record_lazy(|| {
            let mut observation = Observation::success(2, "x", NonZeroU64::MIN);
            observation.failure_class = Some(FailureClass::Io);
            observation
        })
        .expect_err("success with class");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::UnexpectedFailureClass {
            code: 2,
            class: FailureClass::Io
        })
    );
}

#[test]
fn outcome_must_match_declared_outcome_including_unknown() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    // Unknown-outcome code accepts only unknown observations.
    let accepted =
        receipt(component.try_record_lazy(|| Observation::unknown(3, "nothing", NonZeroU64::MIN)));
    assert_eq!(accepted.code_total, 1);
    let error = component
        .try_record_lazy(|| Observation::success(3, "x", NonZeroU64::MIN))
        .expect_err("success on unknown code");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::OutcomeMismatch {
            code: 3,
            declared: DiagnosticOutcome::Unknown,
            observed: DiagnosticOutcome::Success
        })
    );
    let error = component
        .try_record_lazy(|| Observation::success(1, "x", NonZeroU64::MIN))
        .expect_err("success on failure code");
    assert_eq!(error.reason(), "invalid_observation");
    let error = component
        .try_record_lazy(|| Observation::success(0, "x", NonZeroU64::MIN))
        .expect_err("position 0");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::UnknownCode {
            code: 0,
            declared: 3
        })
    );
}

#[test]
fn extension_class_rules_are_checked_at_declaration() {
    let diagnostics = context();
    let declare = |code: DiagnosticCode<'static>| {
        let codes = [code];
        diagnostics.component_lazy(|| ComponentDeclaration {
            name: "rules.c",
            codes: &codes,
        })
    };
    let non_failure_with_classes = declare(DiagnosticCode::Extension {
        name: "done",
        description: "d",
        outcome: DiagnosticOutcome::Success,
        allowed_classes: &[FailureClass::Io],
    });
    assert_eq!(
        non_failure_with_classes.expect_err("success with classes"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::NonFailureWithClasses {
            position: 1
        })
    );
    let unknown_with_classes = declare(DiagnosticCode::Extension {
        name: "probe",
        description: "d",
        outcome: DiagnosticOutcome::Unknown,
        allowed_classes: &[FailureClass::Io],
    });
    assert_eq!(
        unknown_with_classes
            .expect_err("unknown with classes")
            .reason(),
        "invalid_declaration"
    );
    let failure_without_classes = declare(DiagnosticCode::Extension {
        name: "failed",
        description: "d",
        outcome: DiagnosticOutcome::Failure,
        allowed_classes: &[],
    });
    assert_eq!(
        failure_without_classes.expect_err("failure without classes"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::FailureWithoutClasses {
            position: 1
        })
    );
    let duplicate_class = declare(DiagnosticCode::Extension {
        name: "failed",
        description: "d",
        outcome: DiagnosticOutcome::Failure,
        allowed_classes: &[FailureClass::Io, FailureClass::Io],
    });
    assert_eq!(
        duplicate_class.expect_err("duplicate class"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::DuplicateClass {
            position: 1,
            class: FailureClass::Io
        })
    );
    // Nothing was charged by the refused declarations.
    let usage = diagnostics.usage().expect("usage");
    assert_eq!(
        (
            usage.live_components,
            usage.extension_declarations,
            usage.registration_text_bytes
        ),
        (0, 0, 0)
    );
}

#[test]
fn names_and_vocabulary_are_validated() {
    let diagnostics = context();
    let long = "a".repeat(129);
    for bad in ["", "Upper", "a..b", ".a", "a.", "a-b", "a b", long.as_str()] {
        let error = builtin_component(&diagnostics, bad).expect_err("bad name");
        assert_eq!(
            error,
            DiagnosticError::InvalidDeclaration(DeclarationProblem::InvalidComponentName {
                name: bad.to_owned()
            }),
            "name {bad:?}"
        );
    }
    builtin_component(&diagnostics, &"a".repeat(128)).expect("128 bytes ok");
    builtin_component(&diagnostics, "a1_b.c2").expect("dotted ok");

    let reserved = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "vocab.reserved",
        codes: &[DiagnosticCode::Extension {
            name: "plugin.internal",
            description: "d",
            outcome: DiagnosticOutcome::Success,
            allowed_classes: &[],
        }],
    });
    assert!(matches!(
        reserved,
        Err(DiagnosticError::InvalidDeclaration(
            DeclarationProblem::ReservedCodeName { position: 1, .. }
        ))
    ));
    let duplicate = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "vocab.duplicate",
        codes: &[
            DiagnosticCode::Builtin(BuiltinDiagnosticCode::PluginTimeout),
            DiagnosticCode::Builtin(BuiltinDiagnosticCode::PluginTimeout),
        ],
    });
    assert!(matches!(
        duplicate,
        Err(DiagnosticError::InvalidDeclaration(
            DeclarationProblem::DuplicateCode { position: 2, .. }
        ))
    ));
    let empty = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "vocab.empty",
        codes: &[],
    });
    assert_eq!(
        empty.expect_err("no codes"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::NoCodes)
    );
    let blank = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "vocab.blank",
        codes: &[DiagnosticCode::Extension {
            name: "x",
            description: "  ",
            outcome: DiagnosticOutcome::Success,
            allowed_classes: &[],
        }],
    });
    assert_eq!(
        blank.expect_err("blank description"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::EmptyDescription { position: 1 })
    );
    let host_owned = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "vocab.host",
        codes: &[DiagnosticCode::Builtin(BuiltinDiagnosticCode::Pipeline(
            PipelineCode::TickMissed,
        ))],
    });
    assert_eq!(
        host_owned.expect_err("host-owned code"),
        DiagnosticError::InvalidDeclaration(DeclarationProblem::HostOwnedCode {
            position: 1,
            name: "pipeline.tick_missed"
        })
    );
}

#[test]
fn duplicate_live_name_rejected_until_closed() {
    let diagnostics = context();
    let first = builtin_component(&diagnostics, "dup.name").expect("first");
    let error = builtin_component(&diagnostics, "dup.name").expect_err("duplicate");
    assert_eq!(error.reason(), "duplicate_component");
    first.close();
    let second = builtin_component(&diagnostics, "dup.name").expect("after close");
    assert!(!second.is_closed());
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let states: Vec<ComponentState> = snapshot
        .components
        .iter()
        .filter(|c| c.name == "dup.name")
        .map(|c| c.state)
        .collect();
    assert_eq!(states, vec![ComponentState::Closed, ComponentState::Open]);
}

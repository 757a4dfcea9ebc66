//! Integration tests of the diagnostics module: limits at their edges, rules, storage and pipeline.

use std::cell::Cell;
use std::collections::HashSet;
use std::io;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wattline_actors::diagnostics::{
    Availability, BuiltinDiagnosticCode, CodeOrigin, ComponentDeclaration, ComponentState,
    DeclarationProblem, DiagnosticCode, DiagnosticComponent, DiagnosticError, DiagnosticOutcome,
    Diagnostics, DiagnosticsLimits, DiagnosticsSnapshot, EvidenceDisposition, ExporterCode,
    FailureClass, GpuCode, Observation, ObservationProblem, PipelineCode, PipelineComponent,
    PipelineDiagnostics, RecordOutcome, RecordReceipt, SamplerCategory, SamplerFailure, Severity,
};

// ---------------------------------------------------------------- helpers

fn context() -> Diagnostics {
    Diagnostics::new(DiagnosticsLimits::default()).expect("default limits are valid")
}

fn context_with(change: impl FnOnce(&mut DiagnosticsLimits)) -> Diagnostics {
    let mut limits = DiagnosticsLimits::default();
    change(&mut limits);
    Diagnostics::new(limits).expect("test limits are valid")
}

fn n(count: u64) -> NonZeroU64 {
    NonZeroU64::new(count).expect("non-zero count")
}

/// Registers `name` with one built-in failure code (`plugin.unavailable`), no extensions.
fn builtin_component(
    diagnostics: &Diagnostics,
    name: &str,
) -> Result<DiagnosticComponent, DiagnosticError> {
    diagnostics.component_lazy(|| ComponentDeclaration {
        name,
        codes: &[DiagnosticCode::Builtin(
            BuiltinDiagnosticCode::PluginUnavailable,
        )],
    })
}

/// Owned extension names for dynamic declarations.
fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}_{i}")).collect()
}

/// Success extensions borrowing `names`.
fn success_extensions(names: &[String]) -> Vec<DiagnosticCode<'_>> {
    names
        .iter()
        .map(|name| DiagnosticCode::Extension {
            name,
            description: "d",
            outcome: DiagnosticOutcome::Success,
            allowed_classes: &[],
        })
        .collect()
}

/// A component with: 1 failure (unavailable, not_found), 2 success, 3 unknown.
fn mixed_component(diagnostics: &Diagnostics) -> DiagnosticComponent {
    diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "test.mixed",
            codes: &[
                DiagnosticCode::Extension {
                    name: "op_failed",
                    description: "An operation failed",
                    outcome: DiagnosticOutcome::Failure,
                    allowed_classes: &[FailureClass::Unavailable, FailureClass::NotFound],
                },
                DiagnosticCode::Extension {
                    name: "op_completed",
                    description: "An operation completed",
                    outcome: DiagnosticOutcome::Success,
                    allowed_classes: &[],
                },
                DiagnosticCode::Extension {
                    name: "op_probed",
                    description: "A probe found nothing to report",
                    outcome: DiagnosticOutcome::Unknown,
                    allowed_classes: &[],
                },
            ],
        })
        .expect("mixed component registers")
}

fn receipt(outcome: Result<RecordOutcome, DiagnosticError>) -> RecordReceipt {
    match outcome.expect("recording accepted") {
        RecordOutcome::Recorded(receipt) => receipt,
        RecordOutcome::Disabled => panic!("expected Recorded, got Disabled"),
    }
}

fn occurrences(snapshot: &DiagnosticsSnapshot, component: &str, code: &str) -> u64 {
    snapshot
        .component(component)
        .and_then(|c| c.code(code))
        .map(|c| c.occurrences)
        .expect("component and code present")
}

// ---------------------------------------------------------------- spec example

fn register_lookup_diagnostics(
    diagnostics: &Diagnostics,
) -> Result<DiagnosticComponent, DiagnosticError> {
    diagnostics.component_lazy(|| ComponentDeclaration {
        name: "example.lookup",
        codes: &[
            DiagnosticCode::Extension {
                name: "lookup_failed",
                description: "The lookup backend was unavailable",
                outcome: DiagnosticOutcome::Failure,
                allowed_classes: &[FailureClass::Unavailable],
            },
            DiagnosticCode::Extension {
                name: "lookup_completed",
                description: "A lookup completed",
                outcome: DiagnosticOutcome::Success,
                allowed_classes: &[],
            },
        ],
    })
}

fn record_lookup_failure(
    component: &DiagnosticComponent,
    request_id: &str,
) -> Result<RecordOutcome, DiagnosticError> {
    component.try_record_lazy(|| {
        let mut observation = Observation::failure(
            1,
            FailureClass::Unavailable,
            "The lookup backend was unavailable",
            NonZeroU64::MIN,
        );
        observation.correlation.request_id = Some(request_id.into());
        observation
    })
}

fn record_lookup_success(
    component: &DiagnosticComponent,
    request_id: &str,
) -> Result<RecordOutcome, DiagnosticError> {
    component.try_record_lazy(|| {
        let mut observation = Observation::success(2, "A lookup completed", NonZeroU64::MIN);
        observation.correlation.request_id = Some(request_id.into());
        observation
    })
}

#[test]
fn spec_lookup_example_records_failure_then_independent_success() {
    let diagnostics = context();
    let component = register_lookup_diagnostics(&diagnostics).expect("registers");
    let failed = receipt(record_lookup_failure(&component, "req-1"));
    let completed = receipt(record_lookup_success(&component, "req-2"));
    assert_eq!((failed.sequence, failed.code_total), (1, 1));
    assert_eq!((completed.sequence, completed.code_total), (2, 1));
    assert_eq!(failed.evidence, EvidenceDisposition::Retained);

    let snapshot = diagnostics.snapshot().expect("snapshot");
    // Success does not erase the earlier failure.
    assert_eq!(occurrences(&snapshot, "example.lookup", "lookup_failed"), 1);
    assert_eq!(
        occurrences(&snapshot, "example.lookup", "lookup_completed"),
        1
    );
    let events = &snapshot.recent_events;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].correlation.request_id.as_deref(), Some("req-1"));
    assert_eq!(events[0].failure_class, Some(FailureClass::Unavailable));
    assert_eq!(events[0].severity, Severity::Error);
    assert_eq!(events[1].code, "lookup_completed");
    assert_eq!(events[1].failure_class, None);
    assert_eq!(events[1].severity, Severity::Info);
}

// ---------------------------------------------------------------- admission limits

#[test]
fn eighth_live_component_accepted_ninth_rejected() {
    let diagnostics = context();
    let components: Vec<DiagnosticComponent> = (0..8)
        .map(|i| builtin_component(&diagnostics, &format!("limit.c{i}")).expect("within limit"))
        .collect();
    assert_eq!(components.len(), 8);
    assert_eq!(diagnostics.usage().expect("usage").live_components, 8);
    let error = builtin_component(&diagnostics, "limit.c8").expect_err("ninth rejected");
    assert_eq!(error.reason(), "component_limit");
    assert_eq!(error, DiagnosticError::ComponentLimit { limit: 8 });
    // A refused registration charges nothing.
    let usage = diagnostics.usage().expect("usage");
    assert_eq!(usage.live_components, 8);
    assert_eq!(
        usage.registration_text_bytes,
        (0..8)
            .map(|i| format!("limit.c{i}").len() + "plugin.unavailable".len())
            .sum::<usize>()
    );
}

#[test]
fn closing_a_component_frees_a_live_slot() {
    let diagnostics = context();
    let components: Vec<DiagnosticComponent> = (0..8)
        .map(|i| builtin_component(&diagnostics, &format!("slot.c{i}")).expect("within limit"))
        .collect();
    assert!(components[3].close(), "first close closes");
    assert!(!components[3].close(), "second close is a no-op");
    let replacement = builtin_component(&diagnostics, "slot.c8").expect("freed slot reused");
    assert!(!replacement.is_closed());
    let error = builtin_component(&diagnostics, "slot.c9").expect_err("full again");
    assert_eq!(error.reason(), "component_limit");
}

#[test]
fn lowered_component_limit_is_enforced() {
    let diagnostics = context_with(|l| l.max_live_components = 2);
    let _a = builtin_component(&diagnostics, "low.a").expect("first");
    let _b = builtin_component(&diagnostics, "low.b").expect("second");
    let error = builtin_component(&diagnostics, "low.c").expect_err("third");
    assert_eq!(error, DiagnosticError::ComponentLimit { limit: 2 });
}

fn thirty_two_code_declaration<'a>(extension_names: &'a [String]) -> Vec<DiagnosticCode<'a>> {
    let mut codes: Vec<DiagnosticCode<'a>> = BuiltinDiagnosticCode::all()
        .filter(|code| !code.is_host_owned())
        .map(DiagnosticCode::Builtin)
        .collect();
    assert_eq!(codes.len(), 16, "sixteen plugin built-ins");
    codes.extend(success_extensions(extension_names));
    codes
}

#[test]
fn thirty_two_codes_accepted_thirty_three_rejected() {
    let diagnostics = context();
    let sixteen = names("ext", 16);
    let codes = thirty_two_code_declaration(&sixteen);
    assert_eq!(codes.len(), 32);
    let component = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "codes.full",
            codes: &codes,
        })
        .expect("32 codes accepted");
    // Position 32 exists; 33 does not.
    receipt(component.try_record_lazy(|| Observation::success(32, "last", NonZeroU64::MIN)));
    let error = component
        .try_record_lazy(|| Observation::success(33, "past", NonZeroU64::MIN))
        .expect_err("position 33 rejected");
    assert_eq!(
        error,
        DiagnosticError::InvalidObservation(ObservationProblem::UnknownCode {
            code: 33,
            declared: 32
        })
    );

    let fresh = context();
    let mut too_many = codes.clone();
    too_many.push(DiagnosticCode::Extension {
        name: "one_more",
        description: "d",
        outcome: DiagnosticOutcome::Success,
        allowed_classes: &[],
    });
    let error = fresh
        .component_lazy(|| ComponentDeclaration {
            name: "codes.over",
            codes: &too_many,
        })
        .expect_err("33 codes rejected");
    assert_eq!(error.reason(), "code_limit");
    assert_eq!(
        error,
        DiagnosticError::CodeLimit {
            declared: 33,
            limit: 32
        }
    );
    assert_eq!(fresh.usage().expect("usage").live_components, 0);
}

#[test]
fn extension_budget_is_cumulative_and_survives_close() {
    let diagnostics = context();
    let ten = names("a", 10);
    let six = names("b", 6);
    let ten_codes = success_extensions(&ten);
    let six_codes = success_extensions(&six);
    let first = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "ext.first",
            codes: &ten_codes,
        })
        .expect("10 extensions");
    let second = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "ext.second",
            codes: &six_codes,
        })
        .expect("16th extension accepted");
    assert_eq!(
        diagnostics.usage().expect("usage").extension_declarations,
        16
    );
    first.close();
    drop(second);
    assert_eq!(diagnostics.usage().expect("usage").live_components, 0);

    let error = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "ext.third",
            codes: &[DiagnosticCode::Extension {
                name: "seventeenth",
                description: "d",
                outcome: DiagnosticOutcome::Success,
                allowed_classes: &[],
            }],
        })
        .expect_err("17th extension rejected after close");
    assert_eq!(error.reason(), "extension_limit");
    assert_eq!(
        error,
        DiagnosticError::ExtensionLimit {
            used: 16,
            requested: 1,
            limit: 16
        }
    );
    // Built-ins still register: they do not spend the extension budget.
    builtin_component(&diagnostics, "ext.builtin_only").expect("built-in only");
}

#[test]
fn seventeen_extensions_in_one_declaration_rejected() {
    let diagnostics = context();
    let seventeen = names("x", 17);
    let codes = success_extensions(&seventeen);
    let error = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "ext.many",
            codes: &codes,
        })
        .expect_err("17 extensions");
    assert_eq!(error.reason(), "extension_limit");
    assert_eq!(
        diagnostics.usage().expect("usage").extension_declarations,
        0
    );
}

/// A declaration charging exactly `total` registration text bytes.
fn text_declaration_description(total: usize) -> String {
    // name "text.budget" (11) + extension name "big" (3) + description.
    "x".repeat(total - 11 - 3)
}

fn big_extension(description: &str) -> DiagnosticCode<'_> {
    DiagnosticCode::Extension {
        name: "big",
        description,
        outcome: DiagnosticOutcome::Success,
        allowed_classes: &[],
    }
}

#[test]
fn registration_text_budget_exact_edge() {
    let diagnostics = context();
    let description = text_declaration_description(16_384);
    let codes = [big_extension(&description)];
    let component = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "text.budget",
            codes: &codes,
        })
        .expect("exactly 16384 bytes accepted");
    assert_eq!(
        diagnostics.usage().expect("usage").registration_text_bytes,
        16_384
    );
    // Closing does not restore the budget: even the smallest registration is refused.
    component.close();
    let error = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "t",
            codes: &[DiagnosticCode::Extension {
                name: "s",
                description: "d",
                outcome: DiagnosticOutcome::Success,
                allowed_classes: &[],
            }],
        })
        .expect_err("budget spent");
    assert_eq!(
        error,
        DiagnosticError::RegistrationTextLimit {
            used: 16_384,
            requested: 3,
            limit: 16_384
        }
    );
}

#[test]
fn registration_text_one_byte_over_rejected_and_not_charged() {
    let diagnostics = context();
    let description = text_declaration_description(16_385);
    let codes = [big_extension(&description)];
    let error = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "text.budget",
            codes: &codes,
        })
        .expect_err("16385 bytes rejected");
    assert_eq!(error.reason(), "registration_text_limit");
    assert_eq!(
        error,
        DiagnosticError::RegistrationTextLimit {
            used: 0,
            requested: 16_385,
            limit: 16_384
        }
    );
    let usage = diagnostics.usage().expect("usage");
    assert_eq!(usage.registration_text_bytes, 0);
    assert_eq!(usage.extension_declarations, 0);
}

#[test]
fn input_text_per_call_exact_edge() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let request = "r".repeat(8);
    let session = "s".repeat(8);
    let detail_ok = "d".repeat(16_384 - 16);
    let accepted = receipt(component.try_record_lazy(|| {
        Observation::success(2, detail_ok.as_str(), NonZeroU64::MIN)
            .with_request_id(request.as_str())
            .with_session_id(session.as_str())
    }));
    assert_eq!(accepted.code_total, 1);
    // The default 1024-byte detail cap applies to the retained event.
    assert_eq!(accepted.evidence, EvidenceDisposition::Truncated);

    let detail_over = "d".repeat(16_384 - 16 + 1);
    let error = component
        .try_record_lazy(|| {
            Observation::success(2, detail_over.as_str(), NonZeroU64::MIN)
                .with_request_id(request.as_str())
                .with_session_id(session.as_str())
        })
        .expect_err("16385 bytes rejected");
    assert_eq!(error.reason(), "input_text_limit");
    assert_eq!(
        error,
        DiagnosticError::InputTextLimit {
            bytes: 16_385,
            limit: 16_384
        }
    );
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 1);
    assert_eq!(snapshot.recent_events.len(), 1);
    assert_eq!(snapshot.delivery.accepted, 1);
    assert_eq!(snapshot.delivery.rejected, 1);
}

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

// ---------------------------------------------------------------- counts and storage

#[test]
fn counts_add_two_plus_three_is_five() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let first = receipt(
        component.try_record_lazy(|| Observation::failure(1, FailureClass::Unavailable, "a", n(2))),
    );
    let second = receipt(
        component.try_record_lazy(|| Observation::failure(1, FailureClass::NotFound, "b", n(3))),
    );
    assert_eq!(first.code_total, 2);
    assert_eq!(second.code_total, 5);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_failed"), 5);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 0);
    let code = snapshot
        .component("test.mixed")
        .and_then(|c| c.code("op_failed"))
        .expect("code");
    assert_eq!(
        code.last_observed_at,
        Some(snapshot.recent_events[1].recorded_at)
    );
    assert_eq!(snapshot.recent_events[0].count, 2);
    assert_eq!(snapshot.recent_events[1].count, 3);
}

#[test]
fn counts_saturate_instead_of_wrapping() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    receipt(component.try_record_lazy(|| Observation::success(2, "a", NonZeroU64::MAX)));
    let total = receipt(component.try_record_lazy(|| Observation::success(2, "b", n(1))));
    assert_eq!(total.code_total, u64::MAX);
}

#[test]
fn sequence_is_context_wide_in_accepted_order() {
    let diagnostics = context();
    let a = builtin_component(&diagnostics, "seq.a").expect("a");
    let b = builtin_component(&diagnostics, "seq.b").expect("b");
    let record = |c: &DiagnosticComponent| {
        receipt(c.try_record_lazy(|| {
            Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN)
        }))
        .sequence
    };
    let sequences = [record(&a), record(&b), record(&a), record(&b)];
    assert_eq!(sequences, [1, 2, 3, 4]);
    // A refused call does not consume a sequence.
    a.try_record_lazy(|| Observation::success(1, "x", NonZeroU64::MIN))
        .expect_err("mismatch");
    assert_eq!(record(&b), 5);
}

#[test]
fn disabled_context_skips_factories() {
    let diagnostics = Diagnostics::disabled();
    assert_eq!(diagnostics.availability(), Availability::Disabled);
    assert_eq!(diagnostics.capabilities(), None);
    let declaration_ran = Cell::new(false);
    let component = diagnostics
        .component_lazy(|| {
            declaration_ran.set(true);
            ComponentDeclaration {
                name: "disabled.c",
                codes: &[],
            }
        })
        .expect("disabled registration succeeds");
    assert!(!declaration_ran.get(), "declaration factory must not run");
    assert!(!component.is_enabled());
    assert_eq!(component.name(), None);

    let observation_ran = Cell::new(false);
    let outcome = component
        .try_record_lazy(|| {
            observation_ran.set(true);
            Observation::success(1, "x", NonZeroU64::MIN)
        })
        .expect("disabled record succeeds");
    assert_eq!(outcome, RecordOutcome::Disabled);
    assert_eq!(outcome.receipt(), None);
    assert!(!observation_ran.get(), "observation factory must not run");

    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(snapshot.availability, Availability::Disabled);
    assert!(snapshot.components.is_empty());
    assert_eq!(diagnostics.delivery_stats().accepted, 0);

    let enabled = context();
    assert_eq!(enabled.availability(), Availability::Enabled);
    assert_eq!(enabled.capabilities(), Some(DiagnosticsLimits::default()));
}

#[test]
fn ring_overflow_keeps_counters_exact() {
    let capacity = 16;
    let diagnostics = context_with(|l| l.history_capacity = capacity);
    let component = mixed_component(&diagnostics);
    let total = capacity * 10;
    for i in 0..total {
        let detail = format!("event {i}");
        receipt(
            component.try_record_lazy(|| Observation::success(2, detail.as_str(), NonZeroU64::MIN)),
        );
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "test.mixed", "op_completed"),
        total as u64
    );
    assert_eq!(snapshot.recent_events.len(), capacity);
    let newest = snapshot.recent_events.last().expect("newest");
    assert_eq!(
        newest.detail.as_deref(),
        Some(format!("event {}", total - 1).as_str())
    );
    assert_eq!(newest.sequence, total as u64);
    let oldest = snapshot.recent_events.first().expect("oldest");
    assert_eq!(oldest.sequence, (total - capacity + 1) as u64);
    assert_eq!(snapshot.history.capacity, capacity);
    assert_eq!(snapshot.history.retained, capacity);
    assert_eq!(snapshot.history.evicted, (total - capacity) as u64);
}

#[test]
fn zero_history_capacity_drops_evidence_but_counts() {
    let diagnostics = context_with(|l| l.history_capacity = 0);
    let component = mixed_component(&diagnostics);
    let accepted = receipt(component.try_record_lazy(|| Observation::success(2, "x", n(4))));
    assert_eq!(accepted.evidence, EvidenceDisposition::Dropped);
    assert_eq!(accepted.code_total, 4);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert!(snapshot.recent_events.is_empty());
    assert_eq!(snapshot.history.dropped, 1);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 4);
}

#[test]
fn detail_truncated_on_utf8_boundary() {
    let diagnostics = context_with(|l| l.max_detail_bytes = 5);
    let component = mixed_component(&diagnostics);
    // "ééé" is 6 bytes; the 5-byte cap falls inside the third 'é'.
    let cut = receipt(component.try_record_lazy(|| Observation::success(2, "ééé", n(1))));
    assert_eq!(cut.evidence, EvidenceDisposition::Truncated);
    let exact = receipt(component.try_record_lazy(|| Observation::success(2, "abcde", n(1))));
    assert_eq!(exact.evidence, EvidenceDisposition::Retained);
    let none = receipt(component.try_record_lazy(|| {
        let mut observation = Observation::success(2, "", n(1));
        observation.detail = None;
        observation
    }));
    assert_eq!(none.evidence, EvidenceDisposition::Retained);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let details: Vec<Option<&str>> = snapshot
        .recent_events
        .iter()
        .map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(details, vec![Some("éé"), Some("abcde"), None]);
    assert_eq!(snapshot.history.truncated, 1);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 3);
}

#[test]
fn correlation_ids_are_kept_whole() {
    let diagnostics = context_with(|l| l.max_detail_bytes = 1);
    let component = mixed_component(&diagnostics);
    let request = "request-0123456789";
    receipt(component.try_record_lazy(|| {
        Observation::success(2, "xy", n(1))
            .with_request_id(request)
            .with_session_id(String::from("session-owned"))
    }));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let event = &snapshot.recent_events[0];
    assert_eq!(event.correlation.request_id.as_deref(), Some(request));
    assert_eq!(
        event.correlation.session_id.as_deref(),
        Some("session-owned")
    );
    assert_eq!(event.detail.as_deref(), Some("x"));
}

// ---------------------------------------------------------------- lifecycle

#[test]
fn close_fences_every_clone_and_keeps_counters() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let clone = component.clone();
    receipt(clone.try_record_lazy(|| Observation::success(2, "before", n(2))));
    assert!(component.close());
    assert!(clone.is_closed());
    let ran = Cell::new(false);
    let error = clone
        .try_record_lazy(|| {
            ran.set(true);
            Observation::success(2, "after", n(1))
        })
        .expect_err("closed");
    assert_eq!(error, DiagnosticError::Closed);
    assert_eq!(error.reason(), "closed");
    assert!(!ran.get(), "factory must not run on a closed component");
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let row = snapshot.component("test.mixed").expect("row kept");
    assert_eq!(row.state, ComponentState::Closed);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 2);
    assert_eq!(snapshot.usage.live_components, 0);
}

#[test]
fn last_drop_closes_and_frees_the_slot() {
    let diagnostics = context_with(|l| l.max_live_components = 1);
    let component = mixed_component(&diagnostics);
    receipt(component.try_record_lazy(|| Observation::success(2, "x", n(7))));
    let clone = component.clone();
    drop(component);
    assert!(!clone.is_closed(), "a remaining clone keeps it open");
    assert_eq!(
        builtin_component(&diagnostics, "drop.other")
            .expect_err("slot still held")
            .reason(),
        "component_limit"
    );
    drop(clone);
    let other = builtin_component(&diagnostics, "drop.other").expect("slot freed by last drop");
    assert!(!other.is_closed());
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        snapshot.component("test.mixed").map(|c| c.state),
        Some(ComponentState::Closed)
    );
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 7);
}

// ---------------------------------------------------------------- concurrency

#[test]
fn nested_call_from_a_factory_gets_busy() {
    let diagnostics = context();
    let outer = builtin_component(&diagnostics, "busy.outer").expect("outer");
    let inner = builtin_component(&diagnostics, "busy.inner").expect("inner");
    let mut nested: Option<Result<RecordOutcome, DiagnosticError>> = None;
    let mut nested_snapshot_busy = false;
    receipt(outer.try_record_lazy(|| {
        nested = Some(inner.try_record_lazy(|| {
            Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN)
        }));
        nested_snapshot_busy = diagnostics.snapshot() == Err(DiagnosticError::Busy);
        Observation::failure(1, FailureClass::Unavailable, "outer", NonZeroU64::MIN)
    }));
    let nested = nested.expect("nested call ran");
    assert_eq!(nested, Err(DiagnosticError::Busy));
    assert_eq!(DiagnosticError::Busy.reason(), "busy");
    assert!(nested_snapshot_busy);
    let stats = diagnostics.delivery_stats();
    assert_eq!((stats.accepted, stats.busy, stats.rejected), (1, 1, 0));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "busy.inner", "plugin.unavailable"),
        0
    );
    assert_eq!(
        occurrences(&snapshot, "busy.outer", "plugin.unavailable"),
        1
    );
}

#[test]
fn concurrent_recording_loses_no_count() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 1000;
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let start = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let component = component.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                while !start.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let mut sequences = Vec::with_capacity(PER_THREAD);
                for i in 0..PER_THREAD {
                    loop {
                        let result = component.try_record_lazy(|| {
                            Observation::success(2, format!("t{t} i{i}"), NonZeroU64::MIN)
                        });
                        match result {
                            Ok(RecordOutcome::Recorded(r)) => {
                                sequences.push(r.sequence);
                                break;
                            }
                            Err(DiagnosticError::Busy) => std::thread::yield_now(),
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                }
                sequences
            })
        })
        .collect();
    start.store(true, Ordering::Release);
    let mut all = HashSet::new();
    for handle in handles {
        for sequence in handle.join().expect("thread") {
            assert!(all.insert(sequence), "sequence {sequence} repeated");
        }
    }
    let expected = (THREADS * PER_THREAD) as u64;
    assert_eq!(all.len() as u64, expected);
    assert_eq!(all.iter().copied().max(), Some(expected));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "test.mixed", "op_completed"),
        expected
    );
    assert_eq!(snapshot.delivery.accepted, expected);
    assert_eq!(snapshot.delivery.rejected, 0);
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Diagnostics>();
    assert_send_sync::<DiagnosticComponent>();
    assert_send_sync::<PipelineDiagnostics>();
}

// ---------------------------------------------------------------- snapshot and limits

#[test]
fn json_snapshot_round_trips_with_snake_case_names() {
    let diagnostics = context();
    let component = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "json.c",
            codes: &[DiagnosticCode::Builtin(
                BuiltinDiagnosticCode::PluginIoFailed,
            )],
        })
        .expect("registers");
    receipt(component.try_record_lazy(|| {
        Observation::failure(1, FailureClass::PermissionDenied, "denied", n(2))
            .with_severity(Severity::Warning)
            .with_request_id("req-9")
    }));
    component.close();
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let json = snapshot.to_json().expect("serializes");
    for needle in [
        "\"failure_class\":\"permission_denied\"",
        "\"severity\":\"warning\"",
        "\"outcome\":\"failure\"",
        "\"state\":\"closed\"",
        "\"origin\":\"builtin\"",
        "\"availability\":\"enabled\"",
        "\"code\":\"plugin.io_failed\"",
        "\"occurrences\":2",
        "\"request_id\":\"req-9\"",
    ] {
        assert!(json.contains(needle), "missing {needle} in {json}");
    }
    assert!(!json.contains("PermissionDenied"));
    let parsed = DiagnosticsSnapshot::from_json(&json).expect("parses");
    assert_eq!(parsed, snapshot);
    let value: serde_json::Value = serde_json::from_str(&json).expect("json value");
    assert_eq!(
        value["components"][0]["codes"][0]["allowed_classes"][2],
        "permission_denied"
    );
    assert_eq!(value["limits"]["history_capacity"], 256);
}

/// A change to the default limits and the (field, value, min, max) it must be refused with.
type LimitCase = (
    fn(&mut DiagnosticsLimits),
    &'static str,
    usize,
    usize,
    usize,
);

#[test]
fn limits_validate_naming_field_and_range() {
    assert_eq!(DiagnosticsLimits::default().validate(), Ok(()));
    let cases: [LimitCase; 6] = [
        (
            |l| l.history_capacity = 4097,
            "history_capacity",
            4097,
            0,
            4096,
        ),
        (|l| l.max_detail_bytes = 0, "max_detail_bytes", 0, 1, 16_384),
        (
            |l| l.max_live_components = 9,
            "max_live_components",
            9,
            1,
            8,
        ),
        (
            |l| l.max_codes_per_component = 33,
            "max_codes_per_component",
            33,
            1,
            32,
        ),
        (
            |l| l.max_extension_declarations = 17,
            "max_extension_declarations",
            17,
            0,
            16,
        ),
        (
            |l| l.max_input_text_bytes = 16_385,
            "max_input_text_bytes",
            16_385,
            1,
            16_384,
        ),
    ];
    for (change, field, value, min, max) in cases {
        let mut limits = DiagnosticsLimits::default();
        change(&mut limits);
        let error = limits.validate().expect_err("out of range");
        assert_eq!(
            (error.field, error.value, error.min, error.max),
            (field, value, min, max)
        );
        assert!(error.to_string().contains(field));
        assert!(error.to_string().contains(&format!("{min}..={max}")));
        let refused = Diagnostics::new(limits).expect_err("new validates");
        assert_eq!(refused.field, field);
    }
    let limits = DiagnosticsLimits {
        max_registration_text_bytes: 16_385,
        ..DiagnosticsLimits::default()
    };
    assert_eq!(
        limits.validate().expect_err("text").field,
        "max_registration_text_bytes"
    );
}

#[test]
fn limits_deserialize_with_defaults_and_deny_unknown_fields() {
    let partial: DiagnosticsLimits =
        serde_json::from_str(r#"{"history_capacity": 8, "max_live_components": 4}"#)
            .expect("partial table");
    assert_eq!(partial.history_capacity, 8);
    assert_eq!(partial.max_live_components, 4);
    assert_eq!(
        partial.max_detail_bytes,
        DiagnosticsLimits::default().max_detail_bytes
    );
    let unknown = serde_json::from_str::<DiagnosticsLimits>(r#"{"history_capacty": 8}"#)
        .expect_err("typo rejected");
    assert!(unknown.to_string().contains("unknown field"));
}

#[test]
fn error_reasons_are_stable() {
    let cases = [
        (DiagnosticError::Busy, "busy"),
        (DiagnosticError::Closed, "closed"),
        (
            DiagnosticError::ComponentLimit { limit: 8 },
            "component_limit",
        ),
        (
            DiagnosticError::CodeLimit {
                declared: 33,
                limit: 32,
            },
            "code_limit",
        ),
        (
            DiagnosticError::ExtensionLimit {
                used: 16,
                requested: 1,
                limit: 16,
            },
            "extension_limit",
        ),
        (
            DiagnosticError::RegistrationTextLimit {
                used: 0,
                requested: 1,
                limit: 0,
            },
            "registration_text_limit",
        ),
        (
            DiagnosticError::InputTextLimit { bytes: 2, limit: 1 },
            "input_text_limit",
        ),
        (
            DiagnosticError::DuplicateComponent { name: "a".into() },
            "duplicate_component",
        ),
        (
            DiagnosticError::InvalidDeclaration(DeclarationProblem::NoCodes),
            "invalid_declaration",
        ),
        (
            DiagnosticError::InvalidObservation(ObservationProblem::MissingFailureClass {
                code: 1,
            }),
            "invalid_observation",
        ),
    ];
    for (error, reason) in cases {
        assert_eq!(error.reason(), reason);
    }
}

#[test]
fn builtin_catalogue_names_are_unique_and_resolvable() {
    let all: Vec<BuiltinDiagnosticCode> = BuiltinDiagnosticCode::all().collect();
    assert_eq!(all.len(), 16 + 36);
    let names: HashSet<&str> = all.iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), all.len());
    for code in &all {
        assert_eq!(BuiltinDiagnosticCode::from_name(code.name()), Some(*code));
        match code.outcome() {
            DiagnosticOutcome::Failure => assert!(!code.allowed_classes().is_empty()),
            _ => assert!(code.allowed_classes().is_empty()),
        }
    }
    for required in [
        "plugin.configuration_invalid",
        "plugin.internal",
        "plugin.io_failed",
        "plugin.timeout",
        "plugin.unavailable",
        "plugin.permission_denied",
        "plugin.unsupported",
        "plugin.resource_exhausted",
    ] {
        let code = BuiltinDiagnosticCode::from_name(required).expect("required built-in");
        assert!(!code.is_host_owned());
    }
    assert_eq!(BuiltinDiagnosticCode::from_name("plugin.nope"), None);
}

// ---------------------------------------------------------------- pipeline components

#[test]
fn pipeline_registers_within_limits_and_leaves_room() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("pipeline registers");
    let usage = diagnostics.usage().expect("usage");
    let limits = diagnostics.capabilities().expect("enabled");
    assert_eq!(usage.live_components, 4);
    assert_eq!(limits.max_live_components - usage.live_components, 4);
    assert_eq!(usage.extension_declarations, 0);
    let expected_text: usize = PipelineComponent::ALL
        .iter()
        .map(|c| {
            c.name().len()
                + c.declaration()
                    .codes
                    .iter()
                    .map(|code| match code {
                        DiagnosticCode::Builtin(b) => b.name().len(),
                        DiagnosticCode::Extension { .. } => panic!("pipeline uses built-ins"),
                    })
                    .sum::<usize>()
        })
        .sum();
    assert_eq!(usage.registration_text_bytes, expected_text);
    assert!(usage.registration_text_bytes < 1536, "{expected_text}");
    for component in PipelineComponent::ALL {
        assert!(component.declaration().codes.len() <= 32);
        assert_eq!(pipeline.component(component).name(), Some(component.name()));
    }

    // The remaining four slots and all sixteen extensions stay usable.
    let sixteen = names("plugin_ext", 16);
    let codes = success_extensions(&sixteen);
    let _plugin = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "plugin.with_extensions",
            codes: &codes,
        })
        .expect("16 extensions fit next to the pipeline");
    let _others: Vec<DiagnosticComponent> = (0..3)
        .map(|i| builtin_component(&diagnostics, &format!("plugin.o{i}")).expect("slot"))
        .collect();
    assert_eq!(
        builtin_component(&diagnostics, "plugin.too_many")
            .expect_err("ninth")
            .reason(),
        "component_limit"
    );

    // Registering the pipeline twice is refused.
    let again = PipelineDiagnostics::register(&context()).expect("other context is fine");
    drop(again);
    let twice = PipelineDiagnostics::register(&diagnostics).expect_err("once per context");
    assert_eq!(twice.reason(), "duplicate_component");
}

#[test]
fn pipeline_helpers_record_every_code_by_name() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let codes: Vec<PipelineCode> = PipelineCode::all().collect();
    assert_eq!(codes.len(), 36);
    for code in &codes {
        receipt(pipeline.record(*code, code.name()));
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    for code in &codes {
        let row = snapshot
            .component(code.component().name())
            .expect("component row");
        let declared = &row.codes[code.position() as usize - 1];
        assert_eq!(declared.code, code.name(), "position of {code:?}");
        assert_eq!(declared.origin, CodeOrigin::Builtin);
        assert_eq!(declared.occurrences, 1, "{}", code.name());
    }
    let by_name = |name: &str| {
        snapshot
            .recent_events
            .iter()
            .find(|e| e.code == name)
            .expect("event")
    };
    let no_devices = by_name("gpu.nvidia_smi.no_devices");
    assert_eq!(no_devices.outcome, DiagnosticOutcome::Unknown);
    assert_eq!(no_devices.failure_class, None);
    assert_eq!(no_devices.severity, Severity::Info);
    let cpu_read = by_name("sampler.cpu.read_failed");
    assert_eq!(cpu_read.component, "sampler");
    assert_eq!(cpu_read.failure_class, Some(FailureClass::Io));
    assert_eq!(
        by_name("exporter.otlp.dropped").failure_class,
        Some(FailureClass::ResourceExhausted)
    );
    assert_eq!(
        by_name("pipeline.tick_missed").failure_class,
        Some(FailureClass::Timeout)
    );
}

#[test]
fn pipeline_typed_helpers_pick_code_and_class() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    pipeline
        .record_sampler_failure(
            SamplerCategory::Network,
            SamplerFailure::DeadlineMissed,
            "late",
        )
        .expect("deadline");
    pipeline
        .record_sampler_io_error(
            SamplerCategory::Disk,
            &io::Error::new(io::ErrorKind::NotFound, "no /proc/diskstats"),
        )
        .expect("not found");
    pipeline
        .record_sampler_io_error(
            SamplerCategory::Cpu,
            &io::Error::new(io::ErrorKind::PermissionDenied, "denied"),
        )
        .expect("denied");
    pipeline
        .record_gpu(GpuCode::SmiStartFailed, "spawn failed")
        .expect("gpu");
    pipeline
        .record_exporter(ExporterCode::AtofWriteFailed, "disk full")
        .expect("exporter");
    pipeline.record_tick_missed("").expect("tick");
    let wrong = pipeline
        .record_as(
            PipelineCode::Exporter(ExporterCode::OtlpDropped),
            Some(FailureClass::Io),
            "x",
        )
        .expect_err("io not allowed for dropped");
    assert_eq!(wrong.reason(), "invalid_observation");

    let snapshot = diagnostics.snapshot().expect("snapshot");
    let events: Vec<(&str, Option<FailureClass>, Option<&str>)> = snapshot
        .recent_events
        .iter()
        .map(|e| (e.code.as_str(), e.failure_class, e.detail.as_deref()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                "sampler.network.deadline_missed",
                Some(FailureClass::Timeout),
                Some("late")
            ),
            (
                "sampler.disk.read_failed",
                Some(FailureClass::NotFound),
                Some("no /proc/diskstats")
            ),
            (
                "sampler.cpu.permission_denied",
                Some(FailureClass::PermissionDenied),
                Some("denied")
            ),
            (
                "gpu.nvidia_smi.start_failed",
                Some(FailureClass::ExecutionFailed),
                Some("spawn failed")
            ),
            (
                "exporter.atof.write_failed",
                Some(FailureClass::Io),
                Some("disk full")
            ),
            ("pipeline.tick_missed", Some(FailureClass::Timeout), None),
        ]
    );
    pipeline.close();
    assert_eq!(
        pipeline
            .record_tick_missed("x")
            .expect_err("closed")
            .reason(),
        "closed"
    );
    assert_eq!(diagnostics.usage().expect("usage").live_components, 0);
}

#[test]
fn pipeline_on_disabled_context_is_a_no_op() {
    let pipeline = PipelineDiagnostics::register(&Diagnostics::disabled()).expect("disabled ok");
    assert_eq!(
        pipeline.record_tick_missed("x").expect("no-op"),
        RecordOutcome::Disabled
    );
}

#[test]
fn pipeline_recordings_from_many_threads_lose_no_count() {
    // The pipeline's own recordings retry when the context is busy, so actors on
    // several threads never drop an occurrence.
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let pipeline = pipeline.clone();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    pipeline
                        .record_counted(
                            PipelineCode::TickMissed,
                            Some(FailureClass::Timeout),
                            NonZeroU64::new(2).expect("two"),
                            "late",
                        )
                        .expect("recorded despite contention");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let occurrences = snapshot
        .components
        .iter()
        .flat_map(|c| &c.codes)
        .find(|c| c.code == "pipeline.tick_missed")
        .map(|c| c.occurrences);
    assert_eq!(occurrences, Some(8 * 500 * 2));
}

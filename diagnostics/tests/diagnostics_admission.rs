//! Diagnostics: the spec example and the admission limits at their edges.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::num::NonZeroU64;

use wattline_diagnostics::{
    BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode, DiagnosticComponent,
    DiagnosticError, DiagnosticOutcome, Diagnostics, EvidenceDisposition, FailureClass,
    Observation, ObservationProblem, RecordOutcome, Severity,
};

use diagnostics_support::*;

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

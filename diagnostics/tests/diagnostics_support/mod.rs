//! What the diagnostics tests share: contexts at chosen limits and components to
//! register in them.
#![allow(dead_code)]

use std::num::NonZeroU64;

use wattline_diagnostics::{
    BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode, DiagnosticComponent,
    DiagnosticError, DiagnosticOutcome, Diagnostics, DiagnosticsLimits, DiagnosticsSnapshot,
    FailureClass, RecordOutcome, RecordReceipt,
};

pub fn context() -> Diagnostics {
    Diagnostics::new(DiagnosticsLimits::default()).expect("default limits are valid")
}

pub fn context_with(change: impl FnOnce(&mut DiagnosticsLimits)) -> Diagnostics {
    let mut limits = DiagnosticsLimits::default();
    change(&mut limits);
    Diagnostics::new(limits).expect("test limits are valid")
}

pub fn n(count: u64) -> NonZeroU64 {
    NonZeroU64::new(count).expect("non-zero count")
}

/// Registers `name` with one built-in failure code (`plugin.unavailable`), no extensions.
pub fn builtin_component(
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
pub fn names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}_{i}")).collect()
}

/// Success extensions borrowing `names`.
pub fn success_extensions(names: &[String]) -> Vec<DiagnosticCode<'_>> {
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
pub fn mixed_component(diagnostics: &Diagnostics) -> DiagnosticComponent {
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

pub fn receipt(outcome: Result<RecordOutcome, DiagnosticError>) -> RecordReceipt {
    match outcome.expect("recording accepted") {
        RecordOutcome::Recorded(receipt) => receipt,
        RecordOutcome::Disabled => panic!("expected Recorded, got Disabled"),
    }
}

pub fn occurrences(snapshot: &DiagnosticsSnapshot, component: &str, code: &str) -> u64 {
    snapshot
        .component(component)
        .and_then(|c| c.code(code))
        .map(|c| c.occurrences)
        .expect("component and code present")
}

//! Diagnostics: snapshots and limits.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::collections::HashSet;

use wattline_diagnostics::{
    BuiltinDiagnosticCode, ComponentDeclaration, DeclarationProblem, DiagnosticCode,
    DiagnosticError, DiagnosticOutcome, Diagnostics, DiagnosticsLimits, DiagnosticsSnapshot,
    FailureClass, Observation, ObservationProblem, Severity,
};

use diagnostics_support::*;

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
    assert_eq!(all.len(), 16 + 39);
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

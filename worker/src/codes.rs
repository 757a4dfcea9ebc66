//! Declaring a component's codes: [`extension_code`], [`builtin_code`] over the
//! built-in codes of `wattline-diagnostics` (the host's own list; a worker selects the
//! `plugin.*` ones), and the registration checks the SDK makes before anything is
//! queued, at the protocol's limits from the same crate (the host stays the authority).

use nemo_relay_worker_proto::v1::{
    DiagnosticCodeDefinition, DiagnosticComponentRegistration, DiagnosticExtensionDefinition,
    DiagnosticObservationOutcome, diagnostic_code_definition,
};
use wattline_diagnostics::{
    BuiltinDiagnosticCode, MAX_CODES_PER_COMPONENT, MAX_WORKER_EXTENSION_CLASSES,
    MAX_WORKER_EXTENSION_DESCRIPTION_BYTES, MAX_WORKER_EXTENSION_NAME_BYTES,
};

use crate::error::DiagnosticDeliveryError;
use crate::negotiate::Limits;

/// Declares a component-local extension code (counts toward the session's extension
/// budget; its name is local to the host-assigned namespace).
pub fn extension_code(extension: DiagnosticExtensionDefinition) -> DiagnosticCodeDefinition {
    DiagnosticCodeDefinition {
        definition: Some(diagnostic_code_definition::Definition::Extension(extension)),
    }
}

/// Declares a built-in code by its canonical name. Plugins may select the `plugin.*`
/// codes only; the host refuses the pipeline's own (`BuiltinDiagnosticCode::Pipeline`).
pub fn builtin_code(code: BuiltinDiagnosticCode) -> DiagnosticCodeDefinition {
    DiagnosticCodeDefinition {
        definition: Some(diagnostic_code_definition::Definition::BuiltinName(
            code.name().to_owned(),
        )),
    }
}

/// Checks a registration against the protocol's fixed rules and the negotiated
/// budgets; [`DiagnosticDeliveryError::Invalid`] for what the host would refuse.
pub(crate) fn check_registration(
    registration: &DiagnosticComponentRegistration,
    limits: &Limits,
) -> Result<(), DiagnosticDeliveryError> {
    let invalid = Err(DiagnosticDeliveryError::Invalid);
    if registration.local_name.trim().is_empty()
        || registration.codes.is_empty()
        || registration.codes.len() > MAX_CODES_PER_COMPONENT
    {
        return invalid;
    }
    let mut extensions = 0;
    let mut metadata = registration.local_name.len();
    for code in &registration.codes {
        match &code.definition {
            Some(diagnostic_code_definition::Definition::BuiltinName(name)) => {
                if name.is_empty() {
                    return invalid;
                }
                metadata += name.len();
            }
            Some(diagnostic_code_definition::Definition::Extension(extension)) => {
                if !extension_is_valid(extension) {
                    return invalid;
                }
                extensions += 1;
                metadata += extension.name.len() + extension.description.len();
            }
            None => return invalid,
        }
    }
    if extensions > limits.max_extensions || metadata > limits.max_metadata_bytes {
        return invalid;
    }
    Ok(())
}

/// Name 1–32 bytes, description ≤ 256 bytes, ≤ 16 classes; a failure needs a class,
/// anything else has none.
fn extension_is_valid(extension: &DiagnosticExtensionDefinition) -> bool {
    let classes = extension.allowed_failure_classes.len();
    let outcome_fits = match DiagnosticObservationOutcome::try_from(extension.outcome) {
        Ok(DiagnosticObservationOutcome::Failure) => classes > 0,
        Ok(_) => classes == 0,
        Err(_) => false,
    };
    (1..=MAX_WORKER_EXTENSION_NAME_BYTES).contains(&extension.name.len())
        && extension.description.len() <= MAX_WORKER_EXTENSION_DESCRIPTION_BYTES
        && classes <= MAX_WORKER_EXTENSION_CLASSES
        && extension
            .allowed_failure_classes
            .iter()
            .all(|class| !class.is_empty())
        && outcome_fits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::tests::limits;

    fn extension(
        name: &str,
        outcome: DiagnosticObservationOutcome,
        classes: &[&str],
    ) -> DiagnosticCodeDefinition {
        extension_code(DiagnosticExtensionDefinition {
            name: name.into(),
            description: "described".into(),
            outcome: outcome as i32,
            allowed_failure_classes: classes.iter().map(|class| (*class).into()).collect(),
        })
    }

    fn registration(codes: Vec<DiagnosticCodeDefinition>) -> DiagnosticComponentRegistration {
        DiagnosticComponentRegistration {
            local_name: "example.lookup".into(),
            codes,
        }
    }

    #[test]
    fn builtin_code_carries_the_canonical_name() {
        assert_eq!(
            builtin_code(BuiltinDiagnosticCode::PluginTimeout).definition,
            Some(diagnostic_code_definition::Definition::BuiltinName(
                "plugin.timeout".into()
            ))
        );
    }

    #[test]
    fn registrations_the_host_would_refuse_are_invalid_before_sending() {
        use DiagnosticObservationOutcome::{Failure, Success, Unknown};
        let limits = limits(4);
        let good = registration(vec![
            extension("lookup_failed", Failure, &["unavailable"]),
            extension("lookup_completed", Success, &[]),
            extension("lookup_seen", Unknown, &[]),
            builtin_code(BuiltinDiagnosticCode::PluginTimeout),
        ]);
        assert_eq!(check_registration(&good, &limits), Ok(()));
        let too_many: Vec<_> = (0..=MAX_CODES_PER_COMPONENT)
            .map(|_| builtin_code(BuiltinDiagnosticCode::PluginInternal))
            .collect();
        let cases = [
            ("no codes", registration(vec![])),
            ("33 codes", registration(too_many)),
            (
                "a failure without a class",
                registration(vec![extension("lookup_failed", Failure, &[])]),
            ),
            (
                "a success with a class",
                registration(vec![extension("ok", Success, &["unavailable"])]),
            ),
            (
                "a name over 32 bytes",
                registration(vec![extension(&"n".repeat(33), Success, &[])]),
            ),
            (
                "an empty name",
                registration(vec![extension("", Success, &[])]),
            ),
            (
                "a code without a definition",
                registration(vec![DiagnosticCodeDefinition { definition: None }]),
            ),
            (
                "a blank component name",
                DiagnosticComponentRegistration {
                    local_name: " ".into(),
                    codes: vec![builtin_code(BuiltinDiagnosticCode::PluginTimeout)],
                },
            ),
        ];
        for (what, registration) in cases {
            assert_eq!(
                check_registration(&registration, &limits),
                Err(DiagnosticDeliveryError::Invalid),
                "{what}"
            );
        }
        // More extensions in one registration than the session may hold.
        let mut tight = limits;
        tight.max_extensions = 1;
        assert_eq!(
            check_registration(&good, &tight),
            Err(DiagnosticDeliveryError::Invalid)
        );
    }
}

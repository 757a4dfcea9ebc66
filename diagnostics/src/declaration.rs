//! Component declarations, built-in and extension codes, and their validation.

use serde::{Deserialize, Serialize};

use super::error::{DeclarationProblem, DiagnosticError};
use super::limits::DiagnosticsLimits;
use super::pipeline_codes::PipelineCode;
use super::vocabulary::{DiagnosticOutcome, FailureClass};

/// Longest accepted component or extension name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// One component's stable name and its complete, ordered code list.
///
/// A code's position in `codes` (starting at 1) is the `code` an observation uses.
/// Everything is borrowed for the registration call and copied into the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComponentDeclaration<'a> {
    /// Stable dotted lowercase name describing a responsibility, e.g. `example.lookup`.
    pub name: &'a str,
    /// The component's codes; position 1 is the first entry.
    pub codes: &'a [DiagnosticCode<'a>],
}

/// One declared code: a typed built-in or a component-local extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiagnosticCode<'a> {
    /// A built-in code with a canonical name, outcome and allowed classes.
    Builtin(BuiltinDiagnosticCode),
    /// A code defined by the declaring component; counts toward the extension budget.
    Extension {
        /// Dotted lowercase name, unique within the component and not a built-in name.
        name: &'a str,
        /// Non-empty human description; charged to the registration text budget.
        description: &'a str,
        /// The outcome every observation of this code reports.
        outcome: DiagnosticOutcome,
        /// Failure classes allowed; non-empty for failures, empty otherwise.
        allowed_classes: &'a [FailureClass],
    },
}

/// Built-in codes with canonical dotted names.
///
/// The sixteen `Plugin*` codes are common failure codes any producer may declare
/// (all with a failure outcome); with 16 extensions they let one component reach
/// the 32-code limit. The
/// `Pipeline` codes are wattline's own host vocabulary: only
/// `PipelineDiagnostics::register` may declare them, so they never spend a
/// producer's extension budget and no producer can impersonate them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinDiagnosticCode {
    /// `plugin.configuration_invalid`: configuration was rejected.
    PluginConfigurationInvalid,
    /// `plugin.internal`: an internal invariant failed.
    PluginInternal,
    /// `plugin.io_failed`: an I/O operation failed.
    PluginIoFailed,
    /// `plugin.timeout`: an operation passed its deadline.
    PluginTimeout,
    /// `plugin.unavailable`: a dependency was unavailable.
    PluginUnavailable,
    /// `plugin.permission_denied`: access was denied.
    PluginPermissionDenied,
    /// `plugin.unsupported`: the operation is unsupported here.
    PluginUnsupported,
    /// `plugin.resource_exhausted`: a bounded resource ran out.
    PluginResourceExhausted,
    /// `plugin.invalid_input`: input was malformed or out of range.
    PluginInvalidInput,
    /// `plugin.invalid_state`: an operation was attempted in the wrong state.
    PluginInvalidState,
    /// `plugin.not_found`: a required resource does not exist.
    PluginNotFound,
    /// `plugin.conflict`: an operation conflicted with existing state.
    PluginConflict,
    /// `plugin.authentication_failed`: credentials were missing or rejected.
    PluginAuthenticationFailed,
    /// `plugin.incompatible`: two parts are incompatible.
    PluginIncompatible,
    /// `plugin.execution_failed`: an external execution failed.
    PluginExecutionFailed,
    /// `plugin.policy_rejected`: a policy rejected the operation.
    PluginPolicyRejected,
    /// A wattline pipeline code (host-owned).
    Pipeline(PipelineCode),
}

/// The plugin built-ins, in declaration order.
const PLUGIN_CODES: [BuiltinDiagnosticCode; 16] = [
    BuiltinDiagnosticCode::PluginConfigurationInvalid,
    BuiltinDiagnosticCode::PluginInternal,
    BuiltinDiagnosticCode::PluginIoFailed,
    BuiltinDiagnosticCode::PluginTimeout,
    BuiltinDiagnosticCode::PluginUnavailable,
    BuiltinDiagnosticCode::PluginPermissionDenied,
    BuiltinDiagnosticCode::PluginUnsupported,
    BuiltinDiagnosticCode::PluginResourceExhausted,
    BuiltinDiagnosticCode::PluginInvalidInput,
    BuiltinDiagnosticCode::PluginInvalidState,
    BuiltinDiagnosticCode::PluginNotFound,
    BuiltinDiagnosticCode::PluginConflict,
    BuiltinDiagnosticCode::PluginAuthenticationFailed,
    BuiltinDiagnosticCode::PluginIncompatible,
    BuiltinDiagnosticCode::PluginExecutionFailed,
    BuiltinDiagnosticCode::PluginPolicyRejected,
];

impl BuiltinDiagnosticCode {
    /// Every built-in code: plugin codes first, then the pipeline's codes.
    pub fn all() -> impl Iterator<Item = BuiltinDiagnosticCode> {
        PLUGIN_CODES
            .into_iter()
            .chain(PipelineCode::all().map(BuiltinDiagnosticCode::Pipeline))
    }

    /// Looks a built-in up by its canonical name.
    pub fn from_name(name: &str) -> Option<BuiltinDiagnosticCode> {
        Self::all().find(|code| code.name() == name)
    }

    /// The canonical dotted name.
    pub fn name(self) -> &'static str {
        match self {
            BuiltinDiagnosticCode::PluginConfigurationInvalid => "plugin.configuration_invalid",
            BuiltinDiagnosticCode::PluginInternal => "plugin.internal",
            BuiltinDiagnosticCode::PluginIoFailed => "plugin.io_failed",
            BuiltinDiagnosticCode::PluginTimeout => "plugin.timeout",
            BuiltinDiagnosticCode::PluginUnavailable => "plugin.unavailable",
            BuiltinDiagnosticCode::PluginPermissionDenied => "plugin.permission_denied",
            BuiltinDiagnosticCode::PluginUnsupported => "plugin.unsupported",
            BuiltinDiagnosticCode::PluginResourceExhausted => "plugin.resource_exhausted",
            BuiltinDiagnosticCode::PluginInvalidInput => "plugin.invalid_input",
            BuiltinDiagnosticCode::PluginInvalidState => "plugin.invalid_state",
            BuiltinDiagnosticCode::PluginNotFound => "plugin.not_found",
            BuiltinDiagnosticCode::PluginConflict => "plugin.conflict",
            BuiltinDiagnosticCode::PluginAuthenticationFailed => "plugin.authentication_failed",
            BuiltinDiagnosticCode::PluginIncompatible => "plugin.incompatible",
            BuiltinDiagnosticCode::PluginExecutionFailed => "plugin.execution_failed",
            BuiltinDiagnosticCode::PluginPolicyRejected => "plugin.policy_rejected",
            BuiltinDiagnosticCode::Pipeline(code) => code.name(),
        }
    }

    /// A one-line description (not charged to the registration text budget).
    pub fn description(self) -> &'static str {
        match self {
            BuiltinDiagnosticCode::PluginConfigurationInvalid => "Configuration was rejected",
            BuiltinDiagnosticCode::PluginInternal => "An internal invariant failed",
            BuiltinDiagnosticCode::PluginIoFailed => "An I/O operation failed",
            BuiltinDiagnosticCode::PluginTimeout => "An operation passed its deadline",
            BuiltinDiagnosticCode::PluginUnavailable => "A dependency was unavailable",
            BuiltinDiagnosticCode::PluginPermissionDenied => "Access was denied",
            BuiltinDiagnosticCode::PluginUnsupported => "The operation is unsupported here",
            BuiltinDiagnosticCode::PluginResourceExhausted => "A bounded resource ran out",
            BuiltinDiagnosticCode::PluginInvalidInput => "Input was malformed or out of range",
            BuiltinDiagnosticCode::PluginInvalidState => {
                "An operation was attempted in the wrong state"
            }
            BuiltinDiagnosticCode::PluginNotFound => "A required resource does not exist",
            BuiltinDiagnosticCode::PluginConflict => "An operation conflicted with existing state",
            BuiltinDiagnosticCode::PluginAuthenticationFailed => {
                "Credentials were missing or rejected"
            }
            BuiltinDiagnosticCode::PluginIncompatible => "Two parts are incompatible",
            BuiltinDiagnosticCode::PluginExecutionFailed => "An external execution failed",
            BuiltinDiagnosticCode::PluginPolicyRejected => "A policy rejected the operation",
            BuiltinDiagnosticCode::Pipeline(code) => code.description(),
        }
    }

    /// The outcome every observation of this code reports.
    pub fn outcome(self) -> DiagnosticOutcome {
        match self {
            BuiltinDiagnosticCode::Pipeline(code) => code.outcome(),
            _ => DiagnosticOutcome::Failure,
        }
    }

    /// Failure classes an observation of this code may carry.
    pub fn allowed_classes(self) -> &'static [FailureClass] {
        use FailureClass as C;
        match self {
            BuiltinDiagnosticCode::PluginConfigurationInvalid => {
                &[C::InvalidInput, C::Incompatible, C::Unsupported]
            }
            BuiltinDiagnosticCode::PluginInternal => &[C::Internal, C::InvalidState, C::Unknown],
            BuiltinDiagnosticCode::PluginIoFailed => &[C::Io, C::NotFound, C::PermissionDenied],
            BuiltinDiagnosticCode::PluginTimeout => &[C::Timeout],
            BuiltinDiagnosticCode::PluginUnavailable => &[C::Unavailable, C::NotFound],
            BuiltinDiagnosticCode::PluginPermissionDenied => {
                &[C::PermissionDenied, C::Authentication, C::PolicyRejected]
            }
            BuiltinDiagnosticCode::PluginUnsupported => &[C::Unsupported, C::Incompatible],
            BuiltinDiagnosticCode::PluginResourceExhausted => &[C::ResourceExhausted],
            BuiltinDiagnosticCode::PluginInvalidInput => &[C::InvalidInput],
            BuiltinDiagnosticCode::PluginInvalidState => &[C::InvalidState, C::Conflict],
            BuiltinDiagnosticCode::PluginNotFound => &[C::NotFound],
            BuiltinDiagnosticCode::PluginConflict => &[C::Conflict],
            BuiltinDiagnosticCode::PluginAuthenticationFailed => &[C::Authentication],
            BuiltinDiagnosticCode::PluginIncompatible => &[C::Incompatible, C::Unsupported],
            BuiltinDiagnosticCode::PluginExecutionFailed => &[C::ExecutionFailed, C::Internal],
            BuiltinDiagnosticCode::PluginPolicyRejected => &[C::PolicyRejected],
            BuiltinDiagnosticCode::Pipeline(code) => code.allowed_classes(),
        }
    }

    /// True for codes only the wattline pipeline may declare.
    pub fn is_host_owned(self) -> bool {
        matches!(self, BuiltinDiagnosticCode::Pipeline(_))
    }
}

/// Where a declared code comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeOrigin {
    /// A built-in code.
    Builtin,
    /// A component-local extension.
    Extension,
}

/// Whether a registration may declare host-owned built-ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HostCodes {
    /// Public registration path: host-owned built-ins are rejected.
    Rejected,
    /// The pipeline's own registration path.
    Allowed,
}

/// A code copied out of a declaration after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CodeSpec {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) outcome: DiagnosticOutcome,
    pub(super) allowed_classes: Vec<FailureClass>,
    pub(super) origin: CodeOrigin,
}

/// A declaration that passed validation, with what it charges to the context budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ValidatedDeclaration {
    pub(super) name: String,
    pub(super) codes: Vec<CodeSpec>,
    /// Extension codes declared (charged to the cumulative extension budget).
    pub(super) extension_count: usize,
    /// Component name + every code name + every extension description, in bytes.
    pub(super) text_bytes: usize,
}

/// True when `name` is 1..=128 bytes of `[a-z0-9_]+` segments joined by single dots.
pub(super) fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name.split('.').all(|segment| {
            !segment.is_empty()
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
}

fn invalid(problem: DeclarationProblem) -> DiagnosticError {
    DiagnosticError::InvalidDeclaration(problem)
}

/// Checks a declaration's shape and vocabulary and copies it into owned form.
///
/// Order: code count (`invalid_declaration` for none, `code_limit` past the limit),
/// then the component name, then each code in position order.
pub(super) fn validate_declaration(
    declaration: &ComponentDeclaration<'_>,
    limits: &DiagnosticsLimits,
    host_codes: HostCodes,
) -> Result<ValidatedDeclaration, DiagnosticError> {
    let declared = declaration.codes.len();
    if declared == 0 {
        return Err(invalid(DeclarationProblem::NoCodes));
    }
    if declared > limits.max_codes_per_component {
        return Err(DiagnosticError::CodeLimit {
            declared,
            limit: limits.max_codes_per_component,
        });
    }
    if !is_valid_name(declaration.name) {
        return Err(invalid(DeclarationProblem::InvalidComponentName {
            name: declaration.name.to_owned(),
        }));
    }
    let mut codes: Vec<CodeSpec> = Vec::with_capacity(declared);
    let mut extension_count = 0;
    let mut text_bytes = declaration.name.len();
    for (position, code) in (1u32..).zip(declaration.codes.iter()) {
        let spec = validate_code(position, code, host_codes)?;
        if codes.iter().any(|earlier| earlier.name == spec.name) {
            return Err(invalid(DeclarationProblem::DuplicateCode {
                position,
                name: spec.name,
            }));
        }
        if spec.origin == CodeOrigin::Extension {
            extension_count += 1;
            text_bytes += spec.name.len() + spec.description.len();
        } else {
            text_bytes += spec.name.len();
        }
        codes.push(spec);
    }
    Ok(ValidatedDeclaration {
        name: declaration.name.to_owned(),
        codes,
        extension_count,
        text_bytes,
    })
}

fn validate_code(
    position: u32,
    code: &DiagnosticCode<'_>,
    host_codes: HostCodes,
) -> Result<CodeSpec, DiagnosticError> {
    match *code {
        DiagnosticCode::Builtin(builtin) => {
            if builtin.is_host_owned() && host_codes == HostCodes::Rejected {
                return Err(invalid(DeclarationProblem::HostOwnedCode {
                    position,
                    name: builtin.name(),
                }));
            }
            Ok(CodeSpec {
                name: builtin.name().to_owned(),
                description: builtin.description().to_owned(),
                outcome: builtin.outcome(),
                allowed_classes: builtin.allowed_classes().to_vec(),
                origin: CodeOrigin::Builtin,
            })
        }
        DiagnosticCode::Extension {
            name,
            description,
            outcome,
            allowed_classes,
        } => {
            if !is_valid_name(name) {
                return Err(invalid(DeclarationProblem::InvalidCodeName {
                    position,
                    name: name.to_owned(),
                }));
            }
            if BuiltinDiagnosticCode::from_name(name).is_some() {
                return Err(invalid(DeclarationProblem::ReservedCodeName {
                    position,
                    name: name.to_owned(),
                }));
            }
            if description.trim().is_empty() {
                return Err(invalid(DeclarationProblem::EmptyDescription { position }));
            }
            match (outcome, allowed_classes.is_empty()) {
                (DiagnosticOutcome::Failure, true) => {
                    return Err(invalid(DeclarationProblem::FailureWithoutClasses {
                        position,
                    }));
                }
                (DiagnosticOutcome::Success | DiagnosticOutcome::Unknown, false) => {
                    return Err(invalid(DeclarationProblem::NonFailureWithClasses {
                        position,
                    }));
                }
                _ => {}
            }
            for (index, class) in allowed_classes.iter().enumerate() {
                if allowed_classes
                    .iter()
                    .take(index)
                    .any(|earlier| earlier == class)
                {
                    return Err(invalid(DeclarationProblem::DuplicateClass {
                        position,
                        class: *class,
                    }));
                }
            }
            Ok(CodeSpec {
                name: name.to_owned(),
                description: description.to_owned(),
                outcome,
                allowed_classes: allowed_classes.to_vec(),
                origin: CodeOrigin::Extension,
            })
        }
    }
}

//! Typed errors returned by diagnostics registration and recording, with stable reasons.

use thiserror::Error;

use super::vocabulary::{DiagnosticOutcome, FailureClass};

/// Why a diagnostics call was refused. Nothing is stored when an error is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DiagnosticError {
    /// Another call on the same context was in progress; the call did not wait. Retry later.
    #[error("diagnostics context is busy with another call")]
    Busy,
    /// The component was closed explicitly, by the drop of its last handle, or by the
    /// activation's teardown.
    #[error("diagnostic component is closed")]
    Closed,
    /// A plugin asked to read the whole context without the host's grant.
    #[error(
        "reading the whole diagnostics context needs the host's grant: `grant_plugin_reads = true` in the diagnostics component's config"
    )]
    ReadNotGranted,
    /// The context already has its maximum of live components.
    #[error("live component limit reached: {limit} components are open")]
    ComponentLimit {
        /// Live components allowed per context.
        limit: usize,
    },
    /// The declaration lists more codes than one component may declare.
    #[error("component declares {declared} codes; at most {limit} are allowed")]
    CodeLimit {
        /// Codes in the rejected declaration.
        declared: usize,
        /// Codes allowed per component.
        limit: usize,
    },
    /// Cumulative extension declarations would pass the context's budget.
    #[error(
        "extension budget exhausted: {used} declared, {requested} more requested, limit {limit}"
    )]
    ExtensionLimit {
        /// Extensions already declared in this context (closed components included).
        used: usize,
        /// Extensions in the rejected declaration.
        requested: usize,
        /// Cumulative extensions allowed per context.
        limit: usize,
    },
    /// Cumulative registration text would pass the context's budget.
    #[error(
        "registration text budget exhausted: {used} bytes used, {requested} more requested, limit {limit}"
    )]
    RegistrationTextLimit {
        /// Registration text bytes already charged in this context.
        used: usize,
        /// Bytes the rejected declaration would charge.
        requested: usize,
        /// Cumulative bytes allowed per context.
        limit: usize,
    },
    /// One recording call carried too much text (detail + request id + session id).
    #[error("observation carries {bytes} bytes of text; at most {limit} are allowed per call")]
    InputTextLimit {
        /// Aggregate text bytes in the rejected observation.
        bytes: usize,
        /// Bytes allowed per call.
        limit: usize,
    },
    /// A live component already uses this name.
    #[error("a live component named `{name}` already exists")]
    DuplicateComponent {
        /// The name in use.
        name: String,
    },
    /// The declaration breaks a naming or vocabulary rule.
    #[error("invalid component declaration: {0}")]
    InvalidDeclaration(DeclarationProblem),
    /// The observation breaks a rule of its declared code.
    #[error("invalid observation: {0}")]
    InvalidObservation(ObservationProblem),
}

impl DiagnosticError {
    /// A stable snake_case reason, suitable for metrics labels and tests.
    pub fn reason(&self) -> &'static str {
        match self {
            DiagnosticError::Busy => "busy",
            DiagnosticError::Closed => "closed",
            DiagnosticError::ReadNotGranted => "read_not_granted",
            DiagnosticError::ComponentLimit { .. } => "component_limit",
            DiagnosticError::CodeLimit { .. } => "code_limit",
            DiagnosticError::ExtensionLimit { .. } => "extension_limit",
            DiagnosticError::RegistrationTextLimit { .. } => "registration_text_limit",
            DiagnosticError::InputTextLimit { .. } => "input_text_limit",
            DiagnosticError::DuplicateComponent { .. } => "duplicate_component",
            DiagnosticError::InvalidDeclaration(_) => "invalid_declaration",
            DiagnosticError::InvalidObservation(_) => "invalid_observation",
        }
    }
}

/// What is wrong with a component declaration. Code positions are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DeclarationProblem {
    /// The component name is not 1..=128 bytes of `[a-z0-9_]` segments joined by dots.
    #[error("component name `{name}` must be 1..=128 bytes of [a-z0-9_] segments joined by dots")]
    InvalidComponentName {
        /// The rejected name.
        name: String,
    },
    /// The declaration lists no codes.
    #[error("a component must declare at least one code")]
    NoCodes,
    /// An extension name is not 1..=128 bytes of `[a-z0-9_]` segments joined by dots.
    #[error(
        "code {position} name `{name}` must be 1..=128 bytes of [a-z0-9_] segments joined by dots"
    )]
    InvalidCodeName {
        /// Position of the code in the declaration.
        position: u32,
        /// The rejected name.
        name: String,
    },
    /// An extension reuses the canonical name of a built-in code.
    #[error("code {position} extension name `{name}` is reserved for a built-in code")]
    ReservedCodeName {
        /// Position of the code in the declaration.
        position: u32,
        /// The rejected name.
        name: String,
    },
    /// Two codes of one component share a name.
    #[error("code {position} repeats the name `{name}`")]
    DuplicateCode {
        /// Position of the repeated code.
        position: u32,
        /// The repeated name.
        name: String,
    },
    /// An extension has an empty (or whitespace-only) description.
    #[error("code {position} needs a non-empty description")]
    EmptyDescription {
        /// Position of the code in the declaration.
        position: u32,
    },
    /// A failure extension lists no allowed failure class.
    #[error("code {position} declares a failure outcome but no allowed failure class")]
    FailureWithoutClasses {
        /// Position of the code in the declaration.
        position: u32,
    },
    /// A success or unknown extension lists failure classes.
    #[error("code {position} declares a non-failure outcome but lists failure classes")]
    NonFailureWithClasses {
        /// Position of the code in the declaration.
        position: u32,
    },
    /// An extension lists the same failure class twice.
    #[error("code {position} lists failure class `{class}` twice")]
    DuplicateClass {
        /// Position of the code in the declaration.
        position: u32,
        /// The repeated class.
        class: FailureClass,
    },
    /// A built-in code owned by the wattline pipeline was declared through the public path.
    #[error("code {position} `{name}` is owned by the wattline pipeline")]
    HostOwnedCode {
        /// Position of the code in the declaration.
        position: u32,
        /// Canonical name of the built-in.
        name: &'static str,
    },
}

/// What is wrong with an observation. Code positions are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObservationProblem {
    /// The code position is 0 or past the declared code list.
    #[error("code position {code} is not declared; the component has {declared} codes")]
    UnknownCode {
        /// The rejected position.
        code: u32,
        /// Codes the component declares.
        declared: usize,
    },
    /// The observation's outcome differs from the code's declared outcome.
    #[error("code {code} declares outcome `{declared}` but the observation reports `{observed}`")]
    OutcomeMismatch {
        /// The code position.
        code: u32,
        /// The declared outcome.
        declared: DiagnosticOutcome,
        /// The observed outcome.
        observed: DiagnosticOutcome,
    },
    /// A failure observation carries no failure class.
    #[error("failure observation for code {code} needs a failure class")]
    MissingFailureClass {
        /// The code position.
        code: u32,
    },
    /// A failure observation uses a class its code does not allow.
    #[error("failure class `{class}` is not allowed for code {code}")]
    DisallowedFailureClass {
        /// The code position.
        code: u32,
        /// The rejected class.
        class: FailureClass,
    },
    /// A success or unknown observation carries a failure class.
    #[error("non-failure observation for code {code} must not carry failure class `{class}`")]
    UnexpectedFailureClass {
        /// The code position.
        code: u32,
        /// The class that should be absent.
        class: FailureClass,
    },
}

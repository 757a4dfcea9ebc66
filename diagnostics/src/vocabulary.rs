//! Shared diagnostic vocabulary: failure classes, severities, outcomes and availability.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why an operation failed, serialized with the canonical snake_case class names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The input was malformed or out of range (`invalid_input`).
    InvalidInput,
    /// The operation was attempted in a state that does not allow it (`invalid_state`).
    InvalidState,
    /// A required file, device or resource does not exist (`not_found`).
    NotFound,
    /// The operation conflicted with concurrent or existing state (`conflict`).
    Conflict,
    /// Credentials were missing or rejected (`authentication`).
    Authentication,
    /// The caller lacks permission (`permission_denied`).
    PermissionDenied,
    /// The operation is not supported here (`unsupported`).
    Unsupported,
    /// Two parts are present but incompatible, e.g. versions (`incompatible`).
    Incompatible,
    /// A deadline passed before the operation finished (`timeout`).
    Timeout,
    /// A backend or dependency is unavailable (`unavailable`).
    Unavailable,
    /// A quota, buffer or other bounded resource ran out (`resource_exhausted`).
    ResourceExhausted,
    /// A read or write failed at the I/O layer (`io`).
    Io,
    /// A child process or external execution failed (`execution_failed`).
    ExecutionFailed,
    /// A policy rejected the operation (`policy_rejected`).
    PolicyRejected,
    /// An internal invariant failed (`internal`).
    Internal,
    /// The cause is not known (`unknown`).
    Unknown,
}

impl FailureClass {
    /// Every failure class, in vocabulary order.
    pub const ALL: [FailureClass; 16] = [
        FailureClass::InvalidInput,
        FailureClass::InvalidState,
        FailureClass::NotFound,
        FailureClass::Conflict,
        FailureClass::Authentication,
        FailureClass::PermissionDenied,
        FailureClass::Unsupported,
        FailureClass::Incompatible,
        FailureClass::Timeout,
        FailureClass::Unavailable,
        FailureClass::ResourceExhausted,
        FailureClass::Io,
        FailureClass::ExecutionFailed,
        FailureClass::PolicyRejected,
        FailureClass::Internal,
        FailureClass::Unknown,
    ];

    /// The canonical snake_case name, identical to the serialized form.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::InvalidInput => "invalid_input",
            FailureClass::InvalidState => "invalid_state",
            FailureClass::NotFound => "not_found",
            FailureClass::Conflict => "conflict",
            FailureClass::Authentication => "authentication",
            FailureClass::PermissionDenied => "permission_denied",
            FailureClass::Unsupported => "unsupported",
            FailureClass::Incompatible => "incompatible",
            FailureClass::Timeout => "timeout",
            FailureClass::Unavailable => "unavailable",
            FailureClass::ResourceExhausted => "resource_exhausted",
            FailureClass::Io => "io",
            FailureClass::ExecutionFailed => "execution_failed",
            FailureClass::PolicyRejected => "policy_rejected",
            FailureClass::Internal => "internal",
            FailureClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How important a piece of evidence is; independent of the observation's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Fine-grained tracing evidence (`trace`).
    Trace,
    /// Debugging evidence (`debug`).
    Debug,
    /// Routine information (`info`).
    Info,
    /// Something degraded but work continued (`warning`).
    Warning,
    /// Work failed (`error`).
    Error,
}

impl Severity {
    /// The canonical snake_case name, identical to the serialized form.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Trace => "trace",
            Severity::Debug => "debug",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The outcome a code declares and an observation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticOutcome {
    /// The observed operation failed; a failure class is required.
    Failure,
    /// The observed operation succeeded; no failure class is allowed.
    Success,
    /// The outcome is unspecified (e.g. "no devices found"); no failure class is allowed.
    Unknown,
}

impl DiagnosticOutcome {
    /// The canonical snake_case name, identical to the serialized form.
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosticOutcome::Failure => "failure",
            DiagnosticOutcome::Success => "success",
            DiagnosticOutcome::Unknown => "unknown",
        }
    }
}

impl fmt::Display for DiagnosticOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a diagnostics context collects anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    /// Registrations and observations are stored.
    Enabled,
    /// Every call is a no-op; lazy factories are never called.
    Disabled,
}

//! The SDK's errors, one enum per concern: diagnostic delivery, the environment
//! contract, serving a plugin, Agent scopes, and a plugin's own
//! refusal.

use std::path::PathBuf;

/// Why a diagnostic operation did not go through. A delivery outcome, independent of
/// the operation the plugin was recording: handle it without replacing that result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DiagnosticDeliveryError {
    /// The local queue (pending submissions plus one in flight) is full; the
    /// recording factory was skipped and the submission counted as dropped.
    #[error("the diagnostic queue is full; the submission was dropped")]
    Full,
    /// The count, code, payload or encoded request is invalid or exceeds a
    /// negotiated bound; nothing was sent.
    #[error("the diagnostic submission is invalid or exceeds a negotiated bound")]
    Invalid,
    /// The host refused this attempt without consuming its sequence.
    #[error("the host refused the diagnostic submission without consuming it")]
    NotConsumed,
    /// The host rejected the submission for good.
    #[error("the host rejected the diagnostic submission")]
    Rejected,
    /// Acceptance could not be confirmed within the retry policy, or a lifecycle
    /// wait timed out. Do not replay the observation.
    #[error("the host's acceptance could not be confirmed; do not replay")]
    Uncertain,
    /// Delivery no longer accepts the operation (closed, or stopped by the host).
    #[error("diagnostic delivery is closed")]
    Closed,
}

/// A variable of the environment contract is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvironmentError {
    /// The variable is not set.
    #[error("{name} is not set")]
    Missing {
        /// The variable.
        name: &'static str,
    },
    /// The variable is not valid Unicode.
    #[error("{name} is not valid Unicode")]
    NotUnicode {
        /// The variable.
        name: &'static str,
    },
    /// The variable is empty or only whitespace.
    #[error("{name} is blank")]
    Blank {
        /// The variable.
        name: &'static str,
    },
    /// The variable does not name an endpoint this SDK can use (a Unix socket or
    /// loopback TCP).
    #[error("{name} = {value:?}: {reason}")]
    Endpoint {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The message limit is not a decimal integer in range.
    #[error("{reason}")]
    MessageLimit {
        /// What is wrong with it, naming the variable.
        reason: String,
    },
}

/// Why [`serve_plugin`](crate::serve_plugin) stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The environment contract is incomplete.
    #[error("worker environment: {0}")]
    Environment(#[from] EnvironmentError),
    /// The worker endpoint could not be bound.
    #[error("cannot bind the worker endpoint {endpoint}: {source}")]
    Bind {
        /// The endpoint.
        endpoint: crate::endpoint::Endpoint,
        /// What the OS said.
        source: std::io::Error,
    },
    /// `NEMO_RELAY_WORKER_ENDPOINT_FILE` could not be written.
    #[error("cannot write the worker endpoint file {}: {source}", path.display())]
    EndpointFile {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("the worker's gRPC server failed: {0}")]
    Server(#[from] tonic::transport::Error),
}

/// Why an Agent scope could not be started or ended.
#[derive(Debug, thiserror::Error)]
pub enum AgentScopeError {
    /// The name breaks the service's rule (non-blank, at most 256 bytes); nothing
    /// was sent.
    #[error("agent scope name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The weight is not a positive, finite number; nothing was sent.
    #[error("agent scope weight {0}: a positive, finite number")]
    InvalidWeight(f64),
    /// The host answered with an error status.
    #[error("{operation} failed: {code:?}: {message}")]
    Host {
        /// `StartAgentScope` or `EndAgentScope`.
        operation: &'static str,
        /// The gRPC status code (`PERMISSION_DENIED` for wrong credentials,
        /// `NOT_FOUND` for a scope already ended, `UNIMPLEMENTED` for a host without
        /// the service, `UNAVAILABLE` when it cannot be reached).
        code: tonic::Code,
        /// The host's message.
        message: String,
    },
    /// The host did not answer in time.
    #[error("{operation}: no answer within {seconds} s")]
    Timeout {
        /// `StartAgentScope` or `EndAgentScope`.
        operation: &'static str,
        /// The limit.
        seconds: u64,
    },
    /// The host answered without a scope id.
    #[error("StartAgentScope answered without a scope id")]
    NoScopeId,
}

/// A plugin's own refusal of its configuration or registration, returned to the host
/// as the reference's `WorkerError { code, message }`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct PluginError {
    /// A stable machine-readable code, e.g. `invalid_config`.
    pub code: String,
    /// A human-readable message (sent to the host; keep secrets out of it).
    pub message: String,
}

impl PluginError {
    /// A refusal with `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> PluginError {
        PluginError {
            code: code.into(),
            message: message.into(),
        }
    }
}

//! The one contract every exporter keeps (export, flush, shutdown) and its typed errors.

use std::io;
use std::path::PathBuf;

use wattline_model::events::PipelineEvent;

/// Which exporter a failure or a counter belongs to; the integrator maps it to a
/// diagnostics code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExporterKind {
    /// The ATOF JSON-lines file.
    Atof,
    /// OTLP metrics to one or more collectors.
    Otlp,
    /// OpenTelemetry metrics printed on standard output, for debugging.
    Stdout,
}

impl ExporterKind {
    /// The kind's short name (`atof`, `otlp`, `stdout`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExporterKind::Atof => "atof",
            ExporterKind::Otlp => "otlp",
            ExporterKind::Stdout => "stdout",
        }
    }
}

/// An exporter: receives every pipeline event in order and ships it somewhere.
///
/// Calls may block (file I/O, a flush waiting for a collector): the fan-out runs each
/// exporter off the async workers, one call at a time. Retries live inside `export`
/// and `flush`. After `shutdown`, `export` and `flush` return
/// [`ExportError::ShutDown`]; a second `shutdown` does nothing.
pub trait Exporter: Send + 'static {
    /// What kind of exporter this is.
    fn kind(&self) -> ExporterKind;

    /// Ships one event (or records it for a later periodic export).
    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError>;

    /// Makes everything exported so far durable or delivered (fsync, forced export).
    fn flush(&mut self) -> Result<(), ExportError>;

    /// Flushes and releases what the exporter holds.
    fn shutdown(&mut self) -> Result<(), ExportError>;

    /// Events it accepted and will never deliver (lines dropped from a full backlog,
    /// lines still unwritten at shutdown). Default: none.
    fn lost(&self) -> u64 {
        0
    }

    /// The slowest a destination has been to answer one request (a collector's
    /// acceptance or refusal), where the exporter sends requests. Default: none.
    fn slowest_answer(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Why one export, flush or shutdown failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The exporter was shut down before this call.
    #[error("the {0} exporter is shut down")]
    ShutDown(&'static str),
    /// A file operation failed; `pending` lines are kept and tried again at the next call.
    #[error("cannot {operation} {path}: {source} ({pending} line(s) kept for the next attempt)")]
    Io {
        /// What was being done (`open`, `write`, `sync`).
        operation: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
        /// Lines not yet written, kept to retry.
        pending: usize,
    },
    /// A mark's data broke a `nemo.relay.metric_measurements` v1 rule; it was not
    /// written.
    #[error("mark {name:?} is not valid nemo.relay.metric_measurements v1: {reason}")]
    InvalidMark {
        /// The mark's name.
        name: String,
        /// The first rule broken, with the measurement's position.
        reason: String,
    },
    /// An event could not be encoded as JSON.
    #[error("cannot encode an event as JSON: {0}")]
    Encode(#[from] serde_json::Error),
    /// Some measurements could not be recorded into instruments (the others were).
    #[error("{refused} measurement(s) not recorded; first: {first}")]
    MeasurementsRefused {
        /// How many were refused in this call.
        refused: usize,
        /// Why the first one was refused.
        first: String,
    },
    /// Spans could not all be sent at a flush (the metrics' outcome is their own).
    #[error("OpenTelemetry span flush failed: {0}")]
    Spans(String),
    /// An OpenTelemetry export, flush or shutdown failed for one endpoint.
    #[error("OpenTelemetry {operation} to {endpoint} failed: {message}")]
    Otlp {
        /// `export`, `flush` or `shutdown`.
        operation: &'static str,
        /// The endpoint URL (or `stdout`).
        endpoint: String,
        /// What the SDK reported.
        message: String,
    },
}

/// Why an exporter could not be built; each variant names the bad setting or path.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A configuration rule was broken (`field` is relative to the component's config).
    #[error("{field}: {rule}")]
    Config {
        /// The field path, e.g. `endpoints[0].timeout_millis`.
        field: String,
        /// The rule.
        rule: String,
    },
    /// The output directory could not be created or is not a directory.
    #[error("cannot create the ATOF output directory {path}: {source}")]
    OutputDirectory {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The ATOF file could not be opened for writing.
    #[error("cannot open the ATOF file {path} for writing: {source}")]
    OpenFile {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// OpenTelemetry is enabled with no endpoint to send to.
    #[error("endpoints: no endpoint configured; add one `[[components.config.endpoints]]`")]
    NoEndpoints,
    /// An `https://` endpoint was given, but this build has no TLS support.
    #[error(
        "endpoints[{index}].endpoint: {endpoint} needs TLS, which this build does not include; use http:// (for instance a local collector that forwards over TLS)"
    )]
    TlsUnsupported {
        /// The endpoint's position.
        index: usize,
        /// The URL.
        endpoint: String,
    },
    /// A header name or value cannot be sent. The value is never part of the message.
    #[error("endpoints[{index}].{field}.{header}: {rule}")]
    InvalidHeader {
        /// The endpoint's position.
        index: usize,
        /// `headers` or `header_env`.
        field: &'static str,
        /// The header name.
        header: String,
        /// What is wrong.
        rule: String,
    },
    /// A `header_env` variable is unset, empty or not UTF-8.
    #[error("endpoints[{index}].header_env.{header}: environment variable {variable} {problem}")]
    HeaderEnv {
        /// The endpoint's position.
        index: usize,
        /// The header name.
        header: String,
        /// The variable's name (its value is never shown).
        variable: String,
        /// `is not set`, `is empty`, ...
        problem: &'static str,
    },
    /// The OTLP exporter library refused the endpoint's settings.
    #[error("endpoints[{index}] ({endpoint}): {message}")]
    Otlp {
        /// The endpoint's position.
        index: usize,
        /// The URL.
        endpoint: String,
        /// What the library said.
        message: String,
    },
    /// A thread or runtime the exporter needs could not be started.
    #[error("cannot start the {what}: {source}")]
    Runtime {
        /// What could not be started.
        what: &'static str,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
}

impl From<wattline_config::FieldError> for BuildError {
    fn from(error: wattline_config::FieldError) -> Self {
        BuildError::Config {
            field: error.path,
            rule: error.rule,
        }
    }
}

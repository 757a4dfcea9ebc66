//! What a fan-out tells: the failure sink it reports failures and drops to (and the
//! pipeline diagnostics' side of it), each exporter's counters, and the answers to a
//! flush or shutdown.

use std::num::NonZeroU64;

use wattline_diagnostics::{ExporterCode, FailureClass, PipelineCode, PipelineDiagnostics};
use wattline_model::events::EventKind;

use crate::exporter::{ExportError, ExporterKind};

/// Receives exporter failures and drops, rate-limited: called at the first occurrence
/// and then at every `log_every`-th, with the number of occurrences since the previous
/// call (so the totals add up exactly), and once more at shutdown for any remainder.
/// Called on the sending thread for drops: it must be quick and must not block.
pub trait ExportFailureSink: Send + Sync + 'static {
    /// `occurrences` calls of `exporter` failed since the last report; `error` is the
    /// latest (`None` in the report at shutdown).
    fn export_failed(
        &self,
        exporter: &str,
        kind: ExporterKind,
        occurrences: NonZeroU64,
        error: Option<&ExportError>,
    );

    /// `occurrences` events (lines, for a poll's mark copies) were dropped for
    /// `exporter` since the last report, because its lane was over its byte budget or
    /// it had stopped; `by_kind` is the lane's total so far per [`EventKind`] (kinds
    /// with none left out).
    fn events_dropped(
        &self,
        exporter: &str,
        kind: ExporterKind,
        occurrences: NonZeroU64,
        by_kind: &[(EventKind, u64)],
    );
}

/// Records exporter failures as `exporter.atof.write_failed` / `exporter.otlp.export_failed`
/// and drops as `exporter.otlp.dropped` (ATOF drops as `exporter.atof.write_failed`:
/// a dropped event is a line never written).
impl ExportFailureSink for PipelineDiagnostics {
    fn export_failed(
        &self,
        exporter: &str,
        kind: ExporterKind,
        occurrences: NonZeroU64,
        error: Option<&ExportError>,
    ) {
        let (code, class) = match kind {
            ExporterKind::Atof => {
                let denied = matches!(error, Some(ExportError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::PermissionDenied);
                let class = if denied {
                    FailureClass::PermissionDenied
                } else {
                    FailureClass::Io
                };
                (ExporterCode::AtofWriteFailed, class)
            }
            ExporterKind::Otlp | ExporterKind::Stdout => {
                (ExporterCode::OtlpExportFailed, FailureClass::Unavailable)
            }
        };
        let detail = match error {
            Some(error) => format!("{exporter}: {error}"),
            None => format!("{exporter}: failures since the last report"),
        };
        record(self, code, class, detail, occurrences);
    }

    fn events_dropped(
        &self,
        exporter: &str,
        kind: ExporterKind,
        occurrences: NonZeroU64,
        by_kind: &[(EventKind, u64)],
    ) {
        let (code, class) = match kind {
            ExporterKind::Atof => (ExporterCode::AtofWriteFailed, FailureClass::Io),
            ExporterKind::Otlp | ExporterKind::Stdout => {
                (ExporterCode::OtlpDropped, FailureClass::ResourceExhausted)
            }
        };
        let detail = format!(
            "{exporter}: events dropped (so far: {}), lane over its byte budget or exporter stopped",
            kinds_and_counts(by_kind)
        );
        record(self, code, class, detail, occurrences);
    }
}

/// `scope 3, mark_copy 2000`: each kind's name and count, in order.
pub(super) fn kinds_and_counts(by_kind: &[(EventKind, u64)]) -> String {
    let parts: Vec<String> = by_kind
        .iter()
        .map(|(kind, count)| format!("{} {count}", kind.name()))
        .collect();
    parts.join(", ")
}

fn record(
    diagnostics: &PipelineDiagnostics,
    code: ExporterCode,
    class: FailureClass,
    detail: String,
    occurrences: NonZeroU64,
) {
    let code = PipelineCode::Exporter(code);
    let outcome = diagnostics.record_counted(code, Some(class), occurrences, &detail);
    if let Err(error) = outcome {
        tracing::debug!(code = code.name(), %error, "exporter diagnostic not recorded");
    }
}

/// Counters of one exporter in a fan-out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExporterStats {
    /// The name it was added under.
    pub name: String,
    /// Its kind.
    pub kind: ExporterKind,
    /// Events it exported without error.
    pub exported: u64,
    /// Calls (export, flush, shutdown) that returned an error.
    pub failed: u64,
    /// Events dropped for it (a poll's mark copies one per line): its lane over its
    /// byte budget, or the exporter had stopped.
    pub dropped: u64,
    /// [`Self::dropped`] by kind, in [`EventKind::ALL`] order, kinds with none left out.
    pub dropped_by_kind: Vec<(EventKind, u64)>,
    /// Events it accepted and will never deliver (see [`crate::Exporter::lost`]).
    pub lost: u64,
    /// Events waiting in its lane now (a batch counts each of its events).
    pub queued: usize,
    /// The estimated bytes of those events ([`wattline_model::events::PipelineEvent::estimated_bytes`]).
    pub queued_bytes: u64,
    /// The last error a call returned, if any.
    pub last_error: Option<String>,
    /// The slowest its destination answered one request (see
    /// [`crate::Exporter::slowest_answer`]), as of its last call.
    pub slowest_answer: Option<std::time::Duration>,
}

/// How one exporter answered a flush or shutdown.
#[derive(Debug)]
pub enum LaneOutcome {
    /// Done.
    Done,
    /// The exporter reported an error.
    Failed(ExportError),
    /// No answer before the deadline (the call may still finish later).
    TimedOut,
    /// The exporter's task had ended (shut down, or its exporter panicked).
    Stopped,
}

impl LaneOutcome {
    /// `done`, `failed`, `timed_out` or `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            LaneOutcome::Done => "done",
            LaneOutcome::Failed(_) => "failed",
            LaneOutcome::TimedOut => "timed_out",
            LaneOutcome::Stopped => "stopped",
        }
    }
}

/// One exporter's answer to a flush or shutdown.
#[derive(Debug)]
pub struct LaneReport {
    /// The exporter's name.
    pub exporter: String,
    /// What happened.
    pub outcome: LaneOutcome,
}

/// The answers of every exporter, in the order they were added.
#[derive(Debug)]
pub struct FanOutReport {
    /// One per exporter.
    pub lanes: Vec<LaneReport>,
}

impl FanOutReport {
    /// Whether every exporter answered `Done`.
    pub fn all_done(&self) -> bool {
        self.lanes
            .iter()
            .all(|lane| matches!(lane.outcome, LaneOutcome::Done))
    }

    /// Each exporter's name with its outcome's [`LaneOutcome::as_str`], in order.
    pub fn summary(&self) -> Vec<(&str, &'static str)> {
        self.lanes
            .iter()
            .map(|lane| (lane.exporter.as_str(), lane.outcome.as_str()))
            .collect()
    }

    /// The outcome of the exporter called `name`.
    pub fn outcome(&self, name: &str) -> Option<&LaneOutcome> {
        self.lanes
            .iter()
            .find(|lane| lane.exporter == name)
            .map(|lane| &lane.outcome)
    }
}

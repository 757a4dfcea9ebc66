//! The fan-out: every exporter runs as its own tokio task fed by its lane (a mailbox
//! bounded by bytes), so a slow, failing or dead exporter never delays the sender or
//! another exporter.
//!
//! [`FanOut::send`] and [`FanOut::send_batch`] never wait: per exporter they either
//! queue the event (a batch as one message) or, when the lane's events already hold
//! its byte budget ([`PipelineEvent::estimated_bytes`]; [`DEFAULT_LANE_BYTES`] unless
//! set) or the exporter has stopped, drop it and count the drop by
//! [`EventKind`](wattline_model::events::EventKind). A lane has the budget twice: once
//! for the run's record of its steps (scope starts and ends, energy records, settled
//! energy: [`EventKind::is_record`](wattline_model::events::EventKind::is_record)) and
//! once for the bulk (a poll's copies, metrics, telemetry), so bulk waiting to be
//! written never crowds out a step's record. A sender of bulk that can wait awaits
//! [`FanOut::room`] first: it resolves once every live lane's bulk is under its budget,
//! woken by the lanes as they take events. Each task runs
//! its exporter's (possibly blocking) calls on the blocking thread pool, one at a
//! time, in order; the messages waiting when a call starts (up to 256) go out in that
//! one call, so a lane short of CPU catches up instead of paying two thread wake-ups
//! per event. Besides its mailbox, a lane holds at most what it last took from it (no
//! more than the mailbox held). Failures and drops are counted per exporter
//! ([`FanOut::stats`]), logged with `tracing` at the first occurrence and then every
//! `log_every`-th, and handed (with the exact count since the last report) to an
//! optional [`ExportFailureSink`], such as the pipeline's diagnostics.

mod lane;
mod report;
mod shared;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use wattline_model::events::{EventSink, PipelineEvent, Room};

use crate::exporter::Exporter;
use lane::{Asked, Lane, LaneMessage, LaneTask, Parcel, Reply, drop_off_runtime};
pub use report::{ExportFailureSink, ExporterStats, FanOutReport, LaneOutcome, LaneReport};
use shared::{Held, LaneShared};

/// Default estimated bytes of events one exporter's lane may hold before new ones are
/// dropped for it: a poll's copies under 10 000 live scopes, many times over.
pub const DEFAULT_LANE_BYTES: u64 = 64 * 1024 * 1024;
/// Default spacing of repeated failure and drop reports (the first is always reported).
pub const DEFAULT_LOG_EVERY: u64 = 100;
/// How long shutdown waits for a task to end once it was told to stop.
const TASK_STOP_GRACE: Duration = Duration::from_secs(5);

/// Builds a [`FanOut`].
pub struct FanOutBuilder {
    exporters: Vec<(String, Box<dyn Exporter>, Option<u64>)>,
    lane_bytes: u64,
    log_every: u64,
    sink: Option<Arc<dyn ExportFailureSink>>,
}

impl Default for FanOutBuilder {
    fn default() -> Self {
        FanOutBuilder {
            exporters: Vec::new(),
            lane_bytes: DEFAULT_LANE_BYTES,
            log_every: DEFAULT_LOG_EVERY,
            sink: None,
        }
    }
}

impl std::fmt::Debug for FanOutBuilder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .exporters
            .iter()
            .map(|(name, _, _)| name.as_str())
            .collect();
        formatter
            .debug_struct("FanOutBuilder")
            .field("exporters", &names)
            .field("lane_bytes", &self.lane_bytes)
            .field("log_every", &self.log_every)
            .finish()
    }
}

/// Why a fan-out could not start.
#[derive(Debug, thiserror::Error)]
pub enum FanOutError {
    /// Two exporters were added under one name.
    #[error("two exporters are named {0:?}")]
    DuplicateName(String),
    /// An exporter's task did not start (no tokio runtime).
    #[error("the task of exporter {name:?} did not start: {message}")]
    Spawn {
        /// The exporter.
        name: String,
        /// What tokio said.
        message: String,
    },
}

impl FanOutBuilder {
    /// An empty fan-out whose lanes hold [`DEFAULT_LANE_BYTES`] each.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an exporter under `name` (used in logs, counters and reports).
    pub fn exporter(self, name: impl Into<String>, exporter: impl Exporter) -> Self {
        self.boxed_exporter(name, Box::new(exporter))
    }

    /// Adds an already boxed exporter under `name`.
    pub fn boxed_exporter(mut self, name: impl Into<String>, exporter: Box<dyn Exporter>) -> Self {
        self.exporters.push((name.into(), exporter, None));
        self
    }

    /// Adds an exporter whose lane holds its own budget of estimated bytes (at least
    /// 1), e.g. a larger one for a local file than for a remote collector.
    pub fn exporter_with_lane_bytes(
        mut self,
        name: impl Into<String>,
        exporter: impl Exporter,
        bytes: u64,
    ) -> Self {
        self.exporters
            .push((name.into(), Box::new(exporter), Some(bytes.max(1))));
        self
    }

    /// The estimated bytes of events each exporter without its own budget may have
    /// waiting in its lane (at least 1).
    pub fn lane_bytes(mut self, bytes: u64) -> Self {
        self.lane_bytes = bytes.max(1);
        self
    }

    /// Report failures and drops at the first one and then every `every`-th (at least 1).
    pub fn log_every(mut self, every: u64) -> Self {
        self.log_every = every.max(1);
        self
    }

    /// Where failures and drops are reported besides the log.
    pub fn failure_sink(mut self, sink: Arc<dyn ExportFailureSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Spawns one task per exporter on the current tokio runtime.
    pub async fn start(self) -> Result<FanOut, FanOutError> {
        let duplicate = self
            .exporters
            .iter()
            .enumerate()
            .find_map(|(at, (name, ..))| {
                self.exporters[..at]
                    .iter()
                    .any(|(earlier, ..)| earlier == name)
                    .then(|| name.clone())
            });
        if let Some(name) = duplicate {
            drop_off_runtime(self.exporters);
            return Err(FanOutError::DuplicateName(name));
        }
        let room = Arc::new(Notify::new());
        let mut lanes: Vec<Lane> = Vec::with_capacity(self.exporters.len());
        for (name, exporter, budget) in self.exporters {
            let runtime =
                tokio::runtime::Handle::try_current().map_err(|error| FanOutError::Spawn {
                    name: name.clone(),
                    message: error.to_string(),
                })?;
            let shared = Arc::new(LaneShared::new(
                name,
                exporter.kind(),
                budget.unwrap_or(self.lane_bytes),
                self.log_every,
                self.sink.clone(),
                Arc::clone(&room),
            ));
            let (sender, receiver) = mpsc::unbounded_channel();
            let lane = LaneTask {
                receiver,
                exporter: Some(exporter),
                shared: Arc::clone(&shared),
            };
            let task = runtime.spawn(lane.run());
            lanes.push(Lane {
                sender,
                shared,
                abort: task.abort_handle(),
                task: std::sync::Mutex::new(Some(task)),
            });
        }
        Ok(FanOut {
            lanes: Arc::new(lanes),
            room,
        })
    }
}

/// Sends every pipeline event to every exporter; cheap to clone (all clones feed the
/// same exporters).
#[derive(Clone)]
pub struct FanOut {
    lanes: Arc<Vec<Lane>>,
    /// Woken by the lanes as they take events or stop: [`FanOut::room`] looks again.
    room: Arc<Notify>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FanOut")
            .field("exporters", &self.stats())
            .finish()
    }
}

/// The pipeline's view of the fan-out: it queues or drops, never waits; a sender
/// that can wait awaits [`FanOut::room`].
impl EventSink for FanOut {
    fn send(&self, event: PipelineEvent) {
        FanOut::send(self, event);
    }

    fn send_batch(&self, events: Vec<PipelineEvent>) {
        FanOut::send_batch(self, events);
    }

    fn room(&self) -> Room<'_> {
        Box::pin(FanOut::room(self))
    }
}

impl FanOut {
    /// A builder.
    pub fn builder() -> FanOutBuilder {
        FanOutBuilder::new()
    }

    /// Queues `event` for every exporter without waiting; where an exporter's lane
    /// is over its byte budget or it has stopped, the event is dropped for that
    /// exporter only and counted by kind. Returns how many exporters accepted it.
    /// Callable from any thread.
    pub fn send(&self, event: PipelineEvent) -> usize {
        let held = Held::of(std::slice::from_ref(&event));
        self.offer(&Parcel::One(Arc::new(event)), held)
    }

    /// Queues `events`, in order, as one message per exporter, without waiting: each
    /// exporter takes all of them (its lane had room for their estimated bytes) or
    /// none (each counted dropped by kind). Returns how many exporters accepted them.
    pub fn send_batch(&self, events: Vec<PipelineEvent>) -> usize {
        if events.is_empty() {
            return 0;
        }
        let held = Held::of(&events);
        self.offer(&Parcel::Batch(events.into()), held)
    }

    fn offer(&self, parcel: &Parcel, held: Held) -> usize {
        self.lanes
            .iter()
            .filter(|lane| lane.offer(parcel, held))
            .count()
    }

    /// Resolves once every live exporter's lane is under its byte budget (a stopped
    /// one holds nothing back): at once when they are, else when the lanes over it
    /// have taken enough of their events. Never sends or drops anything.
    pub async fn room(&self) {
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before looking, so a lane that drains in between wakes it.
            notified.as_mut().enable();
            if self.lanes.iter().all(Lane::has_room) {
                return;
            }
            notified.await;
        }
    }

    /// Counters of every exporter, in the order they were added.
    pub fn stats(&self) -> Vec<ExporterStats> {
        self.lanes.iter().map(|lane| lane.shared.stats()).collect()
    }

    /// Counters of the exporter called `name`.
    pub fn stats_of(&self, name: &str) -> Option<ExporterStats> {
        self.lanes
            .iter()
            .find(|lane| lane.shared.name == name)
            .map(|lane| lane.shared.stats())
    }

    /// Asks every exporter to flush once the events queued before this call are
    /// exported, and waits at most `timeout` for all the answers together.
    pub async fn flush(&self, timeout: Duration) -> FanOutReport {
        self.ask(timeout, LaneMessage::Flush).await
    }

    /// Asks every exporter to shut down after the events queued before this call, and
    /// waits at most `timeout`. Exporters that did not answer in time are stopped (a
    /// blocked call finishes on its own thread). When this returns, every exporter's
    /// task has ended; later events count as dropped.
    pub async fn shutdown(&self, timeout: Duration) -> FanOutReport {
        let report = self.ask(timeout, LaneMessage::Shutdown).await;
        for (lane, answer) in self.lanes.iter().zip(&report.lanes) {
            let given_up = !matches!(answer.outcome, LaneOutcome::Done | LaneOutcome::Failed(_));
            if given_up {
                lane.shared
                    .stopping
                    .store(true, std::sync::atomic::Ordering::Relaxed);
                lane.abort.abort();
            }
            let task = lane
                .task
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .take();
            if let Some(task) = task {
                // An aborted task ends at its next await point: promptly.
                if tokio::time::timeout(TASK_STOP_GRACE, task).await.is_err() {
                    tracing::warn!(exporter = %lane.shared.name, "exporter task did not end in time");
                }
            }
            if given_up {
                lane.shared.report_remainders();
            }
        }
        report
    }

    async fn ask(&self, timeout: Duration, message: fn(Reply) -> LaneMessage) -> FanOutReport {
        let deadline = Instant::now() + timeout;
        // Every lane is asked before any answer is awaited, so each request lands right
        // behind the events already queued for it.
        let asked: Vec<Asked> = self.lanes.iter().map(|lane| lane.ask(message)).collect();
        let mut lanes = Vec::with_capacity(asked.len());
        for (lane, asked) in self.lanes.iter().zip(asked) {
            lanes.push(LaneReport {
                exporter: lane.shared.name.clone(),
                outcome: asked.outcome(deadline).await,
            });
        }
        FanOutReport { lanes }
    }
}

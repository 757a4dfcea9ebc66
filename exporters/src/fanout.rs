//! The fan-out: every exporter runs as its own tokio task fed by a bounded channel (its
//! mailbox), so a slow, failing or dead exporter never delays the sender or another
//! exporter.
//!
//! [`FanOut::send`] never waits: per exporter it either queues the event or, when that
//! exporter already has `mailbox_capacity` events waiting (or has stopped), drops it
//! and counts the drop. Each task runs its exporter's (possibly blocking) calls on the
//! blocking thread pool, one at a time, in order; the events waiting when a call starts
//! (up to 256) go out in that one call, so a lane short of CPU catches up instead of
//! paying two thread wake-ups per event. Besides its mailbox, a lane holds at most what
//! it last took from it (256 messages at most, and no more than the mailbox held).
//! Failures and drops are counted per exporter ([`FanOut::stats`]), logged with
//! `tracing` at the first occurrence and then every `log_every`-th, and handed (with
//! the exact count since the last report) to an optional [`ExportFailureSink`], such
//! as the pipeline's diagnostics.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::oneshot::{self, error::RecvError};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::{Instant, error::Elapsed};
use wattline_diagnostics::{ExporterCode, FailureClass, PipelineCode, PipelineDiagnostics};
use wattline_model::events::{EventSink, PipelineEvent};

use crate::exporter::{ExportError, Exporter, ExporterKind};

/// Default events one exporter may have waiting before new ones are dropped for it.
pub const DEFAULT_MAILBOX_CAPACITY: usize = 1024;
/// Default spacing of repeated failure and drop reports (the first is always reported).
pub const DEFAULT_LOG_EVERY: u64 = 100;
/// How long shutdown waits for a task to end once it was told to stop.
const TASK_STOP_GRACE: Duration = Duration::from_secs(5);

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

    /// `occurrences` events were dropped for `exporter` since the last report, because
    /// its mailbox was full or it had stopped.
    fn events_dropped(&self, exporter: &str, kind: ExporterKind, occurrences: NonZeroU64);
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

    fn events_dropped(&self, exporter: &str, kind: ExporterKind, occurrences: NonZeroU64) {
        let (code, class) = match kind {
            ExporterKind::Atof => (ExporterCode::AtofWriteFailed, FailureClass::Io),
            ExporterKind::Otlp | ExporterKind::Stdout => {
                (ExporterCode::OtlpDropped, FailureClass::ResourceExhausted)
            }
        };
        let detail = format!("{exporter}: events dropped, mailbox full or exporter stopped");
        record(self, code, class, detail, occurrences);
    }
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
    /// Events dropped for it: mailbox full, or the exporter had stopped.
    pub dropped: u64,
    /// Events it accepted and will never deliver (see [`Exporter::lost`]).
    pub lost: u64,
    /// Events waiting in its mailbox now.
    pub queued: usize,
    /// The last error a call returned, if any.
    pub last_error: Option<String>,
    /// The slowest its destination answered one request (see
    /// [`Exporter::slowest_answer`]), as of its last call.
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

/// What the sender and the task of one lane share.
struct LaneShared {
    name: String,
    kind: ExporterKind,
    capacity: usize,
    log_every: u64,
    sink: Option<Arc<dyn ExportFailureSink>>,
    queued: AtomicUsize,
    /// Shutdown gave up on the lane: a call in progress stops after its event in hand.
    stopping: AtomicBool,
    exported: AtomicU64,
    failed: AtomicU64,
    failures_reported: AtomicU64,
    dropped: AtomicU64,
    drops_reported: AtomicU64,
    lost: AtomicU64,
    /// [`Exporter::slowest_answer`] after the last call, µs (0: none).
    slowest_answer_micros: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl LaneShared {
    fn due(&self, total: u64) -> bool {
        total == 1 || total.is_multiple_of(self.log_every)
    }

    /// Counts `lines` events dropped (a mark's copies are one line each).
    fn note_drop(&self, lines: u64) {
        if lines == 0 {
            return;
        }
        let before = self.dropped.fetch_add(lines, Ordering::Relaxed);
        let total = before + lines;
        // Logged at the first drop and each time the count passes a multiple.
        if before == 0 || before / self.log_every != total / self.log_every {
            tracing::warn!(
                exporter = %self.name,
                dropped = total,
                capacity = self.capacity,
                "exporter mailbox full or exporter stopped: event dropped for this exporter"
            );
            self.report_drops(total);
        }
    }

    fn report_drops(&self, total: u64) {
        let previous = self.drops_reported.fetch_max(total, Ordering::Relaxed);
        if let (Some(sink), Some(new)) =
            (&self.sink, NonZeroU64::new(total.saturating_sub(previous)))
        {
            sink.events_dropped(&self.name, self.kind, new);
        }
    }

    fn note_failure(&self, error: &ExportError) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(error.to_string());
        }
        let total = self.failed.fetch_add(1, Ordering::Relaxed) + 1;
        if self.due(total) {
            tracing::warn!(exporter = %self.name, failures = total, %error, "exporter call failed");
            self.report_failures(total, Some(error));
        }
    }

    fn report_failures(&self, total: u64, error: Option<&ExportError>) {
        let previous = self.failures_reported.fetch_max(total, Ordering::Relaxed);
        if let (Some(sink), Some(new)) =
            (&self.sink, NonZeroU64::new(total.saturating_sub(previous)))
        {
            sink.export_failed(&self.name, self.kind, new, error);
        }
    }

    /// Reports what the rate limit held back.
    fn report_remainders(&self) {
        self.report_failures(self.failed.load(Ordering::Relaxed), None);
        self.report_drops(self.dropped.load(Ordering::Relaxed));
    }

    fn stats(&self) -> ExporterStats {
        ExporterStats {
            name: self.name.clone(),
            kind: self.kind,
            exported: self.exported.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
            slowest_answer: match self.slowest_answer_micros.load(Ordering::Relaxed) {
                0 => None,
                micros => Some(std::time::Duration::from_micros(micros)),
            },
            last_error: self.last_error.lock().ok().and_then(|last| last.clone()),
        }
    }
}

/// Where a lane's task answers a flush or shutdown.
type Reply = oneshot::Sender<Result<(), ExportError>>;

enum LaneMessage {
    Export(Arc<PipelineEvent>),
    Flush(Reply),
    Shutdown(Reply),
}

/// The lines of `events`: what dropping them loses (a mark's copies are one each).
fn unexported_lines(events: &[Arc<PipelineEvent>]) -> u64 {
    events.iter().map(|event| event.line_count()).sum()
}

/// Drops `value` on the blocking pool: dropping an exporter can block (a meter
/// provider's last export), which must not stall an async worker.
fn drop_off_runtime<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(value))),
        Err(_) => drop(value),
    }
}

/// The most queued events one exporter call on the blocking pool takes: a backlog goes
/// out in a few hand-offs, not two thread wake-ups per event.
const EVENTS_PER_CALL: usize = 256;

/// One exporter's task: takes its messages in order and runs the exporter's calls on
/// the blocking pool, one at a time. Events already waiting go out together in one
/// call (in order, each exported on its own), so a lane starved of CPU catches up in a
/// few hand-offs instead of falling behind by one hand-off per event.
struct LaneTask {
    receiver: mpsc::Receiver<LaneMessage>,
    /// Away while a call runs; gone for good once the exporter panicked.
    exporter: Option<Box<dyn Exporter>>,
    shared: Arc<LaneShared>,
}

impl Drop for LaneTask {
    fn drop(&mut self) {
        // Also reached when shutdown aborts the task between two calls.
        if let Some(exporter) = self.exporter.take() {
            drop_off_runtime(exporter);
        }
    }
}

impl LaneTask {
    /// Ends after a shutdown, once the exporter panicked, or when every sender is gone.
    async fn run(mut self) {
        let mut messages = Vec::with_capacity(EVENTS_PER_CALL);
        let mut events = Vec::with_capacity(EVENTS_PER_CALL);
        while self
            .receiver
            .recv_many(&mut messages, EVENTS_PER_CALL)
            .await
            > 0
        {
            let mut received = messages.drain(..);
            while let Some(message) = received.next() {
                let (reply, shutdown) = match message {
                    LaneMessage::Export(event) => {
                        self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                        events.push(event);
                        continue;
                    }
                    LaneMessage::Flush(reply) => (reply, false),
                    LaneMessage::Shutdown(reply) => (reply, true),
                };
                // A request answers after every event queued before it.
                if !self.export_all(&mut events).await {
                    self.count_unexported(received, Some(reply)).await;
                    return;
                }
                let result = if shutdown {
                    self.call(|exporter| exporter.shutdown()).await
                } else {
                    self.call(|exporter| exporter.flush()).await
                };
                let Some(result) = result else {
                    self.count_unexported(received, Some(reply)).await;
                    return;
                };
                if shutdown {
                    // Closed before answering: once the caller hears back, sends are
                    // drops.
                    self.count_unexported(received, None).await;
                    self.shared.report_remainders();
                    let _ = reply.send(result);
                    return;
                }
                // The caller may have given up waiting; nothing to do then.
                let _ = reply.send(result);
            }
            if !self.export_all(&mut events).await {
                self.count_unexported(std::iter::empty(), None).await;
                return;
            }
        }
    }

    /// Exports `events` (left empty) in order in one blocking call, counting each one
    /// exported or failed. `false` when the exporter panicked: the event it panicked on
    /// and those after it are counted as dropped. Once shutdown has given up on the
    /// lane (`stopping`), the call stops after the event in hand and counts the rest.
    async fn export_all(&mut self, events: &mut Vec<Arc<PipelineEvent>>) -> bool {
        if events.is_empty() {
            return true;
        }
        let batch = Arc::new(std::mem::take(events));
        // Events the call has finished with, kept outside it: a panic takes the call's
        // own state.
        let finished = Arc::new(AtomicUsize::new(0));
        let (call_batch, progress, shared) = (
            Arc::clone(&batch),
            Arc::clone(&finished),
            Arc::clone(&self.shared),
        );
        let outcome = self
            .call(move |exporter| {
                for (index, event) in call_batch.iter().enumerate() {
                    if shared.stopping.load(Ordering::Relaxed) {
                        shared.note_drop(unexported_lines(&call_batch[index..]));
                        shared.report_remainders();
                        break;
                    }
                    match exporter.export(event) {
                        Ok(()) => {
                            shared.exported.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => shared.note_failure(&error),
                    }
                    progress.store(index + 1, Ordering::Relaxed);
                }
                Ok(())
            })
            .await;
        if outcome.is_none() {
            self.shared
                .note_drop(unexported_lines(&batch[finished.load(Ordering::Relaxed)..]));
            return false;
        }
        // The list comes back (the call has dropped its handle) for the next batch.
        if let Ok(mut batch) = Arc::try_unwrap(batch) {
            batch.clear();
            *events = batch;
        }
        true
    }

    /// Counts as dropped the events of `received` and those left in the mailbox, which
    /// it closes: the exporter stopped before it reached them. The requests among them
    /// (and `request`, the one being answered) are dropped after the count, so a caller
    /// told the lane stopped finds every drop counted.
    async fn count_unexported(
        &mut self,
        received: impl Iterator<Item = LaneMessage>,
        request: Option<Reply>,
    ) {
        self.receiver.close();
        let mut requests: Vec<Reply> = request.into_iter().collect();
        let mut lines = 0;
        let mut count = |message| match message {
            LaneMessage::Export(event) => {
                self.shared.queued.fetch_sub(1, Ordering::Relaxed);
                lines += event.line_count();
            }
            LaneMessage::Flush(reply) | LaneMessage::Shutdown(reply) => requests.push(reply),
        };
        received.for_each(&mut count);
        // Ends once the mailbox is empty and no send is under way (it is closed).
        while let Some(message) = self.receiver.recv().await {
            count(message);
        }
        self.shared.note_drop(lines);
        drop(requests);
    }

    /// Runs one exporter call on the blocking pool. `None` when the exporter panicked:
    /// it is gone, the lane closes, and later events count as dropped.
    async fn call<R: Send + 'static>(
        &mut self,
        call: impl FnOnce(&mut dyn Exporter) -> Result<R, ExportError> + Send + 'static,
    ) -> Option<Result<R, ExportError>> {
        let Some(mut exporter) = self.exporter.take() else {
            return Some(Err(ExportError::ShutDown(self.shared.kind.as_str())));
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let result = call(exporter.as_mut());
            (exporter, result)
        })
        .await;
        match outcome {
            Ok((exporter, result)) => {
                self.shared.lost.store(exporter.lost(), Ordering::Relaxed);
                let slowest = exporter.slowest_answer().map_or(0, |took| {
                    u64::try_from(took.as_micros()).unwrap_or(u64::MAX)
                });
                self.shared
                    .slowest_answer_micros
                    .store(slowest, Ordering::Relaxed);
                self.exporter = Some(exporter);
                if let Err(error) = &result {
                    self.shared.note_failure(error);
                }
                Some(result)
            }
            Err(error) => {
                tracing::error!(exporter = %self.shared.name, %error, "exporter panicked; it receives nothing more");
                // Closed before the pending replies are dropped, so a caller told
                // `Stopped` finds the lane closed.
                self.receiver.close();
                None
            }
        }
    }
}

/// A flush or shutdown request on its way to one lane.
enum Asked {
    /// Queued; the answer comes on this.
    Queued(oneshot::Receiver<Result<(), ExportError>>),
    /// The lane was full: a task waits for room, then for the answer, by the deadline.
    Waiting(JoinHandle<LaneOutcome>),
    /// The lane's task had ended.
    Stopped,
}

impl Asked {
    async fn outcome(self, deadline: Instant) -> LaneOutcome {
        match self {
            Asked::Queued(answer) => answered(tokio::time::timeout_at(deadline, answer).await),
            // The task gives up by the deadline on its own.
            Asked::Waiting(task) => task.await.unwrap_or(LaneOutcome::Stopped),
            Asked::Stopped => LaneOutcome::Stopped,
        }
    }
}

fn answered(answer: Result<Result<Result<(), ExportError>, RecvError>, Elapsed>) -> LaneOutcome {
    match answer {
        Ok(Ok(Ok(()))) => LaneOutcome::Done,
        Ok(Ok(Err(error))) => LaneOutcome::Failed(error),
        Ok(Err(_closed)) => LaneOutcome::Stopped,
        Err(_elapsed) => LaneOutcome::TimedOut,
    }
}

struct Lane {
    sender: mpsc::Sender<LaneMessage>,
    shared: Arc<LaneShared>,
    abort: AbortHandle,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Lane {
    /// Queues a flush or shutdown behind the events already queued, without waiting.
    fn ask(&self, message: fn(Reply) -> LaneMessage, deadline: Instant) -> Asked {
        let (reply, answer) = oneshot::channel();
        match self.sender.try_send(message(reply)) {
            Ok(()) => Asked::Queued(answer),
            Err(TrySendError::Closed(_)) => Asked::Stopped,
            // Unlike an event, a request is not dropped for a busy exporter: it takes
            // the next free place (waiting senders go before `try_send`) or times out.
            Err(TrySendError::Full(request)) => {
                let sender = self.sender.clone();
                Asked::Waiting(tokio::spawn(async move {
                    match tokio::time::timeout_at(deadline, sender.send(request)).await {
                        Ok(Ok(())) => answered(tokio::time::timeout_at(deadline, answer).await),
                        Ok(Err(_closed)) => LaneOutcome::Stopped,
                        Err(_elapsed) => LaneOutcome::TimedOut,
                    }
                }))
            }
        }
    }
}

/// Builds a [`FanOut`].
pub struct FanOutBuilder {
    exporters: Vec<(String, Box<dyn Exporter>, Option<usize>)>,
    mailbox_capacity: usize,
    log_every: u64,
    sink: Option<Arc<dyn ExportFailureSink>>,
}

impl Default for FanOutBuilder {
    fn default() -> Self {
        FanOutBuilder {
            exporters: Vec::new(),
            mailbox_capacity: DEFAULT_MAILBOX_CAPACITY,
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
            .field("mailbox_capacity", &self.mailbox_capacity)
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
    /// An empty fan-out with a 1024-event mailbox per exporter.
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

    /// Adds an exporter with its own mailbox capacity (at least 1), e.g. a larger one
    /// for a local file than for a remote collector.
    pub fn exporter_with_capacity(
        mut self,
        name: impl Into<String>,
        exporter: impl Exporter,
        capacity: usize,
    ) -> Self {
        self.exporters
            .push((name.into(), Box::new(exporter), Some(capacity.max(1))));
        self
    }

    /// Events each exporter without its own capacity may have waiting (at least 1).
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.mailbox_capacity = capacity.max(1);
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
        let mut lanes: Vec<Lane> = Vec::with_capacity(self.exporters.len());
        for (name, exporter, capacity) in self.exporters {
            let runtime =
                tokio::runtime::Handle::try_current().map_err(|error| FanOutError::Spawn {
                    name: name.clone(),
                    message: error.to_string(),
                })?;
            let shared = Arc::new(LaneShared {
                name,
                kind: exporter.kind(),
                capacity: capacity.unwrap_or(self.mailbox_capacity),
                log_every: self.log_every,
                sink: self.sink.clone(),
                queued: AtomicUsize::new(0),
                stopping: AtomicBool::new(false),
                exported: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                failures_reported: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                slowest_answer_micros: AtomicU64::new(0),
                drops_reported: AtomicU64::new(0),
                last_error: std::sync::Mutex::new(None),
            });
            let (sender, receiver) = mpsc::channel(shared.capacity);
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
        })
    }
}

/// Sends every pipeline event to every exporter; cheap to clone (all clones feed the
/// same exporters).
#[derive(Clone)]
pub struct FanOut {
    lanes: Arc<Vec<Lane>>,
}

impl std::fmt::Debug for FanOut {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FanOut")
            .field("exporters", &self.stats())
            .finish()
    }
}

/// The pipeline's view of the fan-out: it queues or drops, never waits.
impl EventSink for FanOut {
    fn send(&self, event: PipelineEvent) {
        FanOut::send(self, event);
    }
}

impl FanOut {
    /// A builder.
    pub fn builder() -> FanOutBuilder {
        FanOutBuilder::new()
    }

    /// Queues `event` for every exporter without waiting; where an exporter's mailbox
    /// is full or it has stopped, the event is dropped for that exporter only and
    /// counted. Returns how many exporters accepted it. Callable from any thread.
    pub fn send(&self, event: PipelineEvent) -> usize {
        let lines = event.line_count();
        let event = Arc::new(event);
        let mut accepted = 0;
        for lane in self.lanes.iter() {
            let shared = &lane.shared;
            // Counted before the send, so the task's count on receipt never goes below zero.
            shared.queued.fetch_add(1, Ordering::Relaxed);
            match lane
                .sender
                .try_send(LaneMessage::Export(Arc::clone(&event)))
            {
                Ok(()) => accepted += 1,
                Err(TrySendError::Full(_) | TrySendError::Closed(_)) => {
                    shared.queued.fetch_sub(1, Ordering::Relaxed);
                    shared.note_drop(lines);
                }
            }
        }
        accepted
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
                lane.shared.stopping.store(true, Ordering::Relaxed);
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
        let asked: Vec<Asked> = self
            .lanes
            .iter()
            .map(|lane| lane.ask(message, deadline))
            .collect();
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

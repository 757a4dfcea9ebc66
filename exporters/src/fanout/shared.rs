//! What the senders and the task of one lane share: its byte budget and what it holds
//! against it, its counters (drops per kind), and the reports they make.

use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;
use wattline_model::events::{EventKind, PipelineEvent};

use super::report::{ExportFailureSink, ExporterStats, kinds_and_counts};
use crate::exporter::{ExportError, ExporterKind};

/// Which of a lane's two allowances a parcel is held against: the run's record of its
/// steps ([`EventKind::is_record`]) or the bulk (a poll's copies, metrics,
/// telemetry). Each has the lane's whole budget, so a poll's copies waiting to be
/// written never crowd out a step's start, end or energy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Allowance {
    Record = 0,
    Bulk = 1,
}

/// A parcel's estimated bytes and the allowance they are held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub(super) bytes: u64,
    pub(super) allowance: Allowance,
}

impl Held {
    /// What `events` hold: their estimated bytes, against the record's allowance
    /// when any of them is part of the record.
    pub(super) fn of(events: &[PipelineEvent]) -> Held {
        let record = events.iter().any(|event| event.kind().is_record());
        Held {
            bytes: events.iter().map(PipelineEvent::estimated_bytes).sum(),
            allowance: if record {
                Allowance::Record
            } else {
                Allowance::Bulk
            },
        }
    }
}

/// What the sender and the task of one lane share.
pub(super) struct LaneShared {
    pub(super) name: String,
    pub(super) kind: ExporterKind,
    /// The most estimated bytes of events the lane's mailbox holds, per allowance.
    pub(super) budget: u64,
    pub(super) log_every: u64,
    pub(super) sink: Option<Arc<dyn ExportFailureSink>>,
    /// Events in the mailbox (a batch counts each).
    pub(super) queued: AtomicUsize,
    /// Their estimated bytes, held against [`Self::budget`], by [`Allowance`].
    queued_bytes: [AtomicU64; 2],
    /// Woken whenever the lane takes events out of its mailbox or ends: the fan-out's
    /// room (shared by its lanes).
    pub(super) room: Arc<Notify>,
    /// Shutdown gave up on the lane: a call in progress stops after its event in hand.
    pub(super) stopping: AtomicBool,
    pub(super) exported: AtomicU64,
    pub(super) failed: AtomicU64,
    failures_reported: AtomicU64,
    dropped: AtomicU64,
    /// [`Self::dropped`] by [`EventKind::index`].
    dropped_by_kind: [AtomicU64; EventKind::ALL.len()],
    drops_reported: AtomicU64,
    pub(super) lost: AtomicU64,
    /// [`crate::Exporter::slowest_answer`] after the last call, µs (0: none).
    pub(super) slowest_answer_micros: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl LaneShared {
    /// A lane's shared half with nothing counted yet.
    pub(super) fn new(
        name: String,
        kind: ExporterKind,
        budget: u64,
        log_every: u64,
        sink: Option<Arc<dyn ExportFailureSink>>,
        room: Arc<Notify>,
    ) -> Self {
        LaneShared {
            name,
            kind,
            budget,
            log_every,
            sink,
            queued: AtomicUsize::new(0),
            queued_bytes: Default::default(),
            room,
            stopping: AtomicBool::new(false),
            exported: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            failures_reported: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            dropped_by_kind: Default::default(),
            drops_reported: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            slowest_answer_micros: AtomicU64::new(0),
            last_error: std::sync::Mutex::new(None),
        }
    }

    /// Books `held` into the mailbox when it fits its allowance (an empty allowance
    /// takes anything, so an event larger than the budget is not refused for good);
    /// `false` when it does not fit.
    pub(super) fn reserve(&self, held: Held) -> bool {
        self.queued_bytes[held.allowance as usize]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued == 0 || queued.saturating_add(held.bytes) <= self.budget)
                    .then(|| queued + held.bytes)
            })
            .is_ok()
    }

    /// Whether the bulk allowance is under its budget: a poll's copies go in now.
    pub(super) fn under_budget(&self) -> bool {
        self.queued_bytes[Allowance::Bulk as usize].load(Ordering::Acquire) < self.budget
    }

    /// Takes `events` events holding `held` out of the mailbox's books.
    pub(super) fn release(&self, events: usize, held: Held) {
        self.queued.fetch_sub(events, Ordering::Relaxed);
        self.queued_bytes[held.allowance as usize].fetch_sub(held.bytes, Ordering::AcqRel);
    }

    /// The estimated bytes in the mailbox, both allowances.
    fn queued_bytes(&self) -> u64 {
        self.queued_bytes
            .iter()
            .map(|queued| queued.load(Ordering::Relaxed))
            .sum()
    }

    fn due(&self, total: u64) -> bool {
        total == 1 || total.is_multiple_of(self.log_every)
    }

    /// Counts `events` as dropped, each by its kind (a poll's mark copies one per
    /// line), and reports at the first drop and each time the total passes a multiple
    /// of `log_every`.
    pub(super) fn note_drops<'a>(&self, events: impl IntoIterator<Item = &'a PipelineEvent>) {
        let mut lines = 0;
        for event in events {
            let count = event.line_count();
            self.dropped_by_kind[event.kind().index()].fetch_add(count, Ordering::Relaxed);
            lines += count;
        }
        if lines == 0 {
            return;
        }
        let before = self.dropped.fetch_add(lines, Ordering::Relaxed);
        let total = before + lines;
        if before == 0 || before / self.log_every != total / self.log_every {
            let by_kind = self.dropped_by_kind();
            tracing::warn!(
                exporter = %self.name,
                dropped = total,
                by_kind = %kinds_and_counts(&by_kind),
                budget_bytes = self.budget,
                "exporter lane over its byte budget or exporter stopped: events dropped for this exporter"
            );
            self.report_drops(total, &by_kind);
        }
    }

    /// Every kind with drops, with its count.
    fn dropped_by_kind(&self) -> Vec<(EventKind, u64)> {
        EventKind::ALL
            .into_iter()
            .map(|kind| {
                let count = self.dropped_by_kind[kind.index()].load(Ordering::Relaxed);
                (kind, count)
            })
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    fn report_drops(&self, total: u64, by_kind: &[(EventKind, u64)]) {
        let previous = self.drops_reported.fetch_max(total, Ordering::Relaxed);
        if let (Some(sink), Some(new)) =
            (&self.sink, NonZeroU64::new(total.saturating_sub(previous)))
        {
            sink.events_dropped(&self.name, self.kind, new, by_kind);
        }
    }

    pub(super) fn note_failure(&self, error: &ExportError) {
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
    pub(super) fn report_remainders(&self) {
        self.report_failures(self.failed.load(Ordering::Relaxed), None);
        self.report_drops(
            self.dropped.load(Ordering::Relaxed),
            &self.dropped_by_kind(),
        );
    }

    pub(super) fn stats(&self) -> ExporterStats {
        ExporterStats {
            name: self.name.clone(),
            kind: self.kind,
            exported: self.exported.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            dropped_by_kind: self.dropped_by_kind(),
            lost: self.lost.load(Ordering::Relaxed),
            queued: self.queued.load(Ordering::Relaxed),
            queued_bytes: self.queued_bytes(),
            slowest_answer: match self.slowest_answer_micros.load(Ordering::Relaxed) {
                0 => None,
                micros => Some(std::time::Duration::from_micros(micros)),
            },
            last_error: self.last_error.lock().ok().and_then(|last| last.clone()),
        }
    }
}

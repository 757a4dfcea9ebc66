//! The events that flow from the pipeline to the exporters: scope start/end events,
//! marks carrying `nemo.relay.metric_measurements` v1 data, and metric batches.
//! Exporters decide the wire format; this module only says what happened.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The mark name of a resource poll.
pub const RESOURCE_MARK_NAME: &str = "nemo.relay.resource_metrics";
use crate::metric_measurements::{MetricMeasurement, MetricMeasurements};

/// A mark: one poll's measurements under one parent scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Its own UUIDv7.
    pub uuid: Uuid,
    /// The Agent scope it was copied under, or the root scope; `None` only when there
    /// is no parent at all.
    pub parent_uuid: Option<Uuid>,
    /// When the sample was taken (identical across copies).
    pub timestamp: DateTime<Utc>,
    /// Mark name, e.g. [`RESOURCE_MARK_NAME`].
    pub name: String,
    /// `nemo.relay.metric_measurements` v1 data.
    pub data: MetricMeasurements,
}

/// One poll's mark copied under each live Agent scope, sent as one event: the copies
/// share time, name and data (built once, behind an `Arc`), and differ only in their
/// own UUID and parent. An exporter writes each copy (ATOF) or takes the data once (a
/// metrics exporter: the copies' measurements are identical).
#[derive(Debug, Clone, PartialEq)]
pub struct MarkCopies {
    /// When the sample was taken.
    pub timestamp: DateTime<Utc>,
    /// Mark name, e.g. [`RESOURCE_MARK_NAME`].
    pub name: String,
    /// `nemo.relay.metric_measurements` v1 data, shared by every copy.
    pub data: std::sync::Arc<MetricMeasurements>,
    /// The copies, one per parent scope.
    pub copies: Vec<MarkCopy>,
}

/// What one copy of a [`MarkCopies`] has of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkCopy {
    /// The copy's UUIDv7.
    pub uuid: Uuid,
    /// The scope it is copied under.
    pub parent_uuid: Option<Uuid>,
}

impl MarkCopies {
    /// Each copy as a [`Mark`] of its own (a clone of the data each: for readers and
    /// tests, not for the exporters' hot path).
    pub fn marks(&self) -> impl Iterator<Item = Mark> + '_ {
        self.copies.iter().map(|copy| Mark {
            uuid: copy.uuid,
            parent_uuid: copy.parent_uuid,
            timestamp: self.timestamp,
            name: self.name.clone(),
            data: MetricMeasurements::clone(&self.data),
        })
    }
}

/// Start or end of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeCategory {
    /// The scope began.
    Start,
    /// The scope ended (strictly later than its start).
    End,
}

/// What a scope is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// An Agent scope: receives a copy of every resource mark while live.
    Agent,
    /// Any other scope (the root is `Custom` with subtype `root`... see exporters).
    Custom,
}

/// A scope start or end event. Start and end share one `uuid`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopeEvent {
    /// The scope's UUIDv7.
    pub uuid: Uuid,
    /// The enclosing scope, `None` for the root.
    pub parent_uuid: Option<Uuid>,
    /// When it started or ended.
    pub timestamp: DateTime<Utc>,
    /// Scope name (the agent's name), shared by the scope's start and end events.
    pub name: std::sync::Arc<str>,
    /// Start or end.
    pub scope_category: ScopeCategory,
    /// What kind of scope.
    pub kind: ScopeKind,
    /// ATOF scope flags, sorted and de-duplicated: [`REMOTE_SCOPE`] for a scope a
    /// program started over the host endpoint, [`ENDED_AT_PROGRAM_EXIT`] on the end of
    /// one its program left open.
    pub attributes: Vec<&'static str>,
}

/// The ATOF flag of a scope started by another process over the host endpoint.
pub const REMOTE_SCOPE: &str = "remote";
/// The flag on the end event of a scope that its program left open when it exited:
/// wattline ended it at the exit.
pub const ENDED_AT_PROGRAM_EXIT: &str = "wattline.ended_at_program_exit";

/// Everything exporters receive, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum PipelineEvent {
    /// A scope started or ended.
    Scope(ScopeEvent),
    /// A single mark.
    Mark(Mark),
    /// One poll's mark, copied under every live Agent scope.
    MarkCopies(MarkCopies),
    /// Metrics that are not carried in marks (a count of steps whose name the metrics
    /// fold, a host's own), each a `MetricMeasurement` with its attributes, observed at
    /// `timestamp`.
    Metrics {
        /// When they were observed.
        timestamp: DateTime<Utc>,
        /// The observations.
        measurements: Vec<MetricMeasurement>,
    },
    /// A GPU gauge sample and the energy of the intervals it closed, from the energy
    /// stage. The exporters send it under the `gen_ai.*`, `wattline.*` and `hw.*` names
    /// of [`crate::telemetry_names`].
    GpuTelemetry {
        /// When the sample was observed.
        timestamp: DateTime<Utc>,
        /// The sample and its intervals.
        telemetry: Box<crate::energy_telemetry::GpuTelemetry>,
    },
    /// The RAPL intervals (CPU packages and DRAM) one reading closed, from the energy
    /// stage; named by the exporters as [`PipelineEvent::GpuTelemetry`] is.
    RaplIntervals {
        /// When the reading was booked.
        timestamp: DateTime<Utc>,
        /// One per zone.
        intervals: Vec<crate::energy_telemetry::RaplInterval>,
    },
    /// An input of the energy account, for event files: `wattline report FILE`
    /// replays them into the same account. Metric exporters ignore it.
    Energy {
        /// When it was recorded.
        timestamp: DateTime<Utc>,
        /// The record.
        record: crate::energy::EnergyRecord,
    },
    /// An Agent scope's final energy, announced once when no later reading can change
    /// it. Its per-step histogram observations
    /// ([`crate::scope_energy::SettledScope::measurements`]) are made by the exporters
    /// that record them, not by the energy actor for every scope.
    ScopeEnergy {
        /// The figures.
        settled: Box<crate::scope_energy::SettledScope>,
        /// The metrics carry it as `other`, past the configured limit of scope names
        /// ([`crate::scope_energy::SettledScope::metric_name`]).
        name_folded: bool,
    },
}

impl PipelineEvent {
    /// The marks this event carries, each copy as its own [`Mark`]; none for other
    /// events.
    pub fn marks(&self) -> Vec<Mark> {
        match self {
            PipelineEvent::Mark(mark) => vec![mark.clone()],
            PipelineEvent::MarkCopies(copies) => copies.marks().collect(),
            _ => Vec::new(),
        }
    }

    /// How many lines of an event file this event is (each mark copy is one): what
    /// is lost when it is dropped.
    pub fn line_count(&self) -> u64 {
        match self {
            PipelineEvent::MarkCopies(copies) => copies.copies.len() as u64,
            _ => 1,
        }
    }

    /// What kind of event this is (a [`PipelineEvent::MarkCopies`] is
    /// [`EventKind::MarkCopy`], counted by [`Self::line_count`]).
    pub fn kind(&self) -> EventKind {
        match self {
            PipelineEvent::Scope(_) => EventKind::Scope,
            PipelineEvent::Mark(_) => EventKind::Mark,
            PipelineEvent::MarkCopies(_) => EventKind::MarkCopy,
            PipelineEvent::Metrics { .. } => EventKind::Metrics,
            PipelineEvent::GpuTelemetry { .. } => EventKind::GpuTelemetry,
            PipelineEvent::RaplIntervals { .. } => EventKind::RaplIntervals,
            PipelineEvent::Energy { .. } => EventKind::EnergyRecord,
            PipelineEvent::ScopeEnergy { .. } => EventKind::ScopeEnergy,
        }
    }

    /// A cheap estimate of this event's encoded size in bytes (an ATOF line, or the
    /// lines of a poll's copies: copies × one mark line of its measurement count).
    /// Counts fields; never serialises. For bounding queues, not for accounting.
    pub fn estimated_bytes(&self) -> u64 {
        let measurements = |count: usize| count as u64 * MEASUREMENT_BYTES;
        match self {
            PipelineEvent::Scope(scope) => {
                LINE_BYTES + scope.name.len() as u64 + 16 * scope.attributes.len() as u64
            }
            PipelineEvent::Mark(mark) => {
                LINE_BYTES + mark.name.len() as u64 + measurements(mark.data.measurements.len())
            }
            PipelineEvent::MarkCopies(copies) => {
                let line = LINE_BYTES
                    + copies.name.len() as u64
                    + measurements(copies.data.measurements.len());
                copies.copies.len() as u64 * line
            }
            PipelineEvent::Metrics {
                measurements: m, ..
            } => LINE_BYTES + measurements(m.len()),
            PipelineEvent::GpuTelemetry { telemetry, .. } => {
                // Each device's gauges and its interval's energy, cost and CO2.
                LINE_BYTES + measurements(16 * telemetry.intervals.len().max(1))
            }
            PipelineEvent::RaplIntervals { intervals, .. } => {
                LINE_BYTES + measurements(4 * intervals.len())
            }
            PipelineEvent::Energy { .. } => 2 * LINE_BYTES,
            PipelineEvent::ScopeEnergy { settled, .. } => {
                // Its per-step observations: energy, parts, cost, CO2, duration.
                LINE_BYTES + settled.energy.name.len() as u64 + measurements(12)
            }
        }
    }
}

/// [`PipelineEvent::estimated_bytes`]: an event line's envelope (kind, version, UUIDs,
/// timestamp, schema, the closing fields).
const LINE_BYTES: u64 = 320;
/// [`PipelineEvent::estimated_bytes`]: one measurement in a mark's data (name, kind,
/// types, value, unit, a few attributes).
const MEASUREMENT_BYTES: u64 = 160;

/// The kinds of [`PipelineEvent`], by which a dropped event is counted (a poll's mark
/// copies one line each, as [`EventKind::MarkCopy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// [`PipelineEvent::Scope`]: a scope's start or end.
    Scope,
    /// [`PipelineEvent::Mark`]: a single mark.
    Mark,
    /// One copy of a [`PipelineEvent::MarkCopies`].
    MarkCopy,
    /// [`PipelineEvent::Metrics`].
    Metrics,
    /// [`PipelineEvent::GpuTelemetry`].
    GpuTelemetry,
    /// [`PipelineEvent::RaplIntervals`].
    RaplIntervals,
    /// [`PipelineEvent::Energy`]: an input of the energy account.
    EnergyRecord,
    /// [`PipelineEvent::ScopeEnergy`]: a settled scope's energy.
    ScopeEnergy,
}

impl EventKind {
    /// Every kind, in declaration order ([`Self::index`] is the position here).
    pub const ALL: [EventKind; 8] = [
        EventKind::Scope,
        EventKind::Mark,
        EventKind::MarkCopy,
        EventKind::Metrics,
        EventKind::GpuTelemetry,
        EventKind::RaplIntervals,
        EventKind::EnergyRecord,
        EventKind::ScopeEnergy,
    ];

    /// The kind's snake_case name (`scope`, `mark_copy`, `scope_energy`, ...).
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Scope => "scope",
            EventKind::Mark => "mark",
            EventKind::MarkCopy => "mark_copy",
            EventKind::Metrics => "metrics",
            EventKind::GpuTelemetry => "gpu_telemetry",
            EventKind::RaplIntervals => "rapl_intervals",
            EventKind::EnergyRecord => "energy_record",
            EventKind::ScopeEnergy => "scope_energy",
        }
    }

    /// Its position in [`Self::ALL`], for a table indexed by kind.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether an event of this kind is part of the run's record of its steps (a
    /// scope's start or end, a mark of its own, an energy record, a step's settled
    /// energy), as opposed to the bulk a pipeline can slow down (a poll's copies,
    /// metric batches, telemetry): an exporter's lane gives each its own allowance, so
    /// bulk waiting to be written never crowds out a step's record.
    pub fn is_record(self) -> bool {
        matches!(
            self,
            EventKind::Scope | EventKind::Mark | EventKind::EnergyRecord | EventKind::ScopeEnergy
        )
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A new UUIDv7.
pub fn new_uuid() -> Uuid {
    Uuid::now_v7()
}

/// A new UUIDv7 stamped `at` (random below the millisecond), for a caller that has
/// just read the clock: no second reading, and no lock on the process-wide context
/// [`new_uuid`] keeps to order UUIDs made in the same millisecond.
pub fn new_uuid_at(at: std::time::SystemTime) -> Uuid {
    let since_epoch = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Uuid::new_v7(uuid::Timestamp::from_unix(
        uuid::NoContext,
        since_epoch.as_secs(),
        since_epoch.subsec_nanos(),
    ))
}

/// A future that resolves when a sink has room ([`EventSink::room`]).
pub type Room<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

/// Where the pipeline sends its events (the exporters' fan-out in production). A sink
/// must never block: it queues or drops.
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn send(&self, event: PipelineEvent);

    /// Takes several events, in order, as one delivery where the sink can (the
    /// fan-out queues them as one message per exporter). Default: each sent alone.
    fn send_batch(&self, events: Vec<PipelineEvent>) {
        for event in events {
            self.send(event);
        }
    }

    /// Resolves once the sink has room for more (the fan-out: every live exporter
    /// under its byte budget). A sender that can wait (a poll's copies) awaits it,
    /// bounded by its own deadline, and sends anyway past it; nothing is ever
    /// required to wait. Default: ready at once.
    fn room(&self) -> Room<'_> {
        Box::pin(std::future::ready(()))
    }
}

/// A sink that keeps every event in memory (tests, examples, `collect`-style hosts).
#[derive(Debug, Default)]
pub struct CollectingEventSink {
    events: std::sync::Mutex<Vec<PipelineEvent>>,
}

impl CollectingEventSink {
    /// A copy of the events so far.
    pub fn events(&self) -> Vec<PipelineEvent> {
        match self.events.lock() {
            Ok(events) => events.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl EventSink for CollectingEventSink {
    fn send(&self, event: PipelineEvent) {
        match self.events.lock() {
            Ok(mut events) => events.push(event),
            Err(poisoned) => poisoned.into_inner().push(event),
        }
    }
}

/// Sends every event to each of several sinks.
pub struct FanOutSink(pub Vec<std::sync::Arc<dyn EventSink>>);

impl EventSink for FanOutSink {
    fn send(&self, event: PipelineEvent) {
        if let Some((last, rest)) = self.0.split_last() {
            for sink in rest {
                sink.send(event.clone());
            }
            last.send(event);
        }
    }

    fn send_batch(&self, events: Vec<PipelineEvent>) {
        if let Some((last, rest)) = self.0.split_last() {
            for sink in rest {
                sink.send_batch(events.clone());
            }
            last.send_batch(events);
        }
    }

    /// Resolves once every sink has room.
    fn room(&self) -> Room<'_> {
        Box::pin(async move {
            for sink in &self.0 {
                sink.room().await;
            }
        })
    }
}

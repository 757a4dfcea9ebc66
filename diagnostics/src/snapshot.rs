//! Serializable read view of a context: counters, recent events, coverage and delivery.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::declaration::CodeOrigin;
use super::limits::DiagnosticsLimits;
use super::vocabulary::{Availability, DiagnosticOutcome, FailureClass, Severity};

/// A consistent copy of one context's state, taken under its lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticsSnapshot {
    /// Whether the context collects anything.
    pub availability: Availability,
    /// When the snapshot was taken (UTC).
    pub taken_at: DateTime<Utc>,
    /// Limits in force; `None` for a disabled context.
    pub limits: Option<DiagnosticsLimits>,
    /// What the admission budgets have used so far.
    pub usage: AdmissionUsage,
    /// Every registration in registration order, closed ones included.
    pub components: Vec<ComponentSnapshot>,
    /// Retained events, oldest first.
    pub recent_events: Vec<DiagnosticEvent>,
    /// Coverage of the recent-event history.
    pub history: HistoryStats,
    /// Recording calls accepted and refused.
    pub delivery: DeliveryStats,
}

impl DiagnosticsSnapshot {
    /// Serializes to compact JSON with snake_case enum names.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// Parses JSON produced by [`DiagnosticsSnapshot::to_json`].
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The newest registration named `name`, open or closed.
    pub fn component(&self, name: &str) -> Option<&ComponentSnapshot> {
        self.components.iter().rev().find(|c| c.name == name)
    }
}

/// Budget use of a context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionUsage {
    /// Components currently open.
    pub live_components: usize,
    /// Extension codes declared so far; never decreases.
    pub extension_declarations: usize,
    /// Registration text bytes charged so far; never decreases.
    pub registration_text_bytes: usize,
}

/// Whether a registration still accepts observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentState {
    /// Accepting observations.
    Open,
    /// Closed; its counters stay readable.
    Closed,
}

/// One registration and its lifetime counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComponentSnapshot {
    /// The component's dotted name.
    pub name: String,
    /// Open or closed.
    pub state: ComponentState,
    /// Codes in declaration order.
    pub codes: Vec<CodeSnapshot>,
}

impl ComponentSnapshot {
    /// The code with canonical or extension name `name`.
    pub fn code(&self, name: &str) -> Option<&CodeSnapshot> {
        self.codes.iter().find(|c| c.code == name)
    }
}

/// Lifetime counter of one declared code; history loss never changes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeSnapshot {
    /// 1-based position in the declaration.
    pub position: u32,
    /// Canonical built-in name or extension name.
    pub code: String,
    /// Built-in or extension.
    pub origin: CodeOrigin,
    /// Human description.
    pub description: String,
    /// Declared outcome.
    pub outcome: DiagnosticOutcome,
    /// Failure classes the code allows.
    pub allowed_classes: Vec<FailureClass>,
    /// Lifetime occurrences (saturating).
    pub occurrences: u64,
    /// Receipt time of the latest accepted observation, if any.
    pub last_observed_at: Option<DateTime<Utc>>,
}

/// One retained observation in the recent-event history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticEvent {
    /// Context-wide accepted sequence.
    pub sequence: u64,
    /// Component name.
    pub component: String,
    /// Code name.
    pub code: String,
    /// 1-based code position.
    pub position: u32,
    /// Occurrences this observation added.
    pub count: u64,
    /// Observed outcome.
    pub outcome: DiagnosticOutcome,
    /// Evidence severity.
    pub severity: Severity,
    /// Failure class of a failure.
    pub failure_class: Option<FailureClass>,
    /// Detail, possibly truncated to `max_detail_bytes`.
    pub detail: Option<String>,
    /// Request and session identifiers, kept whole.
    pub correlation: EventCorrelation,
    /// Host receipt time (UTC).
    pub recorded_at: DateTime<Utc>,
    /// The sending worker and its own time, for observations from the host endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<EventProvenance>,
}

/// The owned provenance of a retained worker event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventProvenance {
    /// The worker id (activation id).
    pub worker_id: String,
    /// The producer's time, kept as sent; never used for summaries.
    pub observed_at: Option<DateTime<Utc>>,
}

/// Owned correlation identifiers of a retained event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCorrelation {
    /// Request identifier.
    pub request_id: Option<String>,
    /// Session identifier.
    pub session_id: Option<String>,
}

/// Coverage of the recent-event ring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryStats {
    /// Ring capacity (`0` = counters only).
    pub capacity: usize,
    /// Events currently retained.
    pub retained: usize,
    /// Events overwritten by newer ones.
    pub evicted: u64,
    /// Events stored with a truncated detail.
    pub truncated: u64,
    /// Accepted observations whose evidence was not kept (`EvidenceDisposition::Dropped`).
    pub dropped: u64,
}

/// Totals of recording calls on a context (registration calls are not counted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryStats {
    /// Calls accepted (`RecordOutcome::Recorded`).
    pub accepted: u64,
    /// Calls refused for any reason other than `busy`.
    pub rejected: u64,
    /// Calls refused with `busy`.
    pub busy: u64,
}

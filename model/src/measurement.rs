//! One reading as the snapshot carries it (a number and its unit) and the limit-event
//! counts: what the snapshot's records and the marks both read, and the base-unit
//! limit-event count the samplers report.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CountUnit, MeasurementValue};

/// One available reading: a number and its unit. An unavailable reading is `None`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Measurement<U> {
    /// The number, an exact integer where the conversion allowed one.
    pub value: MeasurementValue,
    /// The output unit.
    pub unit: U,
}

impl<U> Measurement<U> {
    /// A measurement from a value and its unit.
    pub fn new(value: MeasurementValue, unit: U) -> Self {
        Measurement { value, unit }
    }
}

/// Which resource a limit event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitResource {
    /// CPU.
    Cpu,
    /// Memory.
    Memory,
    /// Process count.
    Processes,
}

/// What kind of limit event was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitEventKind {
    /// CPU throttling periods.
    Throttled,
    /// The memory high boundary was crossed.
    High,
    /// The maximum was hit.
    Maximum,
    /// The OOM killer ran.
    OutOfMemory,
    /// Processes were terminated.
    Terminated,
}

/// A cumulative limit-event count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitEvent {
    /// The limited resource.
    pub resource: LimitResource,
    /// The event.
    pub event: LimitEventKind,
    /// The cumulative count, in `events`.
    pub count: Option<Measurement<CountUnit>>,
}

/// A cumulative limit-event count as a sampler reads it (base units: a bare count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitEventReading {
    /// The limited resource.
    pub resource: LimitResource,
    /// The event.
    pub event: LimitEventKind,
    /// The count, when readable.
    pub count: Option<u64>,
}

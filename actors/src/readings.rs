//! Readings in base units, as samplers report them: bytes, microseconds, logical
//! processors, percent, counts. Only the merger converts them to output units.

use std::collections::BTreeMap;

use crate::snapshot::{LimitEventKind, LimitResource};

/// Which sampling series a request belongs to. Each keeps its own baselines for rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplingSeries {
    /// The poll clock's series.
    Polling,
    /// On-demand `collect()` calls.
    OnDemand,
}

impl SamplingSeries {
    /// Index into per-series state arrays.
    pub fn index(self) -> usize {
        match self {
            SamplingSeries::Polling => 0,
            SamplingSeries::OnDemand => 1,
        }
    }
}

/// A cumulative limit-event count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitEventReading {
    /// The limited resource.
    pub resource: LimitResource,
    /// The event.
    pub event: LimitEventKind,
    /// The count, when readable.
    pub count: Option<u64>,
}

/// Coverage of each process-summed field, keyed by canonical path.
pub type FieldCoverage = BTreeMap<&'static str, u64>;

/// The CPU category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuReading {
    /// User time, µs.
    pub user_microseconds: Option<u64>,
    /// System time, µs.
    pub system_microseconds: Option<u64>,
    /// User + system, µs.
    pub total_microseconds: Option<u64>,
    /// Logical processors used since the previous sample of the series.
    pub consumption_logical_processors: Option<f64>,
    /// Throttled time, µs.
    pub throttled_microseconds: Option<u64>,
    /// Effective CPU limit, logical processors.
    pub effective_limit_logical_processors: Option<f64>,
    /// Some-pressure stall, µs.
    pub some_pressure_microseconds: Option<u64>,
    /// Full-pressure stall, µs.
    pub full_pressure_microseconds: Option<u64>,
    /// CPU limit events.
    pub limit_events: Vec<LimitEventReading>,
}

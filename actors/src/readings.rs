//! Readings in base units, as samplers report them: bytes, microseconds, logical
//! processors, percent, counts. Only the merger converts them to output units.

use std::collections::BTreeMap;

use wattline_model::snapshot::{LimitEventKind, LimitResource};

// Each category's reading lives with its record, conversion and marks
// (`crate::categories`).
pub use crate::categories::cpu::CpuReading;
pub use crate::categories::disk::{DiskReading, FilesystemReading};
pub use crate::categories::memory::MemoryReading;
pub use crate::categories::network::{NetworkReading, TrafficReading};
pub use crate::categories::process::ProcessReading;

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

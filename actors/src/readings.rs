//! Readings in base units, as samplers report them: bytes, microseconds, logical
//! processors, percent, counts, one record per category. Only the merger converts
//! them to output units (`crate::categories`).

use std::collections::BTreeMap;

use wattline_model::snapshot::{LimitEventKind, LimitResource};

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

/// The memory category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryReading {
    /// System memory in use, bytes.
    pub system_used_bytes: Option<u64>,
    /// Total system memory, bytes.
    pub system_total_bytes: Option<u64>,
    /// Available system memory, bytes.
    pub system_available_bytes: Option<u64>,
    /// Resident memory of the scope, bytes.
    pub resident_bytes: Option<u64>,
    /// Private memory of the scope, bytes.
    pub private_bytes: Option<u64>,
    /// Virtual memory of the scope, bytes.
    pub virtual_bytes: Option<u64>,
    /// Peak resident memory (one process), bytes.
    pub peak_resident_bytes: Option<u64>,
    /// Environment limit, bytes.
    pub limit_bytes: Option<u64>,
    /// Memory charged to the environment, bytes.
    pub environment_accounted_bytes: Option<u64>,
    /// Some-pressure stall, µs.
    pub some_pressure_microseconds: Option<u64>,
    /// Full-pressure stall, µs.
    pub full_pressure_microseconds: Option<u64>,
    /// OOM events.
    pub out_of_memory_events: Option<u64>,
    /// Memory limit events.
    pub limit_events: Vec<LimitEventReading>,
}

/// The process category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessReading {
    /// Processes listed when collection began.
    pub active_count: Option<u64>,
    /// Live descendants excluding the root.
    pub descendant_count: Option<u64>,
    /// Threads.
    pub thread_count: Option<u64>,
    /// Open file descriptors.
    pub open_file_descriptor_count: Option<u64>,
    /// Process limit events.
    pub limit_events: Vec<LimitEventReading>,
}

/// Capacity of one configured path, bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilesystemReading {
    /// The configured path.
    pub path: String,
    /// Total, bytes.
    pub total_bytes: Option<u64>,
    /// Available to the caller, bytes.
    pub available_bytes: Option<u64>,
    /// Free including reserved, bytes.
    pub free_bytes: Option<u64>,
}

/// The disk category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiskReading {
    /// Bytes read.
    pub read_bytes: Option<u64>,
    /// Bytes written.
    pub write_bytes: Option<u64>,
    /// Read rate, bytes per second.
    pub read_bytes_per_second: Option<f64>,
    /// Write rate, bytes per second.
    pub write_bytes_per_second: Option<f64>,
    /// Read system calls.
    pub read_operations: Option<u64>,
    /// Write system calls.
    pub write_operations: Option<u64>,
    /// Configured filesystems.
    pub filesystems: Vec<FilesystemReading>,
}

/// Traffic of one network record in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrafficReading {
    /// Bytes received.
    pub received_bytes: Option<u64>,
    /// Bytes sent.
    pub transmitted_bytes: Option<u64>,
    /// Receive rate, bytes per second.
    pub receive_bytes_per_second: Option<f64>,
    /// Send rate, bytes per second.
    pub transmit_bytes_per_second: Option<f64>,
    /// Packets received.
    pub received_packets: Option<u64>,
    /// Packets sent.
    pub transmitted_packets: Option<u64>,
    /// Receive errors.
    pub receive_errors: Option<u64>,
    /// Send errors.
    pub transmit_errors: Option<u64>,
}

/// The network category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetworkReading {
    /// Aggregate of the selected interfaces.
    pub system: TrafficReading,
    /// Selected visible interfaces, by name.
    pub interfaces: Vec<(String, TrafficReading)>,
}

//! The snapshot: one reading of every enabled category, in output units, exactly the
//! shape the spec defines (`null` for what could not be read, `[]` vs `null` as the
//! spec's "Arrays have separate empty and unavailable meanings").

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use wattline_config::units::{CountUnit, MeasurementValue};

mod cpu;
mod disk;
mod gpu;
mod memory;
mod network;
mod process;

pub use cpu::CpuMetrics;
pub use disk::{DiskMetrics, FilesystemMetrics};
pub use gpu::{
    AcceleratorDeviceMetrics, AcceleratorProcessMetrics, AcceleratorVendor, GpuMetrics, GpuVendor,
};
pub use memory::MemoryMetrics;
pub use network::{NetworkInterfaceMetrics, NetworkMetrics, NetworkTrafficMetrics};
pub use process::ProcessMetrics;

/// Each category's part of a mark, in the order its gauges appear.
pub(crate) const CATEGORY_MARKS: &[fn(&Snapshot, &mut crate::marks::MarkBuilder)] = &[
    cpu::cpu_marks,
    memory::memory_marks,
    process::process_marks,
    disk::disk_marks,
    gpu::gpu_marks,
    network::network_marks,
];

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

/// The operating system the snapshot was taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatingSystem {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
    /// Windows.
    Windows,
    /// Anything else.
    Unsupported,
}

impl OperatingSystem {
    /// The system this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "linux") {
            OperatingSystem::Linux
        } else if cfg!(target_os = "macos") {
            OperatingSystem::Macos
        } else if cfg!(target_os = "windows") {
            OperatingSystem::Windows
        } else {
            OperatingSystem::Unsupported
        }
    }

    /// The snake_case name used in marks.
    pub fn name(self) -> &'static str {
        match self {
            OperatingSystem::Linux => "linux",
            OperatingSystem::Macos => "macos",
            OperatingSystem::Windows => "windows",
            OperatingSystem::Unsupported => "unsupported",
        }
    }
}

/// The scope a snapshot was collected for (never `runtime_default`: that is resolved
/// before collection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasurementScope {
    /// Every process the operating system shows.
    Global,
    /// One process without its children.
    ApplicationProcess,
    /// A root process and its live descendants.
    ProcessTree,
}

impl MeasurementScope {
    /// The snake_case name used in marks.
    pub fn name(self) -> &'static str {
        match self {
            MeasurementScope::Global => "global",
            MeasurementScope::ApplicationProcess => "application_process",
            MeasurementScope::ProcessTree => "process_tree",
        }
    }
}

/// One resource snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When collection finished, UTC.
    pub timestamp: DateTime<Utc>,
    /// The operating system.
    pub operating_system: OperatingSystem,
    /// The scope collected.
    pub measurement_scope: MeasurementScope,
    /// Coverage of the process sums; `null` when processes were not sampled or could
    /// not be listed.
    pub process_sampling: Option<ProcessSampling>,
    /// CPU category; `null` when disabled.
    pub cpu: Option<CpuMetrics>,
    /// Memory category; `null` when disabled.
    pub memory: Option<MemoryMetrics>,
    /// Process category; `null` when disabled.
    pub process: Option<ProcessMetrics>,
    /// Disk category; `null` when disabled.
    pub disk: Option<DiskMetrics>,
    /// GPU category; `null` when disabled.
    pub gpu: Option<GpuMetrics>,
    /// Network category; `null` when disabled.
    pub network: Option<NetworkMetrics>,
}

/// How many processes each process-summed field covers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessSampling {
    /// Processes listed when collection began.
    pub visible_processes: u64,
    /// Processes whose base query succeeded.
    pub sampled_processes: u64,
    /// Readable values per process-summed field, keyed by canonical path
    /// (`cpu.total_time`); a missing key means the sum was not attempted.
    pub field_sampled_processes: BTreeMap<String, u64>,
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

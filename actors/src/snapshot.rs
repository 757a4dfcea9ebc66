//! The snapshot: one reading of every enabled category, in output units, exactly the
//! shape the spec defines (`null` for what could not be read, `[]` vs `null` as the
//! spec's "Arrays have separate empty and unavailable meanings").

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, MeasurementValue,
    UtilizationUnit,
};

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

/// The CPU category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuMetrics {
    /// User-mode CPU time of the scope. Default unit milliseconds.
    pub user_time: Option<Measurement<DurationUnit>>,
    /// Kernel-mode CPU time of the scope.
    pub system_time: Option<Measurement<DurationUnit>>,
    /// User plus system time.
    pub total_time: Option<Measurement<DurationUnit>>,
    /// Average CPU use since the previous sample of the same series, in logical
    /// processors by default; `null` on a series' first sample.
    pub consumption_rate: Option<Measurement<CpuUnit>>,
    /// Time the environment was throttled (exclusive cgroup only).
    pub throttled_time: Option<Measurement<DurationUnit>>,
    /// CPU capacity available to the environment.
    pub effective_limit: Option<Measurement<CpuUnit>>,
    /// Time some work stalled on CPU.
    pub some_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Time all work stalled on CPU.
    pub full_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Supported cumulative CPU limit-event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// The memory category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryMetrics {
    /// System memory in use. Default unit KiB.
    pub system_used: Option<Measurement<CapacityUnit>>,
    /// Total system memory.
    pub system_total: Option<Measurement<CapacityUnit>>,
    /// System memory available.
    pub system_available: Option<Measurement<CapacityUnit>>,
    /// Resident memory of the scope.
    pub resident: Option<Measurement<CapacityUnit>>,
    /// Private memory of the scope.
    pub private: Option<Measurement<CapacityUnit>>,
    /// macOS physical footprint.
    pub physical_footprint: Option<Measurement<CapacityUnit>>,
    /// Virtual address space.
    pub virtual_memory: Option<Measurement<CapacityUnit>>,
    /// Peak resident memory of one process; `null` for trees.
    pub peak_resident: Option<Measurement<CapacityUnit>>,
    /// Memory limit of the environment.
    pub limit: Option<Measurement<CapacityUnit>>,
    /// Memory charged to the environment.
    pub environment_accounted: Option<Measurement<CapacityUnit>>,
    /// Time some work stalled on memory.
    pub some_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Time all work stalled on memory.
    pub full_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Cumulative OOM events.
    pub out_of_memory_event_count: Option<Measurement<CountUnit>>,
    /// Supported cumulative memory limit-event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// The process category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetrics {
    /// Process IDs found when collection began.
    pub active_count: Option<Measurement<CountUnit>>,
    /// Live descendants, excluding the root.
    pub descendant_count: Option<Measurement<CountUnit>>,
    /// Threads across the scope.
    pub thread_count: Option<Measurement<CountUnit>>,
    /// Windows Job Object creations.
    pub lifetime_creation_count: Option<Measurement<CountUnit>>,
    /// Open file descriptors across the scope.
    pub open_file_descriptor_count: Option<Measurement<CountUnit>>,
    /// Windows kernel handles.
    pub windows_handle_count: Option<Measurement<CountUnit>>,
    /// Supported cumulative process-limit event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// Capacity of the filesystem holding one configured path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesystemMetrics {
    /// The configured path.
    pub path: String,
    /// Total capacity. Default unit bytes.
    pub total_capacity: Option<Measurement<CapacityUnit>>,
    /// Space available to the calling user.
    pub available_capacity: Option<Measurement<CapacityUnit>>,
    /// Free space including reserved blocks.
    pub free_capacity: Option<Measurement<CapacityUnit>>,
}

/// The disk category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskMetrics {
    /// Storage bytes read by the scope.
    pub read_data: Option<Measurement<DataUnit>>,
    /// Storage bytes written by the scope.
    pub write_data: Option<Measurement<DataUnit>>,
    /// Read rate since the previous sample.
    pub read_throughput: Option<Measurement<BandwidthUnit>>,
    /// Write rate since the previous sample.
    pub write_throughput: Option<Measurement<BandwidthUnit>>,
    /// Read system calls.
    pub read_operations: Option<Measurement<CountUnit>>,
    /// Write system calls.
    pub write_operations: Option<Measurement<CountUnit>>,
    /// One entry per configured path; `[]` when none are configured.
    pub filesystems: Vec<FilesystemMetrics>,
}

/// The GPU vendor of a record (the GPU layer's vendor type, one definition).
pub use crate::gpu::GpuVendor as AcceleratorVendor;

/// A whole-device GPU record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceleratorDeviceMetrics {
    /// The vendor.
    pub vendor: AcceleratorVendor,
    /// The backend's device ID (NVML: the UUID).
    pub device_identifier: String,
    /// The backend-local index, when supplied.
    pub device_index: Option<u32>,
    /// Device memory in use. Default unit KiB.
    pub memory_used: Option<Measurement<CapacityUnit>>,
    /// Device activity. Default unit percentage.
    pub compute_utilization: Option<Measurement<UtilizationUnit>>,
}

/// A per-process GPU record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceleratorProcessMetrics {
    /// The vendor.
    pub vendor: AcceleratorVendor,
    /// The backend's device ID.
    pub device_identifier: String,
    /// The backend-local index, when supplied.
    pub device_index: Option<u32>,
    /// The owning process.
    pub process_id: u32,
    /// GPU memory used by the process.
    pub memory_used: Option<Measurement<CapacityUnit>>,
    /// The process's GPU activity since the previous sample of the same series.
    pub compute_utilization: Option<Measurement<UtilizationUnit>>,
}

/// The GPU category: each group `null` when disabled or collection cannot start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuMetrics {
    /// Device records.
    pub device_metrics: Option<Vec<AcceleratorDeviceMetrics>>,
    /// Process records.
    pub process_metrics: Option<Vec<AcceleratorProcessMetrics>>,
}

/// Traffic counters of one network record.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetworkTrafficMetrics {
    /// Bytes received.
    pub received_data: Option<Measurement<DataUnit>>,
    /// Bytes sent.
    pub transmitted_data: Option<Measurement<DataUnit>>,
    /// Receive rate since the previous sample.
    pub receive_throughput: Option<Measurement<BandwidthUnit>>,
    /// Send rate since the previous sample.
    pub transmit_throughput: Option<Measurement<BandwidthUnit>>,
    /// Packets received.
    pub received_packets: Option<Measurement<CountUnit>>,
    /// Packets sent.
    pub transmitted_packets: Option<Measurement<CountUnit>>,
    /// Receive errors.
    pub receive_errors: Option<Measurement<CountUnit>>,
    /// Send errors.
    pub transmit_errors: Option<Measurement<CountUnit>>,
}

/// One selected interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterfaceMetrics {
    /// Interface name.
    pub name: String,
    /// Its counters.
    pub traffic: NetworkTrafficMetrics,
}

/// The network category: always system-wide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkMetrics {
    /// Always `global`.
    pub measurement_scope: MeasurementScope,
    /// The aggregate of the selected interfaces.
    pub system: NetworkTrafficMetrics,
    /// One record per selected visible interface.
    pub interfaces: Vec<NetworkInterfaceMetrics>,
}

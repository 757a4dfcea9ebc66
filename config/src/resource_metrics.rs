//! The `resource_metrics` component: every field of the spec, its default and its rules.

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::units::{BandwidthUnit, CapacityUnit, CpuUnit, DataUnit, DurationUnit, UtilizationUnit};

/// Which processes a reading covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasurementScopeSetting {
    /// The host decides: `global` for the CLI, `process_tree` for the library.
    #[default]
    RuntimeDefault,
    /// Every process the operating system shows.
    Global,
    /// One process, without its children.
    ApplicationProcess,
    /// A root process and its live descendants.
    ProcessTree,
}

/// Configuration of the `resource_metrics` component (`[components.config]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResourceMetricsConfig {
    /// Which processes to measure. Default `runtime_default`.
    pub measurement_scope: MeasurementScopeSetting,
    /// Periodic collection.
    pub polling: PollingConfig,
    /// CPU category.
    pub cpu: CategoryToggle,
    /// Memory category.
    pub memory: MemoryConfig,
    /// Process category.
    pub process: CategoryToggle,
    /// Disk category.
    pub disk: DiskConfig,
    /// GPU category.
    pub gpu: GpuConfig,
    /// Network category.
    pub network: NetworkConfig,
    /// Output units per field.
    pub units: UnitsConfig,
}

/// `[components.config.polling]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PollingConfig {
    /// Collect and emit a mark on each poll. Default `false`.
    pub enabled: bool,
    /// Milliseconds between polls; must be greater than zero even when polling is off.
    /// Default 5000.
    pub interval_millis: u64,
}

impl Default for PollingConfig {
    fn default() -> Self {
        PollingConfig {
            enabled: false,
            interval_millis: 5000,
        }
    }
}

/// A category with only an on/off switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CategoryToggle {
    /// Include this category. Default `true`; a disabled category is `null`.
    pub enabled: bool,
}

impl Default for CategoryToggle {
    fn default() -> Self {
        CategoryToggle { enabled: true }
    }
}

/// `[components.config.memory]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Include memory data. Default `true`.
    pub enabled: bool,
    /// The most of one CPU's time that reading `private` memory may take, in (0, 1].
    /// Its source (`/proc/PID/smaps_rollup` on Linux) walks the process's page
    /// tables, a cost that grows with resident memory; within this share every read
    /// is fresh, beyond it a process's last figure is reused. `1` reads it at every
    /// snapshot. Default `0.01`. A wattline field: the reference has no such rule.
    pub private_max_cpu_share: f64,
}

/// The default of [`MemoryConfig::private_max_cpu_share`].
pub const DEFAULT_PRIVATE_MAX_CPU_SHARE: f64 = 0.01;

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: true,
            private_max_cpu_share: DEFAULT_PRIVATE_MAX_CPU_SHARE,
        }
    }
}

/// `[components.config.disk]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiskConfig {
    /// Include disk data. Default `true`.
    pub enabled: bool,
    /// Collect read/write counters of the measured processes. Default `true`.
    pub process_io: bool,
    /// Absolute paths whose filesystem capacity is reported. Default empty.
    pub filesystem_paths: Vec<String>,
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            enabled: true,
            process_io: true,
            filesystem_paths: Vec::new(),
        }
    }
}

/// `[components.config.gpu]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuConfig {
    /// Include GPU data. Default `true`.
    pub enabled: bool,
    /// Device identifiers or decimal indexes; empty selects every supported device.
    pub devices: Vec<String>,
    /// Collect device-wide records. Default `true`.
    pub device_metrics: bool,
    /// Collect records for processes in the scope. Default `true`.
    pub process_metrics: bool,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            enabled: true,
            devices: Vec::new(),
            device_metrics: true,
            process_metrics: true,
        }
    }
}

/// `[components.config.network]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkConfig {
    /// Include network data. Default `true`.
    pub enabled: bool,
    /// Interface names; empty selects every visible interface.
    pub interfaces: Vec<String>,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            enabled: true,
            interfaces: Vec::new(),
        }
    }
}

/// `[components.config.units]`: output units by family and field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UnitsConfig {
    /// CPU time, rate and pressure units.
    pub cpu: CpuUnits,
    /// Memory units.
    pub memory: MemoryUnits,
    /// Disk units.
    pub disk: DiskUnits,
    /// GPU units.
    pub gpu: GpuUnits,
    /// Network units, system aggregate and per interface.
    pub network: NetworkUnits,
}

/// `[components.config.units.cpu]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuUnits {
    /// Default `milliseconds`.
    pub user_time: DurationUnit,
    /// Default `milliseconds`.
    pub system_time: DurationUnit,
    /// Default `milliseconds`.
    pub total_time: DurationUnit,
    /// Default `milliseconds`.
    pub throttled_time: DurationUnit,
    /// Default `milliseconds`.
    pub some_pressure_stall_time: DurationUnit,
    /// Default `milliseconds`.
    pub full_pressure_stall_time: DurationUnit,
    /// Default `logical_processors`.
    pub consumption_rate: CpuUnit,
    /// Default `logical_processors`.
    pub effective_limit: CpuUnit,
}

impl Default for CpuUnits {
    fn default() -> Self {
        CpuUnits {
            user_time: DurationUnit::Milliseconds,
            system_time: DurationUnit::Milliseconds,
            total_time: DurationUnit::Milliseconds,
            throttled_time: DurationUnit::Milliseconds,
            some_pressure_stall_time: DurationUnit::Milliseconds,
            full_pressure_stall_time: DurationUnit::Milliseconds,
            consumption_rate: CpuUnit::LogicalProcessors,
            effective_limit: CpuUnit::LogicalProcessors,
        }
    }
}

/// `[components.config.units.memory]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryUnits {
    /// Default `kibibytes`.
    pub system_used: CapacityUnit,
    /// Default `kibibytes`.
    pub system_total: CapacityUnit,
    /// Default `kibibytes`.
    pub system_available: CapacityUnit,
    /// Default `kibibytes`.
    pub resident: CapacityUnit,
    /// Default `kibibytes`.
    pub private: CapacityUnit,
    /// Default `kibibytes`.
    pub physical_footprint: CapacityUnit,
    /// Default `kibibytes`.
    pub virtual_memory: CapacityUnit,
    /// Default `kibibytes`.
    pub peak_resident: CapacityUnit,
    /// Default `kibibytes`.
    pub limit: CapacityUnit,
    /// Default `kibibytes`.
    pub environment_accounted: CapacityUnit,
    /// Default `milliseconds`.
    pub some_pressure_stall_time: DurationUnit,
    /// Default `milliseconds`.
    pub full_pressure_stall_time: DurationUnit,
}

impl Default for MemoryUnits {
    fn default() -> Self {
        let kib = CapacityUnit::Kibibytes;
        MemoryUnits {
            system_used: kib,
            system_total: kib,
            system_available: kib,
            resident: kib,
            private: kib,
            physical_footprint: kib,
            virtual_memory: kib,
            peak_resident: kib,
            limit: kib,
            environment_accounted: kib,
            some_pressure_stall_time: DurationUnit::Milliseconds,
            full_pressure_stall_time: DurationUnit::Milliseconds,
        }
    }
}

/// `[components.config.units.disk]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiskUnits {
    /// Default `bytes`.
    pub read_data: DataUnit,
    /// Default `bytes`.
    pub write_data: DataUnit,
    /// Default `bytes`.
    pub filesystem_total_capacity: CapacityUnit,
    /// Default `bytes`.
    pub filesystem_available_capacity: CapacityUnit,
    /// Default `bytes`.
    pub filesystem_free_capacity: CapacityUnit,
    /// Default `bytes_per_second`.
    pub read_throughput: BandwidthUnit,
    /// Default `bytes_per_second`.
    pub write_throughput: BandwidthUnit,
}

impl Default for DiskUnits {
    fn default() -> Self {
        DiskUnits {
            read_data: DataUnit::Bytes,
            write_data: DataUnit::Bytes,
            filesystem_total_capacity: CapacityUnit::Bytes,
            filesystem_available_capacity: CapacityUnit::Bytes,
            filesystem_free_capacity: CapacityUnit::Bytes,
            read_throughput: BandwidthUnit::BytesPerSecond,
            write_throughput: BandwidthUnit::BytesPerSecond,
        }
    }
}

/// `[components.config.units.gpu]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuUnits {
    /// Default `kibibytes`.
    pub device_memory_used: CapacityUnit,
    /// Default `kibibytes`.
    pub process_memory_used: CapacityUnit,
    /// Default `percentage`.
    pub device_compute_utilization: UtilizationUnit,
    /// Default `percentage`.
    pub process_compute_utilization: UtilizationUnit,
}

impl Default for GpuUnits {
    fn default() -> Self {
        GpuUnits {
            device_memory_used: CapacityUnit::Kibibytes,
            process_memory_used: CapacityUnit::Kibibytes,
            device_compute_utilization: UtilizationUnit::Percentage,
            process_compute_utilization: UtilizationUnit::Percentage,
        }
    }
}

/// `[components.config.units.network]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkUnits {
    /// Units of the `system` aggregate.
    pub system: NetworkTrafficUnits,
    /// Units of each interface record.
    pub interface: NetworkTrafficUnits,
}

/// Units of one network record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkTrafficUnits {
    /// Default `bytes`.
    pub received_data: DataUnit,
    /// Default `bytes`.
    pub transmitted_data: DataUnit,
    /// Default `bytes_per_second`.
    pub receive_throughput: BandwidthUnit,
    /// Default `bytes_per_second`.
    pub transmit_throughput: BandwidthUnit,
}

impl Default for NetworkTrafficUnits {
    fn default() -> Self {
        NetworkTrafficUnits {
            received_data: DataUnit::Bytes,
            transmitted_data: DataUnit::Bytes,
            receive_throughput: BandwidthUnit::BytesPerSecond,
            transmit_throughput: BandwidthUnit::BytesPerSecond,
        }
    }
}

impl ResourceMetricsConfig {
    /// Checks the rules serde cannot express; the first broken rule is returned with
    /// its path relative to the component's `config` table.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.polling.interval_millis == 0 {
            return Err(FieldError::new(
                "polling.interval_millis",
                "must be greater than zero (got 0)",
            ));
        }
        let share = self.memory.private_max_cpu_share;
        if !(share > 0.0 && share <= 1.0) {
            return Err(FieldError::new(
                "memory.private_max_cpu_share",
                format!("must be greater than 0 and at most 1 (got {share})"),
            ));
        }
        for (index, path) in self.disk.filesystem_paths.iter().enumerate() {
            let field = format!("disk.filesystem_paths[{index}]");
            if path.is_empty() {
                return Err(FieldError::new(field, "must not be empty"));
            }
            if !path.starts_with('/') {
                return Err(FieldError::new(
                    field,
                    format!("must be an absolute path (got {path:?})"),
                ));
            }
        }
        for (index, selector) in self.gpu.devices.iter().enumerate() {
            if selector.trim().is_empty() {
                return Err(FieldError::new(
                    format!("gpu.devices[{index}]"),
                    format!("must not be blank (got {selector:?})"),
                ));
            }
        }
        for (index, name) in self.network.interfaces.iter().enumerate() {
            if name.trim().is_empty() {
                return Err(FieldError::new(
                    format!("network.interfaces[{index}]"),
                    format!("must not be blank (got {name:?})"),
                ));
            }
        }
        Ok(())
    }
}

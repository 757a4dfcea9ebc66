//! The GPU category: the base-unit records every GPU source returns and the reading
//! the sampler reports, the snapshot records in output units with the conversion
//! between them, and the gauges a mark carries for the records, one full metric name
//! per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CapacityUnit, UtilizationUnit};

use super::convert::{memory, utilization};
use super::{Measurement, Snapshot};
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::metric_measurements::AttributeValue;
use crate::semconv::SemconvEquivalent;
use std::time::Instant;
use wattline_config::resource_metrics::GpuUnits;

/// The GPU vendor of a record (the GPU layer's vendor type, one definition).
pub use GpuVendor as AcceleratorVendor;

/// The company that makes a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuVendor {
    /// NVIDIA, read through NVML or `nvidia-smi`.
    Nvidia,
    /// AMD, read through DRM sysfs and `fdinfo`.
    Amd,
    /// Intel, read through DRM sysfs and `fdinfo`.
    Intel,
    /// Apple silicon (macOS registry diagnostics; no reader here yet).
    Apple,
    /// Any other vendor (DRM `fdinfo` process readings only).
    Other,
}

impl GpuVendor {
    /// The lower-case name used in snapshots (`"nvidia"`, `"amd"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            GpuVendor::Nvidia => "nvidia",
            GpuVendor::Amd => "amd",
            GpuVendor::Intel => "intel",
            GpuVendor::Apple => "apple",
            GpuVendor::Other => "other",
        }
    }
}

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

/// The GPU category: each group `null` when disabled (or GPU reading is turned off),
/// a list otherwise: empty when no backend answered, as the reference gives it (why
/// nothing answered is in diagnostics, `doctor` and the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuMetrics {
    /// Device records.
    pub device_metrics: Option<Vec<AcceleratorDeviceMetrics>>,
    /// Process records.
    pub process_metrics: Option<Vec<AcceleratorProcessMetrics>>,
}

/// Each GPU device's gauges.
const GPU_DEVICE_GAUGES: &[Gauge<AcceleratorDeviceMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.accelerator.device.memory_used",
        description: "GPU memory in use",
        value: |device| whole_base(&device.memory_used),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.accelerator.device.compute_utilization",
        description: "GPU activity",
        value: |device| whole_base(&device.compute_utilization),
        semconv: None,
    },
];

/// Each GPU process's gauges.
const GPU_PROCESS_GAUGES: &[Gauge<AcceleratorProcessMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.accelerator.process.memory_used",
        description: "GPU memory used by the process",
        value: |process| whole_base(&process.memory_used),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.accelerator.process.compute_utilization",
        description: "GPU activity of the process",
        value: |process| whole_base(&process.compute_utilization),
        semconv: None,
    },
];

/// The attributes naming one GPU record's device.
fn accelerator_attributes(
    vendor: AcceleratorVendor,
    device_identifier: &str,
    device_index: Option<u32>,
) -> Vec<(&'static str, AttributeValue)> {
    let mut attributes = vec![
        (
            "nemo_relay.resource.accelerator.vendor",
            AttributeValue::String(vendor.as_str().into()),
        ),
        (
            "nemo_relay.resource.accelerator.device_identifier",
            AttributeValue::String(device_identifier.to_string()),
        ),
    ];
    if let Some(index) = device_index {
        attributes.push((
            "nemo_relay.resource.accelerator.device_index",
            AttributeValue::Int(i64::from(index)),
        ));
    }
    attributes
}

/// The GPU category's part of a mark.
pub fn gpu_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    let Some(gpu) = &snapshot.gpu else {
        return;
    };
    for device in gpu.device_metrics.iter().flatten() {
        let attributes = accelerator_attributes(
            device.vendor,
            &device.device_identifier,
            device.device_index,
        );
        mark.gauges(GPU_DEVICE_GAUGES, device, &attributes);
    }
    for process in gpu.process_metrics.iter().flatten() {
        let mut attributes = accelerator_attributes(
            process.vendor,
            &process.device_identifier,
            process.device_index,
        );
        attributes.push((
            "nemo_relay.resource.process_id",
            AttributeValue::Int(i64::from(process.process_id)),
        ));
        mark.gauges(GPU_PROCESS_GAUGES, process, &attributes);
    }
}

/// The semantic-convention equivalent of the GPU gauge named `mark`, if any.
pub(super) fn gpu_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(GPU_DEVICE_GAUGES, mark).or_else(|| semconv_in(GPU_PROCESS_GAUGES, mark))
}

/// Device-wide readings for one GPU at one time. Units are base units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDeviceReading {
    /// Who made the device.
    pub vendor: GpuVendor,
    /// Backend identifier: the NVML UUID (`GPU-...`) for NVIDIA, the PCI address for DRM.
    pub device_identifier: String,
    /// Backend index (NVML index); `None` where the backend has none (DRM).
    pub device_index: Option<u32>,
    /// Product name, as the driver reports it.
    pub name: Option<String>,
    /// Device memory in use, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Device memory installed, bytes.
    pub memory_total_bytes: Option<u64>,
    /// Compute (GPU) utilization over the driver's last sample period, percent.
    pub compute_utilization_percent: Option<f64>,
    /// Memory-controller utilization, percent.
    pub memory_utilization_percent: Option<f64>,
    /// Power draw, watts.
    pub power_draw_watts: Option<f64>,
    /// Enforced power limit, watts.
    pub power_limit_watts: Option<f64>,
    /// Energy consumed since the driver was loaded, millijoules (NVML, Volta or newer).
    pub total_energy_millijoules: Option<u64>,
    /// Core temperature, degrees Celsius.
    pub temperature_celsius: Option<f64>,
    /// Current SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// Current memory clock, MHz.
    pub memory_clock_mhz: Option<f64>,
    /// Intended fan speed, percent of the maximum.
    pub fan_speed_percent: Option<f64>,
    /// Performance state, 0 (maximum) to 15 (minimum).
    pub performance_state: Option<u8>,
    /// Clocks reduced by the driver for temperature (software thermal slowdown), the
    /// reference's `throttle.thermal`.
    pub throttle_thermal: Option<bool>,
    /// Clocks reduced by the hardware for temperature (hardware thermal slowdown).
    pub throttle_hw_thermal: Option<bool>,
    /// Clocks reduced by the driver's software power cap, the reference's
    /// `throttle.power`.
    pub throttle_power: Option<bool>,
    /// Clocks reduced by the external power brake (hardware), where known.
    pub throttle_hw_power_brake: Option<bool>,
    /// Hardware slowdown engaged.
    pub throttle_hw_slowdown: Option<bool>,
    /// Volatile corrected ECC errors since the driver was loaded, count.
    pub ecc_corrected: Option<u64>,
    /// Volatile uncorrected ECC errors since the driver was loaded, count.
    pub ecc_uncorrected: Option<u64>,
    /// Whether MIG (Multi-Instance GPU) mode is on: the power and energy read are the
    /// whole board's, shared by every instance; `None` where not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_enabled: Option<bool>,
    /// When this device's energy counter and power were read, where the source stamps
    /// each device (NVML: a driver call takes milliseconds, so a later device is read
    /// well after the sample's instant). `None`: at the sample's instant.
    #[serde(skip)]
    pub power_read_at: Option<Instant>,
    /// The board's power at the instant it was read, watts, where the source reads it
    /// apart from `power_draw_watts` (NVML's `nvmlDeviceGetPowerUsage` and
    /// `nvidia-smi`'s `power.draw`, the reference's figure, are the mean of the last
    /// second on Ampere and newer boards). The energy stage's figure where present: it
    /// shapes the intervals it cuts, and a step smeared over a second would misplace
    /// their energy.
    #[serde(skip)]
    pub instant_power_watts: Option<f64>,
    /// The source's name for the figure the energy stage takes from this reading
    /// (`instant_power_watts` where present, else `power_draw_watts`), where the
    /// source names it per device: `power.draw.instant`, `power.draw`,
    /// `NVML_FI_DEV_POWER_INSTANT`, `nvmlDeviceGetPowerUsage`.
    #[serde(skip)]
    pub power_field: Option<&'static str>,
}

impl GpuDeviceReading {
    /// A record with identity only; every measurement `None`.
    pub fn new(vendor: GpuVendor, device_identifier: impl Into<String>) -> Self {
        Self {
            vendor,
            device_identifier: device_identifier.into(),
            device_index: None,
            name: None,
            memory_used_bytes: None,
            memory_total_bytes: None,
            compute_utilization_percent: None,
            memory_utilization_percent: None,
            power_draw_watts: None,
            power_limit_watts: None,
            total_energy_millijoules: None,
            temperature_celsius: None,
            sm_clock_mhz: None,
            memory_clock_mhz: None,
            fan_speed_percent: None,
            performance_state: None,
            throttle_thermal: None,
            throttle_hw_thermal: None,
            throttle_power: None,
            throttle_hw_power_brake: None,
            throttle_hw_slowdown: None,
            ecc_corrected: None,
            ecc_uncorrected: None,
            mig_enabled: None,
            power_read_at: None,
            instant_power_watts: None,
            power_field: None,
        }
    }
}

/// GPU use by one process on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuProcessReading {
    /// Who made the device.
    pub vendor: GpuVendor,
    /// Identifier of the device the process uses (same as [`GpuDeviceReading::device_identifier`]).
    pub device_identifier: String,
    /// Index of that device, where the backend has one.
    pub device_index: Option<u32>,
    /// Operating-system process ID.
    pub process_id: u32,
    /// Device memory the process holds, bytes.
    pub memory_used_bytes: Option<u64>,
    /// Compute use since the previous sample of the same series, percent (0 to 100).
    /// `None` on the first sample of a series.
    pub compute_utilization_percent: Option<f64>,
}

/// What one source (or the composite) read at one time.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    /// Device-wide records, one per selected device that gave one.
    pub devices: Vec<GpuDeviceReading>,
    /// Process records, one per (device, process in scope).
    pub processes: Vec<GpuProcessReading>,
    /// When the readings were taken (for `nvidia-smi`: when the tool was started).
    pub taken_at: Instant,
}

impl GpuSample {
    /// An empty sample stamped now.
    pub fn empty() -> Self {
        Self {
            devices: Vec::new(),
            processes: Vec::new(),
            taken_at: Instant::now(),
        }
    }
}

/// The GPU category in base units: the source's sample and which groups are wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReading {
    /// The source's answer; `None` when it observed nothing.
    pub sample: Option<GpuSample>,
    /// Device records wanted.
    pub device_metrics: bool,
    /// Process records wanted.
    pub process_metrics: bool,
}

/// The GPU category in output units. A group turned off is `null`; a wanted group is
/// a list, empty when no backend answered (missing, failed, still starting) or the
/// answer had no record: the reference's shape, so `for device in
/// gpu.device_metrics` holds on every machine.
pub fn gpu_metrics(reading: &GpuReading, units: &GpuUnits) -> GpuMetrics {
    let sample = reading.sample.as_ref();
    let devices = reading.device_metrics.then(|| {
        sample
            .map(|sample| sample.devices.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|device| AcceleratorDeviceMetrics {
                vendor: device.vendor,
                device_identifier: device.device_identifier.clone(),
                device_index: device.device_index,
                memory_used: memory(device.memory_used_bytes, units.device_memory_used),
                compute_utilization: utilization(
                    device.compute_utilization_percent,
                    units.device_compute_utilization,
                ),
            })
            .collect()
    });
    let processes = reading.process_metrics.then(|| {
        sample
            .map(|sample| sample.processes.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|process| AcceleratorProcessMetrics {
                vendor: process.vendor,
                device_identifier: process.device_identifier.clone(),
                device_index: process.device_index,
                process_id: process.process_id,
                memory_used: memory(process.memory_used_bytes, units.process_memory_used),
                compute_utilization: utilization(
                    process.compute_utilization_percent,
                    units.process_compute_utilization,
                ),
            })
            .collect()
    });
    GpuMetrics {
        device_metrics: devices,
        process_metrics: processes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_config::units::MeasurementValue::{Decimal, Integer};

    #[test]
    fn gpu_groups_are_null_when_off_empty_when_unanswered_or_no_record_and_converted_otherwise() {
        let units = GpuUnits {
            device_compute_utilization: UtilizationUnit::Fraction,
            ..GpuUnits::default()
        };
        let off = GpuReading {
            sample: None,
            device_metrics: false,
            process_metrics: false,
        };
        assert_eq!(
            gpu_metrics(&off, &units),
            GpuMetrics {
                device_metrics: None,
                process_metrics: None
            }
        );
        let unanswered = GpuReading {
            device_metrics: true,
            process_metrics: true,
            ..off.clone()
        };
        // The reference's shape without a backend: empty groups, not null.
        assert_eq!(
            gpu_metrics(&unanswered, &units),
            GpuMetrics {
                device_metrics: Some(Vec::new()),
                process_metrics: Some(Vec::new())
            }
        );
        let no_record = GpuReading {
            sample: Some(GpuSample::empty()),
            ..unanswered.clone()
        };
        assert_eq!(
            gpu_metrics(&no_record, &units),
            GpuMetrics {
                device_metrics: Some(Vec::new()),
                process_metrics: Some(Vec::new())
            }
        );
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-1");
        device.device_index = Some(0);
        device.memory_used_bytes = Some(1_500_000);
        device.compute_utilization_percent = Some(50.0);
        let process = GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: "GPU-1".into(),
            device_index: Some(0),
            process_id: 42,
            memory_used_bytes: None,
            compute_utilization_percent: Some(12.0),
        };
        let reading = GpuReading {
            sample: Some(GpuSample {
                devices: vec![device],
                processes: vec![process],
                taken_at: std::time::Instant::now(),
            }),
            device_metrics: true,
            process_metrics: true,
        };
        let metrics = gpu_metrics(&reading, &units);
        let device = &metrics.device_metrics.unwrap()[0];
        // 1 500 000 bytes is 1464 whole KiB (the remainder dropped first).
        assert_eq!(
            device.memory_used,
            Some(Measurement::new(Integer(1464), CapacityUnit::Kibibytes))
        );
        assert_eq!(
            device.compute_utilization,
            Some(Measurement::new(Decimal(0.5), UtilizationUnit::Fraction))
        );
        let process = &metrics.process_metrics.unwrap()[0];
        assert_eq!(process.process_id, 42);
        assert_eq!(process.memory_used, None, "not read is null, never 0");
        assert_eq!(
            process.compute_utilization,
            Some(Measurement::new(Decimal(12.0), UtilizationUnit::Percentage))
        );
    }
}

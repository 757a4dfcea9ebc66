//! The GPU category's snapshot records and the gauges a mark carries for
//! them, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CapacityUnit, UtilizationUnit};

use super::{Measurement, Snapshot};
use crate::events::AttributeValue;
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::semconv::SemconvEquivalent;

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

/// The GPU category: each group `null` when disabled or collection cannot start.
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

//! The GPU category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::resource_metrics::GpuUnits;
use wattline_config::units::{MeasurementValue, UtilizationUnit};

use super::CategoryDescriptor;
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::memory;
use crate::samplers::{CategoryReading, gpu::GpuReading};
use wattline_model::snapshot::{
    AcceleratorDeviceMetrics, AcceleratorProcessMetrics, GpuMetrics, Measurement,
};

/// The GPU category's descriptor. Its sampler has no OS factory: the pipeline builds
/// it, since its source needs a runtime and feeds the energy stage.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Gpu,
    enabled: |config| config.gpu.enabled,
    os_sampler: None,
    fill: |snapshot, reading, units| {
        if let CategoryReading::Gpu(reading) = reading {
            snapshot.gpu = Some(gpu_metrics(&reading, &units.gpu));
        }
    },
};

/// GPU memory in bytes (truncated to KiB) and utilization in percent, in output units.
fn utilization(
    percent: Option<f64>,
    unit: UtilizationUnit,
) -> Option<Measurement<UtilizationUnit>> {
    Some(Measurement::new(
        unit.from_percent(MeasurementValue::Decimal(percent?))?,
        unit,
    ))
}

/// The GPU category in output units. A group is `null` when turned off or when no
/// backend answered (missing, failed, still starting: collection cannot start); an
/// answer with no record is an empty group.
pub fn gpu_metrics(reading: &GpuReading, units: &GpuUnits) -> GpuMetrics {
    let sample = reading.sample.as_ref();
    let devices = sample.filter(|_| reading.device_metrics).map(|sample| {
        sample
            .devices
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
    let processes = sample.filter(|_| reading.process_metrics).map(|sample| {
        sample
            .processes
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
    use MeasurementValue::{Decimal, Integer};
    use wattline_config::units::*;

    #[test]
    fn gpu_groups_are_null_when_off_or_unanswered_empty_when_no_record_and_converted_otherwise() {
        use crate::gpu::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};
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
        assert_eq!(
            gpu_metrics(&unanswered, &units),
            GpuMetrics {
                device_metrics: None,
                process_metrics: None
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

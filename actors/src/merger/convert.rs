//! Unit conversion from base-unit readings to snapshot categories: the only place
//! output units are applied.

use wattline_config::resource_metrics::{
    CpuUnits, DiskUnits, GpuUnits, MemoryUnits, NetworkTrafficUnits,
};
use wattline_config::units::UtilizationUnit;

use crate::samplers::gpu::GpuReading;
use crate::snapshot::{AcceleratorDeviceMetrics, AcceleratorProcessMetrics, GpuMetrics};
use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, MeasurementValue,
};

use crate::readings::{
    CpuReading, DiskReading, LimitEventReading, MemoryReading, NetworkReading, ProcessReading,
    TrafficReading,
};
use crate::snapshot::{
    CpuMetrics, DiskMetrics, FilesystemMetrics, LimitEvent, Measurement, MeasurementScope,
    MemoryMetrics, NetworkInterfaceMetrics, NetworkMetrics, NetworkTrafficMetrics, ProcessMetrics,
};

/// A duration in microseconds, in `unit`.
pub fn duration(
    microseconds: Option<u64>,
    unit: DurationUnit,
) -> Option<Measurement<DurationUnit>> {
    let value = unit.from_microseconds(MeasurementValue::Integer(microseconds?))?;
    Some(Measurement::new(value, unit))
}

/// An amount of CPU in logical processors, in `unit`.
pub fn cpu_amount(logical_processors: Option<f64>, unit: CpuUnit) -> Option<Measurement<CpuUnit>> {
    let value = unit.from_logical_processors(MeasurementValue::Decimal(logical_processors?))?;
    Some(Measurement::new(value, unit))
}

/// A count in its fixed unit.
pub fn count(value: Option<u64>, unit: CountUnit) -> Option<Measurement<CountUnit>> {
    Some(Measurement::new(MeasurementValue::Integer(value?), unit))
}

/// Limit events, each count in `events`.
pub fn limit_events(readings: &[LimitEventReading]) -> Vec<LimitEvent> {
    readings
        .iter()
        .map(|reading| LimitEvent {
            resource: reading.resource,
            event: reading.event,
            count: count(reading.count, CountUnit::Events),
        })
        .collect()
}

/// The CPU category in output units.
pub fn cpu(reading: &CpuReading, units: &CpuUnits) -> CpuMetrics {
    CpuMetrics {
        user_time: duration(reading.user_microseconds, units.user_time),
        system_time: duration(reading.system_microseconds, units.system_time),
        total_time: duration(reading.total_microseconds, units.total_time),
        consumption_rate: cpu_amount(
            reading.consumption_logical_processors,
            units.consumption_rate,
        ),
        throttled_time: duration(reading.throttled_microseconds, units.throttled_time),
        effective_limit: cpu_amount(
            reading.effective_limit_logical_processors,
            units.effective_limit,
        ),
        some_pressure_stall_time: duration(
            reading.some_pressure_microseconds,
            units.some_pressure_stall_time,
        ),
        full_pressure_stall_time: duration(
            reading.full_pressure_microseconds,
            units.full_pressure_stall_time,
        ),
        limit_events: limit_events(&reading.limit_events),
    }
}

/// Memory in bytes, truncated to whole KiB, then in `unit`.
pub fn memory(bytes: Option<u64>, unit: CapacityUnit) -> Option<Measurement<CapacityUnit>> {
    Some(Measurement::new(unit.from_memory_bytes(bytes?)?, unit))
}

/// Filesystem capacity in bytes, in `unit` (no KiB truncation).
pub fn capacity(bytes: Option<u64>, unit: CapacityUnit) -> Option<Measurement<CapacityUnit>> {
    Some(Measurement::new(
        unit.from_bytes(MeasurementValue::Integer(bytes?))?,
        unit,
    ))
}

/// Transferred data in bytes, in `unit`.
pub fn data(bytes: Option<u64>, unit: DataUnit) -> Option<Measurement<DataUnit>> {
    Some(Measurement::new(
        unit.from_bytes(MeasurementValue::Integer(bytes?))?,
        unit,
    ))
}

/// A rate in bytes per second, in `unit`.
pub fn bandwidth(
    bytes_per_second: Option<f64>,
    unit: BandwidthUnit,
) -> Option<Measurement<BandwidthUnit>> {
    Some(Measurement::new(
        unit.from_bytes_per_second(MeasurementValue::Decimal(bytes_per_second?))?,
        unit,
    ))
}

/// The memory category in output units.
pub fn memory_metrics(reading: &MemoryReading, units: &MemoryUnits) -> MemoryMetrics {
    MemoryMetrics {
        system_used: memory(reading.system_used_bytes, units.system_used),
        system_total: memory(reading.system_total_bytes, units.system_total),
        system_available: memory(reading.system_available_bytes, units.system_available),
        resident: memory(reading.resident_bytes, units.resident),
        private: memory(reading.private_bytes, units.private),
        physical_footprint: None,
        virtual_memory: memory(reading.virtual_bytes, units.virtual_memory),
        peak_resident: memory(reading.peak_resident_bytes, units.peak_resident),
        limit: memory(reading.limit_bytes, units.limit),
        environment_accounted: memory(
            reading.environment_accounted_bytes,
            units.environment_accounted,
        ),
        some_pressure_stall_time: duration(
            reading.some_pressure_microseconds,
            units.some_pressure_stall_time,
        ),
        full_pressure_stall_time: duration(
            reading.full_pressure_microseconds,
            units.full_pressure_stall_time,
        ),
        out_of_memory_event_count: count(reading.out_of_memory_events, CountUnit::Events),
        limit_events: limit_events(&reading.limit_events),
    }
}

/// The process category in output units.
pub fn process_metrics(reading: &ProcessReading) -> ProcessMetrics {
    ProcessMetrics {
        active_count: count(reading.active_count, CountUnit::Processes),
        descendant_count: count(reading.descendant_count, CountUnit::Processes),
        thread_count: count(reading.thread_count, CountUnit::Threads),
        lifetime_creation_count: None,
        open_file_descriptor_count: count(
            reading.open_file_descriptor_count,
            CountUnit::FileDescriptors,
        ),
        windows_handle_count: None,
        limit_events: limit_events(&reading.limit_events),
    }
}

/// The disk category in output units.
pub fn disk_metrics(reading: &DiskReading, units: &DiskUnits) -> DiskMetrics {
    DiskMetrics {
        read_data: data(reading.read_bytes, units.read_data),
        write_data: data(reading.write_bytes, units.write_data),
        read_throughput: bandwidth(reading.read_bytes_per_second, units.read_throughput),
        write_throughput: bandwidth(reading.write_bytes_per_second, units.write_throughput),
        read_operations: count(reading.read_operations, CountUnit::Operations),
        write_operations: count(reading.write_operations, CountUnit::Operations),
        filesystems: reading
            .filesystems
            .iter()
            .map(|fs| FilesystemMetrics {
                path: fs.path.clone(),
                total_capacity: capacity(fs.total_bytes, units.filesystem_total_capacity),
                available_capacity: capacity(
                    fs.available_bytes,
                    units.filesystem_available_capacity,
                ),
                free_capacity: capacity(fs.free_bytes, units.filesystem_free_capacity),
            })
            .collect(),
    }
}

fn traffic(reading: &TrafficReading, units: &NetworkTrafficUnits) -> NetworkTrafficMetrics {
    NetworkTrafficMetrics {
        received_data: data(reading.received_bytes, units.received_data),
        transmitted_data: data(reading.transmitted_bytes, units.transmitted_data),
        receive_throughput: bandwidth(reading.receive_bytes_per_second, units.receive_throughput),
        transmit_throughput: bandwidth(
            reading.transmit_bytes_per_second,
            units.transmit_throughput,
        ),
        received_packets: count(reading.received_packets, CountUnit::Packets),
        transmitted_packets: count(reading.transmitted_packets, CountUnit::Packets),
        receive_errors: count(reading.receive_errors, CountUnit::Errors),
        transmit_errors: count(reading.transmit_errors, CountUnit::Errors),
    }
}

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

/// The network category in output units; always `global` scope.
pub fn network_metrics(
    reading: &NetworkReading,
    system_units: &NetworkTrafficUnits,
    interface_units: &NetworkTrafficUnits,
) -> NetworkMetrics {
    NetworkMetrics {
        measurement_scope: MeasurementScope::Global,
        system: traffic(&reading.system, system_units),
        interfaces: reading
            .interfaces
            .iter()
            .map(|(name, reading)| NetworkInterfaceMetrics {
                name: name.clone(),
                traffic: traffic(reading, interface_units),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MeasurementValue::{Decimal, Integer};

    #[test]
    fn cpu_times_convert_with_configured_units() {
        let reading = CpuReading {
            user_microseconds: Some(1_200_000),
            system_microseconds: Some(300_000),
            total_microseconds: Some(1_500_000),
            consumption_logical_processors: Some(0.25),
            ..CpuReading::default()
        };
        let units = CpuUnits {
            user_time: DurationUnit::Seconds,
            consumption_rate: CpuUnit::Millicores,
            ..CpuUnits::default()
        };
        let metrics = cpu(&reading, &units);
        assert_eq!(
            metrics.user_time,
            Some(Measurement::new(Decimal(1.2), DurationUnit::Seconds))
        );
        assert_eq!(
            metrics.system_time,
            Some(Measurement::new(Integer(300), DurationUnit::Milliseconds))
        );
        assert_eq!(
            metrics.total_time,
            Some(Measurement::new(Integer(1500), DurationUnit::Milliseconds))
        );
        assert_eq!(
            metrics.consumption_rate,
            Some(Measurement::new(Decimal(250.0), CpuUnit::Millicores))
        );
        assert_eq!(metrics.throttled_time, None);
        assert!(metrics.limit_events.is_empty());
    }

    #[test]
    fn memory_truncates_to_kibibytes_and_capacity_does_not() {
        let units = MemoryUnits::default();
        let reading = MemoryReading {
            resident_bytes: Some(10_000),
            system_total_bytes: Some(2048),
            ..MemoryReading::default()
        };
        let metrics = memory_metrics(&reading, &units);
        assert_eq!(
            metrics.resident,
            Some(Measurement::new(Integer(9), CapacityUnit::Kibibytes))
        );
        assert_eq!(
            metrics.system_total,
            Some(Measurement::new(Integer(2), CapacityUnit::Kibibytes))
        );
        assert_eq!(metrics.private, None);
        assert_eq!(
            capacity(Some(10_000), CapacityUnit::Kibibytes),
            Some(Measurement::new(Decimal(9.765625), CapacityUnit::Kibibytes))
        );
    }

    #[test]
    fn network_system_and_interface_units_are_separate() {
        let reading = NetworkReading {
            system: TrafficReading {
                received_bytes: Some(2_000_000),
                receive_bytes_per_second: Some(125_000.0),
                ..TrafficReading::default()
            },
            interfaces: vec![(
                "lo".into(),
                TrafficReading {
                    received_bytes: Some(1_048_576),
                    ..TrafficReading::default()
                },
            )],
        };
        let system_units = NetworkTrafficUnits {
            received_data: DataUnit::Megabytes,
            receive_throughput: BandwidthUnit::MegabitsPerSecond,
            ..NetworkTrafficUnits::default()
        };
        let interface_units = NetworkTrafficUnits {
            received_data: DataUnit::Mebibytes,
            ..NetworkTrafficUnits::default()
        };
        let metrics = network_metrics(&reading, &system_units, &interface_units);
        assert_eq!(metrics.measurement_scope, MeasurementScope::Global);
        assert_eq!(
            metrics.system.received_data,
            Some(Measurement::new(Integer(2), DataUnit::Megabytes))
        );
        assert_eq!(
            metrics.system.receive_throughput,
            Some(Measurement::new(
                Decimal(1.0),
                BandwidthUnit::MegabitsPerSecond
            ))
        );
        assert_eq!(
            metrics.interfaces[0].traffic.received_data,
            Some(Measurement::new(Integer(1), DataUnit::Mebibytes))
        );
        assert_eq!(metrics.system.transmitted_data, None);
    }

    #[test]
    fn non_finite_rate_is_null() {
        let reading = CpuReading {
            consumption_logical_processors: Some(f64::NAN),
            ..CpuReading::default()
        };
        assert_eq!(cpu(&reading, &CpuUnits::default()).consumption_rate, None);
    }

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

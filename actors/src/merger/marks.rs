//! A snapshot as `nemo.relay.metric_measurements` v1 data: every available measurement
//! under its `nemo.relay.resource.*` name, each a gauge, with the scope attributes.

use std::collections::BTreeMap;

use wattline_config::units::MeasurementValue;

use crate::events::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue,
};
use crate::snapshot::{
    LimitEvent, LimitEventKind, LimitResource, Measurement, NetworkTrafficMetrics, Snapshot,
};

const PREFIX: &str = "nemo.relay.resource.";
const ATTRIBUTE_PREFIX: &str = "nemo_relay.resource.";

/// Whether a measurement's unit can ever produce a fraction, which fixes its number
/// type for every poll (`f64`), or always gives whole numbers (`u64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberType {
    Whole,
    Fractional,
}

/// Builds the measurements of one mark.
struct MarkBuilder {
    common: BTreeMap<String, AttributeValue>,
    measurements: Vec<MetricMeasurement>,
}

impl MarkBuilder {
    fn push(
        &mut self,
        name: &str,
        value: MeasurementValue,
        unit: &str,
        number: NumberType,
        description: &str,
        extra: &[(&str, AttributeValue)],
    ) {
        let value = match (number, value) {
            (NumberType::Fractional, value) => match value.as_f64() {
                decimal if decimal.is_finite() => MetricValue::F64(decimal),
                _ => return,
            },
            // The event format cannot carry an integer above i64::MAX: omit it.
            (NumberType::Whole, MeasurementValue::Integer(integer))
                if integer <= i64::MAX as u64 =>
            {
                MetricValue::U64(integer)
            }
            (NumberType::Whole, _) => return,
        };
        let mut attributes = self.common.clone();
        for (key, attribute) in extra {
            attributes.insert(format!("{ATTRIBUTE_PREFIX}{key}"), attribute.clone());
        }
        self.measurements.push(MetricMeasurement {
            name: format!("{PREFIX}{name}"),
            kind: MetricKind::Gauge,
            value_type: value.value_type(),
            value,
            unit: Some(unit.to_string()),
            description: Some(description.to_string()),
            attributes: Some(attributes),
            boundaries: None,
        });
    }

    fn measurement<U: UnitNumber>(
        &mut self,
        name: &str,
        measurement: &Option<Measurement<U>>,
        description: &str,
        extra: &[(&str, AttributeValue)],
    ) {
        self.measurement_at(name, measurement, 1, description, extra);
    }

    /// A measurement whose source reads in steps of `resolution` base units.
    fn measurement_at<U: UnitNumber>(
        &mut self,
        name: &str,
        measurement: &Option<Measurement<U>>,
        resolution: u64,
        description: &str,
        extra: &[(&str, AttributeValue)],
    ) {
        if let Some(measurement) = measurement {
            let number = measurement.unit.number_type(resolution);
            self.push(
                name,
                measurement.value,
                measurement.unit.unit_name(),
                number,
                description,
                extra,
            );
        }
    }

    fn limit_events(&mut self, events: &[LimitEvent]) {
        for event in events {
            let resource = match event.resource {
                LimitResource::Cpu => "cpu",
                LimitResource::Memory => "memory",
                LimitResource::Processes => "processes",
            };
            let kind = match event.event {
                LimitEventKind::Throttled => "throttled",
                LimitEventKind::High => "high",
                LimitEventKind::Maximum => "maximum",
                LimitEventKind::OutOfMemory => "out_of_memory",
                LimitEventKind::Terminated => "terminated",
            };
            self.measurement(
                "limit.event_count",
                &event.count,
                "Cumulative limit events of the measured environment",
                &[
                    ("limit.resource", AttributeValue::String(resource.into())),
                    ("limit.event", AttributeValue::String(kind.into())),
                ],
            );
        }
    }

    fn traffic(
        &mut self,
        record: &str,
        traffic: &NetworkTrafficMetrics,
        extra: &[(&str, AttributeValue)],
    ) {
        let fields: [(&str, &str); 2] = [
            ("received_data", "Data received"),
            ("transmitted_data", "Data sent"),
        ];
        self.measurement(
            &format!("network.{record}.{}", fields[0].0),
            &traffic.received_data,
            fields[0].1,
            extra,
        );
        self.measurement(
            &format!("network.{record}.{}", fields[1].0),
            &traffic.transmitted_data,
            fields[1].1,
            extra,
        );
        self.measurement(
            &format!("network.{record}.received_packets"),
            &traffic.received_packets,
            "Packets received",
            extra,
        );
        self.measurement(
            &format!("network.{record}.transmitted_packets"),
            &traffic.transmitted_packets,
            "Packets sent",
            extra,
        );
        self.measurement(
            &format!("network.{record}.receive_errors"),
            &traffic.receive_errors,
            "Receive errors",
            extra,
        );
        self.measurement(
            &format!("network.{record}.transmit_errors"),
            &traffic.transmit_errors,
            "Send errors",
            extra,
        );
        self.measurement(
            &format!("network.{record}.receive_throughput"),
            &traffic.receive_throughput,
            "Receive rate since the previous poll",
            extra,
        );
        self.measurement(
            &format!("network.{record}.transmit_throughput"),
            &traffic.transmit_throughput,
            "Send rate since the previous poll",
            extra,
        );
    }
}

/// A unit as the mark needs it: its name, and its size in its family's base unit
/// (`None` for a rate or share, which can always be fractional).
trait UnitNumber: Copy {
    fn unit_name(self) -> &'static str;
    fn base_units(self) -> Option<u64>;

    /// Whole when every reading, a multiple of the source's `resolution` (in base
    /// units), converts to a whole number of this unit; else a decimal, even for a
    /// reading that happens to be whole, so one name keeps one number type (the
    /// reference's rule: milliseconds and microseconds of CPU time stay whole, seconds
    /// do not; kibibytes of `/proc` memory stay whole, mebibytes do not).
    fn number_type(self, resolution: u64) -> NumberType {
        match self.base_units() {
            Some(size) if size > 0 && resolution.is_multiple_of(size) => NumberType::Whole,
            _ => NumberType::Fractional,
        }
    }
}

macro_rules! unit_number {
    ($unit:ty, |$u:ident| $size:expr) => {
        impl UnitNumber for $unit {
            fn unit_name(self) -> &'static str {
                self.name()
            }
            fn base_units(self) -> Option<u64> {
                let $u = self;
                $size
            }
        }
    };
}

use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, UtilizationUnit,
};
unit_number!(DurationUnit, |unit| Some(match unit {
    DurationUnit::Microseconds => 1,
    DurationUnit::Milliseconds => 1_000,
    DurationUnit::Seconds => 1_000_000,
    DurationUnit::Minutes => 60_000_000,
}));
unit_number!(CapacityUnit, |unit| Some(byte_size(unit.name())));
unit_number!(DataUnit, |unit| Some(byte_size(unit.name())));
unit_number!(BandwidthUnit, |_unit| None);
unit_number!(CpuUnit, |_unit| None);
unit_number!(UtilizationUnit, |_unit| None);
unit_number!(CountUnit, |_unit| Some(1));

/// Bytes in a capacity or data unit, by its name (the two families share names).
fn byte_size(name: &str) -> u64 {
    match name {
        "kilobytes" => 1_000,
        "megabytes" => 1_000_000,
        "gigabytes" => 1_000_000_000,
        "terabytes" => 1_000_000_000_000,
        "kibibytes" => 1 << 10,
        "mebibytes" => 1 << 20,
        "gibibytes" => 1 << 30,
        "tebibytes" => 1 << 40,
        _ => 1,
    }
}

/// CPU times come from clock ticks, at least a millisecond (µs).
const CPU_TIME_RESOLUTION: u64 = 1_000;
/// Linux reports process and system memory in kibibytes (bytes).
const PROC_MEMORY_RESOLUTION: u64 = 1024;

/// The measurements of the resource mark for `snapshot`.
pub fn resource_measurements(snapshot: &Snapshot) -> MetricMeasurements {
    let common = BTreeMap::from([
        (
            format!("{ATTRIBUTE_PREFIX}operating_system"),
            AttributeValue::String(snapshot.operating_system.name().into()),
        ),
        (
            format!("{ATTRIBUTE_PREFIX}measurement_scope"),
            AttributeValue::String(snapshot.measurement_scope.name().into()),
        ),
    ]);
    let mut mark = MarkBuilder {
        common,
        measurements: Vec::with_capacity(64),
    };
    mark.push(
        "sample_count",
        MeasurementValue::Integer(1),
        "events",
        NumberType::Whole,
        "Resource metric samples collected in this poll",
        &[],
    );
    if let Some(cpu) = &snapshot.cpu {
        mark.measurement_at(
            "cpu.user_time",
            &cpu.user_time,
            CPU_TIME_RESOLUTION,
            "User CPU time of the measured scope",
            &[],
        );
        mark.measurement_at(
            "cpu.system_time",
            &cpu.system_time,
            CPU_TIME_RESOLUTION,
            "System CPU time of the measured scope",
            &[],
        );
        mark.measurement_at(
            "cpu.total_time",
            &cpu.total_time,
            CPU_TIME_RESOLUTION,
            "User plus system CPU time",
            &[],
        );
        mark.measurement(
            "cpu.consumption_rate",
            &cpu.consumption_rate,
            "Average CPU use since the previous poll",
            &[],
        );
        mark.measurement(
            "cpu.throttled_time",
            &cpu.throttled_time,
            "Time the environment was throttled",
            &[],
        );
        mark.measurement(
            "cpu.effective_limit",
            &cpu.effective_limit,
            "CPU capacity available to the environment",
            &[],
        );
        mark.measurement(
            "cpu.pressure.some_stall_time",
            &cpu.some_pressure_stall_time,
            "Time some work stalled on CPU",
            &[],
        );
        mark.measurement(
            "cpu.pressure.full_stall_time",
            &cpu.full_pressure_stall_time,
            "Time all work stalled on CPU",
            &[],
        );
        mark.limit_events(&cpu.limit_events);
    }
    if let Some(memory) = &snapshot.memory {
        mark.measurement_at(
            "memory.system.used",
            &memory.system_used,
            PROC_MEMORY_RESOLUTION,
            "System memory in use",
            &[],
        );
        mark.measurement_at(
            "memory.system.total",
            &memory.system_total,
            PROC_MEMORY_RESOLUTION,
            "Total system memory",
            &[],
        );
        mark.measurement_at(
            "memory.system.available",
            &memory.system_available,
            PROC_MEMORY_RESOLUTION,
            "Available system memory",
            &[],
        );
        mark.measurement_at(
            "memory.resident",
            &memory.resident,
            PROC_MEMORY_RESOLUTION,
            "Resident memory of the measured scope",
            &[],
        );
        mark.measurement_at(
            "memory.private",
            &memory.private,
            PROC_MEMORY_RESOLUTION,
            "Private memory of the measured scope",
            &[],
        );
        mark.measurement(
            "memory.physical_footprint",
            &memory.physical_footprint,
            "Physical footprint",
            &[],
        );
        mark.measurement_at(
            "memory.virtual",
            &memory.virtual_memory,
            PROC_MEMORY_RESOLUTION,
            "Virtual memory of the measured scope",
            &[],
        );
        mark.measurement_at(
            "memory.peak_resident",
            &memory.peak_resident,
            PROC_MEMORY_RESOLUTION,
            "Peak resident memory of one process",
            &[],
        );
        mark.measurement(
            "memory.limit",
            &memory.limit,
            "Memory limit of the environment",
            &[],
        );
        mark.measurement(
            "memory.environment_accounted",
            &memory.environment_accounted,
            "Memory charged to the environment",
            &[],
        );
        mark.measurement(
            "memory.pressure.some_stall_time",
            &memory.some_pressure_stall_time,
            "Time some work stalled on memory",
            &[],
        );
        mark.measurement(
            "memory.pressure.full_stall_time",
            &memory.full_pressure_stall_time,
            "Time all work stalled on memory",
            &[],
        );
        mark.measurement(
            "memory.out_of_memory_event_count",
            &memory.out_of_memory_event_count,
            "Cumulative out-of-memory events",
            &[],
        );
        mark.limit_events(&memory.limit_events);
    }
    if let Some(process) = &snapshot.process {
        mark.measurement(
            "process.active_count",
            &process.active_count,
            "Processes in the measured scope",
            &[],
        );
        mark.measurement(
            "process.descendant_count",
            &process.descendant_count,
            "Live descendants of the root",
            &[],
        );
        mark.measurement(
            "thread.count",
            &process.thread_count,
            "Threads in the measured scope",
            &[],
        );
        mark.measurement(
            "process.lifetime_creation_count",
            &process.lifetime_creation_count,
            "Processes created in the job",
            &[],
        );
        mark.measurement(
            "process.open_file_descriptor_count",
            &process.open_file_descriptor_count,
            "Open file descriptors",
            &[],
        );
        mark.measurement(
            "process.windows_handle_count",
            &process.windows_handle_count,
            "Windows kernel handles",
            &[],
        );
        mark.limit_events(&process.limit_events);
    }
    if let Some(disk) = &snapshot.disk {
        mark.measurement(
            "disk.read_data",
            &disk.read_data,
            "Storage data read by the measured scope",
            &[],
        );
        mark.measurement(
            "disk.write_data",
            &disk.write_data,
            "Storage data written by the measured scope",
            &[],
        );
        mark.measurement(
            "disk.read_throughput",
            &disk.read_throughput,
            "Read rate since the previous poll",
            &[],
        );
        mark.measurement(
            "disk.write_throughput",
            &disk.write_throughput,
            "Write rate since the previous poll",
            &[],
        );
        mark.measurement(
            "disk.read.operations",
            &disk.read_operations,
            "Read operations",
            &[],
        );
        mark.measurement(
            "disk.write.operations",
            &disk.write_operations,
            "Write operations",
            &[],
        );
        for filesystem in &disk.filesystems {
            let path = [(
                "disk.filesystem_path",
                AttributeValue::String(filesystem.path.clone()),
            )];
            mark.measurement(
                "disk.filesystem.total_capacity",
                &filesystem.total_capacity,
                "Filesystem capacity",
                &path,
            );
            mark.measurement(
                "disk.filesystem.available_capacity",
                &filesystem.available_capacity,
                "Space available to the caller",
                &path,
            );
            mark.measurement(
                "disk.filesystem.free_capacity",
                &filesystem.free_capacity,
                "Free space including reserved blocks",
                &path,
            );
        }
    }
    if let Some(gpu) = &snapshot.gpu {
        for device in gpu.device_metrics.iter().flatten() {
            let mut attributes = vec![
                (
                    "accelerator.vendor",
                    AttributeValue::String(device.vendor.as_str().into()),
                ),
                (
                    "accelerator.device_identifier",
                    AttributeValue::String(device.device_identifier.clone()),
                ),
            ];
            if let Some(index) = device.device_index {
                attributes.push((
                    "accelerator.device_index",
                    AttributeValue::Int(i64::from(index)),
                ));
            }
            mark.measurement(
                "accelerator.device.memory_used",
                &device.memory_used,
                "GPU memory in use",
                &attributes,
            );
            mark.measurement(
                "accelerator.device.compute_utilization",
                &device.compute_utilization,
                "GPU activity",
                &attributes,
            );
        }
        for process in gpu.process_metrics.iter().flatten() {
            let mut attributes = vec![
                (
                    "accelerator.vendor",
                    AttributeValue::String(process.vendor.as_str().into()),
                ),
                (
                    "accelerator.device_identifier",
                    AttributeValue::String(process.device_identifier.clone()),
                ),
                (
                    "process_id",
                    AttributeValue::Int(i64::from(process.process_id)),
                ),
            ];
            if let Some(index) = process.device_index {
                attributes.push((
                    "accelerator.device_index",
                    AttributeValue::Int(i64::from(index)),
                ));
            }
            mark.measurement(
                "accelerator.process.memory_used",
                &process.memory_used,
                "GPU memory used by the process",
                &attributes,
            );
            mark.measurement(
                "accelerator.process.compute_utilization",
                &process.compute_utilization,
                "GPU activity of the process",
                &attributes,
            );
        }
    }
    if let Some(network) = &snapshot.network {
        mark.traffic("system", &network.system, &[]);
        for interface in &network.interfaces {
            let name = [(
                "network.interface_name",
                AttributeValue::String(interface.name.clone()),
            )];
            mark.traffic("interface", &interface.traffic, &name);
        }
    }
    if let Some(sampling) = &snapshot.process_sampling {
        let processes = "processes";
        mark.push(
            "process_sampling.visible_count",
            MeasurementValue::Integer(sampling.visible_processes),
            processes,
            NumberType::Whole,
            "Processes listed when collection began",
            &[],
        );
        mark.push(
            "process_sampling.sampled_count",
            MeasurementValue::Integer(sampling.sampled_processes),
            processes,
            NumberType::Whole,
            "Processes whose base query succeeded",
            &[],
        );
        for (field, count) in &sampling.field_sampled_processes {
            mark.push(
                "process_sampling.field_sampled_count",
                MeasurementValue::Integer(*count),
                processes,
                NumberType::Whole,
                "Processes that supplied a process-summed field",
                &[("field", AttributeValue::String(field.clone()))],
            );
        }
    }
    MetricMeasurements {
        measurements: mark.measurements,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use wattline_config::units::{CountUnit, CpuUnit, DataUnit, DurationUnit, MeasurementValue};

    use super::*;
    use crate::snapshot::{
        CpuMetrics, DiskMetrics, MeasurementScope, OperatingSystem, ProcessSampling,
    };

    fn snapshot() -> Snapshot {
        Snapshot {
            timestamp: Utc::now(),
            operating_system: OperatingSystem::Linux,
            measurement_scope: MeasurementScope::ProcessTree,
            process_sampling: Some(ProcessSampling {
                visible_processes: 3,
                sampled_processes: 2,
                field_sampled_processes: BTreeMap::from([("cpu.total_time".to_string(), 2)]),
            }),
            cpu: Some(CpuMetrics {
                user_time: Some(Measurement::new(
                    MeasurementValue::Integer(120),
                    DurationUnit::Milliseconds,
                )),
                system_time: Some(Measurement::new(
                    MeasurementValue::Integer(7),
                    DurationUnit::Microseconds,
                )),
                total_time: None,
                consumption_rate: Some(Measurement::new(
                    MeasurementValue::Integer(1),
                    CpuUnit::LogicalProcessors,
                )),
                throttled_time: None,
                effective_limit: None,
                some_pressure_stall_time: None,
                full_pressure_stall_time: None,
                limit_events: vec![LimitEvent {
                    resource: LimitResource::Cpu,
                    event: LimitEventKind::Throttled,
                    count: Some(Measurement::new(
                        MeasurementValue::Integer(4),
                        CountUnit::Events,
                    )),
                }],
            }),
            memory: None,
            process: None,
            disk: Some(DiskMetrics {
                read_data: Some(Measurement::new(
                    MeasurementValue::Integer(u64::MAX),
                    DataUnit::Bytes,
                )),
                write_data: Some(Measurement::new(
                    MeasurementValue::Integer(10),
                    DataUnit::Bytes,
                )),
                read_throughput: None,
                write_throughput: None,
                read_operations: None,
                write_operations: None,
                filesystems: Vec::new(),
            }),
            gpu: None,
            network: None,
        }
    }

    fn find<'a>(data: &'a MetricMeasurements, name: &str) -> Vec<&'a MetricMeasurement> {
        data.measurements
            .iter()
            .filter(|m| m.name == name)
            .collect()
    }

    #[test]
    fn every_measurement_is_a_gauge_with_the_scope_attributes() {
        let data = resource_measurements(&snapshot());
        assert!(
            data.measurements
                .iter()
                .all(|m| m.kind == MetricKind::Gauge)
        );
        for measurement in &data.measurements {
            let attributes = measurement.attributes.as_ref().unwrap();
            assert_eq!(
                attributes["nemo_relay.resource.operating_system"],
                AttributeValue::String("linux".into())
            );
            assert_eq!(
                attributes["nemo_relay.resource.measurement_scope"],
                AttributeValue::String("process_tree".into())
            );
        }
        let count = find(&data, "nemo.relay.resource.sample_count");
        assert_eq!(count.len(), 1);
        assert_eq!(count[0].value, MetricValue::U64(1));
        assert_eq!(count[0].unit.as_deref(), Some("events"));
    }

    #[test]
    fn fraction_capable_units_are_f64_whole_ones_u64() {
        let data = resource_measurements(&snapshot());
        // CPU time comes in whole milliseconds at least: milliseconds stay whole.
        assert_eq!(
            find(&data, "nemo.relay.resource.cpu.user_time")[0].value,
            MetricValue::U64(120)
        );
        assert_eq!(
            find(&data, "nemo.relay.resource.cpu.system_time")[0].value,
            MetricValue::U64(7)
        );
        assert_eq!(
            find(&data, "nemo.relay.resource.cpu.consumption_rate")[0].value,
            MetricValue::F64(1.0)
        );
        assert_eq!(
            find(&data, "nemo.relay.resource.cpu.consumption_rate")[0]
                .unit
                .as_deref(),
            Some("logical_processors")
        );
        assert!(
            find(&data, "nemo.relay.resource.cpu.total_time").is_empty(),
            "null is left out"
        );
    }

    #[test]
    fn a_unit_is_whole_exactly_when_it_divides_the_sources_resolution() {
        // The reference's types, unit by unit (read from its own event files).
        assert_eq!(
            DurationUnit::Microseconds.number_type(CPU_TIME_RESOLUTION),
            NumberType::Whole
        );
        assert_eq!(
            DurationUnit::Milliseconds.number_type(CPU_TIME_RESOLUTION),
            NumberType::Whole
        );
        assert_eq!(
            DurationUnit::Seconds.number_type(CPU_TIME_RESOLUTION),
            NumberType::Fractional
        );
        assert_eq!(
            CapacityUnit::Kibibytes.number_type(PROC_MEMORY_RESOLUTION),
            NumberType::Whole
        );
        assert_eq!(
            CapacityUnit::Bytes.number_type(PROC_MEMORY_RESOLUTION),
            NumberType::Whole
        );
        for fractional in [
            CapacityUnit::Kilobytes,
            CapacityUnit::Mebibytes,
            CapacityUnit::Gibibytes,
        ] {
            assert_eq!(
                fractional.number_type(PROC_MEMORY_RESOLUTION),
                NumberType::Fractional
            );
        }
        // Disk and network data count bytes: only bytes stay whole.
        assert_eq!(DataUnit::Bytes.number_type(1), NumberType::Whole);
        assert_eq!(DataUnit::Kibibytes.number_type(1), NumberType::Fractional);
        assert_eq!(
            BandwidthUnit::BytesPerSecond.number_type(1),
            NumberType::Fractional
        );
    }

    #[test]
    fn an_integer_above_i64_max_is_left_out_of_the_mark() {
        let data = resource_measurements(&snapshot());
        assert!(find(&data, "nemo.relay.resource.disk.read_data").is_empty());
        assert_eq!(
            find(&data, "nemo.relay.resource.disk.write_data")[0].value,
            MetricValue::U64(10)
        );
    }

    #[test]
    fn limit_events_and_coverage_carry_their_attributes() {
        let data = resource_measurements(&snapshot());
        let limit = find(&data, "nemo.relay.resource.limit.event_count");
        let attributes = limit[0].attributes.as_ref().unwrap();
        assert_eq!(
            attributes["nemo_relay.resource.limit.resource"],
            AttributeValue::String("cpu".into())
        );
        assert_eq!(
            attributes["nemo_relay.resource.limit.event"],
            AttributeValue::String("throttled".into())
        );
        assert_eq!(
            find(&data, "nemo.relay.resource.process_sampling.visible_count")[0].value,
            MetricValue::U64(3)
        );
        assert_eq!(
            find(&data, "nemo.relay.resource.process_sampling.sampled_count")[0].value,
            MetricValue::U64(2)
        );
        let field = find(
            &data,
            "nemo.relay.resource.process_sampling.field_sampled_count",
        );
        assert_eq!(field[0].unit.as_deref(), Some("processes"));
        assert_eq!(
            field[0].attributes.as_ref().unwrap()["nemo_relay.resource.field"],
            AttributeValue::String("cpu.total_time".into())
        );
    }
}

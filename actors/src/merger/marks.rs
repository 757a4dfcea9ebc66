//! A snapshot as `nemo.relay.metric_measurements` v1 data: every available measurement
//! under its `nemo.relay.resource.*` name, each a gauge, with the scope attributes.
//!
//! Each category's gauges are a table of full metric names, so every name a mark can
//! carry is written out here once, and [`crate::categories`] lists which table serves
//! which category.

use std::collections::BTreeMap;

use wattline_config::units::MeasurementValue;

use crate::events::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue,
};
use crate::snapshot::{
    AcceleratorDeviceMetrics, AcceleratorProcessMetrics, CpuMetrics, DiskMetrics,
    FilesystemMetrics, LimitEvent, LimitEventKind, LimitResource, Measurement, MemoryMetrics,
    NetworkTrafficMetrics, ProcessMetrics, Snapshot,
};

/// Whether a measurement's unit can ever produce a fraction, which fixes its number
/// type for every poll (`f64`), or always gives whole numbers (`u64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumberType {
    Whole,
    Fractional,
}

/// A value ready for a mark: the number, its unit's name and its number type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkValue {
    value: MeasurementValue,
    unit: &'static str,
    number: NumberType,
}

/// One gauge of a table: its full metric name, what it says, and where its value
/// comes from in the category's metrics `T`.
pub(crate) struct Gauge<T> {
    name: &'static str,
    description: &'static str,
    value: fn(&T) -> Option<MarkValue>,
}

/// The value of `measurement`, whose source reads in steps of `resolution` base units.
fn at<U: UnitNumber>(measurement: &Option<Measurement<U>>, resolution: u64) -> Option<MarkValue> {
    measurement.map(|measurement| MarkValue {
        value: measurement.value,
        unit: measurement.unit.unit_name(),
        number: measurement.unit.number_type(resolution),
    })
}

/// The value of a measurement read in whole base units.
fn whole_base<U: UnitNumber>(measurement: &Option<Measurement<U>>) -> Option<MarkValue> {
    at(measurement, 1)
}

/// A count the mark states itself (a sample, processes), always whole.
fn count(value: u64, unit: &'static str) -> MarkValue {
    MarkValue {
        value: MeasurementValue::Integer(value),
        unit,
        number: NumberType::Whole,
    }
}

/// Builds the measurements of one mark.
pub(crate) struct MarkBuilder {
    common: BTreeMap<String, AttributeValue>,
    measurements: Vec<MetricMeasurement>,
}

impl MarkBuilder {
    fn push(
        &mut self,
        name: &'static str,
        value: MarkValue,
        description: &'static str,
        extra: &[(&'static str, AttributeValue)],
    ) {
        let unit = value.unit;
        let value = match (value.number, value.value) {
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
            attributes.insert((*key).to_string(), attribute.clone());
        }
        self.measurements.push(MetricMeasurement {
            name: name.to_string(),
            kind: MetricKind::Gauge,
            value_type: value.value_type(),
            value,
            unit: Some(unit.to_string()),
            description: Some(description.to_string()),
            attributes: Some(attributes),
            boundaries: None,
        });
    }

    /// Every gauge of `table` that `metrics` has a value for.
    fn gauges<T>(
        &mut self,
        table: &[Gauge<T>],
        metrics: &T,
        extra: &[(&'static str, AttributeValue)],
    ) {
        for gauge in table {
            if let Some(value) = (gauge.value)(metrics) {
                self.push(gauge.name, value, gauge.description, extra);
            }
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
            if let Some(value) = whole_base(&event.count) {
                self.push(
                    "nemo.relay.resource.limit.event_count",
                    value,
                    "Cumulative limit events of the measured environment",
                    &[
                        (
                            "nemo_relay.resource.limit.resource",
                            AttributeValue::String(resource.into()),
                        ),
                        (
                            "nemo_relay.resource.limit.event",
                            AttributeValue::String(kind.into()),
                        ),
                    ],
                );
            }
        }
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

/// The CPU category's gauges.
const CPU_GAUGES: &[Gauge<CpuMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.cpu.user_time",
        description: "User CPU time of the measured scope",
        value: |cpu| at(&cpu.user_time, CPU_TIME_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.system_time",
        description: "System CPU time of the measured scope",
        value: |cpu| at(&cpu.system_time, CPU_TIME_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.total_time",
        description: "User plus system CPU time",
        value: |cpu| at(&cpu.total_time, CPU_TIME_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.consumption_rate",
        description: "Average CPU use since the previous poll",
        value: |cpu| whole_base(&cpu.consumption_rate),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.throttled_time",
        description: "Time the environment was throttled",
        value: |cpu| whole_base(&cpu.throttled_time),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.effective_limit",
        description: "CPU capacity available to the environment",
        value: |cpu| whole_base(&cpu.effective_limit),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.pressure.some_stall_time",
        description: "Time some work stalled on CPU",
        value: |cpu| whole_base(&cpu.some_pressure_stall_time),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.pressure.full_stall_time",
        description: "Time all work stalled on CPU",
        value: |cpu| whole_base(&cpu.full_pressure_stall_time),
    },
];

/// The memory category's gauges.
const MEMORY_GAUGES: &[Gauge<MemoryMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.memory.system.used",
        description: "System memory in use",
        value: |memory| at(&memory.system_used, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.system.total",
        description: "Total system memory",
        value: |memory| at(&memory.system_total, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.system.available",
        description: "Available system memory",
        value: |memory| at(&memory.system_available, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.resident",
        description: "Resident memory of the measured scope",
        value: |memory| at(&memory.resident, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.private",
        description: "Private memory of the measured scope",
        value: |memory| at(&memory.private, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.physical_footprint",
        description: "Physical footprint",
        value: |memory| whole_base(&memory.physical_footprint),
    },
    Gauge {
        name: "nemo.relay.resource.memory.virtual",
        description: "Virtual memory of the measured scope",
        value: |memory| at(&memory.virtual_memory, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.peak_resident",
        description: "Peak resident memory of one process",
        value: |memory| at(&memory.peak_resident, PROC_MEMORY_RESOLUTION),
    },
    Gauge {
        name: "nemo.relay.resource.memory.limit",
        description: "Memory limit of the environment",
        value: |memory| whole_base(&memory.limit),
    },
    Gauge {
        name: "nemo.relay.resource.memory.environment_accounted",
        description: "Memory charged to the environment",
        value: |memory| whole_base(&memory.environment_accounted),
    },
    Gauge {
        name: "nemo.relay.resource.memory.pressure.some_stall_time",
        description: "Time some work stalled on memory",
        value: |memory| whole_base(&memory.some_pressure_stall_time),
    },
    Gauge {
        name: "nemo.relay.resource.memory.pressure.full_stall_time",
        description: "Time all work stalled on memory",
        value: |memory| whole_base(&memory.full_pressure_stall_time),
    },
    Gauge {
        name: "nemo.relay.resource.memory.out_of_memory_event_count",
        description: "Cumulative out-of-memory events",
        value: |memory| whole_base(&memory.out_of_memory_event_count),
    },
];

/// The process category's gauges.
const PROCESS_GAUGES: &[Gauge<ProcessMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.process.active_count",
        description: "Processes in the measured scope",
        value: |process| whole_base(&process.active_count),
    },
    Gauge {
        name: "nemo.relay.resource.process.descendant_count",
        description: "Live descendants of the root",
        value: |process| whole_base(&process.descendant_count),
    },
    Gauge {
        name: "nemo.relay.resource.thread.count",
        description: "Threads in the measured scope",
        value: |process| whole_base(&process.thread_count),
    },
    Gauge {
        name: "nemo.relay.resource.process.lifetime_creation_count",
        description: "Processes created in the job",
        value: |process| whole_base(&process.lifetime_creation_count),
    },
    Gauge {
        name: "nemo.relay.resource.process.open_file_descriptor_count",
        description: "Open file descriptors",
        value: |process| whole_base(&process.open_file_descriptor_count),
    },
    Gauge {
        name: "nemo.relay.resource.process.windows_handle_count",
        description: "Windows kernel handles",
        value: |process| whole_base(&process.windows_handle_count),
    },
];

/// The disk category's gauges.
const DISK_GAUGES: &[Gauge<DiskMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.disk.read_data",
        description: "Storage data read by the measured scope",
        value: |disk| whole_base(&disk.read_data),
    },
    Gauge {
        name: "nemo.relay.resource.disk.write_data",
        description: "Storage data written by the measured scope",
        value: |disk| whole_base(&disk.write_data),
    },
    Gauge {
        name: "nemo.relay.resource.disk.read_throughput",
        description: "Read rate since the previous poll",
        value: |disk| whole_base(&disk.read_throughput),
    },
    Gauge {
        name: "nemo.relay.resource.disk.write_throughput",
        description: "Write rate since the previous poll",
        value: |disk| whole_base(&disk.write_throughput),
    },
    Gauge {
        name: "nemo.relay.resource.disk.read.operations",
        description: "Read operations",
        value: |disk| whole_base(&disk.read_operations),
    },
    Gauge {
        name: "nemo.relay.resource.disk.write.operations",
        description: "Write operations",
        value: |disk| whole_base(&disk.write_operations),
    },
];

/// Each configured filesystem's gauges, under its path.
const FILESYSTEM_GAUGES: &[Gauge<FilesystemMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.total_capacity",
        description: "Filesystem capacity",
        value: |filesystem| whole_base(&filesystem.total_capacity),
    },
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.available_capacity",
        description: "Space available to the caller",
        value: |filesystem| whole_base(&filesystem.available_capacity),
    },
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.free_capacity",
        description: "Free space including reserved blocks",
        value: |filesystem| whole_base(&filesystem.free_capacity),
    },
];

/// Each GPU device's gauges.
const GPU_DEVICE_GAUGES: &[Gauge<AcceleratorDeviceMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.accelerator.device.memory_used",
        description: "GPU memory in use",
        value: |device| whole_base(&device.memory_used),
    },
    Gauge {
        name: "nemo.relay.resource.accelerator.device.compute_utilization",
        description: "GPU activity",
        value: |device| whole_base(&device.compute_utilization),
    },
];

/// Each GPU process's gauges.
const GPU_PROCESS_GAUGES: &[Gauge<AcceleratorProcessMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.accelerator.process.memory_used",
        description: "GPU memory used by the process",
        value: |process| whole_base(&process.memory_used),
    },
    Gauge {
        name: "nemo.relay.resource.accelerator.process.compute_utilization",
        description: "GPU activity of the process",
        value: |process| whole_base(&process.compute_utilization),
    },
];

/// The system-wide network record's gauges.
const NETWORK_SYSTEM_GAUGES: &[Gauge<NetworkTrafficMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.network.system.received_data",
        description: "Data received",
        value: |traffic| whole_base(&traffic.received_data),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmitted_data",
        description: "Data sent",
        value: |traffic| whole_base(&traffic.transmitted_data),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.received_packets",
        description: "Packets received",
        value: |traffic| whole_base(&traffic.received_packets),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmitted_packets",
        description: "Packets sent",
        value: |traffic| whole_base(&traffic.transmitted_packets),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.receive_errors",
        description: "Receive errors",
        value: |traffic| whole_base(&traffic.receive_errors),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmit_errors",
        description: "Send errors",
        value: |traffic| whole_base(&traffic.transmit_errors),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.receive_throughput",
        description: "Receive rate since the previous poll",
        value: |traffic| whole_base(&traffic.receive_throughput),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmit_throughput",
        description: "Send rate since the previous poll",
        value: |traffic| whole_base(&traffic.transmit_throughput),
    },
];

/// Each selected interface's gauges, under its name.
const NETWORK_INTERFACE_GAUGES: &[Gauge<NetworkTrafficMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.network.interface.received_data",
        description: "Data received",
        value: |traffic| whole_base(&traffic.received_data),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmitted_data",
        description: "Data sent",
        value: |traffic| whole_base(&traffic.transmitted_data),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.received_packets",
        description: "Packets received",
        value: |traffic| whole_base(&traffic.received_packets),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmitted_packets",
        description: "Packets sent",
        value: |traffic| whole_base(&traffic.transmitted_packets),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.receive_errors",
        description: "Receive errors",
        value: |traffic| whole_base(&traffic.receive_errors),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmit_errors",
        description: "Send errors",
        value: |traffic| whole_base(&traffic.transmit_errors),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.receive_throughput",
        description: "Receive rate since the previous poll",
        value: |traffic| whole_base(&traffic.receive_throughput),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmit_throughput",
        description: "Send rate since the previous poll",
        value: |traffic| whole_base(&traffic.transmit_throughput),
    },
];

/// The CPU category's part of a mark.
pub(crate) fn cpu_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(cpu) = &snapshot.cpu {
        mark.gauges(CPU_GAUGES, cpu, &[]);
        mark.limit_events(&cpu.limit_events);
    }
}

/// The memory category's part of a mark.
pub(crate) fn memory_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(memory) = &snapshot.memory {
        mark.gauges(MEMORY_GAUGES, memory, &[]);
        mark.limit_events(&memory.limit_events);
    }
}

/// The process category's part of a mark.
pub(crate) fn process_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(process) = &snapshot.process {
        mark.gauges(PROCESS_GAUGES, process, &[]);
        mark.limit_events(&process.limit_events);
    }
}

/// The disk category's part of a mark.
pub(crate) fn disk_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(disk) = &snapshot.disk {
        mark.gauges(DISK_GAUGES, disk, &[]);
        for filesystem in &disk.filesystems {
            let path = [(
                "nemo_relay.resource.disk.filesystem_path",
                AttributeValue::String(filesystem.path.clone()),
            )];
            mark.gauges(FILESYSTEM_GAUGES, filesystem, &path);
        }
    }
}

/// The attributes naming one GPU record's device.
fn accelerator_attributes(
    vendor: crate::snapshot::AcceleratorVendor,
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
pub(crate) fn gpu_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
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

/// The network category's part of a mark.
pub(crate) fn network_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(network) = &snapshot.network {
        mark.gauges(NETWORK_SYSTEM_GAUGES, &network.system, &[]);
        for interface in &network.interfaces {
            let name = [(
                "nemo_relay.resource.network.interface_name",
                AttributeValue::String(interface.name.clone()),
            )];
            mark.gauges(NETWORK_INTERFACE_GAUGES, &interface.traffic, &name);
        }
    }
}

/// The measurements of the resource mark for `snapshot`: the sample count, each
/// category's gauges in [`crate::categories::CATEGORIES`] order, then the coverage of
/// the process sums.
pub fn resource_measurements(snapshot: &Snapshot) -> MetricMeasurements {
    let common = BTreeMap::from([
        (
            "nemo_relay.resource.operating_system".to_string(),
            AttributeValue::String(snapshot.operating_system.name().into()),
        ),
        (
            "nemo_relay.resource.measurement_scope".to_string(),
            AttributeValue::String(snapshot.measurement_scope.name().into()),
        ),
    ]);
    let mut mark = MarkBuilder {
        common,
        measurements: Vec::with_capacity(64),
    };
    mark.push(
        "nemo.relay.resource.sample_count",
        count(1, "events"),
        "Resource metric samples collected in this poll",
        &[],
    );
    for descriptor in crate::categories::CATEGORIES {
        (descriptor.marks)(snapshot, &mut mark);
    }
    if let Some(sampling) = &snapshot.process_sampling {
        mark.push(
            "nemo.relay.resource.process_sampling.visible_count",
            count(sampling.visible_processes, "processes"),
            "Processes listed when collection began",
            &[],
        );
        mark.push(
            "nemo.relay.resource.process_sampling.sampled_count",
            count(sampling.sampled_processes, "processes"),
            "Processes whose base query succeeded",
            &[],
        );
        for (field, sampled) in &sampling.field_sampled_processes {
            mark.push(
                "nemo.relay.resource.process_sampling.field_sampled_count",
                count(*sampled, "processes"),
                "Processes that supplied a process-summed field",
                &[(
                    "nemo_relay.resource.field",
                    AttributeValue::String(field.clone()),
                )],
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

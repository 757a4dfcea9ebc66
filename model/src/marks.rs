//! A snapshot as `nemo.relay.metric_measurements` v1 data: every available measurement
//! under its `nemo.relay.resource.*` name, each a gauge, with the scope attributes.
//!
//! This file holds what every category's gauges share (the number-type rule, the
//! builder, limit events, the sample count and process coverage); each category's
//! gauges are a table of full metric names in its own file under `crate::snapshot`,
//! so every name a mark can carry is written out once and greppable.

use std::collections::BTreeMap;

use wattline_config::units::MeasurementValue;

use crate::events::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue,
};
use crate::snapshot::{LimitEvent, LimitEventKind, LimitResource, Measurement, Snapshot};

/// Whether a measurement's unit can ever produce a fraction, which fixes its number
/// type for every poll (`f64`), or always gives whole numbers (`u64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberType {
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
    pub name: &'static str,
    pub description: &'static str,
    pub value: fn(&T) -> Option<MarkValue>,
}

/// The value of `measurement`, whose source reads in steps of `resolution` base units.
pub(crate) fn at<U: UnitNumber>(
    measurement: &Option<Measurement<U>>,
    resolution: u64,
) -> Option<MarkValue> {
    measurement.map(|measurement| MarkValue {
        value: measurement.value,
        unit: measurement.unit.unit_name(),
        number: measurement.unit.number_type(resolution),
    })
}

/// The value of a measurement read in whole base units.
pub(crate) fn whole_base<U: UnitNumber>(measurement: &Option<Measurement<U>>) -> Option<MarkValue> {
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
    pub(crate) fn gauges<T>(
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

    pub(crate) fn limit_events(&mut self, events: &[LimitEvent]) {
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
pub(crate) trait UnitNumber: Copy {
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
// The sizes are config's unit factors: one home for them.
unit_number!(DurationUnit, |unit| u64::try_from(
    unit.microseconds_per_unit()
)
.ok());
unit_number!(CapacityUnit, |unit| u64::try_from(unit.bytes_per_unit())
    .ok());
unit_number!(DataUnit, |unit| u64::try_from(unit.bytes_per_unit()).ok());
unit_number!(BandwidthUnit, |_unit| None);
unit_number!(CpuUnit, |_unit| None);
unit_number!(UtilizationUnit, |_unit| None);
unit_number!(CountUnit, |_unit| Some(1));

/// CPU times come from clock ticks, at least a millisecond (µs).
pub(crate) const CPU_TIME_RESOLUTION: u64 = 1_000;
/// Linux reports process and system memory in kibibytes (bytes).
pub(crate) const PROC_MEMORY_RESOLUTION: u64 = 1024;

/// The measurements of the resource mark for `snapshot`: the sample count, each
/// category's gauges in the snapshot's order (CPU, memory, process, disk, GPU, network), then the coverage of
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
    for category_marks in crate::snapshot::CATEGORY_MARKS {
        category_marks(snapshot, &mut mark);
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

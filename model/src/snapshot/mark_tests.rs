//! The resource mark built from a snapshot: names, number types, attributes.

use std::collections::BTreeMap;

use chrono::Utc;
use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, MeasurementValue,
};

use super::*;
use crate::marks::{CPU_TIME_RESOLUTION, NumberType, PROC_MEMORY_RESOLUTION, UnitNumber};
use crate::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue,
};
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

#[test]
fn a_gauge_row_gives_its_semantic_convention_equivalent_by_full_name() {
    use crate::semconv::SemconvShape;

    let user = semconv_equivalent("nemo.relay.resource.cpu.user_time").unwrap();
    assert_eq!(user.process, Some("process.cpu.time"));
    assert_eq!(user.system, Some("system.cpu.time"));
    assert_eq!(user.unit, "s");
    assert_eq!(user.shape, SemconvShape::Total);
    assert_eq!(user.attribute, Some(("cpu.mode", "user")));
    // A second table of a category (each interface's gauges) is searched too.
    let interface =
        semconv_equivalent("nemo.relay.resource.network.interface.received_data").unwrap();
    assert_eq!(interface.system, Some("system.network.io"));
    assert_eq!(interface.process, None);
    // A gauge without an equivalent, a bare field name, an unknown name.
    assert_eq!(
        semconv_equivalent("nemo.relay.resource.cpu.total_time"),
        None
    );
    assert_eq!(semconv_equivalent("cpu.user_time"), None);
    assert_eq!(semconv_equivalent("nemo.relay.resource.nothing"), None);
}

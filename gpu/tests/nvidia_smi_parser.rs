//! The `nvidia-smi` CSV parser on answers in the tool's real formats.

mod support;

use support::fixture_text;
use wattline_gpu::nvidia_smi::{
    CORE_QUERY_FIELDS, FULL_QUERY_FIELDS, FULL_QUERY_FIELDS_EVENT_REASONS, FieldList,
    INSTANT_POWER_FIELD, QueryFieldSet, SmiAnswer, SmiParseError, interpret_answer, parse_rows,
    unknown_field_in,
};
use wattline_gpu::nvidia_smi_collector::parse_compute_apps;
use wattline_model::snapshot::{GpuDeviceReading, GpuVendor};

const MIB: u64 = 1024 * 1024;

fn devices(
    answer: Result<SmiAnswer, SmiParseError>,
) -> Vec<wattline_model::snapshot::GpuDeviceReading> {
    match answer {
        Ok(SmiAnswer::Devices(devices)) => devices,
        other => panic!("expected devices, got {other:?}"),
    }
}

/// A query's set: `list`, with or without the instantaneous power after it.
fn set(list: FieldList, instant_power: bool) -> QueryFieldSet {
    QueryFieldSet {
        list,
        instant_power,
    }
}

/// The fields of the first query, which the fixtures of a current driver answer.
fn first_fields() -> Vec<&'static str> {
    QueryFieldSet::FIRST.fields()
}

#[test]
fn query_arguments_are_the_documented_ones() {
    assert_eq!(
        QueryFieldSet::FIRST.query_argument(),
        "--query-gpu=index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,\
temperature.gpu,power.draw,power.limit,clocks.current.sm,clocks.current.memory,fan.speed,pstate,\
clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,\
clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.hw_slowdown,\
ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,power.draw.instant"
    );
    assert_eq!(
        set(FieldList::Full, false).fields(),
        FULL_QUERY_FIELDS.to_vec()
    );
    assert_eq!(
        set(FieldList::Core, false).arguments(),
        [
            "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
                .to_owned(),
            "--format=csv,noheader,nounits".to_owned()
        ]
    );
    // Only the throttle fields differ between the two full sets.
    let differing: Vec<_> = FULL_QUERY_FIELDS
        .iter()
        .zip(FULL_QUERY_FIELDS_EVENT_REASONS.iter())
        .filter(|(a, b)| a != b)
        .map(|(_, b)| *b)
        .collect();
    assert_eq!(
        differing,
        [
            "clocks_event_reasons.sw_thermal_slowdown",
            "clocks_event_reasons.hw_thermal_slowdown",
            "clocks_event_reasons.sw_power_cap",
            "clocks_event_reasons.hw_slowdown"
        ]
    );
}

#[test]
fn one_laptop_device_with_not_available_fields() {
    let devices = devices(interpret_answer(
        &fixture_text("smi/one_device.csv"),
        &first_fields(),
    ));
    assert_eq!(devices.len(), 1);
    let gpu = &devices[0];
    assert_eq!(gpu.vendor, GpuVendor::Nvidia);
    assert_eq!(
        gpu.device_identifier,
        "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
    );
    assert_eq!(gpu.device_index, Some(0));
    assert_eq!(
        gpu.name.as_deref(),
        Some("NVIDIA GeForce RTX 5090 Laptop GPU")
    );
    assert_eq!(gpu.compute_utilization_percent, Some(7.0));
    assert_eq!(gpu.memory_utilization_percent, Some(3.0));
    assert_eq!(gpu.memory_used_bytes, Some(1377 * MIB));
    assert_eq!(gpu.memory_total_bytes, Some(24463 * MIB));
    assert_eq!(gpu.temperature_celsius, Some(46.0));
    assert_eq!(gpu.power_draw_watts, Some(16.85));
    assert_eq!(gpu.power_limit_watts, None, "[N/A] power limit");
    assert_eq!(gpu.sm_clock_mhz, Some(1132.0));
    assert_eq!(gpu.memory_clock_mhz, Some(810.0));
    assert_eq!(gpu.fan_speed_percent, None, "[N/A] fan");
    assert_eq!(gpu.performance_state, Some(8));
    assert_eq!(gpu.throttle_thermal, Some(false));
    assert_eq!(gpu.throttle_power, Some(false));
    assert_eq!(gpu.throttle_hw_slowdown, Some(false));
    assert_eq!(gpu.ecc_corrected, None);
    assert_eq!(gpu.ecc_uncorrected, None);
    assert_eq!(gpu.total_energy_millijoules, None, "not in the query");
}

#[test]
fn eight_data_centre_devices() {
    let devices = devices(interpret_answer(
        &fixture_text("smi/eight_h100.csv"),
        &first_fields(),
    ));
    assert_eq!(devices.len(), 8);
    let indexes: Vec<_> = devices.iter().map(|d| d.device_index).collect();
    assert_eq!(indexes, (0..8).map(Some).collect::<Vec<_>>());
    let mut uuids: Vec<_> = devices
        .iter()
        .map(|d| d.device_identifier.as_str())
        .collect();
    assert!(uuids.iter().all(|u| u.starts_with("GPU-") && u.len() == 40));
    uuids.sort_unstable();
    uuids.dedup();
    assert_eq!(uuids.len(), 8, "every UUID distinct");
    assert!(
        devices
            .iter()
            .all(|d| d.memory_total_bytes == Some(81559 * MIB))
    );
    assert!(devices.iter().all(|d| d.power_limit_watts == Some(700.0)));
    assert!(devices.iter().all(|d| d.fan_speed_percent.is_none()));
    assert!(devices.iter().all(|d| d.performance_state == Some(0)));

    assert_eq!(
        devices[0].device_identifier,
        "GPU-7b9c4e2a-1f3d-8e6b-a4c2-9d0e1f2a3b4c"
    );
    assert_eq!(devices[0].memory_used_bytes, Some(76543 * MIB));
    assert_eq!(devices[0].power_draw_watts, Some(689.43));
    assert_eq!(devices[0].throttle_power, Some(true));
    assert_eq!(devices[0].throttle_thermal, Some(false));
    // Device 2: software thermal slowdown active.
    assert_eq!(devices[2].throttle_thermal, Some(true));
    // Device 3: idle, three corrected ECC errors.
    assert_eq!(devices[3].compute_utilization_percent, Some(0.0));
    assert_eq!(devices[3].memory_used_bytes, Some(4 * MIB));
    assert_eq!(devices[3].ecc_corrected, Some(3));
    assert_eq!(devices[3].ecc_uncorrected, Some(0));
    // Device 4: hardware thermal slowdown and hardware slowdown active; the software
    // thermal flag (the reference's) is not.
    assert_eq!(devices[4].throttle_thermal, Some(false));
    assert_eq!(devices[4].throttle_hw_thermal, Some(true));
    assert_eq!(devices[4].throttle_hw_slowdown, Some(true));
    assert_eq!(devices[4].sm_clock_mhz, Some(1755.0));
    assert_eq!(devices[7].temperature_celsius, Some(72.0));
}

#[test]
fn not_available_fields_are_none_for_that_device_only() {
    let devices = devices(interpret_answer(
        &fixture_text("smi/na_fields.csv"),
        &first_fields(),
    ));
    assert_eq!(devices.len(), 2);
    let (first, second) = (&devices[0], &devices[1]);
    assert_eq!(first.memory_utilization_percent, None);
    assert_eq!(first.power_draw_watts, None);
    assert_eq!(first.power_limit_watts, Some(400.0));
    assert_eq!(second.memory_utilization_percent, Some(20.0));
    assert_eq!(second.power_draw_watts, Some(211.37));
    assert_eq!(second.power_limit_watts, None, "[Not Supported]");
    assert_eq!(second.performance_state, None);
    // sw_thermal unknown and hw_thermal clear: thermal is not reported as clear.
    assert_eq!(second.throttle_thermal, None);
    assert_eq!(first.throttle_thermal, Some(false));
    assert_eq!(second.ecc_corrected, None);
    assert_eq!(first.ecc_corrected, Some(0));
}

#[test]
fn core_field_answer_fills_only_core_fields() {
    let devices = devices(interpret_answer(
        &fixture_text("smi/core_fields.csv"),
        &CORE_QUERY_FIELDS,
    ));
    assert_eq!(devices.len(), 2);
    assert_eq!(
        devices[0].device_identifier,
        "GPU-c0ffee00-1234-5678-9abc-def012345678"
    );
    assert_eq!(devices[0].memory_used_bytes, Some(9876 * MIB));
    assert_eq!(devices[0].power_draw_watts, Some(161.2));
    assert_eq!(devices[1].temperature_celsius, Some(37.0));
    assert_eq!(devices[0].memory_utilization_percent, None);
    assert_eq!(devices[0].throttle_thermal, None);
}

#[test]
fn no_devices_answer() {
    assert_eq!(
        interpret_answer(&fixture_text("smi/no_devices.txt"), &FULL_QUERY_FIELDS),
        Ok(SmiAnswer::NoDevices)
    );
}

#[test]
fn unknown_field_answer_names_the_field() {
    let text = fixture_text("smi/unknown_field.txt");
    assert_eq!(
        interpret_answer(&text, &FULL_QUERY_FIELDS),
        Ok(SmiAnswer::UnknownField(
            "clocks_throttle_reasons.sw_thermal_slowdown".into()
        ))
    );
    // Windows consoles may show typographic quotes.
    assert_eq!(
        unknown_field_in(
            "Field \u{201c}encoder.stats.sessionCount\u{201d} is not a valid field to query."
        ),
        Some("encoder.stats.sessionCount".into())
    );
    // Each list keeps the instantaneous power; its own rejection drops only it.
    for instant_power in [true, false] {
        assert_eq!(
            set(FieldList::Full, instant_power)
                .after_unknown_field("clocks_throttle_reasons.sw_thermal_slowdown"),
            Some(set(FieldList::FullEventReasons, instant_power))
        );
        assert_eq!(
            set(FieldList::Full, instant_power)
                .after_unknown_field("ecc.errors.corrected.volatile.total"),
            Some(set(FieldList::Core, instant_power))
        );
        assert_eq!(
            set(FieldList::FullEventReasons, instant_power)
                .after_unknown_field("clocks_event_reasons.hw_slowdown"),
            Some(set(FieldList::Core, instant_power))
        );
        assert_eq!(
            set(FieldList::Core, instant_power).after_unknown_field("power.draw"),
            None
        );
    }
    for list in [
        FieldList::Full,
        FieldList::FullEventReasons,
        FieldList::Core,
    ] {
        assert_eq!(
            set(list, true).after_unknown_field(INSTANT_POWER_FIELD),
            Some(set(list, false))
        );
    }
    // Rejected again once dropped: the driver answers for another field than asked.
    assert_eq!(
        set(FieldList::Core, false).after_unknown_field(INSTANT_POWER_FIELD),
        None
    );
}

#[test]
fn the_instantaneous_power_is_read_beside_the_one_second_mean() {
    let boards = devices(interpret_answer(
        &fixture_text("smi/eight_h100.csv"),
        &first_fields(),
    ));
    assert_eq!(boards[0].power_draw_watts, Some(689.43));
    assert_eq!(boards[0].instant_power_watts, Some(701.12));
    assert_eq!(boards[3].power_draw_watts, Some(69.85));
    assert_eq!(boards[3].instant_power_watts, Some(70.13));
    // Asked alone (the power stream), it is still the instantaneous figure.
    let stream = devices(interpret_answer(
        "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 512.25",
        &["index", "uuid", INSTANT_POWER_FIELD],
    ));
    assert_eq!(stream[0].instant_power_watts, Some(512.25));
    assert_eq!(stream[0].power_draw_watts, None);
}

#[test]
fn each_device_names_the_power_figure_the_integral_takes() {
    let fields_of = |devices: &[GpuDeviceReading]| -> Vec<Option<&'static str>> {
        devices.iter().map(|device| device.power_field).collect()
    };
    let current = devices(interpret_answer(
        &fixture_text("smi/eight_h100.csv"),
        &first_fields(),
    ));
    assert_eq!(fields_of(&current), vec![Some(INSTANT_POWER_FIELD); 8]);
    // One board says [N/A] for the instant figure: it alone falls back to its mean,
    // as the power stream (which reads only the instant figure) has nothing for it,
    // and every other board keeps the figure its stream readings have.
    let one_without = devices(interpret_answer(
        &fixture_text("smi/eight_h100.csv").replacen("701.12", "[N/A]", 1),
        &first_fields(),
    ));
    assert_eq!(one_without[0].instant_power_watts, None);
    assert_eq!(one_without[0].power_field, Some("power.draw"));
    assert_eq!(one_without[1].instant_power_watts, Some(664.9));
    assert!(
        one_without[1..]
            .iter()
            .all(|d| d.power_field == Some(INSTANT_POWER_FIELD))
    );
    // A board with no power figure at all names none.
    let mixed = devices(interpret_answer(
        &fixture_text("smi/na_fields.csv"),
        &first_fields(),
    ));
    assert_eq!(fields_of(&mixed), vec![None, Some(INSTANT_POWER_FIELD)]);
    // An older driver's answer, and the mean asked under its other name.
    let core = devices(interpret_answer(
        &fixture_text("smi/core_fields.csv"),
        &CORE_QUERY_FIELDS,
    ));
    assert_eq!(fields_of(&core), vec![Some("power.draw"); 2]);
    let average = devices(interpret_answer(
        "0, GPU-a, 161.20",
        &["index", "uuid", "power.draw.average"],
    ));
    assert_eq!(fields_of(&average), vec![Some("power.draw.average")]);
}

#[test]
fn empty_answer_is_not_no_gpu() {
    assert_eq!(
        interpret_answer("", &FULL_QUERY_FIELDS),
        Ok(SmiAnswer::Empty)
    );
    assert_eq!(
        interpret_answer(" \n\r\n", &FULL_QUERY_FIELDS),
        Ok(SmiAnswer::Empty)
    );
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    let wrong_count = parse_rows("Segmentation fault (core dumped)\n", &FULL_QUERY_FIELDS);
    assert_eq!(
        wrong_count,
        Err(SmiParseError::FieldCount {
            line: 1,
            expected: 20,
            found: 1
        })
    );
    let bad_number = parse_rows(
        "0, GPU-c0ffee00-1234-5678-9abc-def012345678, Tesla V100, lots, 1, 2, 3, 4",
        &CORE_QUERY_FIELDS,
    );
    assert!(
        matches!(&bad_number, Err(SmiParseError::InvalidValue { line: 1, field, value }) if field == "utilization.gpu" && value == "lots"),
        "{bad_number:?}"
    );
    let no_uuid = parse_rows("0, [N/A], Tesla V100, 1, 1, 2, 3, 4", &CORE_QUERY_FIELDS);
    assert_eq!(no_uuid, Err(SmiParseError::MissingIdentifier { line: 1 }));
    let bad_pstate = parse_rows(
        "0, GPU-a, n, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, P42, Active, Active, Active, Active, 0, 0",
        &FULL_QUERY_FIELDS,
    );
    assert!(matches!(
        bad_pstate,
        Err(SmiParseError::InvalidValue { .. })
    ));
    let bad_flag = parse_rows(
        "0, GPU-a, n, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, P2, Maybe, Active, Active, Active, 0, 0",
        &FULL_QUERY_FIELDS,
    );
    assert!(matches!(bad_flag, Err(SmiParseError::InvalidValue { .. })));
    for junk in ["\u{0}\u{1}\u{2}", ",,,,,,,", "P0,P0", "\u{feff}0,GPU-1"] {
        assert!(parse_rows(junk, &FULL_QUERY_FIELDS).is_err(), "{junk:?}");
    }
    // Memory that overflows u64 bytes is rejected, not wrapped.
    let overflow = parse_rows(
        "0, GPU-a, n, 1, 18446744073709551615, 1, 1, 1",
        &CORE_QUERY_FIELDS,
    );
    assert!(matches!(overflow, Err(SmiParseError::InvalidValue { .. })));
    // 2^44 MiB is 2^64 bytes, written as a decimal: rejected like the integer form,
    // not saturated to u64::MAX.
    for memory in ["17592186044416", "17592186044416.0"] {
        let overflow = parse_rows(
            &format!("0, GPU-a, n, 1, {memory}, 1, 1, 1"),
            &CORE_QUERY_FIELDS,
        );
        assert!(
            matches!(overflow, Err(SmiParseError::InvalidValue { .. })),
            "{memory}: {overflow:?}"
        );
    }
}

#[test]
fn windows_line_endings_and_blank_lines() {
    let text = fixture_text("smi/core_fields.csv").replace('\n', "\r\n\r\n");
    let devices = devices(interpret_answer(&text, &CORE_QUERY_FIELDS));
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1].power_draw_watts, Some(41.02));
}

#[test]
fn compute_apps_memory_past_64_bits_is_unknown_not_a_panic() {
    // Found by fuzz_gpu_parsers: 2^44 MiB is 2^64 bytes, and `mib * 1024 * 1024`
    // overflowed (a panic in debug builds, a wrapped figure in release).
    let device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-a");
    let processes = parse_compute_apps("GPU-a, 0, 17592186044416\n", &[device]).expect("parsed");
    assert_eq!(processes[0].process_id, 0);
    assert_eq!(processes[0].memory_used_bytes, None);
    let device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-a");
    let processes = parse_compute_apps("GPU-a, 7, 17592186044415\n", &[device]).expect("parsed");
    assert_eq!(
        processes[0].memory_used_bytes,
        Some(17_592_186_044_415 * MIB)
    );
}

//! The NVML source against a fake `libnvidia-ml.so.1` (tests/fixtures/fake_nvml.c)
//! compiled by each test, with its own variant defines, into its own temp folder and
//! loaded through nvml-wrapper's `lib_path`. No environment variable is touched.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use support::build_fake_nvml;
use wattline_gpu::nvml::{NvmlConfig, NvmlPowerProbe, NvmlSource};
use wattline_gpu::{
    CollectingEventSink, GpuEvent, GpuSampleRequest, GpuSource, PowerProbe, PowerSample,
    PowerSampleSink, ProcessScope,
};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::GpuVendor;

const MIB: u64 = 1024 * 1024;
const UUID_0: &str = "GPU-11111111-2222-3333-4444-555555555555";
const UUID_1: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

fn source(library: &Path, retry_delay: Duration) -> (NvmlSource, Arc<CollectingEventSink>) {
    let sink = Arc::new(CollectingEventSink::new());
    let config = NvmlConfig {
        library_path: Some(library.to_path_buf()),
        retry_delay,
    };
    (NvmlSource::new(config, sink.clone()), sink)
}

fn init_attempts(counter: &Path) -> usize {
    std::fs::read_to_string(counter)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn not_supported(sink: &CollectingEventSink, call: &str) -> usize {
    sink.count(|e| matches!(e, GpuEvent::NvmlCallNotSupported { call: c } if c == call))
}

#[test]
fn two_devices_with_their_own_values() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &[]);
    let (mut nvml, sink) = source(&library, Duration::from_secs(60));
    assert_eq!(nvml.name(), "nvml");
    let sample = nvml
        .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("NVML loads");
    assert_eq!(sample.devices.len(), 2);
    let (rtx, h100) = (&sample.devices[0], &sample.devices[1]);

    assert_eq!(rtx.vendor, GpuVendor::Nvidia);
    assert_eq!(rtx.device_identifier, UUID_0);
    assert_eq!(rtx.device_index, Some(0));
    assert_eq!(rtx.name.as_deref(), Some("NVIDIA GeForce RTX 4090"));
    assert_eq!(rtx.memory_used_bytes, Some(1234 * MIB));
    assert_eq!(rtx.memory_total_bytes, Some(24564 * MIB));
    assert_eq!(rtx.compute_utilization_percent, Some(41.0));
    assert_eq!(rtx.memory_utilization_percent, Some(17.0));
    assert_eq!(rtx.power_draw_watts, Some(123.456), "mW to W");
    assert_eq!(rtx.power_limit_watts, Some(450.0));
    assert_eq!(rtx.total_energy_millijoules, Some(987_654_321));
    assert_eq!(rtx.temperature_celsius, Some(63.0));
    assert_eq!(rtx.sm_clock_mhz, Some(2520.0));
    assert_eq!(rtx.memory_clock_mhz, Some(10501.0));
    assert_eq!(rtx.fan_speed_percent, Some(30.0));
    assert_eq!(rtx.performance_state, Some(2));
    assert_eq!(rtx.throttle_power, Some(true), "software power cap");
    assert_eq!(rtx.throttle_thermal, Some(false));
    assert_eq!(rtx.throttle_hw_slowdown, Some(false));
    assert_eq!(rtx.ecc_corrected, None, "ECC not supported on device 0");
    assert_eq!(rtx.ecc_uncorrected, None);

    assert_eq!(h100.device_identifier, UUID_1);
    assert_eq!(h100.device_index, Some(1));
    assert_eq!(h100.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(h100.memory_used_bytes, Some(40000 * MIB));
    assert_eq!(h100.memory_total_bytes, Some(81559 * MIB));
    assert_eq!(h100.power_draw_watts, Some(612.345));
    assert_eq!(h100.power_limit_watts, Some(700.0));
    assert_eq!(h100.total_energy_millijoules, Some(55_555_555_555));
    assert_eq!(
        h100.fan_speed_percent, None,
        "fan not supported on device 1"
    );
    assert_eq!(h100.performance_state, Some(0));
    assert_eq!(
        h100.throttle_thermal,
        Some(false),
        "the reference's thermal flag is the software reason"
    );
    assert_eq!(
        h100.throttle_hw_thermal,
        Some(true),
        "hardware thermal slowdown"
    );
    assert_eq!(h100.throttle_hw_slowdown, Some(true));
    assert_eq!(h100.throttle_power, Some(false));
    assert_eq!(h100.ecc_corrected, Some(3));
    assert_eq!(h100.ecc_uncorrected, Some(1));

    // Each unsupported call kind is reported once, however often it is seen.
    nvml.sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("second sample");
    assert_eq!(not_supported(&sink, "fan_speed"), 1);
    assert_eq!(not_supported(&sink, "total_ecc_errors"), 1);
    assert!(
        !sink
            .events()
            .iter()
            .any(|e| matches!(e, GpuEvent::NvmlUnavailable { .. }))
    );
}

#[test]
fn a_symbol_missing_from_the_library_leaves_its_field_none() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &["-DFAKE_NO_ENERGY_SYMBOL".into()]);
    let (mut nvml, sink) = source(&library, Duration::from_secs(60));
    let sample = nvml
        .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("NVML loads without the energy symbol");
    assert!(
        sample
            .devices
            .iter()
            .all(|d| d.total_energy_millijoules.is_none())
    );
    assert!(sample.devices.iter().all(|d| d.power_draw_watts.is_some()));
    assert_eq!(not_supported(&sink, "total_energy_consumption"), 1);
}

#[test]
fn process_records_for_pids_in_scope_with_utilization_from_the_second_sample() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &[]);
    let (mut nvml, _sink) = source(&library, Duration::from_secs(60));
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.device_metrics = false;
    request.processes = ProcessScope::Pids(BTreeSet::from([4242, 6161, 7171, 9999]));

    let first = nvml.sample(&request).expect("first sample");
    assert!(first.devices.is_empty(), "device metrics off");
    let summary: Vec<_> = first
        .processes
        .iter()
        .map(|p| {
            (
                p.device_identifier.as_str(),
                p.device_index,
                p.process_id,
                p.memory_used_bytes,
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (UUID_0, Some(0), 4242, Some(512 * MIB)),
            (UUID_1, Some(1), 6161, Some(1024 * MIB)),
            (UUID_1, Some(1), 7171, None),
        ],
        "5151 is out of scope; 4242 is in both lists but counted once"
    );
    assert!(
        first
            .processes
            .iter()
            .all(|p| p.compute_utilization_percent.is_none()),
        "no baseline yet"
    );

    let second = nvml.sample(&request).expect("second sample");
    let utilization: Vec<_> = second
        .processes
        .iter()
        .map(|p| (p.process_id, p.compute_utilization_percent))
        .collect();
    assert_eq!(
        utilization,
        vec![(4242, Some(37.0)), (6161, Some(0.0)), (7171, Some(0.0))]
    );

    // The on-demand series has its own baseline: its first sample has none.
    let mut on_demand = request.clone();
    on_demand.series = SamplingSeries::OnDemand;
    let first_on_demand = nvml.sample(&on_demand).expect("on-demand sample");
    assert!(
        first_on_demand
            .processes
            .iter()
            .all(|p| p.compute_utilization_percent.is_none())
    );
    let second_on_demand = nvml.sample(&on_demand).expect("on-demand sample");
    assert_eq!(
        second_on_demand.processes[0].compute_utilization_percent,
        Some(37.0)
    );

    // Global scope sees every process.
    let mut global = GpuSampleRequest::all(SamplingSeries::Polling);
    global.device_metrics = false;
    let pids: Vec<_> = nvml
        .sample(&global)
        .expect("sample")
        .processes
        .iter()
        .map(|p| p.process_id)
        .collect();
    assert_eq!(pids, vec![4242, 5151, 6161, 7171]);
}

#[test]
fn device_selectors_match_uuid_or_index() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &[]);
    let (mut nvml, _sink) = source(&library, Duration::from_secs(60));
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.device_selectors = vec!["1".into()];
    let sample = nvml.sample(&request).expect("sample");
    assert_eq!(sample.devices.len(), 1);
    assert_eq!(sample.devices[0].device_identifier, UUID_1);
    assert!(
        sample
            .processes
            .iter()
            .all(|p| p.device_identifier == UUID_1)
    );
    assert!(!sample.processes.is_empty());

    request.device_selectors = vec![UUID_0.into()];
    let sample = nvml.sample(&request).expect("sample");
    assert_eq!(sample.devices.len(), 1);
    assert_eq!(sample.devices[0].device_index, Some(0));
    assert!(
        sample
            .processes
            .iter()
            .all(|p| p.device_identifier == UUID_0)
    );

    request.device_selectors = vec!["7".into()];
    let sample = nvml.sample(&request).expect("sample");
    assert!(sample.devices.is_empty() && sample.processes.is_empty());
}

#[test]
fn failed_init_reports_unavailable_and_retries_only_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("init-calls");
    let library = build_fake_nvml(
        dir.path(),
        &[
            format!("-DFAKE_COUNTER_FILE=\"{}\"", counter.display()),
            "-DFAKE_INIT_FAIL_UNTIL=2".into(),
        ],
    );
    let retry = Duration::from_secs(1);
    let (mut nvml, sink) = source(&library, retry);
    let request = GpuSampleRequest::all(SamplingSeries::Polling);

    assert!(
        nvml.sample(&request).is_none(),
        "init fails: nothing observed"
    );
    assert_eq!(init_attempts(&counter), 1);
    let unavailable = |sink: &CollectingEventSink| {
        sink.count(|e| matches!(e, GpuEvent::NvmlUnavailable { detail } if !detail.is_empty()))
    };
    assert_eq!(unavailable(&sink), 1);

    // Within the delay: no new attempt.
    assert!(nvml.sample(&request).is_none());
    assert!(!nvml.try_init());
    assert_eq!(init_attempts(&counter), 1);

    std::thread::sleep(retry + Duration::from_millis(100));
    let sample = nvml.sample(&request).expect("second attempt succeeds");
    assert_eq!(init_attempts(&counter), 2);
    assert_eq!(sample.devices.len(), 2);
    assert_eq!(unavailable(&sink), 1);
    assert!(nvml.is_ready());
}

#[test]
fn init_that_always_fails_and_a_missing_library() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &["-DFAKE_INIT_FAIL".into()]);
    let (mut nvml, sink) = source(&library, Duration::from_secs(60));
    assert!(
        nvml.sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
    assert!(!nvml.is_ready());
    assert!(matches!(
        &sink.events()[..],
        [GpuEvent::NvmlUnavailable { .. }]
    ));

    let (mut missing, sink) = source(
        &dir.path().join("no-such-libnvidia-ml.so.1"),
        Duration::from_secs(60),
    );
    assert!(
        missing
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
    assert!(
        matches!(&sink.events()[..], [GpuEvent::NvmlUnavailable { detail }] if detail.contains("no-such-libnvidia-ml"))
    );
}

/// A fake driver whose power follows a square wave of a one-second period: device 0
/// draws 100 W for the first half of each second (from the trace's epoch, now) and
/// 600 W for the second, device 1 the other way round. Without the energy symbol, so
/// each reading is stamped at its power call. The mean of any last second is 350 W.
fn square_wave_library(dir: &Path, extra: &[&str]) -> (std::path::PathBuf, f64) {
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let trace = dir.join("trace");
    std::fs::write(
        &trace,
        format!("epoch {epoch:.6}\nperiod 1\n0 100 600\n0.5 100 600\n0.5 600 100\n1 600 100\n"),
    )
    .unwrap();
    let mut defines = vec![
        "-DFAKE_POWER_TRACE".to_owned(),
        "-DFAKE_NO_ENERGY_SYMBOL".to_owned(),
        format!("-DFAKE_POWER_TRACE_FILE=\"{}\"", trace.display()),
    ];
    defines.extend(extra.iter().map(|define| (*define).to_owned()));
    (build_fake_nvml(dir, &defines), epoch)
}

/// The square wave's power for `device` at `wall` seconds, or `None` within 30 ms of
/// a step (a reading's stamp is the middle of its call, and the fake samples at its
/// end, up to 23 ms later when the call stalls).
fn square_wave_watts(device: usize, epoch: f64, wall: f64) -> Option<f64> {
    let phase = (wall - epoch).rem_euclid(1.0);
    if phase < 0.03 || (0.47..0.53).contains(&phase) || phase > 0.97 {
        return None;
    }
    let low_first = phase < 0.5;
    Some(if low_first == (device == 0) {
        100.0
    } else {
        600.0
    })
}

/// Wall-clock seconds of `at`, from one pairing of the two clocks.
fn wall_seconds(at: std::time::Instant, pair: (std::time::Instant, f64)) -> f64 {
    if at >= pair.0 {
        pair.1 + at.duration_since(pair.0).as_secs_f64()
    } else {
        pair.1 - pair.0.duration_since(at).as_secs_f64()
    }
}

fn clock_pair() -> (std::time::Instant, f64) {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    (std::time::Instant::now(), wall)
}

/// Readings (device, stamp in wall seconds, watts) of `reads` dense reads ~20 ms apart.
fn dense_readings(probe: &mut dyn PowerProbe, reads: usize) -> Vec<(usize, f64, f64)> {
    let pair = clock_pair();
    let mut readings = Vec::new();
    for _ in 0..reads {
        let sample = probe.read().expect("the fake answers");
        for (device, reading) in sample.devices.iter().enumerate() {
            let at = reading.power_read_at.expect("NVML stamps each device");
            let watts = reading.power_draw_watts.expect("power read");
            readings.push((device, wall_seconds(at, pair), watts));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    readings
}

#[test]
fn dense_reads_take_the_instant_power_where_power_usage_is_a_one_second_mean() {
    let dir = tempfile::tempdir().unwrap();
    let (library, epoch) = square_wave_library(dir.path(), &[]);
    let config = NvmlConfig {
        library_path: Some(library),
        retry_delay: Duration::from_secs(60),
    };
    let mut probe = NvmlPowerProbe::open(&config, &[]).expect("the fake opens");
    assert_eq!(probe.power_field(), "NVML_FI_DEV_POWER_INSTANT");
    let readings = dense_readings(&mut probe, 60);
    let mut checked = [[0_usize; 2]; 2];
    for (device, wall, watts) in readings {
        let Some(expected) = square_wave_watts(device, epoch, wall) else {
            continue;
        };
        // The one-second mean would read 350 W throughout.
        assert!(
            (watts - expected).abs() <= 0.5,
            "device {device} at phase {:.3}: {watts} W, the trace {expected} W",
            (wall - epoch).rem_euclid(1.0)
        );
        checked[device][usize::from(expected > 350.0)] += 1;
    }
    assert!(
        checked.iter().flatten().all(|count| *count >= 5),
        "each device read on both halves of the wave: {checked:?}"
    );
}

#[test]
fn full_reads_keep_power_usage_for_the_gauge_and_give_the_instant_power_to_the_integral() {
    let dir = tempfile::tempdir().unwrap();
    let (library, epoch) = square_wave_library(dir.path(), &[]);
    let (mut nvml, sink) = source(&library, Duration::from_secs(60));
    let pair = clock_pair();
    let mut checked = 0;
    for _ in 0..20 {
        let sample = nvml
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .expect("NVML loads");
        for (device, reading) in sample.devices.iter().enumerate() {
            // The mean of the last second of a wave with a one-second period.
            let gauge = reading.power_draw_watts.expect("power usage read");
            assert!((gauge - 350.0).abs() <= 0.5, "device {device}: {gauge} W");
            let at = wall_seconds(reading.power_read_at.expect("stamped"), pair);
            let instant = reading.instant_power_watts.expect("instant power read");
            assert_eq!(reading.power_field, Some("NVML_FI_DEV_POWER_INSTANT"));
            if let Some(expected) = square_wave_watts(device, epoch, at) {
                assert!(
                    (instant - expected).abs() <= 0.5,
                    "device {device}: {instant} W, the trace {expected} W"
                );
                checked += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(37));
    }
    assert!(checked >= 10, "{checked} readings away from the steps");
    assert_eq!(
        not_supported(&sink, "power_usage"),
        0,
        "no call reported unsupported"
    );
}

#[test]
fn a_driver_without_the_instant_field_is_read_through_power_usage() {
    for variant in ["-DFAKE_NO_POWER_INSTANT", "-DFAKE_POWER_INSTANT_ZERO"] {
        read_through_power_usage(variant);
    }
}

/// With the fake's `variant` (a driver without the field, or a board that answers it
/// with 0 W), both the dense and the full reads take `nvmlDeviceGetPowerUsage`.
fn read_through_power_usage(variant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (library, _) = square_wave_library(dir.path(), &[variant]);
    let config = NvmlConfig {
        library_path: Some(library.clone()),
        retry_delay: Duration::from_secs(60),
    };
    let mut probe = NvmlPowerProbe::open(&config, &[]).expect("the fake opens");
    assert_eq!(probe.power_field(), "nvmlDeviceGetPowerUsage", "{variant}");
    for (device, _, watts) in dense_readings(&mut probe, 10) {
        assert!(
            (watts - 350.0).abs() <= 0.5,
            "{variant}: device {device}: {watts} W"
        );
    }
    let (mut nvml, sink) = source(&library, Duration::from_secs(60));
    for _ in 0..3 {
        let sample = nvml
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .expect("NVML loads");
        for reading in &sample.devices {
            assert_eq!(reading.instant_power_watts, None, "{variant}");
            assert!((reading.power_draw_watts.unwrap() - 350.0).abs() <= 0.5);
            assert_eq!(reading.power_field, Some("nvmlDeviceGetPowerUsage"));
        }
    }
    // The field's absence is no failure worth a diagnostic: the source falls back.
    assert!(
        !sink.events().iter().any(|event| matches!(
            event,
            GpuEvent::NvmlCallNotSupported { call } if call.contains("power")
        )),
        "{:?}",
        sink.events()
    );
}

/// Keeps nothing: the dense readings are not what this test looks at.
struct Dropped;

impl PowerSampleSink for Dropped {
    fn send(&self, _sample: PowerSample) {}
}

#[test]
fn full_reads_take_the_dense_probes_figure_so_a_device_is_one_series() {
    // Device 0 answers the instant field with 0 W, device 1 truly: the probe reads
    // power usage for both (one field per probe).
    let dir = tempfile::tempdir().unwrap();
    let (library, _) = square_wave_library(dir.path(), &["-DFAKE_POWER_INSTANT_ZERO_ON_0"]);
    let instant_read = |nvml: &mut NvmlSource| -> Vec<bool> {
        let sample = nvml
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .expect("NVML loads");
        sample
            .devices
            .iter()
            .map(|reading| reading.instant_power_watts.is_some())
            .collect()
    };
    // Alone, the full read takes each device's own: device 1's instant power.
    let (mut alone, _) = source(&library, Duration::from_secs(60));
    assert_eq!(instant_read(&mut alone), [false, true]);
    let (mut with_probe, _) = source(&library, Duration::from_secs(60));
    assert!(with_probe.try_init());
    let dense = with_probe
        .start_dense_power(Duration::from_millis(100), &[], Arc::new(Dropped))
        .expect("the probe starts");
    assert_eq!(instant_read(&mut with_probe), [false, false]);
    drop(dense);
}

#[test]
fn a_driver_without_the_instant_field_is_asked_for_it_once_per_device() {
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("field-calls");
    let (library, _) = square_wave_library(
        dir.path(),
        &[
            "-DFAKE_NO_POWER_INSTANT",
            &format!("-DFAKE_FIELD_CALLS_FILE=\"{}\"", calls.display()),
        ],
    );
    let (mut nvml, _) = source(&library, Duration::from_secs(60));
    for _ in 0..4 {
        nvml.sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .expect("NVML loads");
    }
    let asked = std::fs::read_to_string(&calls).unwrap_or_default();
    assert_eq!(asked.lines().collect::<Vec<_>>(), ["0", "1"], "{asked}");
}

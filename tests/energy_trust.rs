//! Energy through the real binary while power moves. Two stand-ins read one power
//! trace (`support::power_trace`): the fake NVML (power and an energy counter that is
//! the trace's exact integral, each call with an uneven driver latency) and a stand-in
//! `nvidia-smi` (the real CSV format, 80 to 450 ms per full query, a loop mode whose
//! lines come later the busier the device, as a loaded driver answers). The command
//! stamps its own first and last acts (`tests/fixtures/stamp_edges.c`); the energy a
//! run must report is the trace's integral over that lifetime, computed here from the
//! trace and the stamps alone, never from wattline's own figures (its window's edges
//! are only checked, against the stamps).
//!
//! Shapes: a triangle ramp, a square wave, a recorded-looking trace with steps and
//! noise. The claim: wattline's energy is the trace's over the command's life within
//! 0.5% for runs of 4 s or more, 1.5% at 1 s; through `nvidia-smi`, a trapezoid cannot
//! know where inside a reading interval a step fell, so on stepped shapes its bound
//! adds that sampling error, taken from the trace's steps. The life ends at the last
//! act and begins at the exec, which the command cannot stamp: between the two it was
//! on a processor or waiting for one (26 ms once under CI's load), and it says how long
//! that can have been at most (its CPU time and run-queue delay since its fork; 50 ms
//! where the kernel does not say). So a run passes when some life the command's own
//! figures allow makes the claim hold: its figure lies between the claim's lower edge
//! for the shortest life (first act to last) and its upper edge for the longest (begun
//! that much before the first act), the trace's power over that time counted on the
//! upper side only. As the trace's energy only grows with the interval, a run the
//! claim holds for cannot fail, whatever the wait was.
//!
//! These runs are timed against the wall clock: they run one at a time (`SERIAL`).

mod support;

use std::sync::Mutex;

use serde_json::Value;
use support::power_trace::{Gpu, PowerTrace, Run, Source, run_measured};

/// One run at a time: the edges of each window are timed.
static SERIAL: Mutex<()> = Mutex::new(());

const JOULES_PER_KWH: f64 = 3_600_000.0;

/// The relative bound a run of `seconds` is held to.
fn claimed_bound(seconds: f64) -> f64 {
    if seconds >= 4.0 { 0.005 } else { 0.015 }
}

/// How long before its first act the command's life may begin where the command
/// cannot say (the kernel gives no run-queue delay): the new process waiting for a
/// core, s. Also how far before it the report's `started_at` may lie, a coarse check:
/// that instant is worked out from two clock reads a loaded machine can pull
/// milliseconds apart, so the tight check of the opening is the energy's and the
/// coverage's, over the window itself. How far the window may open after the first act
/// (wattline taking the instant late), s.
const OPENED_BEFORE_SECONDS: f64 = 0.050;
const OPENED_AFTER_SECONDS: f64 = 0.010;
/// How late a run's window may close after the command's last act (its exit, and the
/// watching thread woken), s.
const CLOSED_AFTER_SECONDS: f64 = 0.025;
/// The window's wall-clock edges come from the monotonic clock, the stamps from the
/// wall clock: their agreement, s.
const CLOCKS_SECONDS: f64 = 0.001;

/// The longest a stand-in `nvidia-smi` loop takes at 100 ms (a busy device answers
/// up to 60% of a period late), s: the reading interval a step can fall in.
const SMI_LOOP_SECONDS: f64 = 0.16;

/// The longest the fake NVML's dense reads are apart without a counter (100 ms,
/// dithered by a quarter period either way), s: the reading interval a step can fall
/// in.
const NVML_DENSE_SECONDS: f64 = 0.125;

/// The longest the interval holding the command's start can be, s. Through NVML,
/// `run` reads power right before and right after the exec: two full device reads
/// (driver calls of up to 3.2 ms, one in 25 stalling 20 ms) and the spawn between.
/// Through `nvidia-smi` the reading before is the tool's latest answer, and the one
/// after is the stream's first, once the pipeline has spawned.
fn start_gap_seconds(source: Source) -> f64 {
    match source {
        Source::Nvml | Source::NvmlPowerOnly => 0.06,
        Source::NvidiaSmi => 0.2,
    }
}

/// The command's life as its own figures bound it, Unix seconds: it ends at its last
/// act and begins at its exec, at most its CPU time and run-queue delay since its fork
/// (or [`OPENED_BEFORE_SECONDS`]) before its first act. The new process may wait for a
/// core before its first act, and that wait is its life too.
#[derive(Debug, Clone, Copy)]
struct Life {
    earliest_start: f64,
    first_act: f64,
    last_act: f64,
}

impl Life {
    fn of(run: &Run) -> Life {
        Life {
            earliest_start: run.start - run.before_first_act.unwrap_or(OPENED_BEFORE_SECONDS),
            first_act: run.start,
            last_act: run.end,
        }
    }

    /// The shortest and the longest life, s.
    fn seconds(&self) -> (f64, f64) {
        (
            self.last_act - self.first_act,
            self.last_act - self.earliest_start,
        )
    }

    /// The trace's energy of `device` over the shortest and the longest life, J.
    fn joules(&self, trace: &PowerTrace, device: usize) -> (f64, f64) {
        (
            trace.joules(device, self.first_act, self.last_act),
            trace.joules(device, self.earliest_start, self.last_act),
        )
    }
}

/// Whether `measured` is within `relative` (and `absolute` more) of some value in
/// `low..=high`: of the figure for some life the stamps allow.
fn within(measured: f64, (low, high): (f64, f64), relative: f64, absolute: f64) -> bool {
    (1.0 - relative) * low - absolute <= measured && measured <= (1.0 + relative) * high + absolute
}

/// How far `measured` lies outside `low..=high`, relative to the nearer edge (0 inside).
fn outside(measured: f64, (low, high): (f64, f64)) -> f64 {
    if measured < low {
        (measured - low) / low
    } else if measured > high {
        (measured - high) / high
    } else {
        0.0
    }
}

/// The report's RFC 3339 instant `name`, Unix seconds.
fn unix_seconds(report: &serde_json::Value, name: &str) -> f64 {
    support::unix_seconds(&report[name])
}

/// Checks every device's energy against the trace's integral over the command's
/// lifetime, and its coverage against that lifetime, both ways.
fn check(gpu: &Gpu, run: &Run, method: &str) {
    let report = &run.report;
    let devices = report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{report}");
    let source = match gpu.source {
        Source::Nvml | Source::NvmlPowerOnly => "nvml",
        Source::NvidiaSmi => "nvidia-smi",
    };
    assert_eq!(report["gpu_source"], source, "{report}");
    let (opened, closed) = (
        unix_seconds(report, "started_at") - run.start,
        unix_seconds(report, "ended_at") - run.end,
    );
    eprintln!(
        "window edges: opened {:+.3} ms from the first stamp (the command lived at most \
         {:.3} ms before it), closed {:+.3} ms from the last",
        opened * 1e3,
        run.before_first_act.unwrap_or(f64::NAN) * 1e3,
        closed * 1e3
    );
    // The window is the command's life: it opens once the exec is done and closes at
    // the exit, and the stamps are the command's first and last acts. The new process
    // may wait for a core before its first act (the window opens first), or wattline
    // may before it takes the instant (the window opens a little late); it can only
    // close after the last act. Measured here: opened 8.6 ms before (the command had
    // lived up to 10.4 ms before its first act) to 3.3 ms after the first stamp,
    // closed 0.2 to 5 ms after the last.
    assert!(
        (-OPENED_BEFORE_SECONDS..=OPENED_AFTER_SECONDS).contains(&opened)
            && (-CLOCKS_SECONDS..=CLOSED_AFTER_SECONDS).contains(&closed),
        "the window opened {:+.3} ms from the first stamp and closed {:+.3} ms from the last",
        opened * 1e3,
        closed * 1e3
    );
    let life = Life::of(run);
    let seconds = life.seconds();
    let relative = claimed_bound(seconds.0);
    for (index, device) in devices.iter().enumerate() {
        let joules = device["energy_kwh"].as_f64().unwrap() * JOULES_PER_KWH;
        let expected = life.joules(&gpu.trace, index);
        // A step near the command's start, wherever the window opened: the opening
        // interval is interpolated.
        let mut absolute = 0.0;
        absolute += gpu.trace.start_edge_error(
            index,
            life.earliest_start,
            life.first_act + OPENED_AFTER_SECONDS,
            start_gap_seconds(gpu.source),
        );
        // A trapezoid cannot know where inside a reading interval a step fell.
        let reading_interval = match gpu.source {
            Source::Nvml => None,
            Source::NvmlPowerOnly => Some(NVML_DENSE_SECONDS),
            Source::NvidiaSmi => Some(SMI_LOOP_SECONDS),
        };
        if let Some(interval) = reading_interval {
            absolute +=
                gpu.trace
                    .step_sampling_error(index, life.earliest_start, life.last_act, interval);
        }
        let covered = device["covered_seconds"].as_f64().unwrap();
        eprintln!(
            "{source}, D = {:.3} s, device {index}: {joules:.3} J, the trace's {:.3} to {:.3} J \
             ({:+.3}% outside; bound {:.3}% + {absolute:.3} J), covered {covered:.3} s",
            seconds.0,
            expected.0,
            expected.1,
            outside(joules, expected) * 100.0,
            relative * 100.0,
        );
        assert!(
            within(joules, expected, relative, absolute),
            "device {index}: {joules} J against the trace's {} to {} J ({:+.3}% outside, bound \
             {:.3}% + {absolute} J): {device}",
            expected.0,
            expected.1,
            outside(joules, expected) * 100.0,
            relative * 100.0
        );
        // The window is the command's life: not shorter (an interval left out), not
        // longer (a window opened early or closed late) than the edges allow.
        assert!(
            within(covered, seconds, relative, 0.0),
            "covered {covered} s of a command that lived {} to {} s",
            seconds.0,
            seconds.1
        );
        assert_eq!(device["energy_source"], method, "{device}");
        assert_eq!(device["gaps"], 0, "{device}");
        // Every reading integrated is the instantaneous figure: both stand-ins answer
        // power usage and `power.draw` as the mean of the last second, as boards from
        // Ampere on do. Through `nvidia-smi`, a full answer newer than the stream's
        // last line is integrated too, with its own `power.draw.instant`.
        let instant_field = match gpu.source {
            Source::Nvml | Source::NvmlPowerOnly => "NVML_FI_DEV_POWER_INSTANT",
            Source::NvidiaSmi => "power.draw.instant",
        };
        assert_eq!(
            device["power_fields"],
            serde_json::json!([instant_field]),
            "{device}"
        );
    }
    let total = report["total"]["gpu_energy_kwh"].as_f64().unwrap();
    let sum: f64 = devices
        .iter()
        .map(|d| d["energy_kwh"].as_f64().unwrap())
        .sum();
    assert!((total - sum).abs() <= 1e-12 * total);
}

fn measure(source: Source, trace: PowerTrace, seconds: f64, extra: &[&str]) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = Gpu::new(source, trace);
    let run = run_measured(&gpu, seconds, extra);
    let method = match source {
        Source::Nvml => "counter",
        Source::NvmlPowerOnly | Source::NvidiaSmi => "dense_trapezoid",
    };
    check(&gpu, &run, method);
}

#[test]
fn ramp_one_second_through_nvml() {
    measure(Source::Nvml, PowerTrace::ramp(), 1.0, &[]);
}

#[test]
fn ramp_four_seconds_through_nvml() {
    measure(Source::Nvml, PowerTrace::ramp(), 4.0, &[]);
}

#[test]
fn square_wave_one_second_through_nvml() {
    measure(Source::Nvml, PowerTrace::square(), 1.0, &[]);
}

#[test]
fn square_wave_four_seconds_through_nvml_at_one_second_polls() {
    measure(
        Source::Nvml,
        PowerTrace::square(),
        4.0,
        &["--interval", "1000"],
    );
}

#[test]
fn irregular_trace_twelve_seconds_through_nvml() {
    measure(Source::Nvml, PowerTrace::irregular(), 12.0, &[]);
}

#[test]
fn irregular_trace_thirty_seconds_through_nvml_at_one_second_polls() {
    measure(
        Source::Nvml,
        PowerTrace::irregular(),
        30.0,
        &["--interval", "1000"],
    );
}

#[test]
fn square_wave_one_second_through_nvml_without_the_counter() {
    measure(Source::NvmlPowerOnly, PowerTrace::square(), 1.0, &[]);
}

#[test]
fn irregular_trace_twelve_seconds_through_nvml_without_the_counter() {
    measure(Source::NvmlPowerOnly, PowerTrace::irregular(), 12.0, &[]);
}

#[test]
fn ramp_one_second_through_nvidia_smi() {
    measure(Source::NvidiaSmi, PowerTrace::ramp(), 1.0, &[]);
}

#[test]
fn ramp_four_seconds_through_nvidia_smi() {
    measure(Source::NvidiaSmi, PowerTrace::ramp(), 4.0, &[]);
}

#[test]
fn square_wave_one_second_through_nvidia_smi() {
    measure(Source::NvidiaSmi, PowerTrace::square(), 1.0, &[]);
}

#[test]
fn square_wave_four_seconds_through_nvidia_smi_at_one_second_polls() {
    measure(
        Source::NvidiaSmi,
        PowerTrace::square(),
        4.0,
        &["--interval", "1000"],
    );
}

#[test]
fn irregular_trace_twelve_seconds_through_nvidia_smi() {
    measure(Source::NvidiaSmi, PowerTrace::irregular(), 12.0, &[]);
}

#[test]
fn irregular_trace_thirty_seconds_through_nvidia_smi_at_one_second_polls() {
    measure(
        Source::NvidiaSmi,
        PowerTrace::irregular(),
        30.0,
        &["--interval", "1000"],
    );
}

/// A process's energy on a device is its share of the trace's energy there.
fn assert_process_energy(run: &Run, trace: &PowerTrace, device: usize, pid: u32, share: f64) {
    let identifier = [
        "GPU-11111111-2222-3333-4444-555555555555",
        "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
    ][device];
    let processes = run.report["processes"].as_array().unwrap();
    let entry = processes
        .iter()
        .find(|p| p["process_id"] == pid && p["device_identifier"] == identifier)
        .unwrap_or_else(|| panic!("no process {pid} on device {device}: {processes:?}"));
    assert_eq!(entry["basis"], "memory");
    let joules = entry["gpu_energy_kwh"].as_f64().unwrap() * JOULES_PER_KWH;
    let (low, high) = Life::of(run).joules(trace, device);
    let expected = (share * low, share * high);
    eprintln!(
        "process {pid} on device {device}: {joules:.3} J, expected {:.3} to {:.3} J",
        expected.0, expected.1
    );
    if share == 0.0 {
        assert_eq!(joules, 0.0, "{entry}");
    } else {
        assert!(
            within(joules, expected, 0.01, 0.0),
            "process {pid} on device {device}: {joules} J, its share {share} of the trace is {} to {} J",
            expected.0,
            expected.1
        );
    }
}

#[test]
fn processes_get_their_share_of_the_energy_none_and_all_included() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Real processes in the run's (global) scope: wattline, this test, init. On
    // device 0 wattline holds 300 MiB and this test 900 MiB: a quarter and three
    // quarters. On device 1 init holds everything and this test holds 0 MiB.
    let test = std::process::id().to_string();
    let gpu = Gpu::new(Source::NvidiaSmi, PowerTrace::ramp()).with_processes(&[
        (0, "parent", 300),
        (0, &test, 900),
        (1, "1", 2048),
        (1, &test, 0),
    ]);
    let run = run_measured(&gpu, 4.0, &[]);
    let trace = &gpu.trace;
    assert_process_energy(&run, trace, 0, run.wattline_pid, 0.25);
    assert_process_energy(&run, trace, 0, std::process::id(), 0.75);
    assert_process_energy(&run, trace, 1, 1, 1.0);
    assert_process_energy(&run, trace, 1, std::process::id(), 0.0);
    // Device 1's energy all went to init: nothing is left unattributed.
    let device = &run.report["devices"][1];
    assert!(
        device["unattributed_kwh"].as_f64().unwrap().abs()
            <= 1e-9 * device["energy_kwh"].as_f64().unwrap(),
        "{device}"
    );
}

#[test]
fn with_no_process_on_a_device_all_of_its_energy_is_unattributed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let gpu = Gpu::new(Source::NvidiaSmi, PowerTrace::ramp()).with_processes(&[]);
    let run = run_measured(&gpu, 1.0, &[]);
    assert_eq!(
        run.report["processes"],
        serde_json::json!([]),
        "{}",
        run.report
    );
    for (index, device) in run.report["devices"].as_array().unwrap().iter().enumerate() {
        let expected = Life::of(&run).joules(&gpu.trace, index);
        let unattributed = device["unattributed_kwh"].as_f64().unwrap() * JOULES_PER_KWH;
        assert!(
            within(unattributed, expected, claimed_bound(1.0), 0.0),
            "{unattributed} J unattributed, the trace's {} to {} J: {device}",
            expected.0,
            expected.1
        );
        assert_eq!(device["attributed_kwh"], 0.0, "{device}");
    }
}

#[test]
fn with_no_gpu_the_report_says_why_and_its_figures_are_null() {
    let home = tempfile::tempdir().unwrap();
    let output = support::wattline(home.path())
        .args(["run", "--quiet", "--report", "json", "--", "true"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["total"]["gpu_energy_kwh"].is_null(), "{report}");
    assert!(report["total"]["cost"].is_null() || report["total"]["cpu_energy_kwh"].is_number());
    assert!(report["gpu_source"].is_null());
    let reason = report["gpu_unavailable"].as_str().unwrap();
    assert!(
        reason.contains("NVML library not found (libnvidia-ml.so.1)"),
        "{reason}"
    );
    assert!(reason.contains("nvidia-smi not on PATH"), "{reason}");
    // The table says it in words.
    let output = support::wattline(home.path())
        .args(["run", "--quiet", "--", "true"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stderr);
    assert!(table.contains("GPU source: none"), "{table}");
    assert!(
        table.contains("GPU energy not measured: NVML library not found (libnvidia-ml.so.1); nvidia-smi not on PATH"),
        "{table}"
    );
    // Diagnostics say it in sentences too, not as Rust Debug output.
    let output = support::wattline(home.path())
        .args(["diagnostics", "--compact"])
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let diagnostics: Value = serde_json::from_slice(&output.stdout).unwrap();
    let details: Vec<&str> = diagnostics["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|event| {
            event["code"]
                .as_str()
                .is_some_and(|c| c.starts_with("gpu."))
        })
        .filter_map(|event| event["detail"].as_str())
        .collect();
    assert!(
        details
            .iter()
            .any(|d| d.starts_with("NVML could not be loaded or started: ")),
        "{details:?}"
    );
    assert!(
        details.contains(&"nvidia-smi is not on the search path"),
        "{details:?}"
    );
    assert!(details.iter().all(|d| !d.contains(" { ")), "{details:?}");
}

#[test]
fn collect_waits_for_the_first_nvidia_smi_answer_and_shows_its_devices() {
    let gpu = Gpu::new(Source::NvidiaSmi, PowerTrace::ramp());
    let snapshot = support::json_stdout(gpu.command().args(["collect", "--compact"]));
    let devices = snapshot["gpu"]["device_metrics"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{}", snapshot["gpu"]);
    // Without any GPU backend the groups are empty, as the reference gives them.
    let home = tempfile::tempdir().unwrap();
    let snapshot = support::json_stdout(
        support::wattline(home.path())
            .args(["collect", "--compact"])
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env_remove("LD_LIBRARY_PATH"),
    );
    assert_eq!(
        snapshot["gpu"]["device_metrics"],
        serde_json::json!([]),
        "{}",
        snapshot["gpu"]
    );
    assert_eq!(snapshot["gpu"]["process_metrics"], serde_json::json!([]));
}

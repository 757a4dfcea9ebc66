//! Energy through the real binary from realistic sources: a stand-in `nvidia-smi` that
//! takes 350 ms per call and answers in the real CSV format, and the fake NVML library
//! whose energy counter advances in real time. A command of D seconds at constant
//! power P must report P·D within 2%, with at least 95% of the run covered.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const SMI_WATTS: [f64; 2] = [512.34, 71.02];
const NVML_WATTS: [f64; 2] = [123.456, 612.345];

/// A folder with an `nvidia-smi` that sleeps 350 ms, then answers for two devices
/// (and one compute process on the first); in loop mode it streams their power.
fn stand_in_smi() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("nvidia-smi");
    let script = format!(
        r#"#!/bin/sh
sleep 0.35
case "$*" in
  *--query-compute-apps*) echo "GPU-11111111-2222-3333-4444-555555555555, $PPID, 512" ;;
  *--loop-ms=*) while :; do printf '%s\n' \
"0, GPU-11111111-2222-3333-4444-555555555555, {0}" \
"1, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, {1}"; sleep 0.1; done ;;
  *--query-gpu*) printf '%s\n' \
"0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA H100 80GB HBM3, 97, 40, 40000, 81559, 71, {0}, 700.00, 1980, 2619, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0" \
"1, GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee, NVIDIA H100 80GB HBM3, 3, 1, 1000, 81559, 40, {1}, 700.00, 345, 2619, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0" ;;
  *) exit 4 ;;
esac
"#,
        SMI_WATTS[0], SMI_WATTS[1]
    );
    std::fs::write(&program, script).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The fake NVML built with a counter that advances at the device's power.
fn fake_nvml() -> tempfile::TempDir {
    support::fake_nvml(&["-DFAKE_ENERGY_ADVANCES"])
}

/// `PATH` without any real `nvidia-smi`, with `first` in front when given.
fn search_path(first: Option<&Path>) -> String {
    let system = "/usr/local/bin:/usr/bin:/bin";
    match first {
        Some(dir) => format!("{}:{system}", dir.display()),
        None => system.to_owned(),
    }
}

struct Run {
    report: Value,
    seconds: f64,
    /// The wattline process: the stand-in driver reports it as the compute process (a
    /// visible process, as a driver's processes are).
    wattline_pid: u32,
}

fn run_measured(
    seconds: u64,
    interval: Option<u64>,
    path: String,
    library: Option<PathBuf>,
) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wattline"));
    command.args(["run", "--quiet", "--report", "json"]);
    if let Some(interval) = interval {
        command.args(["--interval", &interval.to_string()]);
    }
    // The command stamps its own start and end, so the check is against how long it
    // really ran (a loaded machine stretches `sleep 1` by some milliseconds).
    let script = format!("date +%s.%N; sleep {seconds}; date +%s.%N");
    command
        .args(["--", "sh", "-c", &script])
        .env("PATH", path)
        .env_remove("GENAI_GPU_COLLECTION_INTERVAL")
        .env("HOME", "/nonexistent-wattline-home");
    match library {
        Some(dir) => command.env("LD_LIBRARY_PATH", dir),
        None => command.env_remove("LD_LIBRARY_PATH"),
    };
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let wattline_pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "wattline run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.splitn(3, '\n');
    let mut stamp = || lines.next().unwrap().trim().parse::<f64>().unwrap();
    let (start, end) = (stamp(), stamp());
    let report: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert!(end - start >= seconds as f64);
    Run {
        report,
        seconds: end - start,
        wattline_pid,
    }
}

fn check(run: &Run, watts: &[f64], method: &str, source: &str) {
    let devices = run.report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), watts.len(), "{}", run.report);
    assert_eq!(run.report["gpu_source"], source);
    let joules_per_kwh = 3_600_000.0;
    for (device, watts) in devices.iter().zip(watts) {
        let kwh = device["energy_kwh"].as_f64().unwrap();
        let expected = watts * run.seconds / joules_per_kwh;
        let error = (kwh - expected) / expected;
        let covered = device["covered_seconds"].as_f64().unwrap();
        eprintln!(
            "D = {} s via {source}: {:+.3}% energy error, covered {:.3} s",
            run.seconds,
            error * 100.0,
            covered
        );
        assert!(
            error.abs() < 0.02,
            "{kwh} kWh against {expected}: {}",
            run.report
        );
        assert!(
            covered >= 0.95 * run.seconds,
            "covered {covered} s of {}",
            run.seconds
        );
        assert_eq!(device["energy_source"], method);
        assert_eq!(device["gaps"], 0);
    }
    let total = run.report["total"]["gpu_energy_kwh"].as_f64().unwrap();
    let sum: f64 = devices
        .iter()
        .map(|d| d["energy_kwh"].as_f64().unwrap())
        .sum();
    assert!((total - sum).abs() < 1e-15);
}

fn through_nvidia_smi(seconds: u64, interval: Option<u64>) {
    let smi = stand_in_smi();
    let run = run_measured(seconds, interval, search_path(Some(smi.path())), None);
    check(&run, &SMI_WATTS, "dense_trapezoid", "nvidia-smi");
    // The compute process is attributed by its memory share: all of device 0.
    let process = &run.report["processes"][0];
    assert_eq!(process["process_id"], run.wattline_pid);
    assert_eq!(process["basis"], "memory");
    let device = &run.report["devices"][0];
    let attributed = process["gpu_energy_kwh"].as_f64().unwrap();
    let rest = device["unattributed_kwh"].as_f64().unwrap();
    assert!((attributed + rest - device["energy_kwh"].as_f64().unwrap()).abs() < 1e-15);
}

fn through_nvml(seconds: u64, interval: Option<u64>) {
    let nvml = fake_nvml();
    let run = run_measured(
        seconds,
        interval,
        search_path(None),
        Some(nvml.path().into()),
    );
    check(&run, &NVML_WATTS, "counter", "nvml");
}

#[test]
fn one_second_through_nvidia_smi() {
    through_nvidia_smi(1, None);
}

#[test]
fn four_seconds_through_nvidia_smi_at_one_second_polls() {
    through_nvidia_smi(4, Some(1000));
}

#[test]
fn twelve_seconds_through_nvidia_smi() {
    through_nvidia_smi(12, None);
}

#[test]
fn twelve_seconds_through_nvidia_smi_at_one_second_polls() {
    through_nvidia_smi(12, Some(1000));
}

#[test]
fn sixty_seconds_through_nvidia_smi() {
    through_nvidia_smi(60, None);
}

#[test]
fn one_second_through_nvml() {
    through_nvml(1, Some(1000));
}

#[test]
fn four_seconds_through_nvml() {
    through_nvml(4, None);
}

#[test]
fn twelve_seconds_through_nvml_at_one_second_polls() {
    through_nvml(12, Some(1000));
}

#[test]
fn sixty_seconds_through_nvml() {
    through_nvml(60, None);
}

#[test]
fn with_no_gpu_the_report_says_why_and_its_figures_are_null() {
    let run = run_measured(1, None, search_path(None), None);
    let report = &run.report;
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
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["run", "--quiet", "--", "true"])
        .env("PATH", search_path(None))
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stderr);
    assert!(table.contains("GPU source: none"), "{table}");
    // Diagnostics say it in sentences too, not as Rust Debug output.
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["diagnostics", "--compact"])
        .env("PATH", search_path(None))
        .env_remove("LD_LIBRARY_PATH")
        .env("HOME", "/nonexistent-wattline-home")
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
    assert!(
        table.contains("GPU energy not measured: NVML library not found (libnvidia-ml.so.1); nvidia-smi not on PATH"),
        "{table}"
    );
}

/// One `wattline collect` snapshot with `path` as the search path and no NVML.
fn collect(path: String) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["collect", "--compact"])
        .env("PATH", path)
        .env_remove("LD_LIBRARY_PATH")
        .env("HOME", "/nonexistent-wattline-home")
        .output()
        .unwrap();
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn collect_waits_for_the_first_nvidia_smi_answer_and_shows_its_devices() {
    let smi = stand_in_smi();
    let snapshot = collect(search_path(Some(smi.path())));
    let devices = snapshot["gpu"]["device_metrics"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{}", snapshot["gpu"]);
    // Without any GPU backend the groups are null: collection cannot start.
    let snapshot = collect(search_path(None));
    assert!(
        snapshot["gpu"]["device_metrics"].is_null(),
        "{}",
        snapshot["gpu"]
    );
    assert!(snapshot["gpu"]["process_metrics"].is_null());
}

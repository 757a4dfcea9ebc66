//! `wattline run` counts the GPUs the command can use: `--gpus`, then
//! `CUDA_VISIBLE_DEVICES`, then `NVIDIA_VISIBLE_DEVICES`, then the configuration's
//! `gpu.devices`; a MIG-enabled board's power is marked as the whole board's.
//! The real binary against the fake NVML (two devices: 0 an RTX 4090, 1 an H100).

mod support;

use serde_json::Value;
use support::{fake_nvml, wattline};

const RTX: &str = "GPU-11111111-2222-3333-4444-555555555555";
const H100: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

/// Runs `sleep 0.5` under `wattline run --report json` with the fake NVML, `extra`
/// arguments before `--` and `environment` set; returns the report.
fn run_report(library: &std::path::Path, extra: &[&str], environment: &[(&str, &str)]) -> Value {
    let home = tempfile::tempdir().unwrap();
    let mut command = wattline(home.path());
    command
        .env("LD_LIBRARY_PATH", library)
        .env("PATH", "/usr/bin:/bin")
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
        .args(["run", "--quiet", "--report", "json"])
        .args(extra)
        .args(["--", "sleep", "0.5"]);
    for (name, value) in environment {
        command.env(name, value);
    }
    support::json_stdout(&mut command)
}

fn counted(report: &Value) -> Vec<&str> {
    report["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|device| device["device_identifier"].as_str().unwrap())
        .collect()
}

#[test]
fn every_device_is_counted_when_nothing_narrows_the_choice() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let report = run_report(library.path(), &[], &[]);
    assert_eq!(counted(&report), [RTX, H100]);
    assert_eq!(report["gpu_selection"], Value::Null);
}

#[test]
fn cuda_visible_devices_as_the_command_sees_it_selects_by_index_or_uuid_prefix() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let report = run_report(library.path(), &[], &[("CUDA_VISIBLE_DEVICES", "1")]);
    assert_eq!(counted(&report), [H100]);
    assert_eq!(report["gpu_selection"]["origin"], "CUDA_VISIBLE_DEVICES");
    assert_eq!(report["gpu_selection"]["given"], "1");
    assert!(report["total"]["gpu_energy_kwh"].as_f64().unwrap() > 0.0);

    // CUDA's list ends at its first invalid entry; a UUID prefix names its device.
    let report = run_report(
        library.path(),
        &[],
        &[("CUDA_VISIBLE_DEVICES", "GPU-11111111,-1,1")],
    );
    assert_eq!(counted(&report), [RTX]);
}

#[test]
fn the_flag_wins_over_the_environment_and_none_counts_nothing() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let report = run_report(
        library.path(),
        &["--gpus", "none"],
        &[("CUDA_VISIBLE_DEVICES", "0,1")],
    );
    assert!(counted(&report).is_empty());
    assert_eq!(report["gpu_selection"]["origin"], "--gpus");
    assert_eq!(report["total"]["gpu_energy_kwh"], Value::Null);
    let reason = report["gpu_unavailable"].as_str().unwrap();
    assert!(
        reason.contains("no GPU is selected (--gpus none)"),
        "{reason}"
    );
}

#[test]
fn nvidia_visible_devices_applies_when_cuda_visible_devices_is_unset() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let report = run_report(library.path(), &[], &[("NVIDIA_VISIBLE_DEVICES", RTX)]);
    assert_eq!(counted(&report), [RTX]);
    assert_eq!(report["gpu_selection"]["origin"], "NVIDIA_VISIBLE_DEVICES");
    let report = run_report(library.path(), &[], &[("NVIDIA_VISIBLE_DEVICES", "void")]);
    assert!(counted(&report).is_empty());
}

#[test]
fn a_mig_instance_selects_its_board_and_the_report_marks_the_power_as_shared() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES", "-DFAKE_MIG"]);
    let report = run_report(
        library.path(),
        &[],
        &[(
            "CUDA_VISIBLE_DEVICES",
            "MIG-6d9acd01-8b5d-5b52-ac8f-3f4d2e3f4051",
        )],
    );
    assert_eq!(counted(&report), [H100]);
    assert_eq!(report["devices"][0]["shared_board_power"], true);

    // The table says so in words.
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .env("LD_LIBRARY_PATH", library.path())
        .env("PATH", "/usr/bin:/bin")
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
        .env(
            "CUDA_VISIBLE_DEVICES",
            "MIG-GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/1/0",
        )
        .args(["run", "--quiet", "--", "sleep", "0.3"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{table}");
    assert!(
        table.contains("MIG is on: whole-board power, shared by every MIG instance"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "GPUs counted: {H100} (selected by CUDA_VISIBLE_DEVICES=MIG-GPU-"
        )),
        "{table}"
    );
}

#[test]
fn a_board_without_mig_is_not_marked_shared() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let report = run_report(library.path(), &["--gpus", "1"], &[]);
    assert_eq!(counted(&report), [H100]);
    assert_eq!(report["devices"][0]["shared_board_power"], false);
}

#[test]
fn a_bad_gpus_entry_is_refused_before_the_command_starts() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started");
    let output = wattline(home.path())
        .args(["run", "--quiet", "--gpus", "0,gpu1", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--gpus: entry 2 \"gpu1\""), "{stderr}");
    assert!(!marker.exists(), "the command must not have run");
}

#[test]
fn the_configuration_selects_for_the_library_too() {
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let config = tempfile::tempdir().unwrap();
    std::fs::write(
        config.path().join("plugins.toml"),
        "version = 1\n\n[[components]]\nkind = \"resource_metrics\"\n\n[components.config.gpu]\ndevices = [\"0\"]\n",
    )
    .unwrap();
    let config_path = config.path().join("plugins.toml");
    let report = run_report(
        library.path(),
        &["--config", config_path.to_str().unwrap()],
        &[],
    );
    assert_eq!(counted(&report), [RTX]);
    assert_eq!(
        report["gpu_selection"]["origin"],
        "resource_metrics gpu.devices"
    );
}

//! Dense power sampling through the real binary: power follows a training loop's
//! rhythm (`PowerTrace::rhythm`: high for 1.25 s, a quarter of it for 1.25 s), a period
//! that divides the 5 s collection interval, so sampling only at that interval lands on
//! the same phase every time. Expected energy is the trace's integral over the
//! command's own lifetime.

mod support;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use support::fake_nvml;
use support::power_trace::{Gpu as TraceGpu, PowerTrace, Run, Source, run_measured};

/// What a run reads GPUs from: a fake NVML library, or a stand-in `nvidia-smi` folder.
enum Gpu<'a> {
    Nvml(&'a Path),
    Smi(&'a Path),
}

/// `wattline run --report json [extra] -- sleep SECONDS` with only `gpu` to read.
fn run_on(gpu: Gpu<'_>, extra: &[&str], seconds: u32) -> Value {
    let system_path = "/usr/local/bin:/usr/bin:/bin";
    let mut command = Command::new(env!("CARGO_BIN_EXE_wattline"));
    command
        .args(["run", "--quiet", "--report", "json"])
        .args(extra)
        .args(["--", "sleep", &seconds.to_string()])
        .env("HOME", "/nonexistent-wattline-home")
        .env_remove("GENAI_GPU_COLLECTION_INTERVAL");
    match gpu {
        Gpu::Nvml(library) => command
            .env("PATH", system_path)
            .env("LD_LIBRARY_PATH", library),
        Gpu::Smi(folder) => command
            .env("PATH", format!("{}:{system_path}", folder.display()))
            .env_remove("LD_LIBRARY_PATH"),
    };
    support::json_stdout(&mut command)
}

fn run(library: &Path, extra: &[&str], seconds: u32) -> Value {
    run_on(Gpu::Nvml(library), extra, seconds)
}

/// Relative error of each device's energy against the trace's integral over the
/// command's own lifetime (its own stamps), with the bound a trapezoid over
/// `interval`-second readings is held to on the trace's steps.
fn energy_errors(stand_in: &TraceGpu, run: &Run, interval: f64) -> Vec<(f64, f64)> {
    let devices = run.report["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2, "{}", run.report);
    devices
        .iter()
        .enumerate()
        .map(|(index, device)| {
            let truth = stand_in.trace.joules(index, run.start, run.end);
            let joules = device["energy_kwh"].as_f64().unwrap() * 3_600_000.0;
            let bound = 0.005
                + stand_in
                    .trace
                    .step_sampling_error(index, run.start, run.end, interval)
                    / truth;
            ((joules - truth) / truth, bound)
        })
        .collect()
}

/// The dense power thread reads NVML at most about 125 ms apart (100 ms, dithered).
const NVML_DENSE_SECONDS: f64 = 0.125;

#[test]
fn a_rhythmic_load_is_followed_densely_and_sparse_sampling_is_shown_to_alias() {
    // A driver without the energy counter: the trapezoid is all there is.
    let dense_gpu = TraceGpu::new(Source::NvmlPowerOnly, PowerTrace::rhythm());
    let dense = run_measured(&dense_gpu, 30.0, &[]);
    for ((error, bound), device) in energy_errors(&dense_gpu, &dense, NVML_DENSE_SECONDS)
        .into_iter()
        .zip(dense.report["devices"].as_array().unwrap())
    {
        eprintln!(
            "rhythmic load, 30 s, dense: {:+.3}% (bound {:.3}%)",
            error * 100.0,
            bound * 100.0
        );
        assert!(error.abs() <= bound, "{error} against {bound}: {device}");
        assert_eq!(device["energy_source"], "dense_trapezoid");
        assert!(device["readings"].as_u64().unwrap() >= 150, "{device}");
        assert!(
            device["sampling_rate_hz"].as_f64().unwrap() >= 5.0,
            "{device}"
        );
    }
    // Sampled only every 60 s (plus the polls and the energy clock at 5 s, which the
    // 2.5 s rhythm divides): every reading lands on one phase. The fixture must show
    // it: off by more than 20%, labelled sparse.
    let sparse_gpu = TraceGpu::new(Source::NvmlPowerOnly, PowerTrace::rhythm());
    let file = sparse_gpu.stand_in.path().join("plugins.toml");
    std::fs::write(
        &file,
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\npower_sample_millis = 60000\n",
    )
    .unwrap();
    let sparse = run_measured(&sparse_gpu, 30.0, &["--config", file.to_str().unwrap()]);
    for ((error, _), device) in energy_errors(&sparse_gpu, &sparse, NVML_DENSE_SECONDS)
        .into_iter()
        .zip(sparse.report["devices"].as_array().unwrap())
    {
        eprintln!("rhythmic load, 30 s, sparse: {:+.3}%", error * 100.0);
        assert!(
            error.abs() > 0.20,
            "sparse sampling came out at {error}: {device}"
        );
        assert_eq!(device["energy_source"], "sparse_trapezoid");
    }
}

#[test]
fn the_counter_follows_the_rhythm_exactly_and_stays_the_primary_figure() {
    let gpu = TraceGpu::new(Source::Nvml, PowerTrace::rhythm());
    let run = run_measured(&gpu, 10.0, &[]);
    for ((error, _), device) in energy_errors(&gpu, &run, 0.0)
        .into_iter()
        .zip(run.report["devices"].as_array().unwrap())
    {
        eprintln!("rhythmic load, 10 s, counter: {:+.3}%", error * 100.0);
        assert_eq!(device["energy_source"], "counter");
        assert!(error.abs() <= 0.005, "{error}: {device}");
    }
}

#[test]
fn gauges_keep_the_collection_cadence_while_power_is_read_densely() {
    let nvml = fake_nvml(&[]);
    let directory = tempfile::tempdir().unwrap();
    let report = run(
        nvml.path(),
        &["--atof", directory.path().to_str().unwrap()],
        3,
    );
    let readings = report["devices"][0]["readings"].as_u64().unwrap();
    assert!(readings >= 15, "dense readings: {readings}");
    let file = std::fs::read_dir(directory.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    let power_points = text
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["name"] == "wattline.metrics")
        .flat_map(|event| {
            event["data"]["measurements"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|m| {
            m["name"] == "gen_ai.gpu.power"
                && m["attributes"]["gpu_name"] == "NVIDIA GeForce RTX 4090"
        })
        .count();
    // The first poll, the energy clock's first tick, the final reading: a handful,
    // not one per dense reading.
    assert!(
        power_points <= 5,
        "{power_points} gauge points for {readings} readings"
    );
    assert!(power_points >= 1);
}

/// A folder with the loop-mode stand-in `nvidia-smi` (`mode`: see the script), its
/// rhythm's phase counted from now.
fn stand_in_smi(mode: &str) -> support::StandIn {
    let stand_in = support::StandIn::new();
    stand_in.install_smi_fixture("loop_rhythm.py");
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    std::fs::write(stand_in.path().join("epoch"), format!("{epoch}")).unwrap();
    std::fs::write(stand_in.path().join("mode"), mode).unwrap();
    stand_in
}

fn run_with_smi(smi: &Path, seconds: u32) -> Value {
    run_on(Gpu::Smi(smi), &[], seconds)
}

#[test]
fn a_rhythmic_load_through_the_nvidia_smi_stream_is_followed() {
    let gpu = TraceGpu::new(Source::NvidiaSmi, PowerTrace::rhythm());
    let run = run_measured(&gpu, 30.0, &[]);
    for ((error, bound), device) in energy_errors(&gpu, &run, 0.16)
        .into_iter()
        .zip(run.report["devices"].as_array().unwrap())
    {
        eprintln!(
            "nvidia-smi stream, rhythmic load, 30 s: {:+.3}% (bound {:.3}%)",
            error * 100.0,
            bound * 100.0
        );
        assert!(error.abs() <= bound, "{error} against {bound}: {device}");
        assert_eq!(device["energy_source"], "dense_trapezoid");
        // The stream's field; a full answer newer than the stream's last line counts
        // too, with the same field.
        assert_eq!(
            device["power_fields"],
            serde_json::json!(["power.draw.instant"]),
            "{device}"
        );
        assert!(
            device["sampling_rate_hz"].as_f64().unwrap() >= 5.0,
            "{device}"
        );
        assert_eq!(device["gaps"], 0);
    }
}

#[test]
fn an_older_driver_streams_power_draw_and_the_report_names_it() {
    let smi = stand_in_smi("old");
    let report = run_with_smi(smi.path(), 3);
    for device in report["devices"].as_array().unwrap() {
        assert_eq!(device["power_fields"], serde_json::json!(["power.draw"]));
        assert_eq!(device["energy_source"], "dense_trapezoid");
    }
}

#[test]
fn nvidia_smi_gauges_keep_their_cadence_and_the_dense_energy_reaches_the_metrics() {
    let smi = stand_in_smi("normal");
    let directory = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["run", "--quiet", "--report", "json", "--atof"])
        .arg(directory.path())
        .args(["--", "sleep", "6"])
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", smi.path().display()),
        )
        .env_remove("LD_LIBRARY_PATH")
        .env("HOME", "/nonexistent-wattline-home")
        .env_remove("GENAI_GPU_COLLECTION_INTERVAL")
        .output()
        .unwrap();
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let file = std::fs::read_dir(directory.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let measurements: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["name"] == "wattline.metrics")
        .flat_map(|event| {
            event["data"]["measurements"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    // gen_ai.* series name a device by its index (the reference's `gpu_id`),
    // wattline.* ones also by its UUID.
    let device = "GPU-11111111-2222-3333-4444-555555555555";
    let of = |name: &str| {
        measurements
            .iter()
            .filter(|m| {
                m["name"] == name
                    && (m["attributes"]["gpu_uuid"] == device
                        || (m["attributes"]["gpu_uuid"].is_null()
                            && m["attributes"]["gpu_id"] == "0"))
            })
            .map(|m| m["value"].as_f64().unwrap())
            .collect::<Vec<f64>>()
    };
    // The first answer, the periodic run at 5 s and the final one: each new full
    // answer's gauges once, though a dense reading always overtakes it.
    let temperatures = of("gen_ai.gpu.temperature").len();
    assert!(
        (2..=4).contains(&temperatures),
        "{temperatures} temperature points"
    );
    // Every dense interval's energy goes out with the gauges: the file's sum covers
    // the report's window (and a little before and after it).
    let exported: f64 = of("wattline.energy.consumed").iter().sum();
    let reported = report["devices"][0]["energy_kwh"].as_f64().unwrap();
    assert!(
        exported >= reported * 0.99 && exported <= reported * 1.1,
        "{exported} kWh exported, {reported} kWh reported"
    );
    // The spec's series: every device's trapezoid under `component = gpu` (beside
    // RAPL's `cpu` and `ram` where this host reads them); with no counter here it is
    // the report's figure too.
    let spec: f64 = measurements
        .iter()
        .filter(|m| m["name"] == "gen_ai.energy.consumed" && m["attributes"]["component"] == "gpu")
        .map(|m| m["value"].as_f64().unwrap())
        .sum();
    let total = report["total"]["gpu_energy_kwh"].as_f64().unwrap();
    assert!(
        spec >= total * 0.99 && spec <= total * 1.1,
        "{spec} kWh in gen_ai.energy.consumed, {total} kWh reported"
    );
}

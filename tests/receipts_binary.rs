//! A slice of the receipts' simulated truth through the `wattline` binary: the same
//! 1 ms GPU power traces `energy/tests/receipts.rs` draws, served live by a stand-in
//! `nvidia-smi` (its loop mode prints the trace's power at the moment it prints, in the
//! real CSV format), while `wattline run` measures `examples/agent_step.rs` and its
//! steps. Each step's window and the run's total must hold the trace's own energy over
//! the times the report gives, as often as 95% intervals should.

mod support;

#[allow(dead_code)]
#[path = "../energy/tests/support/power_simulation.rs"]
mod power_simulation;

use std::time::{SystemTime, UNIX_EPOCH};

use power_simulation::{Rng, TruePower};
use support::{StandIn, unix_seconds, wattline};

/// A stand-in `nvidia-smi` serving the trace in `$WATTLINE_TRACE` (its first line the
/// Unix time of the trace's start, then one power figure per millisecond): the device
/// list, one full query answer, and loop mode every 100 ms, each figure the trace's at
/// the moment it is printed.
const TRACE_NVIDIA_SMI: &str = r#"#!/usr/bin/env python3
import os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "pids"), "a") as pids:
    pids.write(f"{os.getpid()}\n")
with open(os.environ["WATTLINE_TRACE"]) as trace:
    start = float(trace.readline())
    watts = [float(line) for line in trace]
uuid = "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
def now():
    index = int((time.time() - start) * 1000)
    return watts[min(max(index, 0), len(watts) - 1)]
arguments = " ".join(sys.argv[1:])
if "-L" in sys.argv[1:]:
    print(f"GPU 0: NVIDIA H200 (UUID: {uuid})")
elif "--loop-ms=" in arguments:
    while True:
        print(f"0, {uuid}, {now():.2f}", flush=True)
        time.sleep(0.1 - time.time() % 0.1)
else:
    power = now()
    print(f"0, {uuid}, NVIDIA H200, 7, 3, 1377, 143771, 46, {power:.2f}, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, {power:.2f}")
"#;

/// Runs `agent_step --weighted` under `wattline run` while the stand-in serves a trace
/// drawn from `seed`; each step's and the run's (truth, receipt low, receipt high), J.
fn run_on_a_simulated_gpu(seed: u64) -> Vec<(String, f64, f64, f64)> {
    let mut rng = Rng::new(seed);
    let truth = TruePower::generate(&mut rng, 12.0);
    let home = tempfile::tempdir().unwrap();
    let bin = StandIn::new();
    bin.install("nvidia-smi", TRACE_NVIDIA_SMI);
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut text = format!("{start}\n");
    for ms in 0..(truth.seconds() * 1000.0) as usize {
        text.push_str(&format!("{:.3}\n", truth.watts_at(ms as f64 / 1000.0)));
    }
    let trace = home.path().join("trace");
    std::fs::write(&trace, text).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = wattline(home.path())
        .env("PATH", path)
        .env("WATTLINE_TRACE", &trace)
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.1")
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--report",
            "json",
            "--",
        ])
        .arg(support::example("agent_step"))
        .arg("--weighted")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find("{\n").expect("a JSON report")..]).unwrap();
    assert_eq!(report["gpu_source"], "nvidia-smi", "{report}");
    let joules = |kwh: &serde_json::Value| kwh.as_f64().unwrap() * 3.6e6;
    let true_joules = |from: &serde_json::Value, to: &serde_json::Value| {
        truth.energy(unix_seconds(from) - start, unix_seconds(to) - start)
    };
    let mut checked = Vec::new();
    for step in report["agent_scopes"].as_array().unwrap() {
        let receipt = &step["receipt"];
        checked.push((
            step["name"].as_str().unwrap().to_owned(),
            true_joules(&step["started_at"], &step["ended_at"]),
            joules(&receipt["low_kwh"]),
            joules(&receipt["high_kwh"]),
        ));
    }
    let total = &report["total"]["receipt"];
    checked.push((
        "run".to_owned(),
        true_joules(&report["started_at"], &report["ended_at"]),
        joules(&total["low_kwh"]),
        joules(&total["high_kwh"]),
    ));
    checked
}

#[test]
fn through_the_binary_the_intervals_hold_the_traces_energy() {
    let mut held = 0;
    let mut all = Vec::new();
    for seed in 0..5 {
        for (name, truth, low, high) in run_on_a_simulated_gpu(seed * 104_729 + 17) {
            held += usize::from(low <= truth && truth <= high);
            all.push(format!("{name}: {truth:.1} J in [{low:.1}, {high:.1}]"));
        }
    }
    // Five runs of four steps and a total: intervals that hold the truth 95% of the
    // time hold at least 19 of 25 (fewer, about once in five thousand runs of this
    // test).
    assert_eq!(all.len(), 25, "{all:#?}");
    eprintln!("{held} of 25 held:\n{}", all.join("\n"));
    assert!(held >= 19, "{held} of 25 held:\n{all:#?}");
}

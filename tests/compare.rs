//! `wattline compare` on two real runs: the same agent program (`examples/agent_step`,
//! which marks a `planner` step over the host endpoint) measured twice, under stand-in
//! `nvidia-smi`s drawing 100 W and then 300 W. One run is saved as a JSON report, the
//! other as an ATOF file, as a CI job would keep them. Expected figures come from the
//! two runs' own reports (compare's input) and from the stand-ins' power.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::wattline;

/// Runs `agent_step` under a GPU drawing `watts`: the JSON report it printed, and the
/// ATOF file when `atof` names a folder.
fn measured_run(home: &Path, watts: f64, atof: Option<&Path>) -> Value {
    let script = support::FAKE_NVIDIA_SMI.replace("250.00", &format!("{watts:.2}"));
    let (_bin, path) = support::path_with_nvidia_smi(&script);
    let mut command = wattline(home);
    command
        .env("PATH", path)
        .args(["run", "--quiet", "--interval", "100", "--report", "json"]);
    if let Some(folder) = atof {
        command.arg("--atof").arg(folder);
    }
    command.arg("--").arg(support::example("agent_step"));
    let output = support::succeeded(&mut command);
    let stdout = String::from_utf8(output.stdout).unwrap();
    // The program's own line comes first on stdout, then the report.
    let report_start = stdout.find("{\n").expect("a JSON report on stdout");
    serde_json::from_str(&stdout[report_start..]).unwrap()
}

fn atof_file(folder: &Path) -> PathBuf {
    std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("an ATOF file")
}

fn planner(report: &Value) -> &Value {
    let scopes = report["agent_scopes"].as_array().unwrap();
    let planners: Vec<&Value> = scopes
        .iter()
        .filter(|scope| scope["name"] == "planner")
        .collect();
    assert_eq!(planners.len(), 1, "{scopes:#?}");
    planners[0]
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

fn close(actual: &Value, expected: f64) {
    let actual = number(actual);
    assert!(
        (actual - expected).abs() <= expected.abs() * 1e-9,
        "{actual} != {expected}"
    );
}

fn seconds(scope: &Value) -> f64 {
    let time = |field: &str| {
        scope[field]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    (time("ended_at") - time("started_at"))
        .num_nanoseconds()
        .unwrap() as f64
        / 1e9
}

#[test]
fn two_runs_at_different_power_compare_by_part_and_gate_on_growth() {
    let home = tempfile::tempdir().unwrap();
    let base_report = measured_run(home.path(), 100.0, None);
    let base = home.path().join("base.json");
    std::fs::write(&base, serde_json::to_string_pretty(&base_report).unwrap()).unwrap();
    let atof = home.path().join("runs");
    let new_report = measured_run(home.path(), 300.0, Some(&atof));
    let new = atof_file(&atof);

    let compare = |extra: &[&str]| {
        let mut command = wattline(home.path());
        command.arg("compare").arg(&base).arg(&new).args(extra);
        command.output().unwrap()
    };
    let output = compare(&["--report", "json"]);
    assert!(output.status.success(), "{output:?}");
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();

    // The run: each side is its report's total, and the change their difference.
    let run = support::comparison_row(&comparison, "run", "run");
    let (base_kwh, new_kwh) = (
        number(&base_report["total"]["energy_kwh"]),
        number(&new_report["total"]["energy_kwh"]),
    );
    close(&run["energy_kwh"]["base"], base_kwh);
    close(&run["energy_kwh"]["new"], new_kwh);
    close(&run["energy_kwh"]["change"], new_kwh - base_kwh);
    close(
        &run["energy_kwh"]["change_percent"],
        (new_kwh - base_kwh) / base_kwh * 100.0,
    );
    close(&run["cost"]["new"], number(&new_report["total"]["cost"]));

    // The planner step: its attributed energy in each run, and it is the stand-in's
    // power times the step's length (the only step, on a constant-power device).
    let step = support::comparison_row(&comparison, "agent_scope", "planner");
    assert_eq!(
        (step["base_count"].as_u64(), step["new_count"].as_u64()),
        (Some(1), Some(1))
    );
    for (side, report, watts) in [("base", &base_report, 100.0), ("new", &new_report, 300.0)] {
        let scope = planner(report);
        close(
            &step["energy_kwh"][side],
            number(&scope["attributed_energy_kwh"]),
        );
        let joules = number(&step["energy_kwh"][side]) * 3_600_000.0;
        let expected = watts * seconds(scope);
        assert!(
            (joules - expected).abs() <= expected * 0.02,
            "{side}: {joules} J for {} s at {watts} W",
            seconds(scope)
        );
    }
    // The device matched by its identifier, the GPU domain by name.
    support::comparison_row(
        &comparison,
        "device",
        "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c",
    );
    support::comparison_row(&comparison, "domain", "gpu");

    // Three times the power: energy grew about 200%, so a 150% gate fails and names
    // what grew, and a 500% gate passes.
    let gated = compare(&["--fail-above", "150"]);
    assert_eq!(gated.status.code(), Some(1), "{gated:?}");
    let stderr = String::from_utf8_lossy(&gated.stderr);
    assert!(stderr.contains("\n  run: "), "{stderr}");
    assert!(stderr.contains("step planner:"), "{stderr}");
    let table = String::from_utf8_lossy(&gated.stdout);
    assert!(table.contains("step planner"), "{table}");
    let page = home.path().join("compare.html");
    let passed = compare(&["--fail-above", "500", "--html", page.to_str().unwrap()]);
    assert!(passed.status.success(), "{passed:?}");
    let page = std::fs::read_to_string(page).unwrap();
    assert!(
        page.contains("planner") && page.contains("<table>"),
        "{page}"
    );
}

#[test]
fn a_file_that_is_not_a_report_is_named_with_what_was_wrong() {
    let home = tempfile::tempdir().unwrap();
    let broken = home.path().join("broken.json");
    std::fs::write(&broken, r#"{"started_at": "yesterday"}"#).unwrap();
    let output = wattline(home.path())
        .arg("compare")
        .arg(&broken)
        .arg(&broken)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("broken.json"), "{stderr}");
    assert!(stderr.contains("started_at"), "{stderr}");
    assert!(output.stdout.is_empty());

    let output = wattline(home.path())
        .args(["compare", "a.json", "b.json", "--fail-above", "-5"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("-5"));
}

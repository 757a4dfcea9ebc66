//! Exporter outcomes in the report: what each exporter exported, dropped and failed,
//! with its last error; `run` says loudly when data were lost, exits with the command's
//! code, and with `--strict` exits 3 instead.

mod support;

use support::wattline;

/// A collector address nothing listens on (the discard port on loopback).
const NOWHERE: &str = "http://127.0.0.1:9/v1/metrics";

fn run(extra: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--report",
            "json",
            "--otlp",
            NOWHERE,
        ])
        .args(extra)
        .args(["--", "sh", "-c", "sleep 0.3; exit 4"])
        .output()
        .unwrap()
}

#[test]
fn a_collector_that_is_not_there_is_reported_as_lost_data() {
    let output = run(&[]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "the command's exit code stands"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("wattline: DATA LOST by exporter opentelemetry:"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let exporter = report["exporters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|exporter| exporter["name"] == "opentelemetry")
        .expect("the OTLP exporter's outcome");
    assert!(exporter["failed"].as_u64().unwrap() >= 1, "{exporter}");
    assert!(
        exporter["last_error"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1:9"),
        "the last error names the endpoint: {exporter}"
    );
}

#[test]
fn strict_exits_3_when_data_were_lost_and_the_command_code_otherwise() {
    assert_eq!(run(&["--strict"]).status.code(), Some(3));
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("runs");
    let clean = wattline(home.path())
        .args(["run", "--quiet", "--strict", "--report", "json", "--atof"])
        .arg(&atof)
        .args(["--", "sh", "-c", "exit 4"])
        .output()
        .unwrap();
    assert_eq!(
        clean.status.code(),
        Some(4),
        "nothing lost: the command's code"
    );
    let report: serde_json::Value = serde_json::from_slice(&clean.stdout).unwrap();
    let exporter = &report["exporters"][0];
    assert_eq!(exporter["name"], "atof");
    assert!(exporter["exported"].as_u64().unwrap() >= 2, "{exporter}");
    assert_eq!(
        (exporter["dropped"].as_u64(), exporter["failed"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(exporter["last_error"].is_null());
}

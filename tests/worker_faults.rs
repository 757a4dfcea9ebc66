//! Worker plugins that misbehave never stop the pipeline: one that starts but never
//! binds its socket is given up on after the host's wait, recorded as
//! `pipeline.worker_failed`, and the run goes on sampling and reports.

mod support;

use support::wattline;

#[test]
fn a_worker_that_never_binds_is_recorded_and_sampling_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("runs");
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "never.binds"
command = ["sleep", "60"]
"#,
    )
    .unwrap();
    let output = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--interval",
            "200",
            "--report",
            "json",
            "--config",
        ])
        .arg(&config)
        .arg("--atof")
        .arg(&atof)
        .args(["--", "sleep", "1"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the command's run is unaffected: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let diagnostics = &report["diagnostics"];
    assert_eq!(support::workers_failed(diagnostics), 1);
    let detail = support::details(diagnostics)
        .into_iter()
        .find(|detail| detail.contains("never.binds"))
        .expect("the failure names the worker");
    assert!(detail.contains("did not listen"), "{detail}");

    // The pipeline sampled all along: resource marks every poll while the host waited.
    let file = std::fs::read_dir(&atof)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .unwrap();
    let marks = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|line| line.contains("\"name\":\"nemo.relay.resource_metrics\""))
        .count();
    assert!(marks >= 10, "{marks} resource marks");
}

#[test]
fn a_tcp_worker_announcing_another_machine_is_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "far.away"
command = ["sh", "-c", "printf http://192.0.2.7:4000 > \"$NEMO_RELAY_WORKER_ENDPOINT_FILE\"; sleep 30"]
transport = "tcp"
"#,
    )
    .unwrap();
    let diagnostics = support::json_stdout(
        wattline(home.path())
            .args(["diagnostics", "--compact", "--config"])
            .arg(&config),
    );
    let detail = support::details(&diagnostics)
        .into_iter()
        .find(|detail| detail.contains("far.away"))
        .expect("the failure names the worker");
    assert_eq!(support::workers_failed(&diagnostics), 1);
    assert!(detail.contains("http://192.0.2.7:4000"), "{detail}");
    assert!(detail.contains("not a loopback address"), "{detail}");
}

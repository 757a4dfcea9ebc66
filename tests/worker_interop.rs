//! A worker plugin written against the reference system's published Python worker SDK
//! (`nemo-relay-plugin` 0.11.0rc3), run unmodified: wattline starts it with the
//! reference's environment contract, registers it over its socket, and its
//! observations land in wattline's diagnostics context; at shutdown it closes its
//! session and exits.

mod support;

use std::path::Path;

use support::{component, details};

use wattline::diagnostics::{Diagnostics, DiagnosticsLimits};
use wattline::host::HostEndpoint;
use wattline::host::worker::{HostAddress, RunningWorker, WorkerSpec, new_credentials};

/// The worker written against the reference SDK.
fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/python_worker.py")
}

fn spec(python: &str) -> WorkerSpec {
    let script = script();
    WorkerSpec {
        plugin_id: "acme.diag".into(),
        command: vec![python.into(), script.display().to_string()],
        env: Default::default(),
        config: serde_json::json!({"backend": "primary"}),
        log_file: None,
        transport: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_python_worker_sdk_reports_into_wattline_unmodified() {
    let Some(python) = support::worker_sdk_python() else {
        return;
    };
    let context = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let spec = spec(&python);
    let credentials = new_credentials(&spec.plugin_id);
    let endpoint = HostEndpoint::start(context.clone(), vec![credentials.clone()], None)
        .expect("the endpoint starts");
    // Register returns once the plugin's register (which flushes) has finished.
    let worker = RunningWorker::start(
        &spec,
        credentials,
        endpoint.directory(),
        HostAddress::Unix(endpoint.socket_path()),
    )
    .await
    .expect("the worker starts and registers");

    let snapshot = context.snapshot().unwrap();
    let component = snapshot
        .components
        .iter()
        .find(|component| component.name == "worker.acme_diag.probe")
        .unwrap_or_else(|| panic!("no worker component in {:?}", snapshot.components));
    let counts: Vec<(&str, u64)> = component
        .codes
        .iter()
        .map(|code| (code.code.as_str(), code.occurrences))
        .collect();
    assert_eq!(counts, vec![("probe.started", 1), ("plugin.timeout", 2)]);
    let details: Vec<&str> = snapshot
        .recent_events
        .iter()
        .filter_map(|event| event.detail.as_deref())
        .collect();
    assert!(details.contains(&"hello from python"), "{details:?}");
    assert!(
        details
            .iter()
            .any(|detail| detail.contains("backend slow") && detail.contains("primary")),
        "the plugin got its config: {details:?}"
    );

    // Shutdown: the SDK closes its session (the component closes with it) and exits.
    worker.stop().await;
    let snapshot = context.snapshot().unwrap();
    let component = snapshot
        .components
        .iter()
        .find(|component| component.name == "worker.acme_diag.probe")
        .unwrap();
    assert_eq!(
        serde_json::to_value(component.state).unwrap(),
        serde_json::json!("closed")
    );
    let directory = endpoint.directory().to_path_buf();
    endpoint.shutdown().await;
    assert!(!directory.exists());
}

#[test]
fn a_worker_plugin_from_plugins_toml_reports_and_a_broken_one_is_recorded() {
    let Some(python) = support::worker_sdk_python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let script = script();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            r#"version = 1

[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.diag"
command = ["{python}", "{script}"]
[components.config.config]
backend = "from-toml"

[[components]]
kind = "worker"
[components.config]
plugin_id = "never.starts"
command = ["/nonexistent/worker-binary"]

[[components]]
kind = "worker"
[components.config]
plugin_id = "exits.at.once"
command = ["sh", "-c", "exit 3"]
"#,
            script = script.display()
        ),
    )
    .unwrap();
    let output = support::wattline(home.path())
        .args(["diagnostics", "--compact", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the pipeline goes on: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let diagnostics: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let worker = component(&diagnostics, "worker.acme_diag.probe");
    assert_eq!(worker["codes"][0]["occurrences"], 1);
    let details = details(&diagnostics);
    assert!(
        details.iter().any(|detail| detail.contains("from-toml")),
        "the plugin got its config table: {details:?}"
    );
    let failures: Vec<&&str> = details
        .iter()
        .filter(|detail| detail.contains("never.starts") || detail.contains("exits.at.once"))
        .collect();
    assert_eq!(failures.len(), 2, "{details:?}");
    assert_eq!(support::workers_failed(&diagnostics), 2);
}

#[test]
fn the_reference_python_worker_reports_over_loopback_tcp() {
    let Some(python) = support::worker_sdk_python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.diag"
command = ["{python}", "{script}"]
transport = "tcp"
[components.config.config]
backend = "over-tcp"
"#,
            script = script().display()
        ),
    )
    .unwrap();
    let diagnostics = support::json_stdout(
        support::wattline(home.path())
            .args(["diagnostics", "--compact", "--config"])
            .arg(&config),
    );
    // Registered over TCP (its announced port), recorded over the host's TCP port.
    let worker = component(&diagnostics, "worker.acme_diag.probe");
    assert_eq!(worker["codes"][0]["occurrences"], 1);
    assert!(
        details(&diagnostics)
            .iter()
            .any(|detail| detail.contains("over-tcp")),
        "{diagnostics}"
    );
    assert_eq!(support::workers_failed(&diagnostics), 0);
}

#[test]
fn a_worker_that_dies_mid_session_is_recorded_and_its_observations_kept() {
    let Some(python) = support::worker_sdk_python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let script = script();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.diag"
command = ["{python}", "{script}"]
env = {{ WORKER_DIE_AFTER_REGISTER = "1" }}
"#,
            script = script.display()
        ),
    )
    .unwrap();
    let output = support::wattline(home.path())
        .args(["run", "--quiet", "--report", "json", "--config"])
        .arg(&config)
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
    let worker = component(diagnostics, "worker.acme_diag.probe");
    assert_eq!(
        worker["codes"][0]["occurrences"], 1,
        "recorded before the crash"
    );
    let details = details(diagnostics);
    assert!(
        details
            .iter()
            .any(|detail| detail.contains("acme.diag") && detail.contains("during the run")),
        "{details:?}"
    );
}

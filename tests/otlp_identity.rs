//! What tells runs apart on a collector: every OTLP export of `wattline run` carries
//! `service.name` (the measured command's, or `OTEL_SERVICE_NAME`), `host.name`,
//! `process.pid` (wattline's own) and `wattline.run.id` (the root scope of its event
//! file), plus `OTEL_RESOURCE_ATTRIBUTES`, decoded with the official
//! `opentelemetry-proto` types from an in-test receiver.

mod support;

#[path = "../exporters/tests/support/mod.rs"]
mod otlp;

use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::resource::v1::Resource;

/// Runs `sh -c 'sleep 0.3'` under `wattline run`, exporting to a fresh receiver, with
/// `variables` set; the resources received, the run's process ID and its event file's
/// root scope UUID.
fn run_with(variables: &[(&str, &str)]) -> (Vec<Resource>, u32, String) {
    let receiver = otlp::grpc_receiver();
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("runs");
    let mut command = support::wattline(home.path());
    command
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--otlp",
            &receiver.url(),
        ])
        .arg("--atof")
        .arg(&atof)
        .args(["--", "sh", "-c", "sleep 0.3"]);
    for (name, value) in variables {
        command.env(name, value);
    }
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let resources = receiver
        .inbox
        .take()
        .into_iter()
        .flat_map(|received| received.request.resource_metrics)
        .map(|metrics| metrics.resource.expect("a resource"))
        .collect();
    let file = std::fs::read_dir(&atof)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("an ATOF file");
    let text = std::fs::read_to_string(file).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["kind"], "scope",
        "the root scope opens the file: {first}"
    );
    assert!(first["parent_uuid"].is_null());
    (resources, pid, first["uuid"].as_str().unwrap().to_owned())
}

fn string(resource: &Resource, key: &str) -> Option<String> {
    otlp::string_attribute(&resource.attributes, key)
}

fn integer(resource: &Resource, key: &str) -> Option<i64> {
    resource
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::IntValue(value) => Some(*value),
            _ => None,
        })
}

#[test]
fn every_export_names_the_command_the_host_the_process_and_the_run() {
    let (resources, pid, root_scope) = run_with(&[(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment=ci,team=perf%20lab",
    )]);
    assert!(!resources.is_empty(), "the collector received nothing");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for resource in &resources {
        assert_eq!(string(resource, "service.name").as_deref(), Some("sh"));
        assert_eq!(string(resource, "host.name").as_deref(), Some(host.trim()));
        assert_eq!(integer(resource, "process.pid"), Some(i64::from(pid)));
        assert_eq!(
            string(resource, "wattline.run.id").as_deref(),
            Some(root_scope.as_str())
        );
        assert_eq!(
            string(resource, "deployment.environment").as_deref(),
            Some("ci")
        );
        assert_eq!(string(resource, "team").as_deref(), Some("perf lab"));
    }
}

#[test]
fn otel_service_name_names_the_service_and_two_runs_are_two_run_ids() {
    let (first, _, first_run) = run_with(&[("OTEL_SERVICE_NAME", "planner-agent")]);
    let (second, _, second_run) = run_with(&[]);
    assert_ne!(first_run, second_run);
    assert_eq!(
        string(&first[0], "service.name").as_deref(),
        Some("planner-agent")
    );
    assert_eq!(string(&second[0], "service.name").as_deref(), Some("sh"));
}

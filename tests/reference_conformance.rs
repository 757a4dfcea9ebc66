//! Conformance with the reference system: the `nemo-relay` Python package measures its
//! own process, wattline measures the same process, and the two snapshots must agree on
//! field names, units, which fields are null, and (for stable quantities) values.
//!
//! The reference runs from the Python named by `WATTLINE_REFERENCE_PYTHON`, which
//! `.ci/run` sets after installing `nemo-relay==0.10.4` into its venv. Without it the
//! test fails, unless `WATTLINE_SKIP_REFERENCE=1` says to skip it on purpose.

mod support;

use support::reference_python;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;
use wattline::ScopeTarget;
use wattline::config::ResourceMetricsConfig;

/// Every key path of a JSON value, with `null` leaves marked and unit names kept, so two
/// snapshots can be compared for shape, units and nulls at once.
fn shape(value: &Value, path: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(unit)), true) = (map.get("unit"), map.contains_key("value"))
            {
                out.push(format!("{path} [{unit}]"));
                return;
            }
            for (key, child) in map {
                shape(child, format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                shape(item, format!("{path}[{index}]"), out);
            }
            if items.is_empty() {
                out.push(format!("{path} []"));
            }
        }
        Value::Null => out.push(format!("{path} null")),
        _ => out.push(path),
    }
}

fn number(value: &Value, pointer: &str) -> f64 {
    value
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{pointer} missing in {value}"))
}

/// Runs the reference on itself in `scope` and wattline on the same target; returns
/// both second snapshots.
fn both_snapshots(python: &str, scope: &str) -> (Value, Value) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/reference/snapshot_of_self.py"
    );
    let mut child = Command::new(python)
        .args([script, scope])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let reference: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("reference output {line:?}: {e}"));

    let mut config = ResourceMetricsConfig::default();
    config.disk.filesystem_paths = vec!["/".into(), "/nonexistent-wattline-path".into()];
    config.network.interfaces = vec!["lo".into()];
    let identity = wattline_actors_identity(child.id());
    let target = match scope {
        "global" => ScopeTarget::Global,
        "process_tree" => ScopeTarget::ProcessTree(identity),
        _ => ScopeTarget::ApplicationProcess(identity),
    };
    // The default GPU sources, as the pipeline picks them (none answer on this machine).
    let gpu = wattline::gpu::select_default_sources(
        std::path::Path::new("/"),
        wattline::gpu::GpuSourceEnv::default(),
    );
    let mut collector =
        wattline_actors::collector::Collector::new("/".into(), target, config.clone())
            .with_gpu_source(Some(Box::new(gpu)));
    collector.collect(wattline::SamplingSeries::OnDemand);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let ours = serde_json::to_value(collector.collect(wattline::SamplingSeries::OnDemand)).unwrap();
    drop(child.stdin.take());
    child.wait().unwrap();
    (reference, ours)
}

fn assert_same_shape(reference: &Value, ours: &Value) {
    // GPU: no backend here. Both give empty groups (why nothing answered is in
    // diagnostics and `doctor`, not in the shape).
    for group in ["device_metrics", "process_metrics"] {
        assert_eq!(
            reference["gpu"][group],
            serde_json::json!([]),
            "reference gpu.{group}"
        );
        assert_eq!(ours["gpu"][group], reference["gpu"][group], "gpu.{group}");
    }
    for category in ["cpu", "memory", "process", "disk", "network"] {
        let mut expected = Vec::new();
        let mut actual = Vec::new();
        shape(&reference[category], category.into(), &mut expected);
        shape(&ours[category], category.into(), &mut actual);
        expected.sort();
        actual.sort();
        assert_eq!(actual, expected, "{category}: names, units or nulls differ");
    }
    let keys = |value: &Value| -> Vec<String> {
        value["process_sampling"]["field_sampled_processes"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(keys(ours), keys(reference), "process_sampling keys");
    assert_eq!(ours["measurement_scope"], reference["measurement_scope"]);
    assert_eq!(ours["operating_system"], reference["operating_system"]);
}

#[test]
fn wattline_and_the_reference_agree_on_the_same_process() {
    let Some(python) = reference_python() else {
        return;
    };
    let (reference, ours) = both_snapshots(&python, "application_process");
    assert_same_shape(&reference, &ours);

    // Values that do not move between the two readings.
    assert_eq!(
        number(&ours, "/memory/system_total/value"),
        number(&reference, "/memory/system_total/value")
    );
    assert_eq!(
        number(&ours, "/disk/filesystems/0/total_capacity/value"),
        number(&reference, "/disk/filesystems/0/total_capacity/value")
    );
    assert_eq!(
        number(&ours, "/process/thread_count/value"),
        number(&reference, "/process/thread_count/value")
    );
    // CPU time only grows; the reference read first.
    let (our_cpu, their_cpu) = (
        number(&ours, "/cpu/total_time/value"),
        number(&reference, "/cpu/total_time/value"),
    );
    assert!(
        our_cpu >= their_cpu && our_cpu - their_cpu <= 100.0,
        "cpu total {our_cpu} vs {their_cpu}"
    );
    // The measured process is the one measuring itself with the reference, so its
    // memory moves between the readings (runtime arenas, the JSON it prints): within
    // 10% or 32 MiB. That still catches a unit error (pages, bytes vs KiB: x4, x1024).
    for field in ["resident", "private", "virtual_memory", "peak_resident"] {
        let (a, b) = (
            number(&ours, &format!("/memory/{field}/value")),
            number(&reference, &format!("/memory/{field}/value")),
        );
        assert!(
            (a - b).abs() <= (b * 0.10).max(32.0 * 1024.0),
            "memory.{field}: {a} vs {b}"
        );
    }
}

#[test]
fn wattline_and_the_reference_agree_on_a_process_tree_and_globally() {
    let Some(python) = reference_python() else {
        return;
    };
    for scope in ["process_tree", "global"] {
        let (reference, ours) = both_snapshots(&python, scope);
        assert_same_shape(&reference, &ours);
        let visible = |v: &Value| number(v, "/process_sampling/visible_processes");
        if scope == "process_tree" {
            assert_eq!(visible(&ours), visible(&reference), "the same tree");
            assert_eq!(
                number(&ours, "/process/descendant_count/value"),
                number(&reference, "/process/descendant_count/value")
            );
        }
    }
}

fn wattline_actors_identity(pid: u32) -> wattline::ProcessIdentity {
    match wattline::resolve_target(
        wattline::config::MeasurementScopeSetting::ApplicationProcess,
        wattline::config::MeasurementScopeSetting::Global,
        Some(pid),
    )
    .unwrap()
    {
        ScopeTarget::ApplicationProcess(identity) => identity,
        other => panic!("{other:?}"),
    }
}

//! Event files as the reference writes them: the reference system (`nemo-relay`
//! 0.10.4) and wattline each poll the same Python process tree every 500 ms, open the
//! same Agent scopes (`coder` nested in `planner`) and write an ATOF file; the files
//! are compared field by field: every measurement's value type, unit, kind and
//! attribute keys, the envelope keys of marks and scopes, and the parent and
//! propagation-root relations of every event. Once with the default units, once with
//! units under which fractions become possible.
//!
//! Differences by design, left out of the comparison and named in the README:
//! wattline's root scope events (the reference writes none for its root) and its own
//! `wattline.*` marks (energy records and `gen_ai.*` metric batches).

mod support;

use support::reference_python;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use wattline::config::{EffectiveConfig, PluginsDocument};
use wattline::{Pipeline, ScopeTarget};

const NON_DEFAULT_UNITS: &str = r#"{"cpu": {"user_time": "seconds", "system_time": "microseconds", "consumption_rate": "millicores"}, "memory": {"resident": "mebibytes", "private": "bytes", "system_total": "kilobytes", "virtual_memory": "gibibytes"}, "disk": {"read_data": "kilobytes", "write_data": "kibibytes"}, "network": {"system": {"received_data": "kibibytes", "receive_throughput": "bits_per_second"}}}"#;

/// `units` as `[components.config.units.*]` TOML tables.
fn units_toml(units: &Value) -> String {
    let mut out = String::new();
    let mut tables = Vec::new();
    fn walk(path: &str, value: &Value, tables: &mut Vec<(String, Vec<(String, String)>)>) {
        let Value::Object(map) = value else { return };
        let leaves: Vec<(String, String)> = map
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
            .collect();
        if !leaves.is_empty() {
            tables.push((path.to_owned(), leaves));
        }
        for (key, child) in map.iter().filter(|(_, v)| v.is_object()) {
            walk(&format!("{path}.{key}"), child, tables);
        }
    }
    walk("components.config.units", units, &mut tables);
    for (path, leaves) in tables {
        out.push_str(&format!("[{path}]\n"));
        for (key, unit) in leaves {
            out.push_str(&format!("{key} = \"{unit}\"\n"));
        }
    }
    out
}

/// Both files, written while measuring the same Python process tree.
async fn both_files(python: &str, units: Option<&str>) -> (Vec<Value>, Vec<Value>) {
    let theirs = tempfile::tempdir().unwrap();
    let ours = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/write_atof.py");
    let mut command = Command::new(python);
    command.arg(script).arg(theirs.path());
    if let Some(units) = units {
        command.arg(units);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: u32 = line.trim().parse().unwrap();

    let units_tables = units
        .map(|units| units_toml(&serde_json::from_str(units).unwrap()))
        .unwrap_or_default();
    let toml = format!(
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config]\nmeasurement_scope = \"process_tree\"\n[components.config.polling]\nenabled = true\ninterval_millis = 500\n{units_tables}[[components]]\nkind = \"atof\"\n[components.config]\noutput_directory = \"{}\"\n",
        ours.path().display()
    );
    let document = PluginsDocument::parse("plugins.toml", &toml).unwrap();
    let config = EffectiveConfig::merge(&[document]).unwrap();
    let target = wattline::resolve_target(
        wattline::config::MeasurementScopeSetting::ProcessTree,
        wattline::config::MeasurementScopeSetting::Global,
        Some(pid),
    )
    .unwrap();
    assert!(matches!(target, ScopeTarget::ProcessTree(_)));
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| None)
        .scope(target)
        .spawn()
        .await
        .unwrap();
    // Go: both sides follow the same schedule from here.
    writeln!(child.stdin.as_mut().unwrap()).unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let planner = pipeline.agent_scope("planner").unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let coder = planner.child("coder").unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    coder.end().unwrap();
    planner.end().unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    pipeline.shutdown().await.unwrap();
    // Judged by its file: the reference sometimes crashes on exit after writing.
    let _ = child.wait();
    (
        support::atof_events(theirs.path()),
        support::atof_events(ours.path()),
    )
}

/// Every resource measurement's name with the signatures (value type, unit, kind and
/// attribute keys) it has in any mark: every mark counts, so a type that flips between
/// marks (an integer unit turned fractional by a conversion) shows as two.
fn measurement_types(events: &[Value]) -> BTreeMap<String, BTreeSet<String>> {
    let mut types: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let measurements = events
        .iter()
        .filter(|e| e["kind"] == "mark" && e["name"] == "nemo.relay.resource_metrics")
        .flat_map(|e| {
            e["data"]["measurements"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        });
    for m in measurements {
        let keys: Vec<String> = m["attributes"]
            .as_object()
            .map(|a| a.keys().cloned().collect())
            .unwrap_or_default();
        types
            .entry(m["name"].as_str().unwrap().to_owned())
            .or_default()
            .insert(format!(
                "{} {} {} {:?}",
                m["value_type"], m["unit"], m["kind"], keys
            ));
    }
    types
}

/// The events both sides write: resource marks and Agent scopes (wattline's root scope
/// events and `wattline.*` marks are its own, by design).
fn comparable(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| {
            (e["kind"] == "mark" && e["name"] == "nemo.relay.resource_metrics")
                || (e["kind"] == "scope" && e["category"] == "agent")
        })
        .collect()
}

fn envelope_keys(events: &[&Value], kind: &str) -> BTreeSet<Vec<String>> {
    events
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| {
            let mut keys: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            keys
        })
        .collect()
}

/// Each event's relations, by scope name (`ROOT` for an id no Agent scope has):
/// `scope start planner: parent ROOT, root planner`, `mark: parent coder, root
/// planner`, with repeats of a mark's relation folded.
fn relations(events: &[&Value]) -> Vec<String> {
    let names: BTreeMap<&str, &str> = events
        .iter()
        .filter(|e| e["kind"] == "scope")
        .map(|e| (e["uuid"].as_str().unwrap(), e["name"].as_str().unwrap()))
        .collect();
    let name = |id: &Value| -> String {
        match id.as_str() {
            Some(id) => names.get(id).copied().unwrap_or("ROOT").to_owned(),
            None => "none".to_owned(),
        }
    };
    let mut out: Vec<String> = Vec::new();
    for event in events {
        let relation = match event["kind"].as_str() {
            Some("scope") => format!(
                "scope {} {}: parent {}, root {}",
                event["scope_category"].as_str().unwrap(),
                event["name"].as_str().unwrap(),
                name(&event["parent_uuid"]),
                name(&event["propagation_root_uuid"])
            ),
            _ => format!(
                "mark: parent {}, root {}",
                name(&event["parent_uuid"]),
                name(&event["propagation_root_uuid"])
            ),
        };
        if out.last() != Some(&relation) {
            out.push(relation);
        }
    }
    out
}

fn compare(theirs: &[Value], ours: &[Value]) {
    let (their_types, our_types) = (measurement_types(theirs), measurement_types(ours));
    for (name, signatures) in &their_types {
        assert_eq!(our_types.get(name), Some(signatures), "{name}");
    }
    let extra: Vec<&String> = our_types
        .keys()
        .filter(|n| !their_types.contains_key(*n))
        .collect();
    assert!(
        extra.is_empty(),
        "measurements the reference does not write: {extra:?}"
    );

    let (theirs, ours) = (comparable(theirs), comparable(ours));
    for kind in ["mark", "scope"] {
        assert_eq!(
            envelope_keys(&ours, kind),
            envelope_keys(&theirs, kind),
            "{kind} keys"
        );
    }
    // Marks copied under both live scopes interleave in either order: compare the
    // relations that occur, in order of first appearance.
    let first_seen = |relations: Vec<String>| {
        let mut seen = Vec::new();
        for relation in relations {
            if !seen.contains(&relation) {
                seen.push(relation);
            }
        }
        seen
    };
    let ours = first_seen(relations(&ours));
    assert_eq!(ours, first_seen(relations(&theirs)));
    // And the relations are the ones the reference is known to write.
    for expected in [
        "mark: parent ROOT, root ROOT",
        "scope start planner: parent ROOT, root planner",
        "mark: parent planner, root planner",
        "scope start coder: parent planner, root planner",
        "mark: parent coder, root planner",
        "scope end coder: parent planner, root planner",
        "scope end planner: parent ROOT, root planner",
    ] {
        assert!(
            ours.iter().any(|r| r == expected),
            "{expected} missing from {ours:#?}"
        );
    }
    assert!(their_types.len() >= 30, "{their_types:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_files_agree_with_the_reference_at_the_default_units() {
    let Some(python) = reference_python() else {
        return;
    };
    let (theirs, ours) = both_files(&python, None).await;
    compare(&theirs, &ours);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_files_agree_with_the_reference_where_fractions_become_possible() {
    let Some(python) = reference_python() else {
        return;
    };
    let (theirs, ours) = both_files(&python, Some(NON_DEFAULT_UNITS)).await;
    compare(&theirs, &ours);
}

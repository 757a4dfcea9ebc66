//! Every example runs and prints what it promises. `cargo test` builds the examples
//! beside the test binaries; this runs them.

mod support;

use std::process::Command;

use support::example;

fn run(name: &str) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(example(name))
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn collect_once_prints_a_snapshot_with_a_rate_on_the_second_sample() {
    let out = run("collect_once");
    assert!(out.contains("cpu consumption rate: Some("), "{out}");
    assert!(
        out.contains("\"measurement_scope\": \"process_tree\""),
        "{out}"
    );
}

#[test]
fn agent_scopes_prints_copies_under_each_scope() {
    let out = run("agent_scopes");
    assert!(out.contains("scope Start planner"), "{out}");
    assert!(out.contains("scope End coder"), "{out}");
    assert!(out.matches("mark  ").count() >= 3, "{out}");
}

#[test]
fn energy_report_prints_the_table_and_json() {
    let out = run("energy_report");
    assert!(out.contains("GPU source: simulated"), "{out}");
    assert!(out.contains("agent training-step"), "{out}");
    let json_start = out.find('{').unwrap();
    let report: serde_json::Value = serde_json::from_str(&out[json_start..]).unwrap();
    assert!(report["total"]["gpu_energy_kwh"].as_f64().unwrap() > 0.0);
    assert!(report["total"]["co2_grams"].as_f64().unwrap() > 0.0);
}

#[test]
fn fleet_host_prints_its_run_id_and_a_report_of_its_concurrent_steps() {
    let out = run("fleet_host");
    let run_id = out
        .lines()
        .find_map(|line| line.strip_prefix("run id: "))
        .expect("a run id line");
    assert_eq!(run_id.len(), 36, "{run_id}");
    let report: serde_json::Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
    let scopes = report["agent_scopes"].as_array().unwrap();
    let named = |name: &str| scopes.iter().filter(|s| s["name"] == name).count();
    // Three workers, each at least one round of request (with a nested tool) and
    // background in its one second.
    assert!(named("request") >= 3, "{out}");
    assert_eq!(named("tool"), named("request"), "{out}");
    assert!(named("background") >= 3, "{out}");
}

/// The lines of the first ```rust block after `heading` in the README.
fn readme_block(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let after = &readme[readme.find(heading).expect("heading")..];
    let start = after.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &after[start..];
    let end = block.find("```").expect("the block ends");
    block[..end]
        .lines()
        .map(|line| line.trim().to_string())
        .collect()
}

#[test]
fn the_readme_library_example_is_the_library_tour_example_and_it_runs() {
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/library_tour.rs"
    ))
    .expect("example source");
    let begin =
        source.find("// README: begin\n").expect("begin marker") + "// README: begin\n".len();
    let end = source.find("// README: end").expect("end marker");
    let example: Vec<String> = source[begin..end]
        .lines()
        .map(|line| line.trim().to_string())
        // The book's include anchor is not part of the example.
        .filter(|line| !line.is_empty() && !line.contains("ANCHOR"))
        .collect();
    assert_eq!(readme_block("## The library"), example);
    // No plugins.toml anywhere (HOME and XDG_CONFIG_HOME are empty): the example works.
    let out = run("library_tour");
    assert!(out.contains("snapshot scope: \"process_tree\""), "{out}");
    assert!(out.contains("memory resident: Some("), "{out}");
    assert!(out.contains("report agent scopes: 1"), "{out}");
}

//! `metric_names = "semconv"` and `"both"`: what a real collector (rotel) receives
//! from `wattline run` with a GPU (the fake NVML) and a process-tree scope. The
//! semantic-convention names, their units and attributes, and under `semconv` the
//! absence of the specification's names they replace.

#[path = "../exporters/tests/support/rotel_agent.rs"]
mod rotel_agent;
mod support;

use std::time::{Duration, Instant};

use support::{fake_nvml, wattline};

/// Runs a busy command under `wattline run --otlp` with `metric_names` set, against a
/// fresh rotel; returns what rotel printed once it saw `hw.energy`.
fn collector_output(metric_names: &str) -> Option<String> {
    let path = rotel_agent::agent_path()?;
    let (grpc, http) = (support::free_port(), support::free_port());
    let grpc_address = format!("127.0.0.1:{grpc}").parse().unwrap();
    let mut agent = rotel_agent::Agent::start(
        &path,
        grpc_address,
        format!("127.0.0.1:{http}").parse().unwrap(),
    );
    agent.wait_for("listening", |_| rotel_agent::listening(grpc_address));
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        format!(
            "version = 1\n\n[[components]]\nkind = \"opentelemetry\"\n[components.config]\n\
             export_interval_millis = 300\nmetric_names = \"{metric_names}\"\n"
        ),
    )
    .unwrap();
    let library = fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    support::succeeded(
        wattline(home.path())
            .env("LD_LIBRARY_PATH", library.path())
            .env("PATH", "/usr/bin:/bin")
            .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
            .arg("run")
            .arg("--config")
            .arg(&config)
            .args(["--quiet", "--interval", "200", "--scope", "process-tree"])
            .args(["--otlp", &format!("http://127.0.0.1:{grpc}")])
            // Real work in the tree: CPU time that grows between polls.
            .args([
                "--",
                "sh",
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
            ]),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !agent.output().contains("hw.energy") {
        assert!(
            Instant::now() < deadline,
            "the collector never saw hw.energy:\n{}",
            agent.output()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The last export (at shutdown) may still be printing.
    std::thread::sleep(Duration::from_millis(300));
    Some(agent.output())
}

/// The lines of rotel's debug output about metric `name` (its name line and the
/// lines that follow until the next metric).
fn metric_block<'a>(seen: &'a str, name: &str) -> &'a str {
    let start = seen
        .find(&format!("Name: {name}\n"))
        .or_else(|| seen.find(&format!("-> Name: {name}")))
        .unwrap_or_else(|| panic!("{name} not received:\n{seen}"));
    let rest = &seen[start..];
    let end = rest[1..]
        .find("Name: ")
        .map_or(rest.len(), |offset| offset + 1);
    &rest[..end]
}

#[test]
fn semconv_sends_hw_and_process_names_instead_of_the_ones_they_replace() {
    let Some(seen) = collector_output("semconv") else {
        return;
    };
    for (name, unit) in [
        ("hw.gpu.utilization", "1"),
        ("hw.gpu.memory.usage", "By"),
        ("hw.gpu.memory.limit", "By"),
        ("hw.power", "W"),
        ("hw.energy", "J"),
        ("hw.temperature", "Cel"),
        ("process.cpu.time", "s"),
        ("process.memory.usage", "By"),
        ("process.thread.count", "{thread}"),
    ] {
        let block = metric_block(&seen, name);
        assert!(
            block.contains(&format!("Unit: {unit}")),
            "{name} without unit {unit}:\n{block}"
        );
    }
    let power = metric_block(&seen, "hw.power");
    assert!(
        power.contains("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"),
        "{power}"
    );
    assert!(power.contains("hw.type"), "{power}");
    let energy = metric_block(&seen, "hw.energy");
    assert!(
        energy.contains("Sum") && energy.contains("IsMonotonic: true"),
        "{energy}"
    );
    let cpu = metric_block(&seen, "process.cpu.time");
    assert!(cpu.contains("cpu.mode"), "{cpu}");
    // Replaced: the spec's names with an equivalent; kept: those without one.
    for replaced in [
        "Name: gen_ai.gpu.power\n",
        "Name: gen_ai.gpu.utilization\n",
        "Name: nemo.relay.resource.cpu.user_time\n",
    ] {
        assert!(!seen.contains(replaced), "{replaced} still sent");
    }
    metric_block(&seen, "gen_ai.power.cost");
}

#[test]
fn both_sends_each_name_twice_over() {
    let Some(seen) = collector_output("both") else {
        return;
    };
    for name in [
        "gen_ai.gpu.power",
        "hw.power",
        "nemo.relay.resource.cpu.user_time",
        "process.cpu.time",
    ] {
        metric_block(&seen, name);
    }
}

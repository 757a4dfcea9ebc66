//! The whole path: pipeline → fan-out → ATOF file and a real OTLP collector, and the
//! report rebuilt from the file alone.

#[path = "../exporters/tests/support/rotel_agent.rs"]
mod rotel_agent;
mod support;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wattline::Pipeline;
use wattline::config::{AtofConfig, EffectiveConfig, ResourceMetricsConfig};

use support::ConstantPowerGpu;

/// Every test here runs alone: one of them times its polls.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn atof_files(directory: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(directory)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[allow(clippy::await_holding_lock)] // a std lock: the tests run on threads of their own
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_rebuilt_from_the_atof_file_matches_the_live_report() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let directory = tempfile::tempdir().unwrap();
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 150;
    let mut config = EffectiveConfig {
        resource_metrics: Some(resource),
        atof: Some(AtofConfig {
            output_directory: directory.path().to_string_lossy().into_owned(),
            ..AtofConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    let energy = config.energy.as_mut().unwrap();
    energy.config.interval_millis = 100;
    energy.config.co2_tracking = true;
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| Some(Box::new(ConstantPowerGpu::new(320.0))))
        .spawn()
        .await
        .unwrap();
    let agent = pipeline.agent_scope("trainer").unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    agent.end().unwrap();
    // A scope still live at shutdown ends there, in the report as in the file.
    let _still_live = pipeline.agent_scope("reviewer").unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let live = pipeline.shutdown().await.unwrap().unwrap();
    assert_eq!(live.exporter_drops, vec![("atof".to_string(), 0)]);
    assert_eq!(live.exporters.len(), 1);
    assert_eq!(live.exporters[0].name, "atof");
    assert!(!live.exporters[0].lost_data(), "{:?}", live.exporters[0]);

    let files = atof_files(directory.path());
    assert_eq!(files.len(), 1);
    let replayed = wattline::report_from_atof(&files[0]).unwrap();
    assert!(live.total.gpu_energy_kwh.unwrap() > 0.0);
    assert_eq!(live.agent_scopes.len(), 2);
    assert!(live.agent_scopes[1].ended_at.is_some(), "ended at shutdown");
    // Field by field: everything but what the file cannot hold (the diagnostics
    // snapshot and the exporters' own counts, taken after the file is written).
    let comparable = |report: &wattline::EnergyReport| {
        let mut value = serde_json::to_value(report).unwrap();
        value["diagnostics"] = serde_json::Value::Null;
        value["exporter_drops"] = serde_json::Value::Null;
        value["exporters"] = serde_json::Value::Null;
        value
    };
    assert_eq!(comparable(&replayed), comparable(&live));

    // Every line is a valid event; scopes open and close; marks sit under the agent
    // while it was live.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "scope");
    assert_eq!(lines.last().unwrap()["scope_category"], "end");
    let agent_uuid = lines.iter().find(|l| l["name"] == "trainer").unwrap()["uuid"].clone();
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "mark" && l["parent_uuid"] == agent_uuid)
    );
    // SAFETY-free: the file holds only what this test wrote; its mode is 0600.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// The pipeline writes zstd frames (and an agent's copies of each poll): the report
/// rebuilt from the compressed file is the live one, and so is the report rebuilt from
/// the same lines spread over a rotated set of plain and of compressed parts, read from
/// any part.
#[allow(clippy::await_holding_lock)] // a std lock: the tests run on threads of their own
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_reads_the_same_from_a_zstd_file_and_from_rotated_sets() {
    use std::io::BufRead;
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let directory = tempfile::tempdir().unwrap();
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 100;
    let mut config = EffectiveConfig {
        resource_metrics: Some(resource),
        atof: Some(AtofConfig {
            output_directory: directory.path().to_string_lossy().into_owned(),
            filename: "run.jsonl".into(),
            compression: wattline::config::AtofCompression::Zstd,
            ..AtofConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    config.energy.as_mut().unwrap().config.interval_millis = 100;
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| Some(Box::new(ConstantPowerGpu::new(250.0))))
        .spawn()
        .await
        .unwrap();
    let first = pipeline.agent_scope("planner").unwrap();
    let second = pipeline.agent_scope("coder").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    second.end().unwrap();
    first.end().unwrap();
    let live = pipeline.shutdown().await.unwrap().unwrap();
    assert!(!live.exporters[0].lost_data(), "{:?}", live.exporters[0]);
    let comparable = |report: &wattline::EnergyReport| {
        let mut value = serde_json::to_value(report).unwrap();
        value["diagnostics"] = serde_json::Value::Null;
        value["exporter_drops"] = serde_json::Value::Null;
        value["exporters"] = serde_json::Value::Null;
        value
    };
    let compressed = directory.path().join("run.jsonl.zst");
    assert_eq!(
        atof_files(directory.path()),
        std::slice::from_ref(&compressed)
    );
    let (replayed, series) = wattline::report_and_series_from_atof(&compressed).unwrap();
    assert!(live.total.gpu_energy_kwh.unwrap() > 0.0);
    assert_eq!(comparable(&replayed), comparable(&live));
    assert!(series.has_power());

    // The file's lines, decoded, spread over three parts: plain, then compressed.
    let mut lines = Vec::new();
    let mut reader =
        wattline_exporters::atof_frames::FrameLines::new(std::fs::File::open(&compressed).unwrap())
            .unwrap();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        lines.push(std::mem::take(&mut line));
    }
    assert!(lines.len() > 10, "{} lines", lines.len());
    let third = lines.len().div_ceil(3);
    let sets = tempfile::tempdir().unwrap();
    for (index, part) in lines.chunks(third).enumerate() {
        let text = part.concat();
        let name = format!("set-{:04}.jsonl", index + 1);
        std::fs::write(sets.path().join(&name), &text).unwrap();
        // One frame per part, written by zstd itself rather than by the exporter.
        let frame = zstd::bulk::compress(text.as_bytes(), 3).unwrap();
        std::fs::write(sets.path().join(format!("{name}.zst")), frame).unwrap();
    }
    for read_from in [
        "set-0001.jsonl",
        "set-0003.jsonl",
        "set.jsonl",
        "set-0002.jsonl.zst",
        "set.jsonl.zst",
    ] {
        let replayed = wattline::report_from_atof(&sets.path().join(read_from))
            .unwrap_or_else(|error| panic!("{read_from}: {error}"));
        assert_eq!(comparable(&replayed), comparable(&live), "{read_from}");
    }
}

#[test]
fn wattline_report_prints_the_recomputed_report() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let home = tempfile::tempdir().unwrap();
    let directory = tempfile::tempdir().unwrap();
    let status = support::wattline(home.path())
        .args(["run", "--quiet", "--interval", "100", "--atof"])
        .arg(directory.path())
        .args(["--", "sleep", "0.4"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let file = &atof_files(directory.path())[0];
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["report", "--report", "json"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // No GPU here: not measured (null), and the replay says why, as the live run did.
    assert!(report["total"]["gpu_energy_kwh"].is_null(), "{report}");
    assert!(
        report["gpu_unavailable"]
            .as_str()
            .is_some_and(|reason| reason.contains("NVML")),
        "{report}"
    );

    // A damaged file is a clear error naming the line.
    let damaged = directory.path().join("damaged.jsonl");
    let mut text = std::fs::read_to_string(file).unwrap();
    text.push_str("{\"kind\":\"mark\",\"atof_version\":\"0.1\"\n");
    std::fs::write(&damaged, text.as_bytes()).unwrap();
    let lines = text.lines().count();
    let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
        .arg("report")
        .arg(&damaged)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains(&format!("damaged.jsonl:{lines}: not JSON")),
        "{stderr}"
    );
}

#[test]
fn wattline_run_sends_its_measurements_to_a_real_collector() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let Some(path) = rotel_agent::agent_path() else {
        return;
    };
    let (grpc, http) = (support::free_port(), support::free_port());
    let mut agent = rotel_agent::Agent::start(
        &path,
        format!("127.0.0.1:{grpc}").parse().unwrap(),
        format!("127.0.0.1:{http}").parse().unwrap(),
    );
    agent.wait_for("listening", |_| {
        rotel_agent::listening(format!("127.0.0.1:{grpc}").parse().unwrap())
            && rotel_agent::listening(format!("127.0.0.1:{http}").parse().unwrap())
    });
    let home = tempfile::tempdir().unwrap();
    let count = || {
        agent
            .output
            .lock()
            .unwrap()
            .matches("nemo.relay.resource.cpu.total_time")
            .count()
    };
    // Each transport in turn: the collector must see new data after each run.
    for url in [
        format!("http://127.0.0.1:{grpc}"),
        format!("http://127.0.0.1:{http}/v1/metrics"),
    ] {
        let before = count();
        let output = Command::new(env!("CARGO_BIN_EXE_wattline"))
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path())
            .args([
                "run",
                "--quiet",
                "--interval",
                "200",
                "--otlp",
                &url,
                "--",
                "sleep",
                "0.5",
            ])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while count() == before {
            let seen = agent.output.lock().unwrap().clone();
            assert!(
                Instant::now() < deadline,
                "{url}: the collector saw nothing new:\n{seen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let seen = agent.output.lock().unwrap().clone();
    assert!(
        seen.contains("nemo_relay.resource.measurement_scope"),
        "{seen}"
    );
    assert!(seen.contains("nemo.relay.resource.sample_count"), "{seen}");
}

#[allow(clippy::await_holding_lock)] // a std lock: the tests run on threads of their own
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_that_never_answers_does_not_move_the_schedule_or_lose_the_file() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    use wattline::config::{OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport};
    use wattline::events::CollectingEventSink;
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let holder = Arc::clone(&held);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            holder.lock().unwrap().push(stream);
        }
    });
    let directory = tempfile::tempdir().unwrap();
    let period = Duration::from_millis(100);
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 100;
    let mut endpoint =
        OtlpEndpointConfig::new(format!("http://127.0.0.1:{port}"), OtlpTransport::Grpc);
    endpoint.timeout_millis = 200;
    let config = EffectiveConfig {
        resource_metrics: Some(resource),
        atof: Some(AtofConfig {
            output_directory: directory.path().to_string_lossy().into_owned(),
            ..AtofConfig::default()
        }),
        opentelemetry: Some(OpenTelemetryConfig {
            export_interval_millis: 100,
            endpoints: vec![endpoint],
            ..OpenTelemetryConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    let seen = Arc::new(CollectingEventSink::default());
    let pipeline = Pipeline::builder()
        .config(config)
        .gpu_source(|| None)
        .event_sink(seen.clone())
        .spawn()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let report = pipeline.shutdown().await.unwrap().unwrap();

    // The schedule held: polls on the grid while exports timed out.
    let marks = support::marks(&seen.events());
    assert!(marks.len() >= 12, "only {} polls in 1.5 s", marks.len());
    let first = marks[0].timestamp;
    for (k, mark) in marks.iter().enumerate() {
        let offset = (mark.timestamp - first).to_std().unwrap();
        assert!(
            offset.abs_diff(period * k as u32) < Duration::from_millis(60),
            "poll {k} at {offset:?}"
        );
    }
    // The ATOF file beside it has every event the pipeline emitted.
    let file = &atof_files(directory.path())[0];
    let lines = std::fs::read_to_string(file).unwrap().lines().count();
    assert_eq!(lines, seen.events().len());
    assert!(
        report
            .exporter_drops
            .iter()
            .any(|(name, _)| name == "opentelemetry")
    );
    let diagnostics = pipeline.diagnostics_json().unwrap().unwrap();
    let value: serde_json::Value = serde_json::from_str(&diagnostics).unwrap();
    let failed = value["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["codes"].as_array().unwrap())
        .find(|c| c["code"] == "exporter.otlp.export_failed")
        .map(|c| c["occurrences"].as_u64().unwrap())
        .unwrap();
    assert!(
        failed >= 1,
        "the failing exports are recorded: {diagnostics}"
    );
}

//! Faults, each with what was recorded kept: the ATOF folder on a full filesystem and
//! removed mid-run, wattline killed with SIGKILL, stopped with SIGTERM, a process tree
//! churning hundreds of children a second, and a collector that flaps for a minute.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::wattline;

/// Every test here runs alone: timed polls, the process's own resident memory and a
/// fork storm must not share the machine with one another.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn atof_files(directory: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every line of `file` ends with a newline and is a JSON object.
fn assert_whole_lines(file: &Path) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "{}: the last line is cut",
        file.display()
    );
    for (number, line) in text.lines().enumerate() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("{}:{}: {error}", file.display(), number + 1));
        assert!(event.is_object());
    }
    text.lines().count()
}

fn exporter<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["exporters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|exporter| exporter["name"] == name)
        .unwrap_or_else(|| panic!("no {name} exporter in {report}"))
}

/// A small tmpfs mounted on a fresh folder for the test's life (root only: the VMs
/// and CI run as root).
struct SmallFilesystem {
    folder: tempfile::TempDir,
}

impl SmallFilesystem {
    fn mount(size: &str) -> SmallFilesystem {
        let folder = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(folder.path())
            .status()
            .expect("mount runs");
        assert!(
            status.success(),
            "mounting a tmpfs needs root (this project's VMs and CI run as root)"
        );
        SmallFilesystem { folder }
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.folder.path()).status();
    }
}

#[test]
fn a_full_filesystem_is_recorded_counted_and_sampling_goes_on() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let filesystem = SmallFilesystem::mount("24k");
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["run", "--quiet", "--interval", "20", "--report", "json"])
        .arg("--atof")
        .arg(filesystem.folder.path())
        .args(["--", "sleep", "1.5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "the command's code: {stderr}"
    );
    assert!(
        stderr.contains("wattline: DATA LOST by exporter atof:"),
        "{stderr}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let atof = exporter(&report, "atof");
    assert!(
        atof["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("No space left on device"),
        "{atof}"
    );
    let lost = atof["lost"].as_u64().unwrap();
    assert!(
        lost > 0,
        "the lines that never reached the file are counted: {atof}"
    );
    // What reached the file is whole (a partial line was cut off) and readable.
    let file = &atof_files(filesystem.folder.path())[0];
    let written = assert_whole_lines(file);
    assert!(written > 0);
    // Sampling went on to the end: the window covers the whole command.
    let started =
        chrono::DateTime::parse_from_rfc3339(report["started_at"].as_str().unwrap()).unwrap();
    let ended = chrono::DateTime::parse_from_rfc3339(report["ended_at"].as_str().unwrap()).unwrap();
    assert!((ended - started).num_milliseconds() >= 1400);
    assert!(report["health"].as_array().unwrap().is_empty(), "{report}");
}

#[test]
fn the_atof_folder_removed_mid_run_is_noticed_and_its_lines_counted_as_lost() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let parent = tempfile::tempdir().unwrap();
    let folder = parent.path().join("atof");
    let home = tempfile::tempdir().unwrap();
    let child = wattline(home.path())
        .args(["run", "--quiet", "--interval", "50", "--report", "json"])
        .arg("--atof")
        .arg(&folder)
        .args(["--", "sleep", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while atof_files(&folder).is_empty() {
        assert!(Instant::now() < deadline, "no ATOF file appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(600));
    std::fs::remove_dir_all(&folder).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("DATA LOST by exporter atof"), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let atof = exporter(&report, "atof");
    assert!(
        atof["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("removed while open"),
        "{atof}"
    );
    assert!(atof["lost"].as_u64().unwrap() > 0, "{atof}");
    // Sampling went on into a new file in the folder made again.
    let files = atof_files(&folder);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(assert_whole_lines(&files[0]) > 0);
}

/// Starts `wattline run` with an ATOF folder and `--interval 50` on `script`; waits for
/// the file and `after` more.
fn start_and_wait(
    home: &Path,
    folder: &Path,
    extra: &[&str],
    script: &str,
    after: Duration,
) -> std::process::Child {
    let child = wattline(home)
        .args(["run", "--quiet", "--interval", "50"])
        .args(extra)
        .arg("--atof")
        .arg(folder)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while atof_files(folder).is_empty() {
        assert!(Instant::now() < deadline, "no ATOF file appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(after);
    child
}

/// Every line but the last is a whole JSON object ending in a newline; returns the
/// line count and whether the last line is cut short.
fn assert_whole_but_last(file: &Path) -> (usize, bool) {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = !text.is_empty() && !text.ends_with('\n');
    let whole = if cut {
        &lines[..lines.len() - 1]
    } else {
        &lines[..]
    };
    for (number, line) in whole.iter().enumerate() {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|error| panic!("{}:{}: {error}", file.display(), number + 1));
    }
    (lines.len(), cut)
}

/// A SIGKILL lands between two lines, or inside the write of one longer than a page
/// (the kernel stops a write between pages for a fatal signal), so only the last line
/// can be cut; `wattline report` names a cut last line and reads everything before it.
#[test]
fn after_sigkill_only_the_last_line_can_be_cut_and_the_report_names_it() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let mut child = start_and_wait(
        home.path(),
        folder.path(),
        &[],
        "sleep 3",
        Duration::from_millis(1200),
    );
    // What the kill orphans (the command, its sleep, the run cgroup) is reaped at the
    // end, whatever happens in between.
    let _reaper = support::Reaper {
        wattline_pid: child.id(),
        orphans: support::descendants(child.id()),
    };
    // SAFETY: killing the wattline process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    let _ = child.wait();
    let file = atof_files(folder.path()).remove(0);
    let (lines, cut) = assert_whole_but_last(&file);
    assert!(lines > 5, "{lines} lines");
    if !cut {
        // Make the crash that cuts a line: the last one again, half written.
        let last = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .to_owned();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(&last.as_bytes()[..last.len() / 2])
            .unwrap();
    }
    let cut_line = if cut { lines } else { lines + 1 };
    let report = wattline(home.path())
        .args(["report", "--report", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let json: Value = serde_json::from_slice(&report.stdout).unwrap();
    let note = json["replay_notes"][0].as_str().unwrap_or_default();
    assert!(
        note.contains(&format!(
            "{}:{cut_line}: the last line is cut short",
            file.display()
        )),
        "{json}"
    );
    assert!(json["ended_at"].is_string());
}

#[test]
fn sigterm_mid_run_stops_cleanly_with_the_report_and_a_whole_file() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let child = start_and_wait(
        home.path(),
        folder.path(),
        &[],
        "sleep 10",
        Duration::from_millis(800),
    );
    // SAFETY: signalling the wattline process this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The command was ended by the forwarded SIGTERM: 128 + 15.
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("wattline energy report"), "{stderr}");
    let file = atof_files(folder.path()).remove(0);
    assert_whole_lines(&file);
    // The file is complete: the run's scopes all ended.
    let report = wattline(home.path())
        .args(["report", "--report", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(report.status.success());
    let json: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert!(json.get("replay_notes").is_none(), "{json}");
}

/// One resource mark's gauges: value by field name, and the coverage counts.
struct PollFigures {
    values: std::collections::HashMap<String, f64>,
    sampled: Option<f64>,
    supplied: std::collections::HashMap<String, f64>,
}

fn resource_polls(file: &Path) -> Vec<PollFigures> {
    const PREFIX: &str = "nemo.relay.resource.";
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "mark" && event["name"] == "nemo.relay.resource_metrics")
        .map(|mark| {
            let mut poll = PollFigures {
                values: Default::default(),
                sampled: None,
                supplied: Default::default(),
            };
            for measurement in mark["data"]["measurements"].as_array().unwrap() {
                let name = measurement["name"].as_str().unwrap();
                let Some(value) = measurement["value"].as_f64() else {
                    continue;
                };
                match name.strip_prefix(PREFIX).unwrap_or(name) {
                    "process_sampling.sampled_count" => poll.sampled = Some(value),
                    "process_sampling.field_sampled_count" => {
                        let field = measurement["attributes"]["nemo_relay.resource.field"]
                            .as_str()
                            .unwrap_or_default();
                        poll.supplied.insert(field.to_owned(), value);
                    }
                    field => {
                        poll.values.insert(field.to_owned(), value);
                    }
                }
            }
            poll
        })
        .collect()
}

fn occurrences(report: &Value, code: &str) -> u64 {
    report["diagnostics"]["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|component| component["codes"].as_array().into_iter().flatten())
        .find(|entry| entry["code"] == code)
        .and_then(|entry| entry["occurrences"].as_u64())
        .unwrap_or(0)
}

/// "No false nulls": under churn a child that exits between listing and reading is
/// skipped, never a null. A total may still be null for the spec's reasons only: a
/// sampled process lacks the counter (a zombie has no memory left: the coverage shows
/// it), or the category missed its deadline (recorded).
#[test]
fn a_tree_churning_hundreds_of_children_a_second_for_30_s() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    let home = tempfile::tempdir().unwrap();
    let folder = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // Ten short-lived children at a time, as fast as the shell can start them.
    let script = "end=$(( $(date +%s) + 30 )); \
                  while [ $(date +%s) -lt $end ]; do \
                  for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true & done; wait; done";
    let output = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--interval",
            "250",
            "--scope",
            "process-tree",
        ])
        .args(["--report", "json", "--atof"])
        .arg(folder.path())
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(started.elapsed() >= Duration::from_secs(29));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["health"].as_array().unwrap().is_empty(), "{report}");
    let file = atof_files(folder.path()).remove(0);
    assert_whole_lines(&file);
    let polls = resource_polls(&file);
    assert!(polls.len() >= 100, "{} polls in 30 s", polls.len());
    for (field, category) in [("cpu.total_time", "cpu"), ("memory.resident", "memory")] {
        let mut unanswered = 0;
        for (index, poll) in polls.iter().enumerate() {
            if poll.values.contains_key(field) {
                continue;
            }
            match (poll.supplied.get(field), poll.sampled) {
                // The category answered: the null must be the coverage rule's (a
                // sampled process did not supply the field), or the tree's
                // all-or-nothing rule (a listed process exited before it was read).
                (Some(supplied), Some(sampled)) => assert!(
                    supplied < &sampled
                        || poll
                            .values
                            .get("process.active_count")
                            .is_some_and(|listed| *listed > sampled),
                    "poll {index}: {field} null though all {sampled} processes listed supplied it"
                ),
                _ => unanswered += 1,
            }
        }
        let missed = occurrences(&report, &format!("sampler.{category}.deadline_missed"));
        assert!(
            unanswered <= missed,
            "{unanswered} polls without {category}, {missed} deadline misses recorded"
        );
    }
    // Counts stay consistent in every poll.
    for poll in &polls {
        let (Some(active), Some(descendants)) = (
            poll.values.get("process.active_count"),
            poll.values.get("process.descendant_count"),
        ) else {
            continue;
        };
        // Listed when collection began (active) ≥ read (the root and its live
        // descendants): the gap is the children that exited in between.
        assert!(
            *descendants + 1.0 <= *active,
            "{descendants} + 1 > {active}"
        );
        if let Some(sampled) = poll.sampled {
            assert_eq!(
                sampled,
                descendants + 1.0,
                "sampled: the root and its descendants"
            );
        }
    }
}

/// A TCP front for a collector that flaps: up (every connection passed through to
/// the real collector), down (connections closed at once) and hanging (accepted,
/// never answered), switching every `phase` and closing open connections at each
/// switch.
struct FlappingCollector {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FlappingCollector {
    fn start(upstream: std::net::SocketAddr, phase: Duration) -> FlappingCollector {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let mode = Arc::new(AtomicUsize::new(0));
        let open: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        {
            let (stop, mode, open) = (Arc::clone(&stop), Arc::clone(&mode), Arc::clone(&open));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(phase);
                    mode.store((mode.load(Ordering::Relaxed) + 1) % 3, Ordering::Relaxed);
                    for stream in open.lock().unwrap().drain(..) {
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    }
                }
            });
        }
        let accept_stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !accept_stop.load(Ordering::Relaxed) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let _ = stream.set_nonblocking(false);
                match mode.load(Ordering::Relaxed) {
                    0 => {
                        let Ok(server) = std::net::TcpStream::connect(upstream) else {
                            continue;
                        };
                        let mut list = open.lock().unwrap();
                        list.push(stream.try_clone().unwrap());
                        list.push(server.try_clone().unwrap());
                        drop(list);
                        pipe(stream.try_clone().unwrap(), server.try_clone().unwrap());
                        pipe(server, stream);
                    }
                    1 => drop(stream),
                    _ => open.lock().unwrap().push(stream),
                }
            }
        });
        FlappingCollector { port, stop }
    }
}

fn pipe(mut from: std::net::TcpStream, mut to: std::net::TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

impl Drop for FlappingCollector {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[path = "../exporters/tests/support/rotel_agent.rs"]
mod rotel_agent;

#[allow(clippy::await_holding_lock)] // a std lock: the tests run on threads of their own
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_flapping_for_a_minute_moves_no_poll_and_memory_stays_bounded() {
    let _alone = support::one_at_a_time(&ONE_AT_A_TIME);
    use std::sync::Arc;
    use wattline::config::{
        EffectiveConfig, OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport,
        ResourceMetricsConfig,
    };
    let Some(path) = rotel_agent::agent_path() else {
        return;
    };
    let (grpc, http) = (support::free_port(), support::free_port());
    let grpc_address: std::net::SocketAddr = format!("127.0.0.1:{grpc}").parse().unwrap();
    let mut agent = rotel_agent::Agent::start(
        &path,
        grpc_address,
        format!("127.0.0.1:{http}").parse().unwrap(),
    );
    agent.wait_for("listening", |_| rotel_agent::listening(grpc_address));
    let flapping = FlappingCollector::start(grpc_address, Duration::from_secs(4));

    let period = Duration::from_millis(500);
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 500;
    let mut endpoint = OtlpEndpointConfig::new(
        format!("http://127.0.0.1:{}", flapping.port),
        OtlpTransport::Grpc,
    );
    endpoint.timeout_millis = 300;
    let config = EffectiveConfig {
        resource_metrics: Some(resource),
        opentelemetry: Some(OpenTelemetryConfig {
            export_interval_millis: 250,
            endpoints: vec![endpoint],
            ..OpenTelemetryConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    let seen = Arc::new(wattline::events::CollectingEventSink::default());
    let pipeline = wattline::Pipeline::builder()
        .config(config)
        .gpu_source(|| None)
        .event_sink(seen.clone())
        .spawn()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let warm = resident_kib();
    tokio::time::sleep(Duration::from_secs(50)).await;
    let end = resident_kib();
    let report = pipeline.shutdown().await.unwrap().unwrap();
    drop(flapping);

    let marks = support::marks(&seen.events());
    assert!(marks.len() >= 110, "only {} polls in 60 s", marks.len());
    let first = marks[0].timestamp;
    let tolerance = period / 10;
    for (k, mark) in marks.iter().enumerate() {
        let offset = (mark.timestamp - first).to_std().unwrap_or_default();
        let expected = period * k as u32;
        assert!(
            offset.abs_diff(expected) < tolerance,
            "poll {k} at {offset:?}, expected {expected:?} (±{tolerance:?})"
        );
    }
    // Memory: what 50 s of flapping added is small and not a queue of everything.
    assert!(
        end.saturating_sub(warm) < 16 * 1024,
        "resident memory grew from {warm} KiB to {end} KiB"
    );
    // The collector saw data in its up phases, and the failures were counted.
    assert!(
        agent.output().contains("nemo.relay.resource"),
        "nothing arrived"
    );
    let otlp = exporter_outcome(&report, "opentelemetry");
    assert!(otlp.failed > 0, "{otlp:?}");
}

fn exporter_outcome<'a>(
    report: &'a wattline::EnergyReport,
    name: &str,
) -> &'a wattline_model::report::ExporterOutcome {
    report
        .exporters
        .iter()
        .find(|outcome| outcome.name == name)
        .unwrap_or_else(|| panic!("no {name} outcome"))
}

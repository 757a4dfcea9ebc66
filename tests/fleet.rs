//! A fleet into one collector: twenty wattline processes at once (library hosts and
//! `wattline run`s, half each), each with concurrent steps, export metrics and spans
//! over OTLP to one real collector (rotel) for 30 s; the collector forwards everything
//! to an in-test receiver, where it is decoded with the official `opentelemetry-proto`
//! types and checked against each process's own final report: every step counted once
//! with its energy (no loss), each process's series under its own resource, and every
//! step's span where the process put it.
//!
//! OTLP delivers at least once: a collector whose own export timed out sends its batch
//! again (rotel does, after its 5 s request timeout, though the receiver had taken it).
//! So spans are counted by span ID, a span delivered again must be the same span, and
//! the repeats are printed with the hop that made them: a request the collector sent
//! again whole, or a span that reached the collector twice (wattline's exporter sending
//! what the collector had taken), which must not happen.
//!
//! Each process's CPU time, the bytes it sent to the collector (through a counting
//! proxy) and the slowest answer its exporter had from the collector are printed:
//! figures for the README and the export timeout, not assertions.

mod support;

#[path = "../exporters/tests/support/mod.rs"]
mod otlp;
#[path = "../exporters/tests/support/rotel_agent.rs"]
mod rotel_agent;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{HistogramDataPoint, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use support::wattline;

/// Processes at once: the even ones library hosts, the odd ones `wattline run`s.
const PROCESSES: usize = 20;
/// How long each keeps starting steps.
const SECONDS: &str = "30";
/// Every process's `service.name`: one service on many hosts, told apart by the rest of
/// the resource.
const SERVICE: &str = "fleet-agent";
const JOULES_PER_KILOWATT_HOUR: f64 = 3.6e6;

fn fleet_host() -> PathBuf {
    support::example("fleet_host")
}

/// Forwards every connection to `upstream`, counting the bytes each way: what one
/// process sent its collector, on the wire.
struct CountingProxy {
    address: SocketAddr,
    sent: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
}

impl CountingProxy {
    fn start(upstream: SocketAddr) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (sent, received) = (Arc::<AtomicU64>::default(), Arc::<AtomicU64>::default());
        let counters = (Arc::clone(&sent), Arc::clone(&received));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(upstream) else {
                    continue;
                };
                pump(&client, &server, Arc::clone(&counters.0));
                pump(&server, &client, Arc::clone(&counters.1));
            }
        });
        CountingProxy {
            address,
            sent,
            received,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

/// Copies `from` to `to` on a thread of its own, adding what it copies to `count`.
fn pump(from: &TcpStream, to: &TcpStream, count: Arc<AtomicU64>) {
    let (mut from, mut to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
    std::thread::spawn(move || {
        let mut chunk = [0u8; 16384];
        while let Ok(n) = from.read(&mut chunk) {
            if n == 0 || to.write_all(&chunk[..n]).is_err() {
                break;
            }
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

/// Whether process `index` is a library host (else a `wattline run`).
fn is_library_host(index: usize) -> bool {
    index.is_multiple_of(2)
}

/// The caller's span process `index` gives its `request` steps: a trace and a span ID
/// of its own.
fn caller(index: usize) -> (String, String) {
    (
        format!(
            "{:032x}",
            0xf1ee_7000_0000_0000_0000_0000_0000_0000u128 + index as u128
        ),
        format!("{:016x}", 0xca11_e400_0000_0000u64 + index as u64),
    )
}

/// One process of the fleet, finished.
struct Finished {
    index: usize,
    kind: &'static str,
    pid: u32,
    /// The run ID it printed (library hosts only).
    run_id: Option<String>,
    report: serde_json::Value,
    /// Its own CPU time and its reaped children's (the measured program, the
    /// stand-in `nvidia-smi`), seconds.
    cpu_seconds: f64,
    children_cpu_seconds: f64,
    sent: u64,
    received: u64,
}

/// CPU seconds of exited child `pid` (own, children's), read from its
/// `/proc/PID/stat` before it is reaped.
fn cpu_of_exited(pid: u32) -> (f64, f64) {
    // SAFETY: waitid only writes the siginfo it is given; WNOWAIT leaves the child a
    // zombie, so its /proc entry and its pid stay until `Child::wait` reaps it.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let waited = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        );
        assert_eq!(
            waited,
            0,
            "waitid {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which ends at the last ')': state is field 3,
    // utime 14, stime 15, cutime 16, cstime 17.
    let fields: Vec<f64> = stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .map(|field| field.parse().unwrap_or(0.0))
        .collect();
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (
        (fields[11] + fields[12]) / ticks,
        (fields[13] + fields[14]) / ticks,
    )
}

fn start_process(
    index: usize,
    collector: &str,
    home: &Path,
    path: &str,
    config: &Path,
) -> std::process::Child {
    let (trace, span) = caller(index);
    let traceparent = format!("00-{trace}-{span}-01");
    let mut command = if is_library_host(index) {
        let mut command = Command::new(fleet_host());
        command
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join("xdg"))
            .args(["--otlp", collector, "--export-interval-millis", "1000"]);
        command
    } else {
        let mut command = wattline(home);
        command
            .arg("run")
            .arg("--config")
            .arg(config)
            .args(["--quiet", "--interval", "500", "--report", "json"])
            .args(["--otlp", collector, "--otlp-spans", "--"])
            .arg(fleet_host())
            .arg("--worker");
        command
    };
    command
        .args(["--seconds", SECONDS, "--traceparent", &traceparent])
        .env("PATH", path)
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.5")
        .env("OTEL_SERVICE_NAME", SERVICE)
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for process `index` to exit; parses what it printed.
fn finish(index: usize, mut child: std::process::Child, proxy: &CountingProxy) -> Finished {
    let pid = child.id();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let (cpu_seconds, children_cpu_seconds) = cpu_of_exited(pid);
    let status = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert!(status.success(), "process {index} ({pid}): {stderr}");
    let run_id = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run id: "))
        .map(str::to_owned);
    let report_start = stdout.find("{\n").expect("a JSON report on stdout");
    Finished {
        index,
        kind: if is_library_host(index) {
            "library host"
        } else {
            "wattline run"
        },
        pid,
        run_id,
        report: serde_json::from_str(&stdout[report_start..]).unwrap(),
        cpu_seconds,
        children_cpu_seconds,
        sent: proxy.sent.load(Ordering::Relaxed),
        received: proxy.received.load(Ordering::Relaxed),
    }
}

fn int_attribute(attributes: &[KeyValue], key: &str) -> Option<i64> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::IntValue(value) => Some(*value),
            _ => None,
        }
    })
}

fn double_attribute(attributes: &[KeyValue], key: &str) -> Option<f64> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::DoubleValue(value) => Some(*value),
            _ => None,
        }
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the collector passed on for one process (by `process.pid`).
#[derive(Default)]
struct Delivered {
    /// Every `wattline.run.id`, `service.name` and `host.name` its resources carried.
    run_ids: BTreeSet<String>,
    services: BTreeSet<String>,
    hosts: BTreeSet<String>,
    /// The newest cumulative point of each per-step histogram, by (metric, step name).
    latest: BTreeMap<(String, String), HistogramDataPoint>,
    /// Every point's (time, count) by (metric, step name), in arrival order: what a
    /// failure shows.
    history: BTreeMap<(String, String), Vec<(u64, u64)>>,
    spans: Vec<Span>,
    /// For each of `spans`, the collector's request that carried it: its number in
    /// arrival order and a hash of its bytes (a request sent again whole has the same
    /// hash and another number).
    span_requests: Vec<(usize, u64)>,
    /// Encoded size of its resource metrics, and of its spans, as they left the
    /// collector.
    metric_bytes: usize,
    span_bytes: usize,
}

/// Adds what the receiver got since the last call to `by_pid`, sorted by the
/// `process.pid` of each resource.
fn take_delivered(receiver: &otlp::Receiver, by_pid: &mut BTreeMap<i64, Delivered>) {
    let mut resource_of = |resource: Option<
        &opentelemetry_proto::tonic::resource::v1::Resource,
    >| {
        let attributes = resource.map(|r| r.attributes.as_slice()).unwrap_or(&[]);
        let pid = int_attribute(attributes, "process.pid").expect("process.pid on every resource");
        let entry = by_pid.entry(pid).or_default();
        for (key, set) in [
            ("wattline.run.id", &mut entry.run_ids),
            ("service.name", &mut entry.services),
            ("host.name", &mut entry.hosts),
        ] {
            set.insert(otlp::string_attribute(attributes, key).unwrap_or_default());
        }
        pid
    };
    let mut metrics = Vec::new();
    for received in receiver.inbox.take() {
        for resource_metrics in received.request.resource_metrics {
            let pid = resource_of(resource_metrics.resource.as_ref());
            metrics.push((pid, resource_metrics));
        }
    }
    let mut spans = Vec::new();
    for request in receiver.spans.take() {
        let number = REQUESTS_SEEN.fetch_add(1, Ordering::Relaxed);
        let fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            request.encode_to_vec().hash(&mut hasher);
            hasher.finish()
        };
        for resource_spans in request.resource_spans {
            let pid = resource_of(resource_spans.resource.as_ref());
            spans.push((pid, (number, fingerprint), resource_spans));
        }
    }
    for (pid, resource_metrics) in metrics {
        let entry = by_pid.get_mut(&pid).unwrap();
        entry.metric_bytes += resource_metrics.encoded_len();
        for metric in resource_metrics
            .scope_metrics
            .iter()
            .flat_map(|s| &s.metrics)
        {
            let Some(metric::Data::Histogram(histogram)) = &metric.data else {
                continue;
            };
            for point in &histogram.data_points {
                let Some(step) = otlp::string_attribute(&point.attributes, "wattline.scope.name")
                else {
                    continue;
                };
                let key = (metric.name.clone(), step);
                entry
                    .history
                    .entry(key.clone())
                    .or_default()
                    .push((point.time_unix_nano, point.count));
                let newer = entry
                    .latest
                    .get(&key)
                    .is_none_or(|seen| seen.time_unix_nano <= point.time_unix_nano);
                if newer {
                    entry.latest.insert(key, point.clone());
                }
            }
        }
    }
    for (pid, fingerprint, resource_spans) in spans {
        let entry = by_pid.get_mut(&pid).unwrap();
        entry.span_bytes += resource_spans.encoded_len();
        for span in resource_spans
            .scope_spans
            .into_iter()
            .flat_map(|scope| scope.spans)
        {
            entry.spans.push(span);
            entry.span_requests.push(fingerprint);
        }
    }
}

/// The report's steps called `name`.
fn steps<'a>(report: &'a serde_json::Value, name: &str) -> Vec<&'a serde_json::Value> {
    report["agent_scopes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|scope| scope["name"] == name)
        .collect()
}

fn joules(scope: &serde_json::Value, field: &str) -> f64 {
    scope[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no {field} in {scope}"))
        * JOULES_PER_KILOWATT_HOUR
}

fn close(seen: f64, expected: f64) -> bool {
    (seen - expected).abs() <= 1e-9 * expected.abs().max(1e-12)
}

/// The span ID of the scope with UUID `uuid`: its last 64 bits, as wattline makes it.
fn span_id_of(uuid: &str) -> String {
    let low = uuid::Uuid::parse_str(uuid).unwrap().as_u128() as u64;
    format!("{:016x}", if low == 0 { 1 } else { low })
}

/// The spans delivered more than once, each by its span ID: every delivery's index in
/// `delivered.spans`.
fn repeated(delivered: &Delivered) -> BTreeMap<Vec<u8>, Vec<usize>> {
    let mut deliveries: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    for (index, span) in delivered.spans.iter().enumerate() {
        deliveries
            .entry(span.span_id.clone())
            .or_default()
            .push(index);
    }
    deliveries.retain(|_, indexes| indexes.len() > 1);
    deliveries
}

/// Trace requests the receiver has taken, numbered in arrival order.
static REQUESTS_SEEN: AtomicUsize = AtomicUsize::new(0);

/// The repeats of `delivered`, by hop: (deliveries in another request with the first's
/// very bytes: the collector sent its request again whole; the rest: the span reached
/// the collector more than once).
fn repeats_by_hop(delivered: &Delivered) -> (usize, usize) {
    let (mut collector, mut upstream) = (0, 0);
    for indexes in repeated(delivered).values() {
        let (first_number, first_bytes) = delivered.span_requests[indexes[0]];
        for &index in &indexes[1..] {
            let (number, bytes) = delivered.span_requests[index];
            if bytes == first_bytes && number != first_number {
                collector += 1;
            } else {
                upstream += 1;
            }
        }
    }
    (collector, upstream)
}

/// The distinct span IDs delivered.
fn unique_spans(delivered: &Delivered) -> usize {
    delivered
        .spans
        .iter()
        .map(|span| &span.span_id)
        .collect::<BTreeSet<_>>()
        .len()
}

/// Whether everything process `process` reported has arrived: every step's histogram
/// point at its final count, and one span per step.
fn complete(process: &Finished, delivered: &Delivered) -> bool {
    let scopes = process.report["agent_scopes"].as_array().unwrap();
    let names: BTreeSet<&str> = scopes.iter().filter_map(|s| s["name"].as_str()).collect();
    unique_spans(delivered) >= scopes.len()
        && names.iter().all(|name| {
            delivered
                .latest
                .get(&("wattline.scope.energy.attributed".into(), name.to_string()))
                .is_some_and(|point| point.count >= steps(&process.report, name).len() as u64)
        })
}

#[test]
fn twenty_processes_into_one_collector_lose_nothing_and_stay_apart() {
    let Some(path) = rotel_agent::agent_path() else {
        return;
    };
    let started = Instant::now();
    let receiver = otlp::grpc_receiver();
    let (grpc, http) = (support::free_port(), support::free_port());
    let grpc_address: SocketAddr = format!("127.0.0.1:{grpc}").parse().unwrap();
    let agent = {
        let mut agent = rotel_agent::Agent::start_forwarding(
            &path,
            grpc_address,
            format!("127.0.0.1:{http}").parse().unwrap(),
            &receiver.url(),
        );
        agent.wait_for("listening", |_| rotel_agent::listening(grpc_address));
        agent
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        "version = 1\n\n[[components]]\nkind = \"opentelemetry\"\n[components.config]\n\
         export_interval_millis = 1000\n",
    )
    .unwrap();
    let (_stand_in, stand_in_path) = support::path_with_stand_in_nvidia_smi();

    // All at once, each through its own counting proxy to the one collector.
    let proxies: Vec<CountingProxy> = (0..PROCESSES)
        .map(|_| CountingProxy::start(grpc_address))
        .collect();
    let children: Vec<std::process::Child> = proxies
        .iter()
        .enumerate()
        .map(|(index, proxy)| {
            let home = home.path().join(format!("process-{index}"));
            std::fs::create_dir_all(&home).unwrap();
            start_process(index, &proxy.url(), &home, &stand_in_path, &config)
        })
        .collect();
    let finished: Vec<Finished> = std::thread::scope(|scope| {
        let waits: Vec<_> = children
            .into_iter()
            .zip(&proxies)
            .enumerate()
            .map(|(index, (child, proxy))| scope.spawn(move || finish(index, child, proxy)))
            .collect();
        waits.into_iter().map(|wait| wait.join().unwrap()).collect()
    });
    let all_exited = started.elapsed();

    // The collector batches and forwards on its own time: wait (bounded) until every
    // process's last export has come through, then check exactly.
    let mut by_pid: BTreeMap<i64, Delivered> = BTreeMap::new();
    let deadline = Instant::now() + rotel_agent::WAIT;
    loop {
        take_delivered(&receiver, &mut by_pid);
        let done = finished.iter().all(|process| {
            by_pid
                .get(&i64::from(process.pid))
                .is_some_and(|delivered| complete(process, delivered))
        });
        if done || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    // Separated by resource: exactly the fleet's processes, each with one run ID of
    // its own (a library host's the one it printed), the shared service name.
    let pids: BTreeSet<i64> = finished.iter().map(|p| i64::from(p.pid)).collect();
    assert_eq!(
        by_pid.keys().copied().collect::<BTreeSet<_>>(),
        pids,
        "sent: {:?}\ncollector:\n{}",
        finished.iter().map(|p| p.sent).collect::<Vec<_>>(),
        agent.output()
    );
    let mut run_ids = BTreeSet::new();
    for process in &finished {
        let delivered = &by_pid[&i64::from(process.pid)];
        assert_eq!(
            delivered.run_ids.len(),
            1,
            "{}: {:?}",
            process.index,
            delivered.run_ids
        );
        let run_id = delivered.run_ids.first().unwrap();
        assert!(uuid::Uuid::parse_str(run_id).is_ok(), "{run_id}");
        assert!(run_ids.insert(run_id.clone()), "run ID {run_id} twice");
        if is_library_host(process.index) {
            assert_eq!(
                Some(run_id),
                process.run_id.as_ref(),
                "process {}",
                process.index
            );
        }
        assert_eq!(
            delivered.services,
            BTreeSet::from([SERVICE.to_string()]),
            "process {}",
            process.index
        );
        assert_eq!(delivered.hosts.len(), 1, "{:?}", delivered.hosts);
    }

    // No loss: each process's final cumulative points are its own report's steps.
    for process in &finished {
        let delivered = &by_pid[&i64::from(process.pid)];
        let report = &process.report;
        let names: &[&str] = if is_library_host(process.index) {
            &["request", "tool", "background"]
        } else {
            &["request", "background"]
        };
        let all = report["agent_scopes"].as_array().unwrap();
        assert_eq!(
            all.len(),
            names
                .iter()
                .map(|name| steps(report, name).len())
                .sum::<usize>(),
            "process {}: steps other than {names:?}",
            process.index
        );
        // The process itself says every export went through (else what is missing
        // below is said, not silent).
        let exporters = report["exporters"].as_array().unwrap();
        assert!(!exporters.is_empty(), "process {}: {report}", process.index);
        for outcome in exporters {
            for count in ["dropped", "failed", "lost"] {
                assert_eq!(outcome[count], 0, "process {}: {outcome}", process.index);
            }
        }
        for name in names {
            let of_name = steps(report, name);
            assert!(
                of_name.len() >= 10,
                "process {}: {} {name}",
                process.index,
                of_name.len()
            );
            for (metric, field) in [
                ("wattline.scope.energy.attributed", "attributed_energy_kwh"),
                ("wattline.scope.energy.window", "energy_kwh"),
            ] {
                let point = delivered
                    .latest
                    .get(&(metric.to_string(), name.to_string()))
                    .unwrap_or_else(|| panic!("process {}: no {metric} {name}", process.index));
                let expected: f64 = of_name.iter().map(|scope| joules(scope, field)).sum();
                let key = (metric.to_string(), name.to_string());
                assert_eq!(
                    point.count,
                    of_name.len() as u64,
                    "process {} {metric} {name}: points (time, count) {:?}; {} spans; \
                     exporters {}; collector errors:\n{}",
                    process.index,
                    delivered.history[&key],
                    delivered.spans.len(),
                    process.report["exporters"],
                    agent
                        .output()
                        .lines()
                        .filter(|line| !line.contains(" INFO "))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                let sum = point.sum.unwrap();
                assert!(
                    close(sum, expected) && expected > 0.0,
                    "process {} {metric} {name}: {sum} J received, {expected} J reported",
                    process.index
                );
            }
        }
    }

    // Spans: one per step (by span ID: a repeat is the same span), parented as the
    // process gave them; none reached the collector twice.
    for process in &finished {
        let delivered = &by_pid[&i64::from(process.pid)];
        let scopes = process.report["agent_scopes"].as_array().unwrap();
        for (span_id, indexes) in repeated(delivered) {
            let first = &delivered.spans[indexes[0]];
            for &again in &indexes[1..] {
                assert_eq!(
                    &delivered.spans[again],
                    first,
                    "process {}: span {} delivered again differs",
                    process.index,
                    hex(&span_id)
                );
            }
        }
        let (_, upstream) = repeats_by_hop(delivered);
        assert_eq!(
            upstream, 0,
            "process {}: spans reached the collector more than once",
            process.index
        );
        let (caller_trace, caller_span) = caller(process.index);
        let by_span_id: BTreeMap<String, &Span> = delivered
            .spans
            .iter()
            .map(|span| (hex(&span.span_id), span))
            .collect();
        assert_eq!(
            by_span_id.len(),
            scopes.len(),
            "process {}: one span per step",
            process.index
        );
        let scope_by_uuid: BTreeMap<&str, &serde_json::Value> = scopes
            .iter()
            .map(|scope| (scope["uuid"].as_str().unwrap(), scope))
            .collect();
        for scope in scopes {
            let uuid = scope["uuid"].as_str().unwrap();
            let span = by_span_id
                .get(&span_id_of(uuid))
                .unwrap_or_else(|| panic!("process {}: no span for {scope}", process.index));
            assert_eq!(span.name, scope["name"].as_str().unwrap());
            let (trace, parent) = match span.name.as_str() {
                "request" => (caller_trace.clone(), caller_span.clone()),
                "tool" => {
                    let parent_uuid = scope["parent_uuid"].as_str().unwrap();
                    assert_eq!(scope_by_uuid[parent_uuid]["name"], "request");
                    (caller_trace.clone(), span_id_of(parent_uuid))
                }
                _ => (uuid.replace('-', ""), String::new()),
            };
            assert_eq!(hex(&span.trace_id), trace, "{scope}");
            assert_eq!(hex(&span.parent_span_id), parent, "{scope}");
            let on_span = double_attribute(&span.attributes, "wattline.energy.attributed_joules");
            let reported = joules(scope, "attributed_energy_kwh");
            assert!(
                on_span.is_some_and(|joules| close(joules, reported)),
                "{on_span:?} vs {reported}"
            );
        }
    }

    eprintln!(
        "\n{PROCESSES} processes, {SECONDS} s each, all exited after {:.1} s; checked after {:.1} s",
        all_exited.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    eprintln!(
        "process  kind          steps  CPU own s  CPU children s  sent B  received B  forwarded metrics B  forwarded spans B  slowest answer ms  spans repeated (collector, upstream)"
    );
    let mut repeats = (0, 0);
    for process in &finished {
        let delivered = &by_pid[&i64::from(process.pid)];
        let slowest = process.report["exporters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|outcome| outcome["slowest_answer_millis"].as_u64())
            .max();
        let (collector, upstream) = repeats_by_hop(delivered);
        repeats = (repeats.0 + collector, repeats.1 + upstream);
        eprintln!(
            "{:>7}  {:<12}  {:>5}  {:>9.2}  {:>14.2}  {:>6}  {:>10}  {:>19}  {:>17}  {:>17}  ({collector}, {upstream})",
            process.index,
            process.kind,
            process.report["agent_scopes"].as_array().unwrap().len(),
            process.cpu_seconds,
            process.children_cpu_seconds,
            process.sent,
            process.received,
            delivered.metric_bytes,
            delivered.span_bytes,
            slowest.map_or_else(|| "-".to_string(), |ms| ms.to_string()),
        );
    }
    eprintln!(
        "spans delivered again: {} in requests the collector sent again whole, {} that reached it twice",
        repeats.0, repeats.1
    );
}

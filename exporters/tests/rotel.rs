//! Against a real OpenTelemetry collector: `rotel-agent` (from the `rotel` Python
//! package) with its blackhole exporter and detailed metric debug logs. The exporter
//! sends over gRPC and HTTP/protobuf; the metric names and values must show up in the
//! collector's output.
//!
//! `WATTLINE_ROTEL_AGENT` names the binary (`.ci/run` installs it). Without it the test
//! fails — under `CI` always, elsewhere unless `WATTLINE_SKIP_ROTEL=1` says to skip, which
//! it then does loudly.

mod support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::free_address;
use wattline_actors::events::{
    MetricKind, MetricMeasurement, MetricValue, MetricValueType, PipelineEvent,
};
use wattline_config::{MetricTemporality, OtlpTransport};
use wattline_exporters::{Exporter, OtlpExporter};

const WAIT: Duration = Duration::from_secs(60);

fn agent_path() -> Option<String> {
    if let Some(path) = std::env::var_os("WATTLINE_ROTEL_AGENT") {
        return Some(path.to_string_lossy().into_owned());
    }
    let help = "WATTLINE_ROTEL_AGENT is not set: the real-collector test cannot run. Install it with \
                `python3 -m venv .ci/venv && .ci/venv/bin/pip install rotel` and set \
                WATTLINE_ROTEL_AGENT=.ci/venv/lib/python3.*/site-packages/rotel/rotel-agent \
                (bash .ci/run does both), or set WATTLINE_SKIP_ROTEL=1 to skip it outside CI.";
    if std::env::var_os("CI").is_some() {
        panic!("{help}");
    }
    if std::env::var("WATTLINE_SKIP_ROTEL").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: the rotel collector test did not run !!!!!!!!\n{help}\n");
        return None;
    }
    panic!("{help}");
}

/// The agent and everything it printed so far (stdout and stderr together).
struct Agent {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Agent {
    fn start(path: &str, grpc: std::net::SocketAddr, http: std::net::SocketAddr) -> Agent {
        let mut child = Command::new(path)
            .args([
                "start",
                "--otlp-grpc-endpoint",
                &grpc.to_string(),
                "--otlp-http-endpoint",
                &http.to_string(),
                "--exporter",
                "blackhole",
                "--debug-log",
                "metrics",
                "--debug-log-verbosity",
                "detailed",
            ])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {path}: {error}"));
        let output = Arc::new(Mutex::new(String::new()));
        for mut stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                let mut chunk = [0u8; 8192];
                while let Ok(n) = stream.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    output
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&chunk[..n]));
                }
            });
        }
        Agent { child, output }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits (bounded) until `condition` holds for the output.
    fn wait_for(&mut self, what: &str, condition: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + WAIT;
        while !condition(&self.output()) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "rotel-agent exited ({status}) before {what}:\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {WAIT:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn listening(address: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
}

fn gauge(name: &str, value: f64) -> PipelineEvent {
    PipelineEvent::Metrics {
        timestamp: support::at(0, 0),
        measurements: vec![MetricMeasurement {
            name: name.into(),
            kind: MetricKind::Gauge,
            value_type: MetricValueType::F64,
            value: MetricValue::F64(value),
            unit: Some("W".into()),
            description: Some("rotel round trip".into()),
            attributes: support::attrs(&[("gpu_id", "GPU-rotel")]),
            boundaries: None,
        }],
    }
}

#[test]
fn rotel_collector_receives_metrics_over_grpc_and_http() {
    let Some(path) = agent_path() else {
        return;
    };
    let (grpc, http) = (free_address(), free_address());
    let mut agent = Agent::start(&path, grpc, http);
    let deadline = Instant::now() + WAIT;
    while !(listening(grpc) && listening(http)) {
        if let Ok(Some(status)) = agent.child.try_wait() {
            panic!("rotel-agent exited ({status}):\n{}", agent.output());
        }
        assert!(
            Instant::now() < deadline,
            "rotel-agent never listened:\n{}",
            agent.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    for (address, transport, name, value) in [
        (grpc, OtlpTransport::Grpc, "wattline.rotel.grpc_power", 41.5),
        (
            http,
            OtlpTransport::HttpBinary,
            "wattline.rotel.http_power",
            42.75,
        ),
    ] {
        let config = support::otel_config(
            &format!("http://{address}"),
            transport,
            MetricTemporality::Delta,
            5_000,
        );
        let mut exporter = OtlpExporter::builder(config).build().unwrap();
        exporter.export(&gauge(name, value)).unwrap();
        exporter
            .flush()
            .unwrap_or_else(|error| panic!("{transport:?}: {error}\n{}", agent.output()));
        exporter.shutdown().unwrap();
        agent.wait_for(name, |output| output.contains(name));
        let output = agent.output();
        let after = &output[output.find(name).unwrap_or(0)..];
        for shown in [
            "-> Unit: W".to_string(),
            "-> DataType: Gauge".to_string(),
            "-> gpu_id: Str(GPU-rotel)".to_string(),
            format!("Value: {value}"),
        ] {
            assert!(
                after.contains(&shown),
                "{transport:?}: {shown:?} not shown:\n{output}"
            );
        }
        assert!(
            output.contains("-> service.name: Str(wattline-test)"),
            "{output}"
        );
    }
}

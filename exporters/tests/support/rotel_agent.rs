//! Starts the real `rotel-agent` OTLP collector for tests and collects what it prints.
//! Shared by the exporters' collector test and the workspace's end-to-end test.

#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long to wait for the collector.
pub const WAIT: Duration = Duration::from_secs(60);

pub fn agent_path() -> Option<String> {
    let under_ci =
        std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"));
    if under_ci && std::env::var_os("WATTLINE_SKIP_ROTEL").is_some() {
        panic!(
            "WATTLINE_SKIP_ROTEL is set under CI: CI runs every test; unset WATTLINE_SKIP_ROTEL"
        );
    }
    if let Some(path) = std::env::var_os("WATTLINE_ROTEL_AGENT") {
        return Some(path.to_string_lossy().into_owned());
    }
    let help = "WATTLINE_ROTEL_AGENT is not set: the real-collector test cannot run. Install it with \
                `python3 -m venv .ci/venv && .ci/venv/bin/pip install rotel` and set \
                WATTLINE_ROTEL_AGENT=.ci/venv/lib/python3.*/site-packages/rotel/rotel-agent \
                (bash .ci/run does both), or set WATTLINE_SKIP_ROTEL=1 to skip it outside CI.";
    if under_ci {
        panic!("{help}");
    }
    if std::env::var("WATTLINE_SKIP_ROTEL").as_deref() == Ok("1") {
        eprintln!("\n!!!!!!!! SKIPPED: the rotel collector test did not run !!!!!!!!\n{help}\n");
        return None;
    }
    panic!("{help}");
}

/// The agent and everything it printed so far (stdout and stderr together).
pub struct Agent {
    pub child: Child,
    pub output: Arc<Mutex<String>>,
}

impl Agent {
    /// An agent that prints the metrics it receives and exports nothing.
    pub fn start(path: &str, grpc: std::net::SocketAddr, http: std::net::SocketAddr) -> Agent {
        Agent::start_exporting(
            path,
            grpc,
            http,
            &[
                "--exporter",
                "blackhole",
                "--debug-log",
                "metrics",
                "--debug-log-verbosity",
                "detailed",
            ],
        )
    }

    /// An agent that forwards everything it receives (metrics and traces) over OTLP
    /// gRPC (gzip, its default) to `downstream` (`http://HOST:PORT`, e.g. a
    /// [`super::grpc_receiver`]): a collector tier in the middle, its output checked
    /// exactly.
    pub fn start_forwarding(
        path: &str,
        grpc: std::net::SocketAddr,
        http: std::net::SocketAddr,
        downstream: &str,
    ) -> Agent {
        Agent::start_exporting(
            path,
            grpc,
            http,
            &["--exporter", "otlp", "--otlp-exporter-endpoint", downstream],
        )
    }

    /// An agent receiving OTLP on `grpc` and `http`, exporting as `exporter` says.
    fn start_exporting(
        path: &str,
        grpc: std::net::SocketAddr,
        http: std::net::SocketAddr,
        exporter: &[&str],
    ) -> Agent {
        let mut child = Command::new(path)
            .args([
                "start",
                "--otlp-grpc-endpoint",
                &grpc.to_string(),
                "--otlp-http-endpoint",
                &http.to_string(),
            ])
            .args(exporter)
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

    pub fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits (bounded) until `condition` holds for the output.
    pub fn wait_for(&mut self, what: &str, condition: impl Fn(&str) -> bool) {
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

pub fn listening(address: std::net::SocketAddr) -> bool {
    std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
}

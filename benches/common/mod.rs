//! What the scale and soak benchmarks share: the pipeline's configuration (polling,
//! ATOF into a directory, OTLP to a collector), the collector itself (the real
//! `rotel-agent`, or a labelled stand-in), and this process's CPU time and RSS.

#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wattline::config::{EffectiveConfig, ResourceMetricsConfig};
use wattline::overrides::{enable_atof, enable_otlp};

/// The real pipeline's configuration as the library starts it (process tree of this
/// process, energy and diagnostics on), with polling every `interval_millis`, the
/// ATOF file in `atof_directory` when given, and OTLP over gRPC to `otlp_url` exported
/// every `export_millis` when given.
pub fn pipeline_config(
    interval_millis: u64,
    atof_directory: Option<&Path>,
    otlp: Option<(&str, u64)>,
) -> EffectiveConfig {
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = interval_millis;
    let mut config = EffectiveConfig {
        resource_metrics: Some(resource),
        ..EffectiveConfig::default()
    };
    if let Some(directory) = atof_directory {
        enable_atof(&mut config, directory, "atof directory").expect("a valid directory");
    }
    if let Some((url, export_millis)) = otlp {
        enable_otlp(&mut config, url, "otlp url").expect("a valid URL");
        if let Some(otlp) = &mut config.opentelemetry {
            otlp.export_interval_millis = export_millis;
        }
    }
    config
}

/// A number from the environment, or `default`.
pub fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a whole number")),
        Err(_) => default,
    }
}

/// CPU time (user + system, every thread) this process has used, in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the rusage we own.
    let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(status, 0, "getrusage failed");
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU time the calling thread has used, in seconds (the scheduler's own count, to
/// the nanosecond: `getrusage` samples at the tick).
pub fn thread_cpu_seconds() -> f64 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime failed");
    time.tv_sec as f64 + time.tv_nsec as f64 / 1e9
}

/// Minor page faults the calling thread has taken (`getrusage(RUSAGE_THREAD)`): each
/// a fresh page of memory touched for the first time.
pub fn thread_minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the rusage we own.
    let status = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    assert_eq!(status, 0, "getrusage failed");
    u64::try_from(usage.ru_minflt).unwrap_or(0)
}

/// This process's resident set (`VmRSS` in `/proc/self/status`), in bytes.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024)
        .expect("a VmRSS line")
}

/// The one ATOF file the pipeline writes in `directory` (`.jsonl`, or `.jsonl.zst`
/// compressed).
pub fn atof_file(directory: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(directory)
        .expect("the ATOF directory")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|ext| ext == "jsonl" || ext == "zst")
        })
        .collect();
    assert_eq!(files.len(), 1, "one ATOF file in {}", directory.display());
    files.into_iter().next().unwrap()
}

/// Size of a file in bytes (0 when it does not exist yet).
pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |metadata| metadata.len())
}

/// Where OTLP goes: the real `rotel-agent` collector, or a stand-in when it cannot run.
pub enum Collector {
    /// `rotel-agent` with its blackhole exporter: a real OTLP receiver that answers.
    Rotel { child: Child, grpc: SocketAddr },
    /// A TCP listener that accepts and discards: no OTLP answer ever comes back.
    Discard { address: SocketAddr },
}

impl Collector {
    /// Starts `rotel-agent` from `WATTLINE_ROTEL_AGENT`; when that is unset or the
    /// agent does not listen within 30 s, says so and starts the discarding stand-in.
    pub fn start() -> Collector {
        match std::env::var_os("WATTLINE_ROTEL_AGENT") {
            Some(path) => match start_rotel(Path::new(&path)) {
                Ok(collector) => return collector,
                Err(why) => eprintln!("rotel-agent at {}: {why}", path.to_string_lossy()),
            },
            None => eprintln!("WATTLINE_ROTEL_AGENT is not set"),
        }
        eprintln!(
            "!!! No real OTLP collector: OTLP goes to a TCP sink that accepts and discards (no reply, exports time out). !!!"
        );
        start_discard()
    }

    /// The gRPC URL to export to.
    pub fn url(&self) -> String {
        match self {
            Collector::Rotel { grpc, .. } => format!("http://{grpc}"),
            Collector::Discard { address } => format!("http://{address}"),
        }
    }

    /// What the OTLP figures were measured against, in words.
    pub fn label(&self) -> &'static str {
        match self {
            Collector::Rotel { .. } => {
                "OTLP/gRPC to a real collector (rotel-agent, blackhole exporter)"
            }
            Collector::Discard { .. } => {
                "OTLP/gRPC to a TCP sink that accepts and discards (NO real collector: exports time out)"
            }
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Collector::Rotel { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free local port")
}

fn start_rotel(path: &Path) -> Result<Collector, String> {
    let (grpc, http) = (free_address(), free_address());
    let mut child = Command::new(path)
        .args(["start", "--exporter", "blackhole", "--otlp-grpc-endpoint"])
        .arg(grpc.to_string())
        .arg("--otlp-http-endpoint")
        .arg(http.to_string())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|error| format!("cannot start: {error}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect_timeout(&grpc, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited ({status}) before listening"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err("not listening within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Collector::Rotel { child, grpc })
}

fn start_discard() -> Collector {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local listener");
    let address = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                while matches!(stream.read(&mut buffer), Ok(n) if n > 0) {}
            });
        }
    });
    Collector::Discard { address }
}

/// One exporter's counters from a report: `(exported, dropped, failed)`.
pub fn exporter_counts(report: &wattline::EnergyReport, name: &str) -> (u64, u64, u64) {
    report
        .exporters
        .iter()
        .find(|outcome| outcome.name == name)
        .map_or((0, 0, 0), |outcome| {
            (outcome.exported, outcome.dropped, outcome.failed)
        })
}

/// Bytes as MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

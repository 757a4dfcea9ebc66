//! CPU cost of dense power sampling through NVML, with the fake NVML library (built
//! here with the system C compiler): one probe read (power and counter only) beside
//! one full NVML sample of the same devices, and the CPU share of a probe thread at
//! 100 ms, extrapolated per device to 8 devices; then wattline's own CPU share for an
//! `nvidia-smi` power stream at 100 ms from a stand-in child printing 8 devices (the
//! child's own CPU is not wattline's and is not counted). Prints figures; asserts
//! nothing. The fake's calls return at once, so this is wattline's own overhead, not
//! the driver's.
//!
//! Run: `cargo bench -p wattline-gpu --bench dense_power_cost`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wattline_gpu::dense_power::DenseSampling;
use wattline_gpu::nvml::{NvmlConfig, NvmlPowerProbe, NvmlSource};
use wattline_gpu::{
    GpuSampleRequest, GpuSource, NoopEventSink, PowerProbe, PowerSample, PowerSampleSink,
};
use wattline_model::series::SamplingSeries;

/// CPU time (user + system) this process has used, ns.
fn process_cpu_nanos() -> u128 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    time.tv_sec as u128 * 1_000_000_000 + time.tv_nsec as u128
}

struct Counting(AtomicU64);

impl PowerSampleSink for Counting {
    fn send(&self, _sample: PowerSample) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let library = dir.path().join("libnvidia-ml.so.1");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_nvml.c");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-DFAKE_ENERGY_ADVANCES", "-o"])
        .arg(&library)
        .arg(source)
        .status()
        .expect("cc runs");
    assert!(status.success(), "fake NVML did not compile");
    let config = NvmlConfig {
        library_path: Some(library),
        ..NvmlConfig::default()
    };

    let rounds = 2000;
    let mut probe = NvmlPowerProbe::open(&config, &[]).expect("fake NVML opens");
    let devices = probe.read().map_or(0, |sample| sample.devices.len());
    let started = process_cpu_nanos();
    for _ in 0..rounds {
        std::hint::black_box(probe.read());
    }
    let probe_nanos = (process_cpu_nanos() - started) as f64 / f64::from(rounds);

    let mut full = NvmlSource::new(config.clone(), Arc::new(NoopEventSink));
    let request = GpuSampleRequest {
        process_metrics: false,
        ..GpuSampleRequest::all(SamplingSeries::Polling)
    };
    full.sample(&request);
    let started = process_cpu_nanos();
    for _ in 0..rounds {
        std::hint::black_box(full.sample(&request));
    }
    let full_nanos = (process_cpu_nanos() - started) as f64 / f64::from(rounds);

    // A probe thread at 100 ms for 5 s; this thread sleeps meanwhile.
    let sink = Arc::new(Counting(AtomicU64::new(0)));
    let period = Duration::from_millis(100);
    let window = Duration::from_secs(5);
    let before = process_cpu_nanos();
    let wall = Instant::now();
    let sampling = DenseSampling::start(
        vec![Box::new(NvmlPowerProbe::open(&config, &[]).expect("opens")) as Box<dyn PowerProbe>],
        period,
        Arc::clone(&sink) as Arc<dyn PowerSampleSink>,
    );
    std::thread::sleep(window);
    sampling.stop();
    let thread_nanos = (process_cpu_nanos() - before) as f64;
    let elapsed = wall.elapsed().as_secs_f64();
    let share = thread_nanos / (elapsed * 1e9) * 100.0;
    let per_device_share = share / devices.max(1) as f64;

    let stream_share = stream_share(dir.path(), period, window);

    println!("fake NVML, {devices} devices, {rounds} rounds");
    println!(
        "probe read (power + counter): {:>8.1} µs ({:.2} µs per device)",
        probe_nanos / 1e3,
        probe_nanos / 1e3 / devices.max(1) as f64
    );
    println!(
        "full NVML sample:             {:>8.1} µs; probe/full = {:.3}",
        full_nanos / 1e3,
        probe_nanos / full_nanos
    );
    println!(
        "probe thread at {} ms for {:.1} s: {} readings, {:.4}% of one core ({:.4}% per device, {:.4}% for 8 devices; goal < 0.5%)",
        period.as_millis(),
        elapsed,
        sink.0.load(Ordering::Relaxed),
        share,
        per_device_share,
        per_device_share * 8.0
    );
    println!(
        "nvidia-smi stream at {} ms, 8 devices, for {:.1} s: {} readings, {:.4}% of one core in wattline",
        period.as_millis(),
        window.as_secs_f64(),
        stream_share.1,
        stream_share.0
    );
}

/// wattline's CPU share while reading a stand-in stream of 8 devices, and the readings.
fn stream_share(dir: &Path, period: Duration, window: Duration) -> (f64, u64) {
    use std::os::unix::fs::PermissionsExt;
    let program = dir.join("nvidia-smi");
    let mut lines = String::new();
    for index in 0..8 {
        lines.push_str(&format!(
            "\"{index}, GPU-{index:08}-0000-0000-0000-000000000000, 512.34\" "
        ));
    }
    std::fs::write(
        &program,
        format!("#!/bin/sh\nwhile :; do printf '%s\\n' {lines}; sleep 0.1; done\n"),
    )
    .expect("stand-in written");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let sink = Arc::new(Counting(AtomicU64::new(0)));
    let before = process_cpu_nanos();
    let wall = Instant::now();
    let stream = wattline_gpu::nvidia_smi_stream::SmiPowerStream::start(
        wattline_gpu::nvidia_smi_stream::SmiStreamConfig {
            program,
            period,
            timeout: Duration::from_secs(10),
            selectors: Vec::new(),
            max_consecutive_failures: 5,
            first_backoff: Duration::from_secs(1),
        },
        Arc::clone(&sink) as Arc<dyn PowerSampleSink>,
        Arc::new(NoopEventSink),
        runtime.handle(),
    );
    std::thread::sleep(window);
    let cpu = (process_cpu_nanos() - before) as f64;
    let elapsed = wall.elapsed().as_secs_f64();
    drop(stream);
    (
        cpu / (elapsed * 1e9) * 100.0,
        sink.0.load(Ordering::Relaxed),
    )
}

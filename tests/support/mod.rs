//! Shared test helpers: GPU sources that behave in known ways, and event filters.

#![allow(dead_code)]

pub mod concurrent_steps;
pub mod power_trace;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wattline::events::{Mark, PipelineEvent};
use wattline::gpu::{GpuDeviceReading, GpuSample, GpuSampleRequest, GpuSource, GpuVendor};

/// One device drawing a constant power, sampled with a fresh timestamp each call.
pub struct ConstantPowerGpu {
    pub watts: f64,
    pub delay: Duration,
    pub calls: Arc<AtomicU64>,
}

impl ConstantPowerGpu {
    pub fn new(watts: f64) -> Self {
        ConstantPowerGpu {
            watts,
            delay: Duration::ZERO,
            calls: Arc::default(),
        }
    }
}

pub fn device(id: &str, watts: f64) -> GpuDeviceReading {
    let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, id);
    device.device_index = Some(0);
    device.name = Some("Test GPU".into());
    device.power_draw_watts = Some(watts);
    device.memory_used_bytes = Some(512 * 1024 * 1024);
    device.compute_utilization_percent = Some(40.0);
    device
}

impl GpuSource for ConstantPowerGpu {
    fn name(&self) -> &str {
        "test-constant"
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        Some(GpuSample {
            devices: if request.device_metrics {
                vec![device("GPU-test-0", self.watts)]
            } else {
                Vec::new()
            },
            processes: Vec::new(),
            taken_at: Instant::now(),
        })
    }
}

/// A source that panics on every sample.
pub struct PanickingGpu;

impl GpuSource for PanickingGpu {
    fn name(&self) -> &str {
        "test-panicking"
    }

    fn sample(&mut self, _request: &GpuSampleRequest) -> Option<GpuSample> {
        panic!("test GPU source failure");
    }
}

pub fn marks(events: &[PipelineEvent]) -> Vec<Mark> {
    events.iter().flat_map(PipelineEvent::marks).collect()
}

/// The built `wattline` binary with a throwaway home, so a developer's own
/// configuration and `GENAI_*` settings stay out of the tests.
pub fn wattline(home: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_wattline"));
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env_remove("GENAI_ENABLE_CO2_TRACKING")
        .env_remove("GENAI_POWER_COST_PER_KWH")
        .env_remove("GENAI_CARBON_INTENSITY")
        .env_remove("GENAI_GPU_COLLECTION_INTERVAL")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("NVIDIA_VISIBLE_DEVICES");
    command
}

/// The built example `name`, beside the test binaries (`cargo test` builds them).
pub fn example(name: &str) -> std::path::PathBuf {
    // target/debug/deps/TEST-HASH -> target/debug/examples/NAME
    let mut path = std::env::current_exe().unwrap();
    path.pop();
    path.pop();
    path.push("examples");
    path.push(name);
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command`, which must succeed (its stderr is shown when it does not), and
/// parses its stdout as JSON.
pub fn json_stdout(command: &mut std::process::Command) -> serde_json::Value {
    serde_json::from_slice(&succeeded(command).stdout).unwrap()
}

/// Runs `command`, which must succeed (its stderr is shown when it does not).
pub fn succeeded(command: &mut std::process::Command) -> std::process::Output {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every line, parsed, of the one plain event file (`*.jsonl`) in `directory`.
pub fn atof_events(directory: &std::path::Path) -> Vec<serde_json::Value> {
    let file = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("an event file");
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The row of `wattline compare --report json`'s `comparison` for `part` `name`.
pub fn comparison_row<'a>(
    comparison: &'a serde_json::Value,
    part: &str,
    name: &str,
) -> &'a serde_json::Value {
    comparison["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["part"] == part && row["name"] == name)
        .unwrap_or_else(|| panic!("no {part} row {name}: {comparison:#}"))
}

/// The ATOF file a short `wattline run --atof` (of `sleep 0.2`) writes under `home`.
pub fn atof_file_of_a_short_run(home: &std::path::Path) -> std::path::PathBuf {
    let atof = home.join("runs");
    succeeded(
        wattline(home)
            .args(["run", "--quiet", "--atof"])
            .arg(&atof)
            .args(["--", "sleep", "0.2"]),
    );
    std::fs::read_dir(&atof)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// The Python with the reference system (`nemo-relay`), from
/// `WATTLINE_REFERENCE_PYTHON` (`.ci/run` sets it after installing the package).
/// Without it a test fails, unless `WATTLINE_SKIP_REFERENCE=1` says to skip it on
/// purpose (then `None`, said loudly).
pub fn reference_python() -> Option<String> {
    python_from("WATTLINE_REFERENCE_PYTHON")
}

/// The Python with the GPU spec's reference (`genai-otel-instrument`), from
/// `WATTLINE_GENAI_REFERENCE_PYTHON`; the same rules as [`reference_python`].
pub fn genai_reference_python() -> Option<String> {
    python_from("WATTLINE_GENAI_REFERENCE_PYTHON")
}

/// The Python with the reference system's worker SDK (`nemo-relay-plugin`), from
/// `WATTLINE_WORKER_SDK_PYTHON`; the same rules as [`reference_python`].
pub fn worker_sdk_python() -> Option<String> {
    python_from("WATTLINE_WORKER_SDK_PYTHON")
}

/// Whether this is CI (`CI` set to anything but empty, `0` or `false`): there every
/// test runs, and a `WATTLINE_SKIP_*` variable is an error that names itself.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
}

/// Panics when `variable` (a `WATTLINE_SKIP_*`) is set under CI.
pub fn refuse_skip_under_ci(variable: &str) {
    if under_ci() && std::env::var_os(variable).is_some() {
        panic!("{variable} is set under CI: CI runs every test; unset {variable}");
    }
}

fn python_from(variable: &str) -> Option<String> {
    refuse_skip_under_ci("WATTLINE_SKIP_REFERENCE");
    match std::env::var(variable) {
        Ok(python) if !python.is_empty() => Some(python),
        _ if std::env::var("WATTLINE_SKIP_REFERENCE").as_deref() == Ok("1") => {
            eprintln!("SKIPPED on request (WATTLINE_SKIP_REFERENCE=1): reference not compared");
            None
        }
        _ => panic!(
            "{variable} is not set: run scripts/test.sh (it installs the reference), \
             or set WATTLINE_SKIP_REFERENCE=1 to skip this test knowingly"
        ),
    }
}

/// The fake `libnvidia-ml.so.1` (gpu/tests/fixtures/fake_nvml.c) built with
/// `defines` into a fresh folder, for `LD_LIBRARY_PATH`.
pub fn fake_nvml(defines: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    build_fake_nvml(dir.path(), defines);
    dir
}

/// Builds the fake `libnvidia-ml.so.1` with `defines` into `folder`.
pub fn build_fake_nvml(folder: &std::path::Path, defines: &[&str]) {
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("gpu/tests/fixtures/fake_nvml.c");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O0"])
        .args(defines)
        .arg("-o")
        .arg(folder.join("libnvidia-ml.so.1"))
        .arg(source)
        .arg("-lm")
        .status()
        .expect("the system C compiler (cc) runs");
    assert!(status.success(), "fake NVML did not compile");
}

/// A folder of stand-in programs whose every process is killed when the guard is
/// dropped, even when an assertion failed first: each stand-in appends its pid to the
/// file `pids` in its folder.
pub struct StandIn {
    pub dir: tempfile::TempDir,
}

impl StandIn {
    pub fn new() -> Self {
        StandIn {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Installs `script` as the executable `name` in the folder.
    pub fn install(&self, name: &str, script: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let program = self.dir.path().join(name);
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    /// Copies the fixture `gpu/tests/fixtures/fake-smi/<fixture>` in as
    /// `nvidia-smi`.
    pub fn install_smi_fixture(&self, fixture: &str) -> std::path::PathBuf {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("gpu/tests/fixtures/fake-smi")
                .join(fixture),
        )
        .unwrap();
        self.install("nvidia-smi", &text)
    }

    /// The pids its stand-ins wrote.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.path().join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }
}

impl Default for StandIn {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        for pid in self.pids() {
            if pid > 1 {
                // SAFETY: kill(2) with a pid this folder's stand-in wrote; a pid that
                // has exited (or been reused by a process of another user) just fails.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// A stand-in `nvidia-smi` answering in the real CSV format: one H200 at 250 W, and
/// its loop mode for the power stream.
pub const FAKE_NVIDIA_SMI: &str = r#"#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
"#;

/// A folder holding [`FAKE_NVIDIA_SMI`] as `nvidia-smi`, and a `PATH` with it first.
pub fn path_with_stand_in_nvidia_smi() -> (StandIn, String) {
    path_with_nvidia_smi(FAKE_NVIDIA_SMI)
}

/// A folder holding `script` (a `#!/bin/sh` script) as `nvidia-smi`, and a `PATH`
/// with it first. Each run of it records its pid, so the guard kills a loop that
/// wattline failed to stop.
pub fn path_with_nvidia_smi(script: &str) -> (StandIn, String) {
    let bin = StandIn::new();
    let script = script.replacen('\n', "\necho $$ >> \"$(dirname \"$0\")/pids\"\n", 1);
    bin.install("nvidia-smi", &script);
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin, path)
}

/// A folder holding the stand-in `fake-smi/lists_the_command.sh` as `nvidia-smi` (a
/// 250 W H200 whose process query lists the command `wattline run` started as the one
/// process on it), and a `PATH` with it first.
pub fn path_with_nvidia_smi_listing_the_command() -> (StandIn, String) {
    let bin = StandIn::new();
    bin.install_smi_fixture("lists_the_command.sh");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin, path)
}

/// The command line that runs `program` under `wattline run` once the stand-in of
/// [`path_with_nvidia_smi_listing_the_command`] has listed it twice
/// (`fake-smi/after_listed.sh`): from then on every reading carries its process share,
/// so no step it starts sees an interval without one.
pub fn after_listed<I, A>(stand_in: &StandIn, program: I) -> Vec<std::ffi::OsString>
where
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString>,
{
    let waiter = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("gpu/tests/fixtures/fake-smi/after_listed.sh");
    let mut line: Vec<std::ffi::OsString> = vec![
        "sh".into(),
        waiter.into(),
        stand_in.path().join("listed").into(),
    ];
    line.extend(program.into_iter().map(Into::into));
    line
}

/// The pids the stand-in of [`path_with_nvidia_smi_listing_the_command`] listed.
pub fn listed_pids(stand_in: &StandIn) -> std::collections::BTreeSet<u32> {
    std::fs::read_to_string(stand_in.path().join("listed"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

/// The RFC 3339 instant `value`, Unix seconds.
pub fn unix_seconds(value: &serde_json::Value) -> f64 {
    let at = chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap()).unwrap();
    at.timestamp() as f64 + f64::from(at.timestamp_subsec_nanos()) / 1e9
}

/// A component of a diagnostics JSON snapshot, by name.
pub fn component<'a>(diagnostics: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let components = diagnostics["components"].as_array().unwrap();
    components
        .iter()
        .find(|component| component["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {components:#?}"))
}

/// How many times `pipeline.worker_failed` was recorded in `diagnostics`.
pub fn workers_failed(diagnostics: &serde_json::Value) -> u64 {
    component(diagnostics, "pipeline")["codes"]
        .as_array()
        .and_then(|codes| {
            codes
                .iter()
                .find(|code| code["code"] == "pipeline.worker_failed")
        })
        .and_then(|code| code["occurrences"].as_u64())
        .expect("the pipeline component has pipeline.worker_failed")
}

/// The details of a diagnostics JSON snapshot's recent events.
pub fn details(diagnostics: &serde_json::Value) -> Vec<&str> {
    diagnostics["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["detail"].as_str())
        .collect()
}

/// Takes `lock` for a test that must not share the machine with its neighbours in the
/// same binary (timed polls, the whole process's memory, a fork storm); a test that
/// failed while holding it does not block the others.
pub fn one_at_a_time(lock: &'static std::sync::Mutex<()>) -> std::sync::MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every cgroup folder this process is in, one per mounted hierarchy (v1 controllers
/// and the unified one), from `/proc/self/cgroup` and `/proc/self/mountinfo`.
pub fn own_cgroup_folders() -> Vec<std::path::PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut folders = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (
            parts.next(),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        for mount in mountinfo.lines() {
            let Some((left, right)) = mount.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (filesystem, options) = (right[0], right.get(2).copied().unwrap_or(""));
            let matches = if controllers.is_empty() {
                filesystem == "cgroup2"
            } else {
                filesystem == "cgroup"
                    && controllers
                        .split(',')
                        .all(|c| options.split(',').any(|option| option == c))
            };
            if matches && fields.len() > 4 {
                folders.push(std::path::Path::new(fields[4]).join(path.trim_start_matches('/')));
            }
        }
    }
    folders
}

/// The processes descended from `pid`, by parent pid, read from `/proc` now.
pub fn descendants(pid: u32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The parent is the second field after the command's closing parenthesis.
        if let Some(parent) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|parent| parent.parse::<i32>().ok())
        {
            parents.push((child, parent));
        }
    }
    let mut found = vec![pid as i32];
    let mut index = 0;
    while index < found.len() {
        let parent = found[index];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        index += 1;
    }
    found.remove(0);
    found
}

/// Kills, when dropped, processes a killed `wattline run` left behind and removes its
/// run cgroups (`wattline-run-<pid>` beside this test's own groups), even when an
/// assertion failed first.
pub struct Reaper {
    pub wattline_pid: u32,
    pub orphans: Vec<i32>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.orphans {
            // SAFETY: kill(2) of a process this test's wattline started.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        let name = format!("wattline-run-{}", self.wattline_pid);
        for folder in own_cgroup_folders() {
            let _ = std::fs::remove_dir(folder.join(&name));
        }
    }
}

/// A pipeline with no GPU source and a quiet environment, its events also going to
/// `sink`.
pub async fn pipeline_into(
    sink: &Arc<wattline::events::CollectingEventSink>,
) -> wattline::Pipeline {
    wattline::Pipeline::builder()
        .environment(Default::default())
        .gpu_source(|| None)
        .event_sink(sink.clone())
        .spawn()
        .await
        .expect("a pipeline")
}

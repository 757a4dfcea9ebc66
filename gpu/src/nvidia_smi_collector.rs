//! Runs `nvidia-smi` in a background task and keeps its latest answer.
//!
//! The tool is started without a shell, every interval, off the sampling path;
//! [`NvidiaSmiSource::sample`] returns the latest answer without waiting. Each run has
//! the collector's own timeout, which never kills a child that has already exited and
//! never loses its output: the output and the exit are awaited together, and when the
//! timer wins (for example because the runtime thread was blocked past the deadline)
//! the child is asked with `try_wait` and its pipes are drained before anything is
//! killed.
//!
//! The failure table of the spec, row by row:
//! - no binary on the search path: one info line, [`GpuEvent::SmiNotFound`], never asked again;
//! - "No devices were found": one info line, [`GpuEvent::SmiNoDevices`], no GPU, stop asking;
//! - failing at start (error exit, timeout, no output): one warning with what the tool
//!   said, tried again every interval; after 5 failures in a row one more warning,
//!   [`GpuEvent::SmiStoppedAfterFailures`], and no further attempt;
//! - an unknown field: downgrade ([`crate::nvidia_smi::QueryFieldSet::after_unknown_field`])
//!   and ask again at once;
//! - failing later: that sample observes nothing (the latest answer becomes a gap),
//!   and after 5 failures in a row collection stops with one warning.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use wattline_model::snapshot::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};

use crate::timed_run::{RunOutcome, run_with_timeout};

use crate::events::{GpuEvent, GpuEventSink};
use crate::nvidia_smi::{FieldList, QueryFieldSet, SmiAnswer, interpret_answer};
use crate::{GpuSampleRequest, GpuSource, PowerSample, PowerSampleSink, SamplePart};

/// Default time between two runs of the tool.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// The shortest interval a pipeline gives the collector, whatever its polling
/// interval. Each run starts the tool afresh, an NVML initialisation each time: on an
/// H200 (driver 580.159), wattline's full and process queries every 100 ms froze every
/// NVML client's power and utilisation figures for seconds at a time, its own loop's
/// too, while every 250 ms and 500 ms they did not. The energy integral's dense power
/// comes from the tool's own loop, not from these runs.
pub const MIN_PIPELINE_INTERVAL: Duration = Duration::from_millis(500);
/// Default limit for one run of the tool.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Failures in a row after which collection stops.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 5;
/// Most characters of the tool's own words kept in a message.
const MESSAGE_LIMIT: usize = 512;

/// The program's file name on this platform.
#[cfg(windows)]
pub const PROGRAM_NAME: &str = "nvidia-smi.exe";
/// The program's file name on this platform.
#[cfg(not(windows))]
pub const PROGRAM_NAME: &str = "nvidia-smi";

/// How the collector runs the tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaSmiConfig {
    /// Full path of the program.
    pub program: PathBuf,
    /// Time between the starts of two runs.
    pub interval: Duration,
    /// Limit for one run.
    pub timeout: Duration,
    /// Failures in a row after which collection stops.
    pub max_consecutive_failures: u32,
}

impl NvidiaSmiConfig {
    /// Defaults (5 s interval, 10 s timeout, stop after 5 failures) for `program`.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            interval: DEFAULT_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
            max_consecutive_failures: MAX_CONSECUTIVE_FAILURES,
        }
    }
}

/// Find `nvidia-smi` in a `PATH`-style list of directories (first match wins).
/// The caller passes the list, so tests never touch the process environment.
pub fn locate_nvidia_smi(path_env: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_env)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(PROGRAM_NAME))
        .find(|candidate| is_executable_file(candidate))
}

#[cfg(unix)]
fn is_executable_file(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() && meta.permissions().mode() & 0o111 != 0,
        Err(_) => false,
    }
}

#[cfg(not(unix))]
fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
}

/// The arguments of the process query: device, process, memory held (MiB).
pub const COMPUTE_APPS_ARGUMENTS: [&str; 2] = [
    "--query-compute-apps=gpu_uuid,pid,used_memory",
    "--format=csv,noheader,nounits",
];

/// Bytes in the MiB the tool reports memory in.
const BYTES_PER_MIB: u64 = 1024 * 1024;

/// One answer of the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SmiReading {
    /// One record per device line.
    pub devices: Vec<GpuDeviceReading>,
    /// Compute processes per device (`--query-compute-apps`), memory only; `None` when
    /// that query failed.
    pub processes: Option<Vec<GpuProcessReading>>,
    /// When it was measured: the middle of the tool's run, which reads the driver
    /// somewhere between its start and its exit.
    pub taken_at: Instant,
}

/// Parses a `--query-compute-apps=gpu_uuid,pid,used_memory` answer; `None` when a line
/// is not of that shape. Memory comes in MiB; `[N/A]` leaves it unknown.
pub fn parse_compute_apps(
    text: &str,
    devices: &[GpuDeviceReading],
) -> Option<Vec<GpuProcessReading>> {
    let mut processes = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line.starts_with("No running") {
            continue;
        }
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [uuid, pid, memory] = fields.as_slice() else {
            return None;
        };
        let process_id = pid.parse::<u32>().ok()?;
        let device = devices.iter().find(|d| d.device_identifier == *uuid)?;
        processes.push(GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: device.device_identifier.clone(),
            device_index: device.device_index,
            process_id,
            // A figure past 64 bits in bytes is no figure: unknown, like `[N/A]`.
            memory_used_bytes: memory
                .parse::<u64>()
                .ok()
                .and_then(|mib| mib.checked_mul(BYTES_PER_MIB)),
            compute_utilization_percent: None,
        });
    }
    Some(processes)
}

/// What finished when, for callers that wait on a blocking thread.
#[derive(Debug, Default)]
struct Progress {
    /// Start of the latest run that finished (answered or failed).
    finished_run_started: Option<Instant>,
    /// When the latest failure was observed.
    failed_at: Option<Instant>,
}

/// Shared between the collector's task and its handle.
#[derive(Debug, Default)]
struct Shared {
    progress: Mutex<Progress>,
    changed: Condvar,
    run_now: Notify,
}

impl Shared {
    fn update(&self, change: impl FnOnce(&mut Progress)) {
        let mut progress = match self.progress.lock() {
            Ok(progress) => progress,
            Err(poisoned) => poisoned.into_inner(),
        };
        change(&mut progress);
        self.changed.notify_all();
    }

    /// Waits on this thread, at most `limit`, until `done` holds.
    fn wait(&self, limit: Duration, mut done: impl FnMut(&Progress) -> bool) {
        let progress = match self.progress.lock() {
            Ok(progress) => progress,
            Err(poisoned) => poisoned.into_inner(),
        };
        let _ = self
            .changed
            .wait_timeout_while(progress, limit, |progress| !done(progress));
    }

    fn failed_at(&self) -> Option<Instant> {
        match self.progress.lock() {
            Ok(progress) => progress.failed_at,
            Err(poisoned) => poisoned.into_inner().failed_at,
        }
    }
}

/// Where the collector stands.
#[derive(Debug, Clone, PartialEq)]
pub enum CollectorState {
    /// No run has finished yet.
    Starting,
    /// The latest run answered with these devices.
    Ready(Arc<SmiReading>),
    /// The tool has never answered and failed this many times in a row; still trying.
    StartFailing {
        /// Failures so far.
        failures: u32,
        /// What the last run said.
        message: String,
    },
    /// The tool answered before, but the latest run failed: nothing observed.
    Gap {
        /// Failures in a row so far.
        failures: u32,
    },
    /// "No devices were found": no NVIDIA GPU; not asked again.
    NoDevices,
    /// No `nvidia-smi` on the search path; not asked again.
    NotFound,
    /// Collection stopped after this many failures in a row.
    Stopped {
        /// Failures in a row.
        failures: u32,
    },
}

impl CollectorState {
    /// Whether no further run will happen.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            CollectorState::NoDevices | CollectorState::NotFound | CollectorState::Stopped { .. }
        )
    }
}

/// The background collector; dropping it stops the task (and kills a running child).
#[derive(Debug)]
pub struct NvidiaSmiCollector {
    state: watch::Receiver<CollectorState>,
    task: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    runtime: Option<Handle>,
    forwarder: Option<JoinHandle<()>>,
    timeout: Duration,
    /// The program and where events go, for the dense power stream.
    program: Option<StreamSetup>,
}

/// What the dense power stream needs from the collector.
struct StreamSetup {
    program: PathBuf,
    events: Arc<dyn GpuEventSink>,
}

impl std::fmt::Debug for StreamSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamSetup")
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

impl NvidiaSmiCollector {
    /// Start collecting with `config` on `runtime`. The first run starts at once.
    pub fn start(config: NvidiaSmiConfig, sink: Arc<dyn GpuEventSink>, runtime: &Handle) -> Self {
        let (sender, state) = watch::channel(CollectorState::Starting);
        let shared = Arc::new(Shared::default());
        let timeout = config.timeout;
        let program = Some(StreamSetup {
            program: config.program.clone(),
            events: Arc::clone(&sink),
        });
        let task = runtime.spawn(collect(config, sink, sender, Arc::clone(&shared)));
        Self {
            state,
            task: Some(task),
            shared,
            runtime: Some(runtime.clone()),
            forwarder: None,
            timeout,
            program,
        }
    }

    /// Look for the tool in `path_env` and start it, or, when it is absent, write one
    /// info line, record [`GpuEvent::SmiNotFound`] and never ask again.
    pub fn start_on_path(
        path_env: &OsStr,
        interval: Duration,
        timeout: Duration,
        sink: Arc<dyn GpuEventSink>,
        runtime: &Handle,
    ) -> Self {
        match locate_nvidia_smi(path_env) {
            Some(program) => {
                let mut config = NvidiaSmiConfig::new(program);
                config.interval = interval;
                config.timeout = timeout;
                Self::start(config, sink, runtime)
            }
            None => Self::not_found(sink.as_ref()),
        }
    }

    /// A collector for a host without the tool: reports it once and never runs.
    pub fn not_found(sink: &dyn GpuEventSink) -> Self {
        tracing::info!("nvidia-smi not found on the search path: no NVIDIA GPU readings");
        sink.record(GpuEvent::SmiNotFound);
        let (_sender, state) = watch::channel(CollectorState::NotFound);
        Self {
            state,
            task: None,
            shared: Arc::new(Shared::default()),
            runtime: None,
            forwarder: None,
            timeout: DEFAULT_TIMEOUT,
            program: None,
        }
    }

    /// The current state.
    pub fn state(&self) -> CollectorState {
        self.state.borrow().clone()
    }

    /// The latest answer, without waiting; `None` unless the latest run answered.
    pub fn latest(&self) -> Option<Arc<SmiReading>> {
        match &*self.state.borrow() {
            CollectorState::Ready(reading) => Some(Arc::clone(reading)),
            _ => None,
        }
    }

    /// Wait (at most `limit`) until the first run has finished, so a short process
    /// still exports one reading; returns the state then.
    pub async fn first_answer(&self, limit: Duration) -> CollectorState {
        let mut state = self.state.clone();
        let waited =
            tokio::time::timeout(limit, state.wait_for(|s| *s != CollectorState::Starting)).await;
        match waited {
            Ok(Ok(current)) => current.clone(),
            _ => self.state(),
        }
    }

    /// Wait (at most `limit`) until `predicate` holds for the state; returns it then.
    pub async fn wait_for_state(
        &self,
        limit: Duration,
        predicate: impl FnMut(&CollectorState) -> bool,
    ) -> CollectorState {
        let mut state = self.state.clone();
        let waited = tokio::time::timeout(limit, state.wait_for(predicate)).await;
        match waited {
            Ok(Ok(current)) => current.clone(),
            _ => self.state(),
        }
    }

    /// Waits on this (blocking) thread, at most `limit`, for the first run to finish.
    pub fn wait_for_first_answer_blocking(&self, limit: Duration) {
        if self.task.is_none() {
            return;
        }
        self.shared
            .wait(limit, |progress| progress.finished_run_started.is_some());
    }

    /// Starts a run now (after the one in flight, if any) and waits on this (blocking)
    /// thread, at most `limit`, for a run started after this call to finish.
    pub fn refresh_blocking(&self, limit: Duration) {
        if self.task.is_none() || self.state().is_final() {
            return;
        }
        let requested = Instant::now();
        self.shared.run_now.notify_one();
        self.shared.wait(limit, |progress| {
            progress
                .finished_run_started
                .is_some_and(|started| started >= requested)
        });
    }

    /// When the latest failed run was observed.
    pub fn failed_at(&self) -> Option<Instant> {
        self.shared.failed_at()
    }

    /// Sends every new answer (and every failure, as a gap) to `sink` as it arrives.
    pub fn forward_to(&mut self, sink: Arc<dyn PowerSampleSink>) {
        let Some(runtime) = &self.runtime else {
            return;
        };
        let mut state = self.state.clone();
        // Only answers from now on: the current one was read by whoever asked already.
        state.mark_unchanged();
        let shared = Arc::clone(&self.shared);
        let forwarder = runtime.spawn(async move {
            while state.changed().await.is_ok() {
                let current = state.borrow_and_update().clone();
                // Each device names its own power figure (`GpuDeviceReading::power_field`).
                let part = match current {
                    CollectorState::Ready(reading) => SamplePart {
                        source: "nvidia-smi".into(),
                        at: reading.taken_at,
                        sample: Some(GpuSample {
                            devices: reading.devices.clone(),
                            processes: Vec::new(),
                            taken_at: reading.taken_at,
                        }),
                    },
                    CollectorState::Gap { .. } | CollectorState::Stopped { .. } => SamplePart {
                        source: "nvidia-smi".into(),
                        at: shared.failed_at().unwrap_or_else(Instant::now),
                        sample: None,
                    },
                    _ => continue,
                };
                let sample = PowerSample::from_part(part, false);
                sink.send(sample);
            }
        });
        if let Some(previous) = self.forwarder.replace(forwarder) {
            previous.abort();
        }
    }
}

impl Drop for NvidiaSmiCollector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(forwarder) = self.forwarder.take() {
            forwarder.abort();
        }
    }
}

/// [`GpuSource`] over a running [`NvidiaSmiCollector`]: device records only (the
/// query has no process data). `sample` never waits for the tool.
#[derive(Debug)]
pub struct NvidiaSmiSource {
    collector: NvidiaSmiCollector,
}

impl NvidiaSmiSource {
    /// Wrap a started collector.
    pub fn new(collector: NvidiaSmiCollector) -> Self {
        Self { collector }
    }

    /// The collector underneath.
    pub fn collector(&self) -> &NvidiaSmiCollector {
        &self.collector
    }
}

impl GpuSource for NvidiaSmiSource {
    fn name(&self) -> &str {
        "nvidia-smi"
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        if self.collector.state() == CollectorState::NoDevices {
            // Asked, and the machine has no NVIDIA device: empty, not unknown.
            return Some(GpuSample::empty());
        }
        let reading = self.collector.latest()?;
        let selected =
            |identifier: &str, index: Option<u32>| request.selects_device(identifier, index);
        let devices = if request.device_metrics {
            reading
                .devices
                .iter()
                .filter(|device| selected(&device.device_identifier, device.device_index))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let processes = match (&reading.processes, request.process_metrics) {
            (Some(processes), true) => processes
                .iter()
                .filter(|p| {
                    selected(&p.device_identifier, p.device_index)
                        && request.processes.contains(p.process_id)
                })
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        Some(GpuSample {
            devices,
            processes,
            taken_at: reading.taken_at,
        })
    }

    /// The latest answer stamped with its measurement time; a failed latest run is
    /// stamped with when it failed, so a failure older than a newer answer is ignored;
    /// no part while the first run is still going.
    fn sample_parts(&mut self, request: &GpuSampleRequest) -> Vec<SamplePart> {
        let sample = self.sample(request);
        let at = match (&sample, self.collector.failed_at()) {
            (Some(sample), _) => sample.taken_at,
            (None, Some(failed_at)) => failed_at,
            // Still starting: nothing observed and nothing failed yet. A gap stamped
            // now would make the first answer, measured earlier, look stale.
            (None, None) => return Vec::new(),
        };
        vec![SamplePart {
            source: self.name().to_owned(),
            sample,
            at,
        }]
    }

    fn wait_until_ready(&mut self, limit: Duration) {
        self.collector
            .wait_for_first_answer_blocking(limit.min(self.collector.timeout));
    }

    fn refresh(&mut self, limit: Duration) {
        // One run of the tool, plus one in flight that it may have to wait out.
        self.collector
            .refresh_blocking(limit.min(self.collector.timeout.saturating_mul(2)));
    }

    fn unavailable_reason(&self) -> Option<String> {
        match self.collector.state() {
            CollectorState::Ready(_) => None,
            CollectorState::Starting => Some("nvidia-smi has not answered yet".into()),
            CollectorState::StartFailing { message, .. } => {
                Some(format!("nvidia-smi is failing: {message}"))
            }
            CollectorState::Gap { failures } => {
                Some(format!("nvidia-smi's last {failures} run(s) failed"))
            }
            CollectorState::NoDevices => Some("nvidia-smi found no device".into()),
            CollectorState::NotFound => Some("nvidia-smi not on PATH".into()),
            CollectorState::Stopped { failures } => Some(format!(
                "nvidia-smi stopped after {failures} failures in a row"
            )),
        }
    }

    fn forward_readings(&mut self, sink: Arc<dyn PowerSampleSink>) {
        self.collector.forward_to(sink);
    }

    /// A second, long-lived child in loop mode, power only (see
    /// [`crate::nvidia_smi_stream`]), while the full query keeps its interval.
    fn start_dense_power(
        &mut self,
        period: Duration,
        selectors: &[String],
        sink: Arc<dyn PowerSampleSink>,
    ) -> Option<crate::dense_power::DensePower> {
        let collector = &self.collector;
        let StreamSetup { program, events } = collector.program.as_ref()?;
        let (program, events) = (program.clone(), Arc::clone(events));
        let runtime = collector.runtime.as_ref()?;
        if matches!(
            collector.state(),
            CollectorState::NoDevices | CollectorState::NotFound
        ) {
            return None;
        }
        let config = crate::nvidia_smi_stream::SmiStreamConfig {
            program,
            period,
            timeout: collector.timeout,
            selectors: selectors.to_vec(),
            max_consecutive_failures: MAX_CONSECUTIVE_FAILURES,
            first_backoff: crate::nvidia_smi_stream::FIRST_BACKOFF,
        };
        Some(crate::dense_power::DensePower::holding(
            crate::nvidia_smi_stream::SmiPowerStream::start(config, sink, events, runtime),
        ))
    }
}

/// Why a run gave no reading.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    /// Could not start, or exited with an error; with what was said.
    Exit(String),
    Timeout,
    Empty,
    Parse(String),
    /// "No devices were found" after the tool had answered with devices.
    DevicesGone,
}

impl Failure {
    fn message(&self) -> String {
        match self {
            Failure::Exit(message) => message.clone(),
            Failure::Timeout => "nvidia-smi did not answer before the timeout".to_owned(),
            Failure::Empty => "nvidia-smi exited without printing anything".to_owned(),
            Failure::Parse(detail) => format!("unreadable nvidia-smi answer: {detail}"),
            Failure::DevicesGone => "nvidia-smi now finds no device".to_owned(),
        }
    }

    fn event(&self, answered_before: bool) -> GpuEvent {
        match self {
            Failure::Timeout => GpuEvent::SmiTimeout,
            Failure::Empty => GpuEvent::SmiEmptyAnswer,
            Failure::Parse(detail) => GpuEvent::SmiParseFailure {
                detail: detail.clone(),
            },
            Failure::Exit(message) if !answered_before => GpuEvent::SmiStartFailed {
                message: message.clone(),
            },
            other => GpuEvent::SmiSampleFailed {
                message: other.message(),
            },
        }
    }
}

#[derive(Debug)]
enum Attempt {
    Devices(Vec<GpuDeviceReading>, Instant),
    NoDevices,
    Failed(Failure),
}

async fn collect(
    config: NvidiaSmiConfig,
    sink: Arc<dyn GpuEventSink>,
    state: watch::Sender<CollectorState>,
    shared: Arc<Shared>,
) {
    let mut fields = QueryFieldSet::FIRST;
    let mut failures: u32 = 0;
    let mut answered_before = false;
    let mut ticker = tokio::time::interval(config.interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            // A fresh reading was asked for: run now, and keep a full interval after it.
            () = shared.run_now.notified() => ticker.reset(),
        }
        let started = Instant::now();
        let outcome = attempt(&config, &mut fields, sink.as_ref()).await;
        let finished = Instant::now();
        if !matches!(outcome, Attempt::Devices(..)) {
            shared.update(|progress| progress.failed_at = Some(finished));
        }
        match outcome {
            Attempt::Devices(devices, run_started) => {
                failures = 0;
                answered_before = true;
                let processes = compute_apps(&config, &devices).await;
                state.send_replace(CollectorState::Ready(Arc::new(SmiReading {
                    devices,
                    processes,
                    taken_at: run_started + finished.saturating_duration_since(run_started) / 2,
                })));
            }
            Attempt::NoDevices if !answered_before => {
                tracing::info!("nvidia-smi found no device: no NVIDIA GPU readings");
                sink.record(GpuEvent::SmiNoDevices);
                state.send_replace(CollectorState::NoDevices);
                shared.update(|progress| progress.finished_run_started = Some(started));
                return;
            }
            Attempt::NoDevices => {
                if record_failure(
                    &config,
                    sink.as_ref(),
                    &state,
                    Failure::DevicesGone,
                    answered_before,
                    &mut failures,
                ) {
                    return;
                }
            }
            Attempt::Failed(failure) => {
                if record_failure(
                    &config,
                    sink.as_ref(),
                    &state,
                    failure,
                    answered_before,
                    &mut failures,
                ) {
                    shared.update(|progress| progress.finished_run_started = Some(started));
                    return;
                }
            }
        }
        shared.update(|progress| progress.finished_run_started = Some(started));
    }
}

/// The compute processes per device, from a second run; `None` when it failed (the
/// device answer stands either way).
async fn compute_apps(
    config: &NvidiaSmiConfig,
    devices: &[GpuDeviceReading],
) -> Option<Vec<GpuProcessReading>> {
    let arguments = COMPUTE_APPS_ARGUMENTS.map(str::to_owned);
    match run_with_timeout(&config.program, &arguments, config.timeout).await {
        RunOutcome::Exited { status, stdout, .. } if status.success() => {
            let parsed = parse_compute_apps(&String::from_utf8_lossy(&stdout), devices);
            if parsed.is_none() {
                tracing::debug!("unreadable nvidia-smi --query-compute-apps answer");
            }
            parsed
        }
        other => {
            tracing::debug!(?other, "nvidia-smi --query-compute-apps failed");
            None
        }
    }
}

/// Count one failure, log and report it; `true` when collection must stop.
fn record_failure(
    config: &NvidiaSmiConfig,
    sink: &dyn GpuEventSink,
    state: &watch::Sender<CollectorState>,
    failure: Failure,
    answered_before: bool,
    failures: &mut u32,
) -> bool {
    *failures = failures.saturating_add(1);
    let message = failure.message();
    sink.record(failure.event(answered_before));
    if answered_before {
        tracing::debug!(failures = *failures, tool_said = %message, "nvidia-smi sample failed");
        state.send_replace(CollectorState::Gap {
            failures: *failures,
        });
    } else {
        if *failures == 1 {
            tracing::warn!(
                tool_said = %message,
                "nvidia-smi is present but failing; retrying every {:?}",
                config.interval
            );
        } else {
            tracing::debug!(failures = *failures, tool_said = %message, "nvidia-smi still failing");
        }
        state.send_replace(CollectorState::StartFailing {
            failures: *failures,
            message,
        });
    }
    if *failures >= config.max_consecutive_failures.max(1) {
        tracing::warn!(
            failures = *failures,
            "nvidia-smi failed {} times in a row: GPU collection stopped",
            *failures
        );
        sink.record(GpuEvent::SmiStoppedAfterFailures { count: *failures });
        state.send_replace(CollectorState::Stopped {
            failures: *failures,
        });
        return true;
    }
    false
}

/// One run (plus immediate re-runs after a field downgrade).
async fn attempt(
    config: &NvidiaSmiConfig,
    fields: &mut QueryFieldSet,
    sink: &dyn GpuEventSink,
) -> Attempt {
    loop {
        let started = Instant::now();
        let outcome = run_with_timeout(&config.program, &fields.arguments(), config.timeout).await;
        let (status, stdout, stderr) = match outcome {
            RunOutcome::Failed(error) => {
                return Attempt::Failed(Failure::Exit(format!(
                    "could not run {}: {error}",
                    config.program.display()
                )));
            }
            RunOutcome::TimedOut { .. } => return Attempt::Failed(Failure::Timeout),
            RunOutcome::Exited {
                status,
                stdout,
                stderr,
            } => (status, stdout, stderr),
        };
        let stdout = String::from_utf8_lossy(&stdout);
        let stderr = String::from_utf8_lossy(&stderr);
        let field_names = fields.fields();
        let answer = match interpret_answer(&stdout, &field_names) {
            // The tool writes its complaints to stdout, but look at stderr too.
            Ok(SmiAnswer::Empty) => interpret_answer(&stderr, &field_names),
            other => other,
        };
        match answer {
            Ok(SmiAnswer::UnknownField(field)) => match fields.after_unknown_field(&field) {
                Some(next) => {
                    if next.list == FieldList::Core && fields.list != FieldList::Core {
                        tracing::info!(
                            unknown_field = %field,
                            "this driver does not know a queried nvidia-smi field: using the core set from now on"
                        );
                        sink.record(GpuEvent::SmiDowngradedToCoreFields {
                            unknown_field: field,
                        });
                    } else if next.instant_power != fields.instant_power {
                        tracing::debug!(
                            "this driver does not know power.draw.instant: integrating power.draw"
                        );
                    } else {
                        tracing::debug!(unknown_field = %field, "retrying with clocks_event_reasons names");
                    }
                    *fields = next;
                    continue;
                }
                None => {
                    return Attempt::Failed(Failure::Parse(format!(
                        "the core field {field} is not known to this driver"
                    )));
                }
            },
            Ok(SmiAnswer::NoDevices) => return Attempt::NoDevices,
            _ if !status.success() => {
                return Attempt::Failed(Failure::Exit(exit_message(status, &stdout, &stderr)));
            }
            Ok(SmiAnswer::Empty) => return Attempt::Failed(Failure::Empty),
            Ok(SmiAnswer::Devices(devices)) if devices.is_empty() => {
                return Attempt::Failed(Failure::Empty);
            }
            Ok(SmiAnswer::Devices(devices)) => return Attempt::Devices(devices, started),
            Err(error) => return Attempt::Failed(Failure::Parse(error.to_string())),
        }
    }
}

/// "exit status N: <what the tool said>", kept short.
fn exit_message(status: ExitStatus, stdout: &str, stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let said = if said.is_empty() {
        "no output".to_owned()
    } else {
        said.join(" ")
    };
    let mut message = format!("nvidia-smi exited with {status}: {said}");
    if message.chars().count() > MESSAGE_LIMIT {
        message = message.chars().take(MESSAGE_LIMIT).collect();
        message.push('…');
    }
    message
}

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
//! - an unknown field: downgrade ([`super::nvidia_smi::QueryFieldSet::after_unknown_field`])
//!   and ask again at once;
//! - failing later: that sample observes nothing (the latest answer becomes a gap),
//!   and after 5 failures in a row collection stops with one warning.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::events::{GpuEvent, GpuEventSink};
use super::nvidia_smi::{QueryFieldSet, SmiAnswer, interpret_answer};
use super::{GpuDeviceReading, GpuSample, GpuSampleRequest, GpuSource};

/// Default time between two runs of the tool.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// Default limit for one run of the tool.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Failures in a row after which collection stops.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 5;
/// How long pipes are drained after the child is known to have exited.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
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

/// One answer of the tool.
#[derive(Debug, Clone, PartialEq)]
pub struct SmiReading {
    /// One record per device line.
    pub devices: Vec<GpuDeviceReading>,
    /// When the run that produced it was started.
    pub taken_at: Instant,
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
}

impl NvidiaSmiCollector {
    /// Start collecting with `config` on `runtime`. The first run starts at once.
    pub fn start(config: NvidiaSmiConfig, sink: Arc<dyn GpuEventSink>, runtime: &Handle) -> Self {
        let (sender, state) = watch::channel(CollectorState::Starting);
        let task = runtime.spawn(collect(config, sink, sender));
        Self {
            state,
            task: Some(task),
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
        Self { state, task: None }
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
}

impl Drop for NvidiaSmiCollector {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
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
        let reading = self.collector.latest()?;
        let devices = if request.device_metrics {
            reading
                .devices
                .iter()
                .filter(|device| {
                    request.selects_device(&device.device_identifier, device.device_index)
                })
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        Some(GpuSample {
            devices,
            processes: Vec::new(),
            taken_at: reading.taken_at,
        })
    }
}

/// How one run of a program ended.
#[derive(Debug)]
pub enum RunOutcome {
    /// The program exited; everything it wrote is here.
    Exited {
        /// Exit status.
        status: ExitStatus,
        /// Standard output.
        stdout: Vec<u8>,
        /// Standard error.
        stderr: Vec<u8>,
    },
    /// Still running at the deadline: killed. What it wrote so far is here.
    TimedOut {
        /// Standard output so far.
        stdout: Vec<u8>,
        /// Standard error so far.
        stderr: Vec<u8>,
    },
    /// It could not be started (or waited for).
    Failed(std::io::Error),
}

/// Run `program` with `args` (no shell), reading its output and exit together, with
/// `timeout` as the limit. When the timer fires first, a child that has already
/// exited is not killed: its pipes are drained and its answer is returned.
pub async fn run_with_timeout(program: &Path, args: &[String], timeout: Duration) -> RunOutcome {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return RunOutcome::Failed(error),
    };
    let mut stdout_pipe = child.stdout.take();
    let mut stderr_pipe = child.stderr.take();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();

    let finished = {
        let work = async {
            let _ = tokio::join!(
                read_pipe(&mut stdout_pipe, &mut stdout),
                read_pipe(&mut stderr_pipe, &mut stderr)
            );
            child.wait().await
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::select! {
            biased;
            status = work => Some(status),
            () = deadline => None,
        }
    };

    match finished {
        Some(Ok(status)) => RunOutcome::Exited {
            status,
            stdout,
            stderr,
        },
        Some(Err(error)) => RunOutcome::Failed(error),
        None => match child.try_wait() {
            // The timer fired late (or at the same moment as the exit): the child is
            // done, so take what it wrote instead of killing it.
            Ok(Some(status)) => {
                let _ = tokio::time::timeout(DRAIN_GRACE, async {
                    tokio::join!(
                        read_pipe(&mut stdout_pipe, &mut stdout),
                        read_pipe(&mut stderr_pipe, &mut stderr)
                    )
                })
                .await;
                RunOutcome::Exited {
                    status,
                    stdout,
                    stderr,
                }
            }
            _ => {
                if let Err(error) = child.start_kill() {
                    tracing::debug!(%error, "could not kill nvidia-smi after its timeout");
                }
                let _ = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
                RunOutcome::TimedOut { stdout, stderr }
            }
        },
    }
}

/// Append everything `pipe` yields to `buffer`, until end of file (then the pipe is
/// dropped). Cancel-safe: bytes read are in `buffer` before the next await.
async fn read_pipe<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buffer: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut chunk = [0_u8; 4096];
    while let Some(reader) = pipe.as_mut() {
        let read = reader.read(&mut chunk).await?;
        if read == 0 {
            *pipe = None;
        } else {
            buffer.extend_from_slice(&chunk[..read]);
        }
    }
    Ok(())
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
) {
    let mut fields = QueryFieldSet::Full;
    let mut failures: u32 = 0;
    let mut answered_before = false;
    let mut ticker = tokio::time::interval(config.interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        match attempt(&config, &mut fields, sink.as_ref()).await {
            Attempt::Devices(devices, taken_at) => {
                failures = 0;
                answered_before = true;
                state.send_replace(CollectorState::Ready(Arc::new(SmiReading {
                    devices,
                    taken_at,
                })));
            }
            Attempt::NoDevices if !answered_before => {
                tracing::info!("nvidia-smi found no device: no NVIDIA GPU readings");
                sink.record(GpuEvent::SmiNoDevices);
                state.send_replace(CollectorState::NoDevices);
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
                    return;
                }
            }
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
        let answer = match interpret_answer(&stdout, fields.fields()) {
            // The tool writes its complaints to stdout, but look at stderr too.
            Ok(SmiAnswer::Empty) => interpret_answer(&stderr, fields.fields()),
            other => other,
        };
        match answer {
            Ok(SmiAnswer::UnknownField(field)) => match fields.after_unknown_field(&field) {
                Some(next) => {
                    if next == QueryFieldSet::Core {
                        tracing::info!(
                            unknown_field = %field,
                            "this driver does not know a queried nvidia-smi field: using the core set from now on"
                        );
                        sink.record(GpuEvent::SmiDowngradedToCoreFields {
                            unknown_field: field,
                        });
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

//! Dense power through `nvidia-smi`: one long-lived child in loop mode
//! (`--query-gpu=index,uuid,<power field> --format=csv,noheader,nounits
//! --loop-ms=<period>`, no shell), read line by line as it streams. Each line is
//! stamped when it arrives; one loop's lines (one per device) make one reading.
//!
//! `power.draw.instant` is asked for first (the driver's instantaneous figure, where it
//! knows it), else `power.draw`. The spec's failure table, for a stream:
//! - "No devices were found": no stream, not asked again;
//! - an unknown field: the next field, at once;
//! - garbage: the line is skipped and counted, once recorded per child;
//! - no line within the timeout (a hang), or the child dying: a gap (the energy of
//!   the gap is not integrated), recorded, and the child restarted after a back-off
//!   that doubles (1 s to 30 s); after 5 failures in a row without a reading, one
//!   warning and no further attempt.
//!
//! The task owns the child (`kill_on_drop`): dropping the [`SmiPowerStream`] kills it.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use wattline_model::snapshot::{GpuDeviceReading, GpuSample};

use crate::events::{GpuEvent, GpuEventSink};
use crate::nvidia_smi::{FORMAT_ARGUMENT, SmiAnswer, interpret_answer};
use crate::power::{PowerSample, PowerSampleSink, SamplePart};
use crate::visible_devices::selector_matches;

/// The power fields, most precise first.
pub const POWER_FIELDS: [&str; 2] = ["power.draw.instant", "power.draw"];
/// Longest back-off between two starts of the child.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The first back-off.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// How the stream runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmiStreamConfig {
    /// Full path of `nvidia-smi`.
    pub program: PathBuf,
    /// The loop period (`--loop-ms`).
    pub period: Duration,
    /// Longest wait for a line before the child counts as hung.
    pub timeout: Duration,
    /// Device selectors (identifier or index); empty selects every device.
    pub selectors: Vec<String>,
    /// Failures in a row, without a reading between, after which the stream stops.
    pub max_consecutive_failures: u32,
    /// The first back-off before a restart (doubles up to [`MAX_BACKOFF`]).
    pub first_backoff: Duration,
}

/// A running stream; dropping it stops the task and kills the child.
#[derive(Debug)]
pub struct SmiPowerStream {
    task: JoinHandle<()>,
}

impl SmiPowerStream {
    /// Starts the stream on `runtime`, sending each reading to `sink` and recording
    /// failures in `events`.
    pub fn start(
        config: SmiStreamConfig,
        sink: Arc<dyn PowerSampleSink>,
        events: Arc<dyn GpuEventSink>,
        runtime: &Handle,
    ) -> Self {
        SmiPowerStream {
            task: runtime.spawn(stream(config, sink, events)),
        }
    }

    /// Whether the stream has ended for good (no devices, or too many failures).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for SmiPowerStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How one child ended.
#[derive(Debug, PartialEq)]
enum Ended {
    /// The driver does not know the field.
    UnknownField,
    /// No NVIDIA device on this host.
    NoDevices,
    /// It died, hung or could not start; with whether it gave a reading first, and
    /// what happened in words.
    Failed { answered: bool, message: String },
}

async fn stream(
    config: SmiStreamConfig,
    sink: Arc<dyn PowerSampleSink>,
    events: Arc<dyn GpuEventSink>,
) {
    let mut field = 0;
    let mut failures: u32 = 0;
    let mut backoff = config.first_backoff;
    loop {
        let Some(name) = POWER_FIELDS.get(field).copied() else {
            tracing::info!("nvidia-smi knows no power field: no dense power readings");
            return;
        };
        match run_child(&config, name, sink.as_ref(), events.as_ref()).await {
            Ended::UnknownField => {
                tracing::debug!(field = name, "nvidia-smi does not know this power field");
                field += 1;
            }
            Ended::NoDevices => return,
            Ended::Failed { answered, message } => {
                // The interval across the failure is not integrated.
                sink.send(gap());
                if answered {
                    failures = 0;
                    backoff = config.first_backoff;
                }
                failures = failures.saturating_add(1);
                if failures >= config.max_consecutive_failures.max(1) {
                    tracing::warn!(
                        failures,
                        "the nvidia-smi power stream failed {failures} times in a row: dense power readings stopped ({message})"
                    );
                    events.record(GpuEvent::SmiStoppedAfterFailures { count: failures });
                    return;
                }
                events.record(GpuEvent::SmiSampleFailed {
                    message: format!(
                        "the nvidia-smi power stream {message}; restarting in {} s",
                        backoff.as_secs_f64()
                    ),
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

fn gap() -> PowerSample {
    let mut sample = PowerSample::from_part(
        SamplePart {
            source: "nvidia-smi".into(),
            sample: None,
            at: Instant::now(),
        },
        false,
    );
    sample.dense = true;
    sample
}

/// Runs one child until it ends; sends each loop's reading as it completes.
async fn run_child(
    config: &SmiStreamConfig,
    field: &'static str,
    sink: &dyn PowerSampleSink,
    events: &dyn GpuEventSink,
) -> Ended {
    let (mut child, mut lines) = match start_child(config, field) {
        Ok(started) => started,
        Err(ended) => return ended,
    };
    let mut reader = StreamLines::new(field);
    loop {
        let line = match tokio::time::timeout(config.timeout, lines.next_line()).await {
            Err(_) => {
                let _ = child.start_kill();
                return Ended::Failed {
                    answered: reader.answered,
                    message: format!(
                        "gave no line for {} s and was killed",
                        config.timeout.as_secs_f64()
                    ),
                };
            }
            Ok(Ok(Some(line))) => line,
            Ok(Ok(None)) | Ok(Err(_)) => return child_ended(&mut child, reader.answered).await,
        };
        if let Some(ended) = reader.read(&line, &config.selectors, sink, events) {
            return ended;
        }
    }
}

/// Starts `nvidia-smi` looping over `field`, with its output's lines to read.
fn start_child(
    config: &SmiStreamConfig,
    field: &str,
) -> Result<(Child, Lines<BufReader<ChildStdout>>), Ended> {
    let loop_ms = config.period.as_millis().max(1);
    let mut child = tokio::process::Command::new(&config.program)
        .arg(format!("--query-gpu=index,uuid,{field}"))
        .arg(FORMAT_ARGUMENT)
        .arg(format!("--loop-ms={loop_ms}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| Ended::Failed {
            answered: false,
            message: format!("could not start: {error}"),
        })?;
    let Some(stdout) = child.stdout.take() else {
        return Err(Ended::Failed {
            answered: false,
            message: "has no standard output".into(),
        });
    };
    Ok((child, BufReader::new(stdout).lines()))
}

/// The child closed its output: how it ended, with what it said on stderr, each
/// waited for at most a second.
async fn child_ended(child: &mut Child, answered: bool) -> Ended {
    let mut said = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ =
            tokio::time::timeout(Duration::from_secs(1), stderr.read_to_string(&mut said)).await;
    }
    let status = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
    let status = match status {
        Ok(Ok(status)) => status.to_string(),
        _ => "an unknown status".into(),
    };
    Ended::Failed {
        answered,
        message: format!("ended with {status}{}", said_suffix(&said)),
    }
}

/// One child's lines as they are read: the loop being gathered, whether a reading
/// went out, and whether garbage was already recorded.
struct StreamLines {
    field: &'static str,
    fields: [&'static str; 3],
    group: LoopGroup,
    answered: bool,
    garbage_recorded: bool,
}

impl StreamLines {
    fn new(field: &'static str) -> Self {
        StreamLines {
            field,
            fields: ["index", "uuid", field],
            group: LoopGroup::default(),
            answered: false,
            garbage_recorded: false,
        }
    }

    /// Reads one line, stamped now: a completed loop goes to `sink` as a dense
    /// reading. Returns how the child ends when the line says it should.
    fn read(
        &mut self,
        line: &str,
        selectors: &[String],
        sink: &dyn PowerSampleSink,
        events: &dyn GpuEventSink,
    ) -> Option<Ended> {
        let arrived = Instant::now();
        match interpret_answer(line, &self.fields) {
            Ok(SmiAnswer::Devices(mut devices)) if devices.len() == 1 => {
                let device = devices.remove(0);
                if let Some(sample) = self.group.add(device, arrived, selectors) {
                    self.answered = true;
                    let mut reading = PowerSample::from_part(
                        SamplePart {
                            source: "nvidia-smi".into(),
                            at: sample.taken_at,
                            sample: Some(sample),
                        },
                        false,
                    );
                    reading.dense = true;
                    reading.power_field = Some(self.field);
                    sink.send(reading);
                }
            }
            Ok(SmiAnswer::UnknownField(_)) => return Some(Ended::UnknownField),
            Ok(SmiAnswer::NoDevices) if !self.answered => {
                tracing::info!("nvidia-smi found no device: no dense power readings");
                return Some(Ended::NoDevices);
            }
            Ok(SmiAnswer::Empty) => {}
            other => {
                if !self.garbage_recorded {
                    self.garbage_recorded = true;
                    let detail = match other {
                        Err(error) => error.to_string(),
                        _ => format!("an unexpected line: {}", truncate(line)),
                    };
                    events.record(GpuEvent::SmiParseFailure {
                        detail: format!("the power stream printed {detail}"),
                    });
                }
                tracing::debug!(line = %truncate(line), "unreadable nvidia-smi stream line skipped");
            }
        }
        None
    }
}

fn said_suffix(said: &str) -> String {
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    if said.is_empty() {
        String::new()
    } else {
        format!(": {}", truncate(&said))
    }
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}

/// One loop's lines: a device seen again starts the next loop; once the number of
/// devices per loop is known, a loop is complete as soon as it has them all.
#[derive(Debug, Default)]
struct LoopGroup {
    seen: Vec<String>,
    devices: Vec<GpuDeviceReading>,
    started: Option<Instant>,
    per_loop: Option<usize>,
}

impl LoopGroup {
    /// Adds one line's device; returns a finished loop's reading, stamped when its
    /// first line arrived.
    fn add(
        &mut self,
        device: GpuDeviceReading,
        arrived: Instant,
        selectors: &[String],
    ) -> Option<GpuSample> {
        let mut finished = None;
        if self.seen.contains(&device.device_identifier) {
            self.per_loop = Some(self.seen.len());
            finished = self.take();
        }
        self.started.get_or_insert(arrived);
        self.seen.push(device.device_identifier.clone());
        if selector_matches(selectors, &device.device_identifier, device.device_index) {
            self.devices.push(device);
        }
        if finished.is_none() && self.per_loop == Some(self.seen.len()) {
            finished = self.take();
        }
        finished
    }

    fn take(&mut self) -> Option<GpuSample> {
        let started = self.started.take()?;
        self.seen.clear();
        let devices = std::mem::take(&mut self.devices);
        (!devices.is_empty()).then_some(GpuSample {
            devices,
            processes: Vec::new(),
            taken_at: started,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::snapshot::GpuVendor;

    fn device(uuid: &str) -> GpuDeviceReading {
        GpuDeviceReading::new(GpuVendor::Nvidia, uuid)
    }

    #[test]
    fn a_loop_ends_when_a_device_comes_again_then_as_soon_as_all_have_answered() {
        let mut group = LoopGroup::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(group.add(device("GPU-a"), at(0), &[]).is_none());
        assert!(group.add(device("GPU-b"), at(1), &[]).is_none());
        // GPU-a again: the first loop is complete, stamped at its first line.
        let first = group.add(device("GPU-a"), at(100), &[]).unwrap();
        assert_eq!(first.devices.len(), 2);
        assert_eq!(first.taken_at, at(0));
        // Now two per loop are known: complete at its second line, no wait.
        let second = group.add(device("GPU-b"), at(101), &[]).unwrap();
        assert_eq!(second.taken_at, at(100));
        // Selectors keep the grouping but drop unselected devices.
        assert!(
            group
                .add(device("GPU-a"), at(200), &["GPU-b".into()])
                .is_none()
        );
        let third = group
            .add(device("GPU-b"), at(201), &["GPU-b".into()])
            .unwrap();
        assert_eq!(third.devices.len(), 1);
        assert_eq!(third.devices[0].device_identifier, "GPU-b");
    }

    proptest::proptest! {
        // proptest's own count honours PROPTEST_CASES; a CI run makes at least 2000.
        #![proptest_config(proptest::test_runner::Config {
            cases: proptest::test_runner::Config::default().cases.max(2000),
            ..proptest::test_runner::Config::default()
        })]

        /// Lines in any order, devices dropping out and coming back, any selection:
        /// every reading holds distinct selected devices, stamped at or before the line
        /// that completed it, and no line is counted twice.
        #[test]
        fn any_line_order_groups_into_readings_of_distinct_devices(
            lines in proptest::collection::vec((0..6u8, 0..3u64), 0..64),
            selected in proptest::collection::vec(0..6u8, 0..3),
        ) {
            let selectors: Vec<String> = selected.iter().map(|d| format!("GPU-{d}")).collect();
            let mut group = LoopGroup::default();
            let mut at = Instant::now();
            let mut read = 0;
            for (device_number, step_ms) in &lines {
                at += Duration::from_millis(*step_ms);
                let Some(sample) = group.add(device(&format!("GPU-{device_number}")), at, &selectors) else {
                    continue;
                };
                proptest::prop_assert!(!sample.devices.is_empty());
                proptest::prop_assert!(sample.taken_at <= at);
                let mut ids: Vec<&str> = sample.devices.iter().map(|d| d.device_identifier.as_str()).collect();
                ids.sort_unstable();
                ids.dedup();
                proptest::prop_assert_eq!(ids.len(), sample.devices.len());
                for id in ids {
                    proptest::prop_assert!(selector_matches(&selectors, id, None));
                }
                read += sample.devices.len();
            }
            let selected_lines = lines
                .iter()
                .filter(|(d, _)| selector_matches(&selectors, &format!("GPU-{d}"), None))
                .count();
            proptest::prop_assert!(read <= selected_lines);
        }
    }
}

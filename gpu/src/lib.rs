//! wattline's GPU sources: the [`GpuSource`] trait, and the backends behind it
//! (NVML, the `nvidia-smi` tool and its power stream, Linux DRM files), which devices
//! a run counts, and dense power probes.
//!
//! A source reads one backend (NVML, the `nvidia-smi` tool, Linux DRM files, or
//! anything a user plugs in) and returns the model's [`GpuSample`]. Every value is in
//! its base unit (bytes, watts, millijoules, percent, degrees Celsius, MHz); no unit
//! conversion happens here: the pipeline applies the configured output units later.
//! A value the backend could not give is `None`, never zero.
//!
//! Sources are synchronous: [`GpuSource::sample`] may block on driver calls or file
//! reads, so the caller runs it on a blocking worker (`tokio::task::spawn_blocking`),
//! never on an async executor thread. The `nvidia-smi` source is the exception that
//! proves the rule: its tool runs in a background task and `sample` only copies the
//! latest answer.
//!
//! The records a source returns ([`GpuSample`] and its device and process readings)
//! and the selection a run counts are the model's (`wattline_model::snapshot`,
//! `wattline_model::gpu_selection`): the snapshot, the energy account and the
//! exporters read them without knowing any source. No actor framework here: the
//! `nvidia-smi` collector runs its tool on the tokio runtime it is handed, and the
//! pipeline's GPU sampler (in `wattline-actors`) drives every source.

#![warn(missing_docs)]

pub mod dense_power;
pub mod drm;
pub mod events;
pub mod nvidia_fallback;
pub mod nvidia_smi;
pub mod nvidia_smi_collector;
pub mod nvidia_smi_stream;
pub mod nvml;
pub mod nvml_survey;
pub mod selection;
pub mod timed_run;
pub mod visible_devices;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::GpuSample;

pub use events::{CollectingEventSink, GpuEvent, GpuEventSeverity, GpuEventSink, NoopEventSink};
pub use selection::{CompositeGpuSource, GpuSourceEnv, select_default_sources, selector_matches};

/// Which processes get process records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProcessScope {
    /// Every visible process (global measurement scope).
    #[default]
    All,
    /// Only these process IDs (application process or process tree).
    Pids(BTreeSet<u32>),
}

impl ProcessScope {
    /// Whether `pid` is in scope.
    pub fn contains(&self, pid: u32) -> bool {
        match self {
            ProcessScope::All => true,
            ProcessScope::Pids(pids) => pids.contains(&pid),
        }
    }
}

/// What the caller wants from one [`GpuSource::sample`] call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSampleRequest {
    /// The series this sample belongs to (baselines are kept per series).
    pub series: SamplingSeries,
    /// Whether device-wide records are wanted.
    pub device_metrics: bool,
    /// Whether process records are wanted.
    pub process_metrics: bool,
    /// Device selectors: an identifier (UUID, PCI address) or an index as a decimal
    /// string. Empty selects every device.
    pub device_selectors: Vec<String>,
    /// The processes in scope for process records.
    pub processes: ProcessScope,
}

impl GpuSampleRequest {
    /// Everything, every device, every process, in `series`.
    pub fn all(series: SamplingSeries) -> Self {
        Self {
            series,
            device_metrics: true,
            process_metrics: true,
            device_selectors: Vec::new(),
            processes: ProcessScope::All,
        }
    }

    /// Whether the device with this identifier and index is selected.
    pub fn selects_device(&self, identifier: &str, index: Option<u32>) -> bool {
        selector_matches(&self.device_selectors, identifier, index)
    }

    /// Whether the device is selected, its MIG instances included in the match.
    pub fn selects(&self, device: &visible_devices::DeviceIdentity<'_>) -> bool {
        visible_devices::selectors_select_device(&self.device_selectors, device)
    }
}

/// One backend's part of a sample, stamped with when it was measured: what the energy
/// stage integrates, per backend.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplePart {
    /// The backend's name.
    pub source: String,
    /// What it read; `None` when it observed nothing (a gap for its devices).
    pub sample: Option<GpuSample>,
    /// When the reading was measured, or when the failure was observed.
    pub at: Instant,
}

/// One backend's reading as the energy stage receives it.
#[derive(Debug, Clone)]
pub struct PowerSample {
    /// The backend (`nvml`, `nvidia-smi`, `drm`, a user's).
    pub source: String,
    /// The device readings; `None` when the source observed nothing.
    pub sample: Option<Arc<GpuSample>>,
    /// Wall-clock time the sample reached the pipeline.
    pub observed_at: DateTime<Utc>,
    /// When it was measured (or the failure observed), on the monotonic clock.
    pub taken_at: Instant,
    /// Whether processes were read with it (empty processes then mean "none").
    pub processes_read: bool,
    /// A dense power reading (a probe's): integrated, but no gauge of its own.
    pub dense: bool,
    /// The backend's name for the power figure (`power.draw.instant`, `power.draw`,
    /// `NVML_FI_DEV_POWER_INSTANT`, `nvmlDeviceGetPowerUsage`), where known.
    pub power_field: Option<&'static str>,
}

impl PowerSample {
    /// The energy stage's view of one part.
    pub fn from_part(part: SamplePart, processes_read: bool) -> Self {
        PowerSample {
            source: part.source,
            sample: part.sample.map(Arc::new),
            observed_at: Utc::now(),
            taken_at: part.at,
            processes_read,
            dense: false,
            power_field: None,
        }
    }
}

/// The parts that answered, as one sample stamped with the first answering part's
/// time; `None` when no part answered.
pub fn merge_parts(parts: &[SamplePart]) -> Option<GpuSample> {
    let mut combined: Option<GpuSample> = None;
    for sample in parts.iter().filter_map(|part| part.sample.as_ref()) {
        match combined.as_mut() {
            None => combined = Some(sample.clone()),
            Some(all) => {
                all.devices.extend(sample.devices.iter().cloned());
                all.processes.extend(sample.processes.iter().cloned());
            }
        }
    }
    combined
}

/// Reads power (and the energy counter) alone, cheaply, on a thread of its own: the
/// energy stage's dense samples. `read` may block on driver calls.
pub trait PowerProbe: Send {
    /// The backend it reads (the same name as its source's part).
    fn source(&self) -> &str;

    /// The backend's name for the power figure it reads.
    fn power_field(&self) -> &'static str;

    /// One reading of every selected device (power and counter only); `None` when it
    /// observed nothing.
    fn read(&mut self) -> Option<GpuSample>;
}

/// Where readings go on their way to the energy stage.
pub trait PowerSampleSink: Send + Sync {
    /// Receives one sample; must not block.
    fn send(&self, sample: PowerSample);
}

/// A reader of GPU data: NVML, `nvidia-smi`, DRM, or a user's own.
///
/// `sample` is synchronous and may block (driver calls, file reads); run it on a
/// blocking worker, and the other methods too (they may wait for a tool). Returning
/// `None` means "nothing observed this time" (no backend, or the backend failed); the
/// caller reports the GPU category as unavailable and an energy integrator sees a gap.
/// `Some` with empty vectors means the backend ran and found no supported or matching
/// record.
pub trait GpuSource: Send {
    /// Short name of the backend: `"nvml"`, `"nvidia-smi"`, `"drm"`, or a user's.
    fn name(&self) -> &str;

    /// Read the devices and processes the request asks for.
    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample>;

    /// The sample split by backend, each part stamped with when it was measured (or
    /// failed). The default is the whole sample as one part.
    fn sample_parts(&mut self, request: &GpuSampleRequest) -> Vec<SamplePart> {
        let asked = Instant::now();
        let sample = self.sample(request);
        vec![SamplePart {
            source: self.name().to_owned(),
            at: sample.as_ref().map_or(asked, |sample| sample.taken_at),
            sample,
        }]
    }

    /// Waits, at most `limit`, until the source has its first answer. A source read
    /// only when asked has nothing to wait for.
    fn wait_until_ready(&mut self, _limit: Duration) {}

    /// Makes the next sample a reading measured after this call: a source that caches
    /// answers measures again now, waiting at most `limit`.
    fn refresh(&mut self, _limit: Duration) {}

    /// Why nothing is read, in words, while nothing is.
    fn unavailable_reason(&self) -> Option<String> {
        None
    }

    /// Sends every reading the source measures on its own schedule (a tool run by a
    /// background task) to `sink` as it arrives. Sources read only when asked ignore it.
    fn forward_readings(&mut self, _sink: Arc<dyn PowerSampleSink>) {}

    /// Starts reading power alone, every `period`, for the devices `selectors`
    /// select, off the async runtime, sending each reading to `sink` as a dense
    /// sample; reading stops when the returned guard is dropped. `None` where the
    /// backend cannot (the energy stage then integrates the source's own samples).
    fn start_dense_power(
        &mut self,
        _period: Duration,
        _selectors: &[String],
        _sink: Arc<dyn PowerSampleSink>,
    ) -> Option<dense_power::DensePower> {
        None
    }
}

impl GpuSource for Box<dyn GpuSource> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        (**self).sample(request)
    }

    fn sample_parts(&mut self, request: &GpuSampleRequest) -> Vec<SamplePart> {
        (**self).sample_parts(request)
    }

    fn wait_until_ready(&mut self, limit: Duration) {
        (**self).wait_until_ready(limit);
    }

    fn refresh(&mut self, limit: Duration) {
        (**self).refresh(limit);
    }

    fn unavailable_reason(&self) -> Option<String> {
        (**self).unavailable_reason()
    }

    fn forward_readings(&mut self, sink: Arc<dyn PowerSampleSink>) {
        (**self).forward_readings(sink);
    }

    fn start_dense_power(
        &mut self,
        period: Duration,
        selectors: &[String],
        sink: Arc<dyn PowerSampleSink>,
    ) -> Option<dense_power::DensePower> {
        (**self).start_dense_power(period, selectors, sink)
    }
}

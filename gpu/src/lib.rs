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
pub mod power;
pub mod selection;
pub mod timed_run;
pub mod visible_devices;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::GpuSample;

pub use events::{CollectingEventSink, GpuEvent, GpuEventSeverity, GpuEventSink, NoopEventSink};
pub use power::{PowerProbe, PowerSample, PowerSampleSink, SamplePart, merge_parts};

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
        visible_devices::selector_matches(&self.device_selectors, identifier, index)
    }

    /// Whether the device is selected, its MIG instances included in the match.
    pub fn selects(&self, device: &visible_devices::DeviceIdentity<'_>) -> bool {
        visible_devices::selectors_select_device(&self.device_selectors, device)
    }
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

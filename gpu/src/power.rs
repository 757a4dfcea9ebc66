//! What a GPU backend hands on: its part of a sample, the energy stage's view of a
//! reading, the dense power probes and where their readings go. Below the sources and
//! the dense sampling threads, which both use them.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use wattline_model::snapshot::GpuSample;

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

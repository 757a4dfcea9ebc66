//! The energy stage's inputs as records: what the live account consumes, in order, and
//! what an event file carries, so `wattline report FILE` feeds the same records to the
//! same account and rebuilds the same report.
//!
//! Times are nanoseconds on the pipeline's monotonic clock since its epoch, an instant
//! taken before the first reading, so no reading is ever stamped before zero.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;
use wattline_config::energy::EnergySettings;

use crate::gpu_selection::GpuSelection;

/// Nanoseconds since the pipeline's epoch, on its monotonic clock.
pub type Nanos = u64;

/// The pipeline's monotonic epoch: converts instants to [`Nanos`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch(pub Instant);

impl Epoch {
    /// An epoch starting now.
    pub fn now() -> Self {
        Epoch(Instant::now())
    }

    /// `at` as nanoseconds since the epoch (an instant before it is zero).
    pub fn nanos(self, at: Instant) -> Nanos {
        u64::try_from(at.saturating_duration_since(self.0).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// What one GPU process share is a share of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareBasis {
    /// The process's share of the device's compute utilization (NVML process samples).
    Utilization,
    /// The process's share of the device memory held by processes (`nvidia-smi
    /// --query-compute-apps`): a proxy, labelled as such.
    Memory,
}

impl ShareBasis {
    /// `utilization` or `memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareBasis::Utilization => "utilization",
            ShareBasis::Memory => "memory",
        }
    }
}

/// How a device's energy divides between processes, as of one reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessShares {
    /// What the shares are shares of; `None` when the driver named no process (none
    /// ran, or none it could see: Agent scopes then divide the energy as if no shares
    /// were read).
    pub basis: Option<ShareBasis>,
    /// Process ID to its fraction of the device's energy; fractions sum to at most 1,
    /// the rest is unattributed.
    #[serde(with = "process_id_keys")]
    pub processes: BTreeMap<u32, f64>,
}

/// Process IDs as the string keys JSON objects have, read back as strings: inside the
/// internally tagged [`EnergyRecord`] serde buffers every key as a string, which a
/// `u32` key refuses, so a file's shares could not be read back.
mod process_id_keys {
    use std::collections::BTreeMap;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        processes: &BTreeMap<u32, f64>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            processes
                .iter()
                .map(|(pid, share)| (pid.to_string(), share)),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<u32, f64>, D::Error> {
        BTreeMap::<String, f64>::deserialize(deserializer)?
            .into_iter()
            .map(|(pid, share)| match pid.parse::<u32>() {
                Ok(number) => Ok((number, share)),
                Err(_) => Err(D::Error::custom(format!(
                    "process id {pid:?} is not a number"
                ))),
            })
            .collect()
    }
}

/// One device's power reading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevicePower {
    /// Backend identifier (NVML UUID, PCI address).
    pub id: String,
    /// Product name, when known.
    pub name: Option<String>,
    /// Power draw, W; `None` when the device gave none (no energy for it).
    pub watts: Option<f64>,
    /// Hardware energy counter, mJ, where readable.
    pub counter_millijoules: Option<u64>,
    /// Process shares read with this reading; `None` when processes were not read.
    pub shares: Option<ProcessShares>,
    /// Whether the device is a MIG-enabled board (its power is shared by every
    /// instance); `None` where not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_enabled: Option<bool>,
    /// When this device was read, where it differs from its record's instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Nanos>,
    /// The backend's name for this device's power figure, where it names it per
    /// device (one answer can hold an instantaneous figure for one board and a
    /// one-second mean for another); else the record's `power_field` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_field: Option<String>,
}

/// What one GPU backend measured at one instant, or that it measured nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerRecord {
    /// The backend (`nvml`, `nvidia-smi`, `drm`, a user's).
    pub source: String,
    /// When the reading was measured (or the failure observed).
    pub at: Nanos,
    /// The devices; `None` for a failed sample, a gap for every device of this source.
    pub devices: Option<Vec<DevicePower>>,
    /// The backend's name for the power figure, where known.
    #[serde(default)]
    pub power_field: Option<String>,
}

/// One input of the energy account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum EnergyRecord {
    /// The account opened, with its factors; `wall` is the wall-clock time at `at`.
    Started {
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time at `at`.
        wall: DateTime<Utc>,
        /// Factors and interval.
        settings: Box<EnergySettings>,
    },
    /// The measured window starts here: energy before it is not in the report.
    MeasuringFrom {
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
    },
    /// A GPU backend's reading.
    Power(PowerRecord),
    /// RAPL counters read at `at`.
    Rapl {
        /// Monotonic time.
        at: Nanos,
        /// The zones that were readable.
        zones: Vec<RaplZoneReading>,
    },
    /// An Agent scope went live.
    ScopeStarted {
        /// Its UUID.
        uuid: Uuid,
        /// Its name (shared with the scope's other records, not copied per record).
        name: std::sync::Arc<str>,
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
        /// The live scope it was opened inside, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<Uuid>,
        /// The process that opened it, when known (attribution by process share).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        process_id: Option<u32>,
        /// The caller's weight for dividing energy among concurrent scopes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f64>,
        /// The caller's W3C `traceparent`: the scope's span is a child of that span.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        traceparent: Option<String>,
    },
    /// An Agent scope ended.
    ScopeEnded {
        /// Its UUID.
        uuid: Uuid,
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
        /// The model call to another machine it stood for, if it did (its estimate is
        /// made by the account, unless the caller's library made one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        remote_call: Option<Box<crate::remote_call::RemoteCall>>,
    },
    /// What the GPU sources are and, when nothing is measured, why in words.
    GpuStatus {
        /// The configured source (`nvml+drm`, `nvidia-smi`, `none`, a user's).
        configured: String,
        /// Why no GPU power is read, when none is.
        unavailable: Option<String>,
        /// The devices counted, when a selection narrows them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selection: Option<GpuSelection>,
    },
    /// Why CPU energy (RAPL) is not read, when it is not.
    CpuStatus {
        /// The cause and its fix, in words.
        unavailable: Option<String>,
    },
    /// Scope boundaries stamped as early as `at` may still come after readings taken
    /// later than it: the window closes at `at`, and the scopes still live then are
    /// ended there. No step that ends after `at` settles before the final report.
    LateBoundariesFrom {
        /// Monotonic time.
        at: Nanos,
    },
    /// A report was taken as of `at`.
    Report {
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
    },
}

impl EnergyRecord {
    /// The instant the record carries, if any.
    pub fn at(&self) -> Option<Nanos> {
        match self {
            EnergyRecord::Started { at, .. }
            | EnergyRecord::MeasuringFrom { at, .. }
            | EnergyRecord::Rapl { at, .. }
            | EnergyRecord::ScopeStarted { at, .. }
            | EnergyRecord::ScopeEnded { at, .. }
            | EnergyRecord::LateBoundariesFrom { at }
            | EnergyRecord::Report { at, .. } => Some(*at),
            EnergyRecord::Power(power) => Some(power.at),
            EnergyRecord::GpuStatus { .. } | EnergyRecord::CpuStatus { .. } => None,
        }
    }
}

/// One RAPL zone's counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaplZoneReading {
    /// Stable identifier: the directory name (`intel-rapl:0`, `intel-rapl:0:1`).
    pub zone: String,
    /// The zone's name (`package-0`, `dram`, `core`, `uncore`, `psys`).
    pub name: String,
    /// Energy counter, µJ.
    pub energy_microjoules: u64,
    /// The counter wraps to zero past this value, µJ.
    pub max_energy_range_microjoules: Option<u64>,
}

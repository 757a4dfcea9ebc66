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

use crate::gpu::GpuSample;
use crate::platform::os::rapl::RaplZoneReading;

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
    /// What the shares are shares of; `None` when no process used the device.
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
        /// Its name.
        name: String,
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
    },
    /// An Agent scope ended.
    ScopeEnded {
        /// Its UUID.
        uuid: Uuid,
        /// Monotonic time.
        at: Nanos,
        /// Wall-clock time.
        wall: DateTime<Utc>,
    },
    /// What the GPU sources are and, when nothing is measured, why in words.
    GpuStatus {
        /// The configured source (`nvml+drm`, `nvidia-smi`, `none`, a user's).
        configured: String,
        /// Why no GPU power is read, when none is.
        unavailable: Option<String>,
        /// The devices counted, when a selection narrows them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selection: Option<crate::gpu::visible_devices::GpuSelection>,
    },
    /// Why CPU energy (RAPL) is not read, when it is not.
    CpuStatus {
        /// The cause and its fix, in words.
        unavailable: Option<String>,
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
            | EnergyRecord::Report { at, .. } => Some(*at),
            EnergyRecord::Power(power) => Some(power.at),
            EnergyRecord::GpuStatus { .. } | EnergyRecord::CpuStatus { .. } => None,
        }
    }
}

/// The power record of one backend's sample: `None` is a failed sample. `shares_read`
/// says whether processes were read with it, so "no process on the device" (empty
/// shares) differs from "not asked" (no shares).
pub fn power_record(
    source: &str,
    epoch: Epoch,
    at: Instant,
    sample: Option<&GpuSample>,
    shares_read: bool,
    power_field: Option<&str>,
) -> PowerRecord {
    let devices = sample.map(|sample| {
        sample
            .devices
            .iter()
            .map(|device| DevicePower {
                id: device.device_identifier.clone(),
                name: device.name.clone(),
                watts: device.power_draw_watts,
                counter_millijoules: device.total_energy_millijoules,
                shares: shares_read
                    .then(|| process_shares(sample, &device.device_identifier))
                    .flatten(),
                mig_enabled: device.mig_enabled,
                at: device.power_read_at.map(|read_at| epoch.nanos(read_at)),
            })
            .collect()
    });
    PowerRecord {
        source: source.to_owned(),
        at: epoch.nanos(at),
        devices,
        power_field: power_field.map(str::to_owned),
    }
}

/// The shares of `device` in `sample`: by compute utilization where processes carry it
/// (relative to the device's own utilization), else by memory held. `None` when the
/// records carry neither (NVML's first process sample has no utilization yet).
pub fn process_shares(sample: &GpuSample, device: &str) -> Option<ProcessShares> {
    let processes: Vec<_> = sample
        .processes
        .iter()
        .filter(|process| process.device_identifier == device)
        .collect();
    if processes.is_empty() {
        // Asked, and no process uses the device: all of it stays unattributed.
        return Some(ProcessShares {
            basis: None,
            processes: BTreeMap::new(),
        });
    }
    let (basis, weights): (ShareBasis, Vec<(u32, f64)>) = if processes
        .iter()
        .any(|p| p.compute_utilization_percent.is_some())
    {
        let device_utilization = sample
            .devices
            .iter()
            .find(|d| d.device_identifier == device)
            .and_then(|d| d.compute_utilization_percent)?;
        let weights = processes
            .iter()
            .filter_map(|p| {
                let utilization = p.compute_utilization_percent?;
                let share = if device_utilization > 0.0 {
                    (utilization / device_utilization).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                Some((p.process_id, share))
            })
            .collect();
        (ShareBasis::Utilization, weights)
    } else if processes.iter().any(|p| p.memory_used_bytes.is_some()) {
        let held: f64 = processes
            .iter()
            .filter_map(|p| p.memory_used_bytes)
            .map(|bytes| bytes as f64)
            .sum();
        let weights = processes
            .iter()
            .filter_map(|p| {
                let bytes = p.memory_used_bytes? as f64;
                Some((p.process_id, if held > 0.0 { bytes / held } else { 0.0 }))
            })
            .collect();
        (ShareBasis::Memory, weights)
    } else {
        return None;
    };
    // Shares never add up to more than the device: scale down when the driver's
    // numbers do (process samples and the device figure are taken at different times).
    let sum: f64 = weights.iter().map(|(_, share)| share).sum();
    let scale = if sum > 1.0 { 1.0 / sum } else { 1.0 };
    Some(ProcessShares {
        basis: Some(basis),
        processes: weights
            .into_iter()
            .map(|(pid, share)| (pid, share * scale))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{GpuDeviceReading, GpuProcessReading, GpuVendor};

    fn device(id: &str, utilization: Option<f64>) -> GpuDeviceReading {
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, id);
        device.compute_utilization_percent = utilization;
        device
    }

    fn process(
        device: &str,
        pid: u32,
        memory_mib: Option<u64>,
        utilization: Option<f64>,
    ) -> GpuProcessReading {
        GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: device.into(),
            device_index: None,
            process_id: pid,
            memory_used_bytes: memory_mib.map(|mib| mib * 1024 * 1024),
            compute_utilization_percent: utilization,
        }
    }

    fn sample(devices: Vec<GpuDeviceReading>, processes: Vec<GpuProcessReading>) -> GpuSample {
        GpuSample {
            devices,
            processes,
            taken_at: Instant::now(),
        }
    }

    fn share(shares: &ProcessShares, pid: u32) -> f64 {
        shares.processes[&pid]
    }

    #[test]
    fn utilization_shares_are_relative_to_the_device_and_scaled_down_past_the_whole() {
        let two = sample(
            vec![device("a", Some(50.0)), device("b", Some(80.0))],
            vec![
                process("a", 1, None, Some(20.0)),
                process("a", 2, None, Some(10.0)),
                process("b", 3, None, Some(80.0)),
            ],
        );
        let shares = process_shares(&two, "a").unwrap();
        assert_eq!(shares.basis, Some(ShareBasis::Utilization));
        assert!((share(&shares, 1) - 0.4).abs() < 1e-12);
        assert!((share(&shares, 2) - 0.2).abs() < 1e-12);
        assert!(!shares.processes.contains_key(&3));
        // 37% + 12% of a device busy 41%: more than the whole, scaled to 37/49, 12/49.
        let over = sample(
            vec![device("a", Some(41.0))],
            vec![
                process("a", 1, None, Some(37.0)),
                process("a", 2, None, Some(12.0)),
            ],
        );
        let shares = process_shares(&over, "a").unwrap();
        assert!((share(&shares, 1) - 37.0 / 49.0).abs() < 1e-12);
        assert!((share(&shares, 2) - 12.0 / 49.0).abs() < 1e-12);
        // A process over an idle device's figure holds nothing; a share above the
        // device's is capped at the whole.
        let idle = sample(
            vec![device("a", Some(0.0))],
            vec![process("a", 1, None, Some(5.0))],
        );
        assert_eq!(share(&process_shares(&idle, "a").unwrap(), 1), 0.0);
        let capped = sample(
            vec![device("a", Some(10.0))],
            vec![process("a", 1, None, Some(30.0))],
        );
        assert_eq!(share(&process_shares(&capped, "a").unwrap(), 1), 1.0);
        // Processes with utilization but no device figure: no shares.
        let unknown = sample(
            vec![device("a", None)],
            vec![process("a", 1, None, Some(30.0))],
        );
        assert_eq!(process_shares(&unknown, "a"), None);
    }

    #[test]
    fn each_basis_and_the_epoch_have_their_meaning() {
        assert_eq!(ShareBasis::Utilization.as_str(), "utilization");
        assert_eq!(ShareBasis::Memory.as_str(), "memory");
        let epoch = Epoch::now();
        let later = epoch.0 + std::time::Duration::from_millis(1500);
        assert_eq!(epoch.nanos(later), 1_500_000_000);
        // Before the epoch is zero, not a wrap.
        assert_eq!(Epoch(later).nanos(epoch.0), 0);
    }

    #[test]
    fn memory_shares_are_of_the_memory_the_processes_hold() {
        let held = sample(
            vec![device("a", None)],
            vec![
                process("a", 1, Some(300), None),
                process("a", 2, Some(900), None),
                process("a", 3, None, None),
            ],
        );
        let shares = process_shares(&held, "a").unwrap();
        assert_eq!(shares.basis, Some(ShareBasis::Memory));
        assert!((share(&shares, 1) - 0.25).abs() < 1e-12);
        assert!((share(&shares, 2) - 0.75).abs() < 1e-12);
        assert!(!shares.processes.contains_key(&3));
        let none_held = sample(
            vec![device("a", None)],
            vec![process("a", 1, Some(0), None)],
        );
        assert_eq!(share(&process_shares(&none_held, "a").unwrap(), 1), 0.0);
        // Neither figure: no shares; no process on the device: empty shares.
        let blind = sample(vec![device("a", None)], vec![process("a", 1, None, None)]);
        assert_eq!(process_shares(&blind, "a"), None);
        let empty = process_shares(&sample(vec![device("a", None)], Vec::new()), "a").unwrap();
        assert_eq!(empty.basis, None);
        assert!(empty.processes.is_empty());
    }
}

//! The energy/cost report: what a run measured, as plain serde data (JSON is its
//! serialised form). The energy stage builds it, a replayed file rebuilds it, and the
//! root crate's `report` module renders it as a table, CSV, or HTML; the language
//! packages read its JSON.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;
use wattline_config::energy::{FactorOrigin, RegionFactor};

use crate::energy::ShareBasis;
use crate::gpu_selection::GpuSelection;

/// Where an energy figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// A hardware energy counter (NVML total energy, RAPL).
    Counter,
    /// The trapezoid between power readings at most [`DENSE_INTERVAL_SECONDS`] apart
    /// on average: a rhythm of a second or two is followed.
    DenseTrapezoid,
    /// The trapezoid between sparser readings: a workload's rhythm can alias with it.
    SparseTrapezoid,
    /// Counter deltas for some intervals, the trapezoid for the rest.
    Mixed,
}

/// Joules in one kilowatt-hour.
pub const JOULES_PER_KILOWATT_HOUR: f64 = 3_600_000.0;

/// Longest mean interval between readings that counts as dense sampling, s.
pub const DENSE_INTERVAL_SECONDS: f64 = 0.5;

impl EnergySource {
    /// `counter`, `dense trapezoid`, `sparse trapezoid` or `mixed`.
    pub fn as_str(self) -> &'static str {
        match self {
            EnergySource::Counter => "counter",
            EnergySource::DenseTrapezoid => "dense trapezoid",
            EnergySource::SparseTrapezoid => "sparse trapezoid",
            EnergySource::Mixed => "mixed",
        }
    }

    /// The trapezoid, dense or sparse by the mean interval `seconds`.
    pub fn trapezoid(mean_interval_seconds: f64) -> Self {
        if mean_interval_seconds <= DENSE_INTERVAL_SECONDS {
            EnergySource::DenseTrapezoid
        } else {
            EnergySource::SparseTrapezoid
        }
    }
}

/// A factor used in the report and where its value came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    /// The value.
    pub value: f64,
    /// Its unit (`USD/kWh`, `gCO2e/kWh`).
    pub unit: String,
    /// Where it came from.
    pub origin: FactorOrigin,
    /// For the carbon intensity: the grid factor `carbon_region` selected, with its
    /// dataset, year and licence, whether it applied or an explicit value won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<RegionFactor>,
}

/// What an energy figure is the energy of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergyDomain {
    /// GPU devices.
    Gpu,
    /// CPU packages (RAPL `package-N`).
    CpuPackage,
    /// Memory (RAPL `dram`).
    Dram,
    /// A RAPL zone inside or overlapping the others (`core`, `uncore`, `psys`): listed,
    /// never added.
    CpuPart,
}

impl EnergyDomain {
    /// `gpu`, `cpu_package`, `dram`, `cpu_part`.
    pub fn as_str(self) -> &'static str {
        match self {
            EnergyDomain::Gpu => "gpu",
            EnergyDomain::CpuPackage => "cpu_package",
            EnergyDomain::Dram => "dram",
            EnergyDomain::CpuPart => "cpu_part",
        }
    }

    /// The domain of a RAPL zone named `name`: `package-N` is a CPU package, `dram` its
    /// memory; `core`, `uncore` and `psys` are parts of, or overlap, those and are
    /// listed but not added.
    pub fn of_rapl_zone(name: &str) -> EnergyDomain {
        if name.starts_with("package") {
            EnergyDomain::CpuPackage
        } else if name == "dram" {
            EnergyDomain::Dram
        } else {
            EnergyDomain::CpuPart
        }
    }

    /// Whether the domain adds to the total (a part of a package does not).
    pub fn is_counted(self) -> bool {
        self != EnergyDomain::CpuPart
    }
}

/// Energy of one GPU device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnergy {
    /// Backend identifier (NVML UUID).
    pub device_identifier: String,
    /// Product name, when known.
    pub name: Option<String>,
    /// The backend that read it (`nvml`, `nvidia-smi`, `drm`, a user's).
    pub source: String,
    /// The primary figure, kWh.
    pub energy_kwh: f64,
    /// Its receipt: method, 95% interval, resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt::EnergyReceipt>,
    /// Which method the primary figure comes from.
    pub energy_source: EnergySource,
    /// kWh from the hardware energy counter, when it covered every interval.
    pub counter_kwh: Option<f64>,
    /// kWh from the trapezoid between power samples (the cross-check).
    pub trapezoid_kwh: Option<f64>,
    /// Mean power over the covered time, W.
    pub mean_watts: Option<f64>,
    /// Highest power reading, W.
    pub max_watts: Option<f64>,
    /// Seconds of the report's window covered by integrated intervals.
    pub covered_seconds: f64,
    /// Power readings taken.
    pub readings: u64,
    /// Effective sampling rate over the window: integrated intervals per covered
    /// second, Hz.
    pub sampling_rate_hz: Option<f64>,
    /// Failed samples (gaps not integrated).
    pub gaps: u64,
    /// Cost of `energy_kwh`.
    pub cost: f64,
    /// gCO2e of `energy_kwh`; present only with CO2 tracking on.
    pub co2_grams: Option<f64>,
    /// The backends' names for the power figures read (`power.draw.instant`,
    /// `power.draw`, `NVML_FI_DEV_POWER_INSTANT`, `nvmlDeviceGetPowerUsage`), where
    /// known.
    pub power_fields: Vec<String>,
    /// What process shares are shares of; `None` when no process was seen on it.
    pub attribution: Option<ShareBasis>,
    /// Energy attributed to processes, kWh.
    pub attributed_kwh: f64,
    /// The rest: `energy_kwh - attributed_kwh` (idle power, processes out of scope or
    /// unseen), kWh.
    pub unattributed_kwh: f64,
    /// The device is a MIG-enabled board: its power and energy are the whole board's,
    /// shared by every MIG instance, not any one instance's own.
    #[serde(default)]
    pub shared_board_power: bool,
}

/// Energy of one RAPL zone (CPU package, DRAM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneEnergy {
    /// Zone directory (`intel-rapl:0`).
    pub zone: String,
    /// Zone name (`package-0`, `dram`).
    pub name: String,
    /// What it measures.
    pub domain: EnergyDomain,
    /// Energy (counter deltas), kWh.
    pub energy_kwh: f64,
    /// Seconds of the report's window covered.
    pub covered_seconds: f64,
    /// Counter readings taken.
    pub readings: u64,
}

/// Energy of one domain (all GPUs, all CPU packages, all DRAM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainEnergy {
    /// The domain.
    pub domain: EnergyDomain,
    /// Energy, kWh.
    pub energy_kwh: f64,
    /// Its receipt: method, 95% interval, resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt::EnergyReceipt>,
    /// How it was measured.
    pub method: EnergySource,
    /// The part of it no Agent scope held (attributed energy: the scopes' parts and
    /// this add up to `energy_kwh`), kWh.
    #[serde(default)]
    pub unattributed_kwh: f64,
    /// Cost of that energy.
    pub cost: f64,
    /// gCO2e of that energy, with CO2 tracking on.
    pub co2_grams: Option<f64>,
}

/// One Agent scope's energy, two ways: its *window* (the device's energy while it was
/// live, whoever used it: concurrent scopes each count all of it, so never add these
/// up) and its *attributed* part ([`SCOPE_ATTRIBUTION`]: the scopes' parts and each
/// domain's `unattributed_kwh` add up to the total).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeEnergy {
    /// The scope's UUID.
    pub uuid: Uuid,
    /// The scope's name.
    pub name: String,
    /// The scope it was opened inside, if any.
    #[serde(default)]
    pub parent_uuid: Option<Uuid>,
    /// The process that opened it, when known.
    #[serde(default)]
    pub process_id: Option<u32>,
    /// The weight the caller gave it (1 when `None`).
    #[serde(default)]
    pub weight: Option<f64>,
    /// Window: GPU energy while the scope was live, kWh; `None` when no GPU power was
    /// read. Scopes overlap: never add these up.
    pub gpu_energy_kwh: Option<f64>,
    /// Window: energy of every measured domain while the scope was live, kWh.
    pub energy_kwh: Option<f64>,
    /// The receipt of `energy_kwh`: method, 95% interval, and `unresolved` for a step
    /// shorter than its sources resolve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt::EnergyReceipt>,
    /// Cost of the window energy.
    pub cost: Option<f64>,
    /// gCO2e of the window energy, with CO2 tracking on.
    pub co2_grams: Option<f64>,
    /// Attributed: the scope's part of the GPU energy (its children's included), kWh.
    #[serde(default)]
    pub attributed_gpu_energy_kwh: Option<f64>,
    /// Attributed: its part of every measured domain's energy, kWh.
    #[serde(default)]
    pub attributed_energy_kwh: Option<f64>,
    /// The receipt of `attributed_energy_kwh`: method `attributed`, the window's
    /// interval scaled by the share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributed_receipt: Option<crate::receipt::EnergyReceipt>,
    /// Cost of the attributed energy.
    #[serde(default)]
    pub attributed_cost: Option<f64>,
    /// gCO2e of the attributed energy, with CO2 tracking on.
    #[serde(default)]
    pub attributed_co2_grams: Option<f64>,
    /// When the scope started.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None` while live.
    pub ended_at: Option<DateTime<Utc>>,
    /// The model call it stands for, when it was a call to another machine: with its
    /// estimate, which none of the figures above includes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_call: Option<Box<crate::remote_call::RemoteCall>>,
}

/// GPU energy attributed to one process on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessEnergy {
    /// Process ID.
    pub process_id: u32,
    /// The device.
    pub device_identifier: String,
    /// Attributed energy, kWh.
    pub gpu_energy_kwh: f64,
    /// What the shares were shares of (`utilization`, or `memory` held, a proxy).
    pub basis: Option<ShareBasis>,
}

/// Totals over every measured domain. A figure that was not measured is `None`,
/// never zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyTotals {
    /// Every measured domain (GPU, CPU package, DRAM), kWh.
    pub energy_kwh: Option<f64>,
    /// The receipt of `energy_kwh`: method, 95% interval, resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<crate::receipt::EnergyReceipt>,
    /// GPU energy, kWh.
    pub gpu_energy_kwh: Option<f64>,
    /// CPU package energy (RAPL), kWh.
    pub cpu_energy_kwh: Option<f64>,
    /// DRAM energy (RAPL), kWh.
    pub dram_energy_kwh: Option<f64>,
    /// Cost of `energy_kwh`.
    pub cost: Option<f64>,
    /// gCO2e of `energy_kwh`, with CO2 tracking on.
    pub co2_grams: Option<f64>,
    /// The power usage effectiveness factor applied to the facility figures.
    pub pue: f64,
    /// `energy_kwh` times `pue`: what the facility drew for it, kWh.
    pub facility_energy_kwh: Option<f64>,
    /// Cost of the facility energy.
    pub facility_cost: Option<f64>,
}

/// What one exporter did with the events it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExporterOutcome {
    /// Its name (`atof`, `opentelemetry`, `stdout`).
    pub name: String,
    /// Events it exported without error.
    pub exported: u64,
    /// Events dropped for it (its lane over its byte budget, or it had stopped).
    pub dropped: u64,
    /// Calls that returned an error (an export, a flush, the shutdown).
    pub failed: u64,
    /// Events it accepted and never delivered (ATOF: lines dropped from its backlog
    /// or still unwritten at shutdown).
    #[serde(default)]
    pub lost: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// The slowest its collector was to answer one request (accepted or refused), ms,
    /// rounded up: how near the export timeout a busy collector comes. Exporters that
    /// send no requests have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest_answer_millis: Option<u64>,
}

impl ExporterOutcome {
    /// Whether anything this exporter was given may be missing at its destination.
    pub fn lost_data(&self) -> bool {
        self.dropped > 0 || self.failed > 0 || self.lost > 0
    }

    /// What it lost, in words: `3 events dropped, 1 calls failed (last error: ...)`.
    pub fn loss_description(&self) -> String {
        format!(
            "{} events dropped, {} lost, {} calls failed{}",
            self.dropped,
            self.lost,
            self.failed,
            self.last_error
                .as_ref()
                .map_or_else(String::new, |error| format!(" (last error: {error})"))
        )
    }
}

/// A distribution's summary: its sum, exact extremes, and quantiles within 1%.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// The sum of the values.
    pub sum: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// The median.
    pub p50: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// Finished Agent scopes of one name beyond those kept in detail (`scopes_in_detail`,
/// the newest), folded into one aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldedScopes {
    /// Their name (`(other names)` past the first 1000 names).
    pub name: String,
    /// How many.
    pub count: u64,
    /// Their attributed energy, kWh.
    pub attributed_energy_kwh: Distribution,
    /// Their durations, s.
    pub duration_seconds: Distribution,
}

/// How Agent scopes' attributed energy is divided, as the report names it: each
/// interval among the live innermost scopes, by process share first where the interval
/// has shares, then in proportion to the scopes' weights.
pub const SCOPE_ATTRIBUTION: &str = "process-share-then-weight";

/// The report at flush.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// Start of the measured window.
    pub started_at: DateTime<Utc>,
    /// The instant the report was asked for: the end of its window.
    pub ended_at: DateTime<Utc>,
    /// The GPU sources that gave readings (`nvml`, `nvidia-smi`, `drm`, a user's),
    /// joined by `+`; `None` when none did.
    pub gpu_source: Option<String>,
    /// The GPU sources configured (`none` when there are none).
    pub gpu_source_configured: Option<String>,
    /// Why no GPU energy was measured, in words, when none was.
    pub gpu_unavailable: Option<String>,
    /// The devices counted when a selection narrowed them (`--gpus`,
    /// `CUDA_VISIBLE_DEVICES`, `NVIDIA_VISIBLE_DEVICES`, `gpu.devices`), and where it
    /// came from; `None` when every device was counted. The counted devices are
    /// [`EnergyReport::devices`].
    #[serde(default)]
    pub gpu_selection: Option<GpuSelection>,
    /// Why no CPU energy was measured, with the fix, when none was.
    pub cpu_unavailable: Option<String>,
    /// Totals.
    pub total: EnergyTotals,
    /// Per-domain figures, each with its method.
    pub domains: Vec<DomainEnergy>,
    /// Per-device figures.
    pub devices: Vec<DeviceEnergy>,
    /// RAPL zones read.
    pub cpu_zones: Vec<ZoneEnergy>,
    /// Energy per Agent scope: window figures overlap; attributed ones add up.
    pub agent_scopes: Vec<ScopeEnergy>,
    /// The remote model calls' estimated energy, summed (every call's, folded scopes'
    /// included): never part of `total`; `None` when there were no remote calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_estimates: Option<crate::remote_call::RemoteEstimateTotals>,
    /// How the scopes' attributed energy was divided ([`SCOPE_ATTRIBUTION`]); `None`
    /// in a report from before attribution.
    #[serde(default)]
    pub scope_attribution: Option<String>,
    /// The older finished scopes folded into per-name aggregates (not in
    /// `agent_scopes`); empty while every scope is kept in detail.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded_scopes: Vec<FoldedScopes>,
    /// GPU energy per process and device; with each device's `unattributed_kwh` it adds
    /// up to the device's energy.
    pub processes: Vec<ProcessEnergy>,
    /// Price per kWh.
    pub cost_per_kwh: Factor,
    /// Currency of every cost.
    pub currency: String,
    /// Carbon intensity (a factor, not a reading of the grid); `None` with CO2 off.
    pub carbon_intensity: Option<Factor>,
    /// Power usage effectiveness (facility energy per unit of IT energy).
    pub pue: Factor,
    /// Environment variables that were set and have no effect.
    pub ignored_variables: Vec<String>,
    /// The pipeline's diagnostics at flush, as JSON, when diagnostics are on.
    pub diagnostics: Option<serde_json::Value>,
    /// Events each exporter dropped, by exporter name.
    pub exporter_drops: Vec<(String, u64)>,
    /// What each exporter did with the run's events (empty without exporters).
    #[serde(default)]
    pub exporters: Vec<ExporterOutcome>,
    /// What replaying an event file left out (a last line cut short by a crash), in
    /// words; empty for a live report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replay_notes: Vec<String>,
    /// Why the last power sample before the report could not be taken (the report
    /// then ends at the previous reading); `None` when it was taken.
    #[serde(default)]
    pub last_sample_missing: Option<String>,
    /// Clocks or actors of the pipeline that stopped on their own during the window
    /// (figures after that instant may be missing); empty when all kept running.
    #[serde(default)]
    pub health: Vec<HealthProblem>,
}

impl EnergyReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }
}

impl EnergyDomain {
    /// How the table names the domain.
    pub fn label(self) -> &'static str {
        match self {
            EnergyDomain::Gpu => "GPU",
            EnergyDomain::CpuPackage => "CPU package",
            EnergyDomain::Dram => "DRAM",
            EnergyDomain::CpuPart => "CPU part",
        }
    }
}

/// One part of the pipeline that stopped working.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthProblem {
    /// The part: `poll clock`, `energy clock`, `merger`, `energy stage`, `supervisor`.
    pub component: String,
    /// What happened, in words.
    pub detail: String,
    /// When it was noticed.
    pub at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_has_its_name_in_words() {
        assert_eq!(EnergySource::Counter.as_str(), "counter");
        assert_eq!(EnergySource::DenseTrapezoid.as_str(), "dense trapezoid");
        assert_eq!(EnergySource::SparseTrapezoid.as_str(), "sparse trapezoid");
        assert_eq!(EnergySource::Mixed.as_str(), "mixed");
        // The line between dense and sparse is 0.5 s between readings, inclusive.
        assert_eq!(EnergySource::trapezoid(0.5), EnergySource::DenseTrapezoid);
        assert_eq!(EnergySource::trapezoid(0.51), EnergySource::SparseTrapezoid);
    }
}

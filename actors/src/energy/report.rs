//! The energy/cost report returned at flush: typed, serializable as JSON, and printable
//! as a terminal table.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use wattline_config::energy::FactorOrigin;

use super::integrator::EnergySource;

/// A factor used in the report and where its value came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    /// The value.
    pub value: f64,
    /// Its unit (`USD/kWh`, `gCO2e/kWh`).
    pub unit: String,
    /// Where it came from.
    pub origin: FactorOrigin,
}

/// Energy of one GPU device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceEnergy {
    /// Backend identifier (NVML UUID).
    pub device_identifier: String,
    /// Product name, when known.
    pub name: Option<String>,
    /// The primary figure, kWh.
    pub energy_kwh: f64,
    /// Which method the primary figure comes from.
    pub energy_source: EnergySource,
    /// kWh from the hardware energy counter, when it covered every interval.
    pub counter_kwh: Option<f64>,
    /// kWh from the trapezoid between power samples (the cross-check); `None` when
    /// rebuilt from a file whose intervals used the counter.
    pub trapezoid_kwh: Option<f64>,
    /// Mean power over the covered time, W.
    pub mean_watts: Option<f64>,
    /// Highest power reading, W.
    pub max_watts: Option<f64>,
    /// Seconds covered by integrated intervals.
    pub covered_seconds: f64,
    /// Power readings used.
    pub readings: u64,
    /// Failed samples (gaps not integrated).
    pub gaps: u64,
    /// Cost of `energy_kwh`.
    pub cost: f64,
    /// gCO2e of `energy_kwh`; present only with CO2 tracking on.
    pub co2_grams: Option<f64>,
}

/// Energy of one RAPL zone (CPU package, DRAM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneEnergy {
    /// Zone directory (`intel-rapl:0`).
    pub zone: String,
    /// Zone name (`package-0`, `dram`).
    pub name: String,
    /// Energy, kWh.
    pub energy_kwh: f64,
    /// Seconds between the first and last reading.
    pub covered_seconds: f64,
}

/// Energy attributed to one Agent scope while it was live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeEnergy {
    /// The scope's UUID.
    pub uuid: String,
    /// The scope's name.
    pub name: String,
    /// GPU energy while the scope was live, kWh. Scopes overlap: never add these up.
    pub gpu_energy_kwh: f64,
    /// Cost of that energy.
    pub cost: f64,
    /// gCO2e of that energy, with CO2 tracking on.
    pub co2_grams: Option<f64>,
    /// When the scope started.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None` while live.
    pub ended_at: Option<DateTime<Utc>>,
}

/// GPU energy attributed to one process from its share of GPU utilization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessEnergy {
    /// Process ID.
    pub process_id: u32,
    /// Attributed energy, kWh.
    pub gpu_energy_kwh: f64,
}

/// Totals over every device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyTotals {
    /// GPU energy, kWh (GPU only: CPU package energy is reported separately).
    pub gpu_energy_kwh: f64,
    /// Cost of the GPU energy.
    pub cost: f64,
    /// gCO2e of the GPU energy, with CO2 tracking on.
    pub co2_grams: Option<f64>,
    /// CPU package and DRAM energy from RAPL, kWh, where readable.
    pub cpu_energy_kwh: Option<f64>,
}

/// The report at flush.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    /// When the energy stage started.
    pub started_at: DateTime<Utc>,
    /// When this report was made.
    pub ended_at: DateTime<Utc>,
    /// The GPU source in use (`nvml`, `nvidia-smi`, `drm`, a user's), or `None`.
    pub gpu_source: Option<String>,
    /// Per-device figures.
    pub devices: Vec<DeviceEnergy>,
    /// Totals.
    pub total: EnergyTotals,
    /// RAPL zones read.
    pub cpu_zones: Vec<ZoneEnergy>,
    /// Energy per Agent scope (overlapping; not additive).
    pub agent_scopes: Vec<ScopeEnergy>,
    /// Energy per process, where per-process GPU utilization exists.
    pub processes: Vec<ProcessEnergy>,
    /// Price per kWh.
    pub cost_per_kwh: Factor,
    /// Currency of every cost.
    pub currency: String,
    /// Carbon intensity (a factor, not a reading of the grid); `None` with CO2 off.
    pub carbon_intensity: Option<Factor>,
    /// Environment variables that were set and have no effect.
    pub ignored_variables: Vec<String>,
    /// The pipeline's diagnostics at flush, as JSON, when diagnostics are on.
    pub diagnostics: Option<serde_json::Value>,
    /// Events each exporter dropped, by exporter name.
    pub exporter_drops: Vec<(String, u64)>,
}

impl EnergyReport {
    /// The report as pretty JSON.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self)
    }

    /// The report as a readable table for a terminal.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let seconds = (self.ended_at - self.started_at).num_milliseconds() as f64 / 1000.0;
        out.push_str(&format!("wattline energy report ({seconds:.1} s)\n"));
        out.push_str(&format!(
            "GPU source: {}\n",
            self.gpu_source.as_deref().unwrap_or("none")
        ));
        if self.devices.is_empty() {
            out.push_str("No GPU power was read (no device answered; see diagnostics).\n");
        } else {
            out.push_str(&format!(
                "{:<40} {:>12} {:>10} {:>9} {:>9} {:>8} {:>5} {:>10}\n",
                "device", "energy kWh", "method", "mean W", "max W", "covered", "gaps", "cost"
            ));
            for device in &self.devices {
                let label = match &device.name {
                    Some(name) => format!("{name} {}", short(&device.device_identifier)),
                    None => device.device_identifier.clone(),
                };
                out.push_str(&format!(
                    "{:<40} {:>12.6} {:>10} {:>9} {:>9} {:>7.1}s {:>5} {:>10.6}\n",
                    truncate(&label, 40),
                    device.energy_kwh,
                    match device.energy_source {
                        EnergySource::Counter => "counter",
                        EnergySource::Trapezoid => "trapezoid",
                        EnergySource::Rapl => "rapl",
                        EnergySource::Mixed => "mixed",
                    },
                    optional(device.mean_watts),
                    optional(device.max_watts),
                    device.covered_seconds,
                    device.gaps,
                    device.cost
                ));
            }
        }
        out.push_str(&format!(
            "GPU total: {:.6} kWh, {:.6} {} at {} {}/kWh ({})\n",
            self.total.gpu_energy_kwh,
            self.total.cost,
            self.currency,
            self.cost_per_kwh.value,
            self.currency,
            origin(&self.cost_per_kwh.origin)
        ));
        match (&self.total.co2_grams, &self.carbon_intensity) {
            (Some(grams), Some(factor)) => out.push_str(&format!(
                "CO2: {grams:.3} gCO2e at {} gCO2e/kWh, a factor, not a reading of the grid ({})\n",
                factor.value,
                origin(&factor.origin)
            )),
            _ => out.push_str("CO2: not tracked (set GENAI_ENABLE_CO2_TRACKING=true)\n"),
        }
        for zone in &self.cpu_zones {
            out.push_str(&format!(
                "CPU {} ({}): {:.6} kWh over {:.1} s (RAPL)\n",
                zone.name, zone.zone, zone.energy_kwh, zone.covered_seconds
            ));
        }
        if self.cpu_zones.is_empty() {
            out.push_str("CPU energy: not readable here, not reported\n");
        }
        for scope in &self.agent_scopes {
            out.push_str(&format!(
                "agent {:<20} {:.6} kWh (overlapping scopes: not additive)\n",
                scope.name, scope.gpu_energy_kwh
            ));
        }
        for (exporter, dropped) in &self.exporter_drops {
            if *dropped > 0 {
                out.push_str(&format!("exporter {exporter}: {dropped} events dropped\n"));
            }
        }
        out
    }
}

fn optional(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn short(identifier: &str) -> String {
    identifier.chars().take(12).collect()
}

fn truncate(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

fn origin(origin: &FactorOrigin) -> String {
    match origin {
        FactorOrigin::Default => "default".into(),
        FactorOrigin::File(path) => format!("from {path}"),
        FactorOrigin::Environment(name) => format!("from ${name}"),
        FactorOrigin::Code => "set in code".into(),
    }
}

//! What the energy stage tells the exporters beside its records, as figures with their
//! units and no metric names: each GPU gauge sample with the energy of the intervals
//! it closed ([`GpuTelemetry`]), and the RAPL intervals a reading closed
//! ([`RaplInterval`]). The exporters name them (`gen_ai.*`, `wattline.*`, `hw.*`) from
//! the naming table, [`crate::telemetry_names`].

use std::sync::Arc;

use wattline_config::energy::EnergySettings;

use crate::report::EnergyDomain;
use crate::snapshot::GpuSample;

/// The energy of one device over the intervals a power record closed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedInterval {
    /// The device (its backend identifier).
    pub device: String,
    /// Its best energy (counter delta where known, else trapezoid), kWh.
    pub kilowatt_hours: f64,
    /// The spec's figure: the mean of the two ends' power times the interval, kWh.
    pub trapezoid_kilowatt_hours: Option<f64>,
    /// Its length, s.
    pub seconds: f64,
    /// Whether the energy is a counter delta.
    pub counter: bool,
}

/// The factors the energy metrics are priced with, as the run's energy settings give
/// them (the carbon region's row already applied).
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyFactors {
    /// Price of a kWh, in [`EnergyFactors::currency`].
    pub cost_per_kwh: f64,
    /// ISO currency code: the cost metrics' unit.
    pub currency: String,
    /// Grid carbon intensity, gCO2e per kWh; `None` when CO2 is not tracked (no CO2
    /// metric is sent).
    pub carbon_intensity: Option<f64>,
}

impl EnergyFactors {
    /// The factors of `settings`.
    pub fn of(settings: &EnergySettings) -> Self {
        let config = &settings.config;
        EnergyFactors {
            cost_per_kwh: config.cost_per_kwh,
            currency: config.currency.clone(),
            carbon_intensity: config
                .co2_tracking
                .then(|| settings.carbon_intensity().gco2e_per_kwh),
        }
    }
}

/// One GPU gauge sample (a full answer, at the collection cadence) and the energy of
/// the intervals it ended, with every interval closed by dense readings since the
/// previous one merged in per device.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuTelemetry {
    /// The devices as read, in their base units (bytes, %, W, °C, MHz).
    pub sample: Arc<GpuSample>,
    /// The intervals it closed, one per device.
    pub intervals: Vec<ClosedInterval>,
    /// What the energy costs and emits.
    pub factors: Arc<EnergyFactors>,
}

/// One RAPL zone's energy between two readings.
#[derive(Debug, Clone, PartialEq)]
pub struct RaplInterval {
    /// The powercap directory (`intel-rapl:0`).
    pub zone: String,
    /// The zone's name (`package-0`, `dram`).
    pub name: String,
    /// [`EnergyDomain::CpuPackage`] or [`EnergyDomain::Dram`].
    pub domain: EnergyDomain,
    /// The counter's increase, wraps undone, J.
    pub joules: f64,
    /// The time between the two readings, s (> 0).
    pub seconds: f64,
}

impl RaplInterval {
    /// Mean power over the interval, W.
    pub fn watts(&self) -> f64 {
        self.joules / self.seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_carry_the_intensity_only_when_co2_is_tracked() {
        let mut settings = EnergySettings::default();
        settings.config.cost_per_kwh = 0.3;
        settings.config.currency = "EUR".into();
        settings.config.carbon_intensity = 100.0;
        settings.config.co2_tracking = false;
        let untracked = EnergyFactors::of(&settings);
        assert_eq!(untracked.cost_per_kwh, 0.3);
        assert_eq!(untracked.currency, "EUR");
        assert_eq!(untracked.carbon_intensity, None);
        settings.config.co2_tracking = true;
        assert_eq!(EnergyFactors::of(&settings).carbon_intensity, Some(100.0));
    }
}

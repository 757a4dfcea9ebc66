//! The cost and CO2 factors an account prices its energy with, fixed for its life.

use wattline_config::energy::EnergySettings;

/// The factors that turn energy into money and CO2.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pricing {
    /// Per kWh, in the configured currency.
    pub(super) price: f64,
    /// gCO2e per kWh.
    pub(super) gco2e_per_kwh: f64,
    /// Whether CO2 is reported at all.
    pub(super) co2_tracking: bool,
}

impl Pricing {
    /// The factors `settings` put in force (they do not change for an account's life).
    pub(super) fn of(settings: &EnergySettings) -> Self {
        Pricing {
            price: settings.config.cost_per_kwh,
            gco2e_per_kwh: settings.carbon_intensity().gco2e_per_kwh,
            co2_tracking: settings.config.co2_tracking,
        }
    }

    pub(super) fn cost(&self, kwh: f64) -> f64 {
        kwh * self.price
    }

    pub(super) fn co2(&self, kwh: f64) -> Option<f64> {
        self.co2_tracking.then_some(kwh * self.gco2e_per_kwh)
    }
}

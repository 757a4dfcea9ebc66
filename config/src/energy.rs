//! The `energy` component: the factors that turn kWh into money and CO2, the energy
//! stage's own GPU sampling interval, and the `GENAI_*` environment variables.
//!
//! Precedence, lowest first: defaults, `plugins.toml` layers, environment variables,
//! configuration passed in code. Each factor remembers where its value came from, so the
//! report can say so.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// `GENAI_POWER_COST_PER_KWH`: price of one kWh.
pub const COST_VARIABLE: &str = "GENAI_POWER_COST_PER_KWH";
/// `GENAI_CARBON_INTENSITY`: gCO2e per kWh.
pub const CARBON_INTENSITY_VARIABLE: &str = "GENAI_CARBON_INTENSITY";
/// `GENAI_ENABLE_CO2_TRACKING`: `true`/`false`.
pub const CO2_TRACKING_VARIABLE: &str = "GENAI_ENABLE_CO2_TRACKING";
/// `GENAI_GPU_COLLECTION_INTERVAL`: seconds between energy GPU samples.
pub const INTERVAL_VARIABLE: &str = "GENAI_GPU_COLLECTION_INTERVAL";
/// `WATTLINE_PUE`: power usage effectiveness of the facility, at least 1.
pub const PUE_VARIABLE: &str = "WATTLINE_PUE";
/// Location and mode variables of the reference's CO2 library: accepted, no effect.
pub const IGNORED_VARIABLE_PREFIX: &str = "GENAI_CO2_";

/// Configuration of the `energy` component (`[components.config]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnergyConfig {
    /// Price of one kWh in `currency`. Default 0.12.
    pub cost_per_kwh: f64,
    /// ISO currency code of `cost_per_kwh`. Default `USD`.
    pub currency: String,
    /// Grid carbon intensity, gCO2e per kWh: a factor, not a reading of the grid.
    /// Default 475 (a world average).
    pub carbon_intensity: f64,
    /// Report CO2 figures. Default `false`.
    pub co2_tracking: bool,
    /// Milliseconds between the energy stage's own GPU samples. Default 5000.
    pub interval_millis: u64,
    /// Power usage effectiveness: facility energy per unit of IT energy (cooling,
    /// power conversion). Multiplies the facility figures only. Default 1.0.
    pub pue: f64,
    /// Milliseconds between two power readings for the energy integral, on a worker
    /// of their own (the `gen_ai.gpu.*` gauges keep `interval_millis`). Default 100.
    pub power_sample_millis: u64,
}

impl Default for EnergyConfig {
    fn default() -> Self {
        EnergyConfig {
            cost_per_kwh: 0.12,
            currency: "USD".into(),
            carbon_intensity: 475.0,
            co2_tracking: false,
            interval_millis: 5000,
            pue: 1.0,
            power_sample_millis: 100,
        }
    }
}

impl EnergyConfig {
    /// Checks the rules serde cannot express.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !self.cost_per_kwh.is_finite() || self.cost_per_kwh < 0.0 {
            return Err(FieldError::new(
                "cost_per_kwh",
                format!("must be a finite number >= 0 (got {})", self.cost_per_kwh),
            ));
        }
        if !self.carbon_intensity.is_finite() || self.carbon_intensity < 0.0 {
            return Err(FieldError::new(
                "carbon_intensity",
                format!(
                    "must be a finite number >= 0 (got {})",
                    self.carbon_intensity
                ),
            ));
        }
        if !(10..=60_000).contains(&self.power_sample_millis) {
            return Err(FieldError::new(
                "power_sample_millis",
                format!(
                    "must be between 10 and 60000 (got {})",
                    self.power_sample_millis
                ),
            ));
        }
        if !self.pue.is_finite() || self.pue < 1.0 {
            return Err(FieldError::new(
                "pue",
                format!("must be a finite number >= 1 (got {})", self.pue),
            ));
        }
        if self.currency.trim().is_empty() {
            return Err(FieldError::new("currency", "must not be blank"));
        }
        if self.interval_millis == 0 {
            return Err(FieldError::new(
                "interval_millis",
                "must be greater than zero (got 0)",
            ));
        }
        Ok(())
    }
}

/// Where a factor's value came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum FactorOrigin {
    /// The built-in default.
    #[default]
    Default,
    /// A `plugins.toml` file (its path).
    File(String),
    /// An environment variable (its name).
    Environment(String),
    /// Configuration passed in code.
    Code,
}

/// The energy configuration in force and where each factor came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergySettings {
    /// The values.
    pub config: EnergyConfig,
    /// Origin of `cost_per_kwh`.
    pub cost_origin: FactorOrigin,
    /// Origin of `carbon_intensity`.
    pub carbon_intensity_origin: FactorOrigin,
    /// Origin of `co2_tracking`.
    pub co2_tracking_origin: FactorOrigin,
    /// Origin of `interval_millis`.
    pub interval_origin: FactorOrigin,
    /// Origin of `pue`.
    #[serde(default)]
    pub pue_origin: FactorOrigin,
    /// `GENAI_CO2_*` variables that were set and have no effect (logged once at start).
    pub ignored_variables: Vec<String>,
}

impl Default for EnergySettings {
    fn default() -> Self {
        EnergySettings {
            config: EnergyConfig::default(),
            cost_origin: FactorOrigin::Default,
            carbon_intensity_origin: FactorOrigin::Default,
            co2_tracking_origin: FactorOrigin::Default,
            interval_origin: FactorOrigin::Default,
            pue_origin: FactorOrigin::Default,
            ignored_variables: Vec::new(),
        }
    }
}

/// An environment variable with a value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {variable}: {rule} (got {value:?})")]
pub struct EnvironmentError {
    /// The variable.
    pub variable: String,
    /// Its value.
    pub value: String,
    /// What it must be.
    pub rule: String,
}

impl EnergySettings {
    /// Applies the `GENAI_*` variables of `environment` over the file layers' values;
    /// a factor set in code keeps its value (code is on top).
    pub fn apply_environment(
        &mut self,
        environment: &BTreeMap<String, String>,
    ) -> Result<(), EnvironmentError> {
        let error = |variable: &str, value: &str, rule: &str| EnvironmentError {
            variable: variable.into(),
            value: value.into(),
            rule: rule.into(),
        };
        let non_negative = |variable: &str, value: &str| -> Result<f64, EnvironmentError> {
            value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|number| number.is_finite() && *number >= 0.0)
                .ok_or_else(|| error(variable, value, "must be a finite number >= 0"))
        };
        let code = FactorOrigin::Code;
        if let Some(value) = environment
            .get(COST_VARIABLE)
            .filter(|_| self.cost_origin != code)
        {
            self.config.cost_per_kwh = non_negative(COST_VARIABLE, value)?;
            self.cost_origin = FactorOrigin::Environment(COST_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(CARBON_INTENSITY_VARIABLE)
            .filter(|_| self.carbon_intensity_origin != code)
        {
            self.config.carbon_intensity = non_negative(CARBON_INTENSITY_VARIABLE, value)?;
            self.carbon_intensity_origin =
                FactorOrigin::Environment(CARBON_INTENSITY_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(CO2_TRACKING_VARIABLE)
            .filter(|_| self.co2_tracking_origin != code)
        {
            self.config.co2_tracking = match value.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => true,
                "false" | "0" | "no" | "" => false,
                _ => return Err(error(CO2_TRACKING_VARIABLE, value, "must be true or false")),
            };
            self.co2_tracking_origin = FactorOrigin::Environment(CO2_TRACKING_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(INTERVAL_VARIABLE)
            .filter(|_| self.interval_origin != code)
        {
            let seconds = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                .ok_or_else(|| {
                    error(
                        INTERVAL_VARIABLE,
                        value,
                        "must be a number of seconds in (0, 86400]",
                    )
                })?;
            self.config.interval_millis = ((seconds * 1000.0).round() as u64).max(1);
            self.interval_origin = FactorOrigin::Environment(INTERVAL_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(PUE_VARIABLE)
            .filter(|_| self.pue_origin != code)
        {
            self.config.pue = value
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|pue| pue.is_finite() && *pue >= 1.0)
                .ok_or_else(|| error(PUE_VARIABLE, value, "must be a finite number >= 1"))?;
            self.pue_origin = FactorOrigin::Environment(PUE_VARIABLE.into());
        }
        self.ignored_variables = environment
            .keys()
            .filter(|name| name.starts_with(IGNORED_VARIABLE_PREFIX))
            .cloned()
            .collect();
        Ok(())
    }

    /// Records which factors a layer's `config` table set, with `origin`.
    pub fn note_layer(&mut self, table: &toml::Table, origin: FactorOrigin) {
        if table.contains_key("cost_per_kwh") {
            self.cost_origin = origin.clone();
        }
        if table.contains_key("carbon_intensity") {
            self.carbon_intensity_origin = origin.clone();
        }
        if table.contains_key("co2_tracking") {
            self.co2_tracking_origin = origin.clone();
        }
        if table.contains_key("interval_millis") {
            self.interval_origin = origin.clone();
        }
        if table.contains_key("pue") {
            self.pue_origin = origin;
        }
    }
}

//! The `energy` component: the factors that turn kWh into money and CO2, the energy
//! stage's own GPU sampling interval, and the `GENAI_*` environment variables.
//!
//! Precedence, lowest first: defaults, `plugins.toml` layers, environment variables,
//! configuration passed in code. Each factor remembers where its value came from, so the
//! report can say so. The carbon intensity is an explicit `carbon_intensity` where one
//! was set, else the grid table's figure for `carbon_region`, else the default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;
use crate::grid_intensity::{REGION_RULE, RegionError, RegionIntensity, region_intensity};

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
/// `GENAI_CO2_COUNTRY_ISO_CODE`: the reference's country for its CO2 library; here
/// `carbon_region` (ISO 3166-1 alpha-3 there, alpha-2 or alpha-3 here).
pub const COUNTRY_VARIABLE: &str = "GENAI_CO2_COUNTRY_ISO_CODE";
/// `GENAI_CO2_USE_MANUAL`: `true` makes the reference use `GENAI_CARBON_INTENSITY`
/// whatever its country; here `GENAI_CO2_COUNTRY_ISO_CODE` is then not applied.
pub const USE_MANUAL_VARIABLE: &str = "GENAI_CO2_USE_MANUAL";
/// The reference's CO2 library variables. Those other than [`COUNTRY_VARIABLE`] and
/// [`USE_MANUAL_VARIABLE`] (sub-national region, cloud provider and region, offline
/// and tracking mode) have no meaning here: accepted and listed as having no effect.
pub const IGNORED_VARIABLE_PREFIX: &str = "GENAI_CO2_";

/// Finished Agent scopes kept in detail by default.
pub const DEFAULT_SCOPES_IN_DETAIL: usize = 10_000;
/// Distinct scope names the per-step metrics carry by default.
pub const DEFAULT_SCOPE_NAMES_IN_METRICS: usize = 100;
/// The most distinct scope names the per-step metrics may be configured to carry: each
/// is a series per histogram at the collector.
pub const MAX_SCOPE_NAMES_IN_METRICS: usize = 10_000;

/// Configuration of the `energy` component (`[components.config]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnergyConfig {
    /// Price of one kWh in `currency`. Default 0.12.
    pub cost_per_kwh: f64,
    /// ISO currency code of `cost_per_kwh`. Default `USD`.
    pub currency: String,
    /// Grid carbon intensity, gCO2e per kWh: a factor, not a reading of the grid.
    /// Default 475 (a world average). Set explicitly, it wins over `carbon_region`.
    pub carbon_intensity: f64,
    /// The country whose grid factor to use (ISO 3166-1 alpha-2 or alpha-3, any case),
    /// from the table wattline ships; applies where `carbon_intensity` was not set.
    /// Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub carbon_region: Option<String>,
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
    /// How many finished Agent scopes the report keeps in detail, the newest; older
    /// ones fold into per-name aggregates (count, attributed energy and duration
    /// distributions), so memory stays bounded. Default 10000.
    pub scopes_in_detail: usize,
    /// How many distinct Agent scope names the per-step metrics
    /// (`wattline.scope.*` histograms) carry as `wattline.scope.name`, the first seen;
    /// steps of any further name are counted under `other` (and in
    /// `wattline.scope.names_folded`), so the series stay bounded. Default 100, at
    /// most 10000.
    pub scope_names_in_metrics: usize,
    /// Energy factors of hosted models for the remote estimate of a model call served
    /// by another machine (`[[components.config.remote_models]]` rows), before the
    /// shipped table: a row here for a model wins over the shipped one. Default none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remote_models: Vec<crate::remote_models::RemoteModelFactor>,
}

impl Default for EnergyConfig {
    fn default() -> Self {
        EnergyConfig {
            cost_per_kwh: 0.12,
            currency: "USD".into(),
            carbon_intensity: 475.0,
            carbon_region: None,
            co2_tracking: false,
            interval_millis: 5000,
            pue: 1.0,
            power_sample_millis: 100,
            scopes_in_detail: DEFAULT_SCOPES_IN_DETAIL,
            scope_names_in_metrics: DEFAULT_SCOPE_NAMES_IN_METRICS,
            remote_models: Vec::new(),
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
        if let Some(region) = &self.carbon_region {
            region_intensity(region)
                .map_err(|error| FieldError::new("carbon_region", error.to_string()))?;
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
        if self.scopes_in_detail > 10_000_000 {
            return Err(FieldError::new(
                "scopes_in_detail",
                format!("must be at most 10000000 (got {})", self.scopes_in_detail),
            ));
        }
        if self.scope_names_in_metrics > MAX_SCOPE_NAMES_IN_METRICS {
            return Err(FieldError::new(
                "scope_names_in_metrics",
                format!(
                    "must be at most {MAX_SCOPE_NAMES_IN_METRICS} (got {})",
                    self.scope_names_in_metrics
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
        for (index, row) in self.remote_models.iter().enumerate() {
            row.validate().map_err(|error| {
                FieldError::new(format!("remote_models[{index}].{}", error.path), error.rule)
            })?;
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
    /// The grid carbon-intensity table's row for a region (its ISO 3166-1 alpha-2
    /// code); the factor's `region` says which dataset, year and licence.
    Region(String),
}

/// The grid factor `carbon_region` selected, as a report shows it beside the carbon
/// intensity: applied, or overridden by an explicit `carbon_intensity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionFactor {
    /// The region's figure and the dataset it comes from.
    #[serde(flatten)]
    pub intensity: RegionIntensity,
    /// Where `carbon_region` was set.
    pub origin: FactorOrigin,
    /// Whether it is the carbon intensity in force (`false`: an explicit
    /// `carbon_intensity` wins).
    pub applied: bool,
}

/// The carbon intensity in force, where it came from, and the region factor when
/// `carbon_region` is set.
#[derive(Debug, Clone, PartialEq)]
pub struct CarbonIntensity {
    /// gCO2e per kWh.
    pub gco2e_per_kwh: f64,
    /// Where the value came from ([`FactorOrigin::Region`] when the region applies).
    pub origin: FactorOrigin,
    /// The region factor, applied or not.
    pub region: Option<RegionFactor>,
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
    /// Origin of `carbon_region`.
    #[serde(default)]
    pub carbon_region_origin: FactorOrigin,
    /// The table row `carbon_region` selected, pinned by
    /// [`EnergySettings::pin_carbon_region`] so the energy records carry it and a
    /// replay uses the figure the run used, whatever table the replaying build ships.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_region: Option<RegionIntensity>,
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
            carbon_region_origin: FactorOrigin::Default,
            pinned_region: None,
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

fn environment_error(variable: &str, value: &str, rule: &str) -> EnvironmentError {
    EnvironmentError {
        variable: variable.into(),
        value: value.into(),
        rule: rule.into(),
    }
}

/// `value` as a finite number that `accept`s, else an error saying the `rule`.
fn parse_number(
    variable: &str,
    value: &str,
    accept: impl Fn(f64) -> bool,
    rule: &str,
) -> Result<f64, EnvironmentError> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|number| number.is_finite() && accept(*number))
        .ok_or_else(|| environment_error(variable, value, rule))
}

impl EnergySettings {
    /// Applies the `GENAI_*` variables of `environment` over the file layers' values;
    /// a factor set in code keeps its value (code is on top).
    pub fn apply_environment(
        &mut self,
        environment: &BTreeMap<String, String>,
    ) -> Result<(), EnvironmentError> {
        self.apply_factor_variables(environment)?;
        self.apply_region_variables(environment)
    }

    /// The factors: cost, carbon intensity, CO2 tracking, interval and PUE.
    fn apply_factor_variables(
        &mut self,
        environment: &BTreeMap<String, String>,
    ) -> Result<(), EnvironmentError> {
        let non_negative = |variable: &str, value: &str| {
            parse_number(
                variable,
                value,
                |number| number >= 0.0,
                "must be a finite number >= 0",
            )
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
            self.config.co2_tracking = parse_switch(value).ok_or_else(|| {
                environment_error(CO2_TRACKING_VARIABLE, value, "must be true or false")
            })?;
            self.co2_tracking_origin = FactorOrigin::Environment(CO2_TRACKING_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(INTERVAL_VARIABLE)
            .filter(|_| self.interval_origin != code)
        {
            let seconds = parse_number(
                INTERVAL_VARIABLE,
                value,
                |s| s > 0.0 && s <= 86_400.0,
                "must be a number of seconds in (0, 86400]",
            )?;
            self.config.interval_millis = ((seconds * 1000.0).round() as u64).max(1);
            self.interval_origin = FactorOrigin::Environment(INTERVAL_VARIABLE.into());
        }
        if let Some(value) = environment
            .get(PUE_VARIABLE)
            .filter(|_| self.pue_origin != code)
        {
            self.config.pue = parse_number(
                PUE_VARIABLE,
                value,
                |pue| pue >= 1.0,
                "must be a finite number >= 1",
            )?;
            self.pue_origin = FactorOrigin::Environment(PUE_VARIABLE.into());
        }
        Ok(())
    }

    /// The grid region (the country, unless the carbon intensity is manual) and the
    /// reference's variables that are accepted but have no effect.
    fn apply_region_variables(
        &mut self,
        environment: &BTreeMap<String, String>,
    ) -> Result<(), EnvironmentError> {
        let manual = match environment.get(USE_MANUAL_VARIABLE) {
            Some(value) => parse_switch(value).ok_or_else(|| {
                environment_error(USE_MANUAL_VARIABLE, value, "must be true or false")
            })?,
            None => false,
        };
        // Blank is unset, as the reference reads it.
        let country = environment
            .get(COUNTRY_VARIABLE)
            .filter(|value| !value.trim().is_empty());
        match country {
            Some(value) if !manual && self.carbon_region_origin != FactorOrigin::Code => {
                region_intensity(value).map_err(|failure| match failure {
                    RegionError::Unknown(_) => {
                        environment_error(COUNTRY_VARIABLE, value, REGION_RULE)
                    }
                    RegionError::Table(table) => {
                        environment_error(COUNTRY_VARIABLE, value, &table.to_string())
                    }
                })?;
                self.config.carbon_region = Some(value.trim().to_string());
                self.carbon_region_origin = FactorOrigin::Environment(COUNTRY_VARIABLE.into());
            }
            _ => {}
        }
        self.ignored_variables = environment
            .keys()
            .filter(|name| match name.as_str() {
                COUNTRY_VARIABLE => manual && country.is_some(),
                USE_MANUAL_VARIABLE => false,
                other => other.starts_with(IGNORED_VARIABLE_PREFIX),
            })
            .cloned()
            .collect();
        Ok(())
    }

    /// The carbon intensity in force: an explicit `carbon_intensity` (file, environment
    /// or code), else the grid table's figure for `carbon_region`, else the default.
    /// The region factor is reported either way.
    pub fn carbon_intensity(&self) -> CarbonIntensity {
        let explicit = self.carbon_intensity_origin != FactorOrigin::Default;
        let region = self.region().map(|intensity| RegionFactor {
            intensity,
            origin: self.carbon_region_origin.clone(),
            applied: !explicit,
        });
        match &region {
            Some(factor) if factor.applied => CarbonIntensity {
                gco2e_per_kwh: factor.intensity.gco2e_per_kwh,
                origin: FactorOrigin::Region(factor.intensity.code.clone()),
                region,
            },
            _ => CarbonIntensity {
                gco2e_per_kwh: self.config.carbon_intensity,
                origin: self.carbon_intensity_origin.clone(),
                region,
            },
        }
    }

    /// Pins the table row `carbon_region` selects into the settings (see
    /// [`EnergySettings::pinned_region`]); a row already pinned for the same region
    /// stays, so replayed settings keep the figure their run used.
    pub fn pin_carbon_region(&mut self) {
        self.pinned_region = self.region();
    }

    /// The row for `carbon_region`: the pinned one when it is that region's, else the
    /// compiled-in table's; `None` without a region or for a code validation refuses.
    fn region(&self) -> Option<RegionIntensity> {
        let code = self.config.carbon_region.as_deref()?;
        match &self.pinned_region {
            Some(pinned) if pinned.matches(code) => Some(pinned.clone()),
            _ => region_intensity(code).ok(),
        }
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
            self.pue_origin = origin.clone();
        }
        if table.contains_key("carbon_region") {
            self.carbon_region_origin = origin;
        }
    }
}

/// A `true`/`false` environment value (`1`/`0`, `yes`/`no`; blank is false).
fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => Some(true),
        "false" | "0" | "no" | "" => Some(false),
        _ => None,
    }
}

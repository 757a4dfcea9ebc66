//! The `energy` component: defaults, validation, and precedence file < environment <
//! code, with the origin of every factor.

mod support;

use support::{energy_document, environment};
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_config::{CODE_SOURCE, EffectiveConfig, PluginsDocument};

#[test]
fn energy_is_on_by_default_with_the_spec_defaults() {
    let settings = EffectiveConfig::merge(&[]).unwrap().energy.unwrap();
    assert_eq!(settings.config.cost_per_kwh, 0.12);
    assert_eq!(settings.config.carbon_intensity, 475.0);
    assert!(!settings.config.co2_tracking);
    assert_eq!(settings.config.currency, "USD");
    assert_eq!(settings.config.interval_millis, 5000);
    assert_eq!(settings.cost_origin, FactorOrigin::Default);
}

#[test]
fn file_then_environment_then_code() {
    let file = energy_document(
        "/etc/wattline/plugins.toml",
        "cost_per_kwh = 0.30\ncarbon_intensity = 100.0\nco2_tracking = false",
    );
    let code = energy_document(CODE_SOURCE, "carbon_intensity = 50.0");
    let mut settings = EffectiveConfig::merge(&[file, code])
        .unwrap()
        .energy
        .unwrap();
    settings
        .apply_environment(&environment(&[
            ("GENAI_POWER_COST_PER_KWH", "0.25"),
            ("GENAI_CARBON_INTENSITY", "999"),
            ("GENAI_ENABLE_CO2_TRACKING", "true"),
            ("GENAI_GPU_COLLECTION_INTERVAL", "2.5"),
        ]))
        .unwrap();
    // Environment beats the file ...
    assert_eq!(settings.config.cost_per_kwh, 0.25);
    assert_eq!(
        settings.cost_origin,
        FactorOrigin::Environment("GENAI_POWER_COST_PER_KWH".into())
    );
    assert!(settings.config.co2_tracking);
    assert_eq!(settings.config.interval_millis, 2500);
    // ... and code beats the environment.
    assert_eq!(settings.config.carbon_intensity, 50.0);
    assert_eq!(settings.carbon_intensity_origin, FactorOrigin::Code);
}

#[test]
fn a_file_value_keeps_its_file_as_origin() {
    let file = energy_document(
        "/home/u/.config/wattline/plugins.toml",
        "cost_per_kwh = 0.5",
    );
    let settings = EffectiveConfig::merge(&[file]).unwrap().energy.unwrap();
    assert_eq!(settings.config.cost_per_kwh, 0.5);
    assert_eq!(
        settings.cost_origin,
        FactorOrigin::File("/home/u/.config/wattline/plugins.toml".into())
    );
    assert_eq!(settings.carbon_intensity_origin, FactorOrigin::Default);
}

#[test]
fn bad_environment_values_name_the_variable() {
    let mut settings = EnergySettings::default();
    let error = settings
        .apply_environment(&environment(&[("GENAI_POWER_COST_PER_KWH", "cheap")]))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "environment variable GENAI_POWER_COST_PER_KWH: must be a finite number >= 0 (got \"cheap\")"
    );
    let error = settings
        .apply_environment(&environment(&[("GENAI_ENABLE_CO2_TRACKING", "maybe")]))
        .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("environment variable GENAI_ENABLE_CO2_TRACKING: must be true or false")
    );
    let error = settings
        .apply_environment(&environment(&[("GENAI_GPU_COLLECTION_INTERVAL", "0")]))
        .unwrap_err();
    assert!(error.to_string().contains("GENAI_GPU_COLLECTION_INTERVAL"));
}

#[test]
fn co2_variables_without_meaning_here_are_accepted_and_listed_as_ignored() {
    let mut settings = EnergySettings::default();
    settings
        .apply_environment(&environment(&[
            ("GENAI_CO2_REGION", "x"),
            ("GENAI_CO2_TRACKING_MODE", "process"),
        ]))
        .unwrap();
    assert_eq!(
        settings.ignored_variables,
        vec![
            "GENAI_CO2_REGION".to_string(),
            "GENAI_CO2_TRACKING_MODE".into()
        ]
    );
    assert_eq!(settings.config, EnergySettings::default().config);
}

#[test]
fn file_validation_names_the_field() {
    let result = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\ncost_per_kwh = -1.0\n",
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "plugins.toml: components[0].config.cost_per_kwh: must be a finite number >= 0 (got -1)"
    );
    let result = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\ninterval_millis = 0\n",
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "plugins.toml: components[0].config.interval_millis: must be greater than zero (got 0)"
    );
}

#[test]
fn energy_can_be_switched_off() {
    let off = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\nenabled = false\n",
    )
    .unwrap();
    assert_eq!(EffectiveConfig::merge(&[off]).unwrap().energy, None);
}

#[test]
fn pue_comes_from_the_file_then_wattline_pue_and_must_be_at_least_one() {
    let file = energy_document("/etc/wattline/plugins.toml", "pue = 1.3");
    let mut settings = EffectiveConfig::merge(&[file]).unwrap().energy.unwrap();
    assert_eq!(settings.config.pue, 1.3);
    assert_eq!(
        settings.pue_origin,
        FactorOrigin::File("/etc/wattline/plugins.toml".into())
    );
    settings
        .apply_environment(&environment(&[("WATTLINE_PUE", "1.55")]))
        .unwrap();
    assert_eq!(settings.config.pue, 1.55);
    assert_eq!(
        settings.pue_origin,
        FactorOrigin::Environment("WATTLINE_PUE".into())
    );
    let error = EnergySettings::default()
        .apply_environment(&environment(&[("WATTLINE_PUE", "0.8")]))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "environment variable WATTLINE_PUE: must be a finite number >= 1 (got \"0.8\")"
    );
    let result = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\npue = 0.5\n",
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "plugins.toml: components[0].config.pue: must be a finite number >= 1 (got 0.5)"
    );
    assert_eq!(EnergySettings::default().config.pue, 1.0);
}

#[test]
fn power_sample_millis_defaults_to_100_and_is_validated() {
    assert_eq!(EnergySettings::default().config.power_sample_millis, 100);
    let file = energy_document("plugins.toml", "power_sample_millis = 250");
    let settings = EffectiveConfig::merge(&[file]).unwrap().energy.unwrap();
    assert_eq!(settings.config.power_sample_millis, 250);
    for bad in ["0", "5", "60001"] {
        let result = PluginsDocument::parse(
            "plugins.toml",
            &format!(
                "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\npower_sample_millis = {bad}\n"
            ),
        );
        assert_eq!(
            result.unwrap_err().to_string(),
            format!(
                "plugins.toml: components[0].config.power_sample_millis: must be between 10 and 60000 (got {bad})"
            )
        );
    }
}

#[test]
fn scopes_in_detail_defaults_to_ten_thousand_and_is_validated() {
    assert_eq!(EnergySettings::default().config.scopes_in_detail, 10_000);
    let file = energy_document("plugins.toml", "scopes_in_detail = 0");
    let settings = EffectiveConfig::merge(&[file]).unwrap().energy.unwrap();
    assert_eq!(settings.config.scopes_in_detail, 0);
    let result = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\nscopes_in_detail = 10000001\n",
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "plugins.toml: components[0].config.scopes_in_detail: must be at most 10000000 (got 10000001)"
    );
}

#[test]
fn scope_names_in_metrics_defaults_to_one_hundred_and_is_validated() {
    assert_eq!(EnergySettings::default().config.scope_names_in_metrics, 100);
    let file = energy_document("plugins.toml", "scope_names_in_metrics = 3");
    let settings = EffectiveConfig::merge(&[file]).unwrap().energy.unwrap();
    assert_eq!(settings.config.scope_names_in_metrics, 3);
    let result = PluginsDocument::parse(
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\nscope_names_in_metrics = 10001\n",
    );
    assert_eq!(
        result.unwrap_err().to_string(),
        "plugins.toml: components[0].config.scope_names_in_metrics: must be at most 10000 (got 10001)"
    );
}

//! `carbon_region`: a country's grid factor from the table wattline ships, set in a
//! file, in code or by the reference's `GENAI_CO2_COUNTRY_ISO_CODE`; an explicit
//! `carbon_intensity` wins over it, and both are reported with their origins.

mod support;

use support::{energy_document, energy_toml, environment};
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_config::grid_intensity::{REGION_RULE, region_intensity};
use wattline_config::{CODE_SOURCE, EffectiveConfig, PluginsDocument};

const ETC: &str = "/etc/wattline/plugins.toml";
const COUNTRY: &str = "GENAI_CO2_COUNTRY_ISO_CODE";

fn settings_from(layers: &[PluginsDocument], pairs: &[(&str, &str)]) -> EnergySettings {
    let mut settings = EffectiveConfig::merge(layers).unwrap().energy.unwrap();
    settings.apply_environment(&environment(pairs)).unwrap();
    settings
}

fn germany() -> f64 {
    region_intensity("DE").unwrap().gco2e_per_kwh
}

#[test]
fn a_region_from_a_file_sets_the_intensity_in_any_code_form() {
    for code in ["DE", "DEU", "de", "deu"] {
        let file = energy_document(ETC, &format!("carbon_region = \"{code}\""));
        let carbon = settings_from(&[file], &[]).carbon_intensity();
        assert_eq!(carbon.gco2e_per_kwh, germany(), "{code}");
        assert_eq!(carbon.origin, FactorOrigin::Region("DE".into()), "{code}");
        let region = carbon.region.unwrap();
        assert!(region.applied);
        assert_eq!(region.origin, FactorOrigin::File(ETC.into()));
        assert_eq!(region.intensity.iso3, "DEU");
        assert_eq!(region.intensity.country, "Germany");
        assert_eq!(region.intensity.year, 2023);
        assert_eq!(region.intensity.dataset, "Ember/OWID");
        assert_eq!(region.intensity.licence, "CC BY 4.0");
        assert_eq!(
            region.intensity.label(),
            "region DE, Ember/OWID 2023, CC BY 4.0"
        );
    }
}

#[test]
fn without_a_region_the_configured_intensity_applies_with_its_origin() {
    let carbon = settings_from(&[], &[]).carbon_intensity();
    assert_eq!(carbon.gco2e_per_kwh, 475.0);
    assert_eq!(carbon.origin, FactorOrigin::Default);
    assert_eq!(carbon.region, None);
}

#[test]
fn the_reference_country_variable_maps_onto_carbon_region() {
    let settings = settings_from(
        &[],
        &[
            (COUNTRY, "FRA"),
            ("GENAI_CO2_REGION", "ile-de-france"),
            ("GENAI_CO2_CLOUD_PROVIDER", "gcp"),
            ("GENAI_CO2_CLOUD_REGION", "europe-west9"),
            ("GENAI_CO2_OFFLINE_MODE", "true"),
            ("GENAI_CO2_TRACKING_MODE", "process"),
        ],
    );
    assert_eq!(settings.config.carbon_region.as_deref(), Some("FRA"));
    assert_eq!(
        settings.carbon_region_origin,
        FactorOrigin::Environment(COUNTRY.into())
    );
    let carbon = settings.carbon_intensity();
    assert_eq!(carbon.origin, FactorOrigin::Region("FR".into()));
    assert_eq!(
        carbon.gco2e_per_kwh,
        region_intensity("FR").unwrap().gco2e_per_kwh
    );
    // What has no meaning here stays listed as having no effect; the country does not.
    assert_eq!(
        settings.ignored_variables,
        [
            "GENAI_CO2_CLOUD_PROVIDER",
            "GENAI_CO2_CLOUD_REGION",
            "GENAI_CO2_OFFLINE_MODE",
            "GENAI_CO2_REGION",
            "GENAI_CO2_TRACKING_MODE",
        ]
    );
}

#[test]
fn the_reference_manual_switch_keeps_the_country_out() {
    let settings = settings_from(&[], &[(COUNTRY, "FRA"), ("GENAI_CO2_USE_MANUAL", "true")]);
    assert_eq!(settings.config.carbon_region, None);
    assert_eq!(settings.ignored_variables, [COUNTRY]);
    assert_eq!(settings.carbon_intensity().gco2e_per_kwh, 475.0);

    let settings = settings_from(&[], &[(COUNTRY, "FRA"), ("GENAI_CO2_USE_MANUAL", "false")]);
    assert_eq!(settings.config.carbon_region.as_deref(), Some("FRA"));
    assert!(settings.ignored_variables.is_empty());

    // Blank is unset, as the reference reads it.
    let settings = settings_from(&[], &[(COUNTRY, " ")]);
    assert_eq!(settings.config.carbon_region, None);
    assert!(settings.ignored_variables.is_empty());
}

#[test]
fn an_explicit_intensity_wins_and_both_origins_are_reported() {
    // The file's intensity over the environment's region ...
    let file = energy_document(ETC, "carbon_intensity = 100.0");
    let carbon = settings_from(&[file], &[(COUNTRY, "DE")]).carbon_intensity();
    assert_eq!(carbon.gco2e_per_kwh, 100.0);
    assert_eq!(carbon.origin, FactorOrigin::File(ETC.into()));
    let region = carbon.region.unwrap();
    assert!(!region.applied);
    assert_eq!(region.origin, FactorOrigin::Environment(COUNTRY.into()));
    assert_eq!(region.intensity.code, "DE");
    assert_eq!(region.intensity.gco2e_per_kwh, germany());

    // ... the environment's intensity over the file's region ...
    let file = energy_document(ETC, "carbon_region = \"DE\"");
    let carbon = settings_from(&[file], &[("GENAI_CARBON_INTENSITY", "42")]).carbon_intensity();
    assert_eq!(carbon.gco2e_per_kwh, 42.0);
    assert_eq!(
        carbon.origin,
        FactorOrigin::Environment("GENAI_CARBON_INTENSITY".into())
    );
    let region = carbon.region.unwrap();
    assert!(!region.applied);
    assert_eq!(region.origin, FactorOrigin::File(ETC.into()));

    // ... and code's intensity over both.
    let code = energy_document(CODE_SOURCE, "carbon_intensity = 7.0");
    let file = energy_document(ETC, "carbon_region = \"DE\"");
    let carbon = settings_from(&[file, code], &[]).carbon_intensity();
    assert_eq!(
        (carbon.gco2e_per_kwh, carbon.origin),
        (7.0, FactorOrigin::Code)
    );
    assert!(!carbon.region.unwrap().applied);
}

#[test]
fn regions_layer_like_every_factor() {
    // The environment over a file ...
    let file = energy_document(ETC, "carbon_region = \"DE\"");
    let settings = settings_from(&[file], &[(COUNTRY, "fr")]);
    assert_eq!(
        settings.carbon_intensity().origin,
        FactorOrigin::Region("FR".into())
    );
    // ... and code over the environment.
    let code = energy_document(CODE_SOURCE, "carbon_region = \"SE\"");
    let settings = settings_from(&[code], &[(COUNTRY, "FR")]);
    assert_eq!(settings.carbon_region_origin, FactorOrigin::Code);
    assert_eq!(
        settings.carbon_intensity().origin,
        FactorOrigin::Region("SE".into())
    );
}

#[test]
fn an_unknown_region_is_refused_naming_the_field_and_value_everywhere() {
    // A file.
    let error =
        PluginsDocument::parse("plugins.toml", &energy_toml("carbon_region = \"XX\"")).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("plugins.toml: components[0].config.carbon_region: {REGION_RULE} (got \"XX\")")
    );
    // Code.
    let mut config = EffectiveConfig::merge(&[]).unwrap();
    if let Some(energy) = &mut config.energy {
        energy.config.carbon_region = Some("Germany".into());
    }
    assert_eq!(
        config.validate().unwrap_err().to_string(),
        format!("<code>: energy.carbon_region: {REGION_RULE} (got \"Germany\")")
    );
    // The environment.
    let error = EnergySettings::default()
        .apply_environment(&environment(&[(COUNTRY, "ZZZ")]))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("environment variable {COUNTRY}: {REGION_RULE} (got \"ZZZ\")")
    );
    // A blank value in a file is a value, and not a code.
    let error =
        PluginsDocument::parse("plugins.toml", &energy_toml("carbon_region = \"\"")).unwrap_err();
    assert!(error.to_string().ends_with("(got \"\")"), "{error}");
}

#[test]
fn a_pinned_row_outlives_a_newer_table_for_the_same_region_only() {
    let file = energy_document(ETC, "carbon_region = \"DE\"");
    let mut settings = settings_from(&[file], &[]);
    settings.pin_carbon_region();
    // As a replay of a file written with an older table would find it.
    let mut older = settings.pinned_region.clone().unwrap();
    older.gco2e_per_kwh = 400.0;
    older.year = 2022;
    settings.pinned_region = Some(older.clone());
    assert_eq!(settings.carbon_intensity().gco2e_per_kwh, 400.0);
    settings.pin_carbon_region();
    assert_eq!(settings.pinned_region, Some(older), "pinning keeps its row");
    // A different region is looked up afresh.
    settings.config.carbon_region = Some("FR".into());
    assert_eq!(
        settings.carbon_intensity().gco2e_per_kwh,
        region_intensity("FR").unwrap().gco2e_per_kwh
    );
}

#[test]
fn settings_from_before_regions_still_read_and_regions_serialize_compactly() {
    let mut old = serde_json::to_value(EnergySettings::default()).unwrap();
    let object = old.as_object_mut().unwrap();
    object.remove("carbon_region_origin");
    object["config"]
        .as_object_mut()
        .unwrap()
        .remove("carbon_region");
    let settings: EnergySettings = serde_json::from_value(old).unwrap();
    assert_eq!(settings, EnergySettings::default());

    assert_eq!(
        serde_json::to_value(FactorOrigin::Region("DE".into())).unwrap(),
        serde_json::json!({"kind": "region", "name": "DE"})
    );
    // `config show` writes the region out and reads it back.
    let file = energy_document(ETC, "carbon_region = \"deu\"");
    let effective = EffectiveConfig::merge(&[file]).unwrap();
    let shown = effective.to_toml().unwrap();
    assert!(shown.contains("carbon_region = \"deu\""), "{shown}");
    let reread = PluginsDocument::parse("shown.toml", &shown).unwrap();
    assert_eq!(
        EffectiveConfig::merge(&[reread])
            .unwrap()
            .energy
            .unwrap()
            .config,
        effective.energy.unwrap().config
    );
}

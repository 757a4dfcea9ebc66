//! A regional carbon intensity through the energy account: the CO2 figures, the
//! report's factor with its dataset and origins (in JSON; the table's words for it are
//! the root crate's `tests/report_table.rs`) and a replay that keeps the row the run
//! used. The `gen_ai.*` CO2 metrics by the region's factor: `exporters/src/energy_names.rs`.

use chrono::Utc;
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_config::grid_intensity::region_intensity;
use wattline_energy::account::EnergyAccount;
use wattline_energy::replay::report_from_records;
use wattline_model::energy::{DevicePower, EnergyRecord, PowerRecord};
use wattline_model::report::EnergyReport;

const HOUR_NANOS: u64 = 3_600_000_000_000;

fn settings(region: &str) -> EnergySettings {
    let mut settings = EnergySettings::default();
    settings.config.co2_tracking = true;
    settings.config.carbon_region = Some(region.into());
    settings.carbon_region_origin = FactorOrigin::Code;
    settings
}

fn kilowatt(at: u64) -> EnergyRecord {
    EnergyRecord::Power(PowerRecord {
        source: "nvml".into(),
        at,
        devices: Some(vec![DevicePower {
            power_field: None,
            id: "GPU-a".into(),
            name: Some("card".into()),
            watts: Some(1000.0),
            counter_millijoules: None,
            shares: None,
            mig_enabled: None,
            at: None,
        }]),
        power_field: None,
    })
}

/// One kilowatt for one hour; the report, and every record the account was given.
fn one_kilowatt_hour(settings: EnergySettings) -> (EnergyReport, Vec<EnergyRecord>) {
    let wall = Utc::now();
    let mut account = EnergyAccount::new(settings, 0, wall);
    let mut records = vec![account.started_record()];
    for record in [kilowatt(0), kilowatt(HOUR_NANOS)] {
        account.apply(&record);
        records.push(record);
    }
    let end = wall + chrono::Duration::hours(1);
    records.push(EnergyRecord::Report {
        at: HOUR_NANOS,
        wall: end,
    });
    (account.report(HOUR_NANOS, end), records)
}

#[test]
fn the_regions_factor_gives_the_co2_and_the_report_names_its_dataset() {
    let germany = region_intensity("DE").unwrap().gco2e_per_kwh;
    let (report, _) = one_kilowatt_hour(settings("deu"));
    assert_eq!(report.total.energy_kwh, Some(1.0));
    let co2 = report.total.co2_grams.unwrap();
    assert!((co2 - germany).abs() < 1e-9, "{co2} vs {germany}");

    let factor = report.carbon_intensity.as_ref().unwrap();
    assert_eq!(factor.value, germany);
    assert_eq!(factor.origin, FactorOrigin::Region("DE".into()));
    // The table's words for it: the root crate's tests/report_table.rs.
    let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    let factor = &json["carbon_intensity"];
    assert_eq!(factor["origin"]["kind"], "region");
    assert_eq!(factor["origin"]["name"], "DE");
    assert_eq!(factor["region"]["code"], "DE");
    assert_eq!(factor["region"]["iso3"], "DEU");
    assert_eq!(factor["region"]["year"], 2023);
    assert_eq!(factor["region"]["dataset"], "Ember/OWID");
    assert_eq!(factor["region"]["licence"], "CC BY 4.0");
    assert_eq!(factor["region"]["applied"], true);
    assert_eq!(factor["region"]["origin"]["kind"], "code");
    // The other factors carry no region.
    assert!(json["cost_per_kwh"].get("region").is_none());
}

#[test]
fn an_explicit_intensity_wins_over_the_regions_factor_which_is_kept() {
    let mut settings = settings("FR");
    settings.config.carbon_intensity = 50.0;
    settings.carbon_intensity_origin = FactorOrigin::Environment("GENAI_CARBON_INTENSITY".into());
    let france = region_intensity("FR").unwrap();
    let (report, _) = one_kilowatt_hour(settings);
    assert!((report.total.co2_grams.unwrap() - 50.0).abs() < 1e-9);
    let factor = report.carbon_intensity.as_ref().unwrap();
    assert_eq!(
        factor.origin,
        FactorOrigin::Environment("GENAI_CARBON_INTENSITY".into())
    );
    let region = factor.region.as_ref().unwrap();
    assert!(!region.applied);
    assert_eq!(region.origin, FactorOrigin::Code);
    assert_eq!(region.intensity.code, "FR");
    assert_eq!(region.intensity.gco2e_per_kwh, france.gco2e_per_kwh);
}

#[test]
fn a_replay_uses_the_row_its_run_used() {
    let (live, mut records) = one_kilowatt_hour(settings("DE"));
    // The started record carries the row; the replay equals the live report.
    let EnergyRecord::Started { settings, .. } = &mut records[0] else {
        panic!("the first record opens the account: {:?}", records[0]);
    };
    let pinned = settings.pinned_region.as_mut().expect("the row is pinned");
    assert_eq!(pinned.code, "DE");
    let through_json: Vec<EnergyRecord> = records
        .iter()
        .map(|record| serde_json::from_str(&serde_json::to_string(record).unwrap()).unwrap())
        .collect();
    assert_eq!(report_from_records(through_json).unwrap(), live);

    // A file written when the table said otherwise replays with what it said.
    let EnergyRecord::Started { settings, .. } = &mut records[0] else {
        unreachable!()
    };
    if let Some(pinned) = settings.pinned_region.as_mut() {
        pinned.gco2e_per_kwh = 123.0;
        pinned.year = 2019;
    }
    let replayed = report_from_records(records).unwrap();
    assert!((replayed.total.co2_grams.unwrap() - 123.0).abs() < 1e-9);
    // What the table prints for the factor (tests/report_table.rs shows it there).
    let region = replayed
        .carbon_intensity
        .as_ref()
        .and_then(|f| f.region.as_ref());
    assert!(region.is_some_and(|region| region.intensity.label().contains("Ember/OWID 2019")));
}

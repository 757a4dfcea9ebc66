//! The report as a terminal table (`wattline::report::render_table`), from reports the
//! energy account builds record by record: the window, the GPU source, the device
//! table, totals and the facility line, processes, the carbon intensity's words, and
//! a part of the pipeline that stopped.

use chrono::{DateTime, Utc};
use wattline::report::render_table;
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_config::grid_intensity::region_intensity;
use wattline_energy::account::EnergyAccount;
use wattline_energy::replay::report_from_records;
use wattline_model::energy::{
    DevicePower, EnergyRecord, Nanos, PowerRecord, ProcessShares, ShareBasis,
};
use wattline_model::report::EnergyReport;
use wattline_model::report::HealthProblem;

const SECOND: f64 = 1e9;
const HOUR_NANOS: u64 = 3_600_000_000_000;

fn at(seconds: f64) -> Nanos {
    (seconds * SECOND).round() as Nanos
}

fn settings(co2: bool) -> EnergySettings {
    let mut settings = EnergySettings::default();
    settings.config.cost_per_kwh = 0.30;
    settings.config.carbon_intensity = 400.0;
    settings.config.co2_tracking = co2;
    settings.cost_origin = FactorOrigin::Code;
    settings
}

/// CO2 tracking on with the grid factor of `region`, set in code.
fn region_settings(region: &str) -> EnergySettings {
    let mut settings = EnergySettings::default();
    settings.config.co2_tracking = true;
    settings.config.carbon_region = Some(region.into());
    settings.carbon_region_origin = FactorOrigin::Code;
    settings
}

/// An account and every record it was given, as the energy actor feeds it.
struct Feed {
    account: EnergyAccount,
    records: Vec<EnergyRecord>,
    epoch_wall: DateTime<Utc>,
}

impl Feed {
    fn new(settings: EnergySettings) -> Self {
        let epoch_wall = Utc::now();
        let account = EnergyAccount::new(settings, 0, epoch_wall);
        Feed {
            records: vec![account.started_record()],
            account,
            epoch_wall,
        }
    }

    fn apply(&mut self, record: EnergyRecord) {
        self.account.apply(&record);
        self.records.push(record);
    }

    fn wall(&self, seconds: f64) -> DateTime<Utc> {
        self.epoch_wall + chrono::Duration::nanoseconds(at(seconds) as i64)
    }

    fn power(&mut self, source: &str, seconds: f64, devices: &[(&str, f64, Option<u64>)]) {
        let devices = devices
            .iter()
            .map(|(id, watts, counter)| DevicePower {
                power_field: None,
                id: (*id).into(),
                name: Some(format!("card {id}")),
                watts: Some(*watts),
                counter_millijoules: *counter,
                shares: None,
                mig_enabled: None,
                at: None,
            })
            .collect();
        self.apply(EnergyRecord::Power(PowerRecord {
            source: source.into(),
            at: at(seconds),
            devices: Some(devices),
            power_field: Some("power.draw".into()),
        }));
    }

    fn from(&mut self, seconds: f64) {
        let wall = self.wall(seconds);
        self.apply(EnergyRecord::MeasuringFrom {
            at: at(seconds),
            wall,
        });
    }

    fn report(&mut self, seconds: f64) -> EnergyReport {
        let wall = self.wall(seconds);
        self.apply(EnergyRecord::Report {
            at: at(seconds),
            wall,
        });
        self.account.report(at(seconds), wall)
    }
}

/// `GPU-a` drawing `watts`, nothing else known.
fn gpu_a(watts: f64) -> DevicePower {
    DevicePower {
        power_field: None,
        id: "GPU-a".into(),
        name: None,
        watts: Some(watts),
        counter_millijoules: None,
        shares: None,
        mig_enabled: None,
        at: None,
    }
}

/// An `nvml` power record of one device at `seconds`.
fn nvml_reading(seconds: f64, device: DevicePower) -> EnergyRecord {
    EnergyRecord::Power(PowerRecord {
        source: "nvml".into(),
        at: at(seconds),
        devices: Some(vec![device]),
        power_field: None,
    })
}

/// Shares of `basis`, by pid.
fn shares_of(basis: ShareBasis, pairs: &[(u32, f64)]) -> Option<ProcessShares> {
    Some(ProcessShares {
        basis: Some(basis),
        processes: pairs.iter().copied().collect(),
    })
}

/// One kilowatt on `GPU-a` for one hour: the report, and every record the account was
/// given.
fn one_kilowatt_hour(settings: EnergySettings) -> (EnergyReport, Vec<EnergyRecord>) {
    let mut feed = Feed::new(settings);
    for seconds in [0.0, 3600.0] {
        feed.apply(nvml_reading(seconds, gpu_a(1000.0)));
    }
    let report = feed.report(3600.0);
    (report, feed.records)
}

#[test]
fn a_part_of_the_pipeline_that_stopped_is_said_loudly_in_the_table() {
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, None)]);
    let mut report = feed.report(1.0);
    assert!(!render_table(&report).contains("PIPELINE STOPPED"));
    report.health.push(HealthProblem {
        component: "poll clock".into(),
        detail: "panicked: boom".into(),
        at: report.ended_at,
    });
    let table = render_table(&report);
    assert!(
        table.contains("PIPELINE STOPPED IN PART: poll clock panicked: boom at "),
        "{table}"
    );
    // And it survives the JSON round trip a file reader makes.
    let back: EnergyReport = serde_json::from_str(&report.to_json().unwrap()).unwrap();
    assert_eq!(back.health, report.health);
}

#[test]
fn the_table_gives_the_windows_length_the_silent_source_and_the_facility_line() {
    let mut with_pue = settings(false);
    with_pue.config.pue = 1.5;
    let mut feed = Feed::new(with_pue);
    feed.from(0.0);
    feed.apply(EnergyRecord::GpuStatus {
        configured: "nvml".into(),
        unavailable: None,
        selection: None,
    });
    feed.power("drm", 0.0, &[("card0", 100.0, None)]);
    feed.power("drm", 12.5, &[("card0", 100.0, None)]);
    let table = render_table(&feed.report(12.5));
    assert!(
        table.starts_with("wattline energy report (12.5 s)\n"),
        "{table}"
    );
    assert!(table.contains("Facility at PUE 1.5 "), "{table}");
    // 1250 J times 1.5 is 1875 J, three significant figures.
    assert!(table.contains(": 1880 J, "), "{table}");
    // A configured source that never answered, and one configured as none.
    let mut feed = Feed::new(settings(false));
    feed.apply(EnergyRecord::GpuStatus {
        configured: "nvml".into(),
        unavailable: None,
        selection: None,
    });
    let table = render_table(&feed.report(1.0));
    assert!(
        table.contains("GPU source: none (configured: nvml, not answering)\n"),
        "{table}"
    );
    assert!(!table.contains("Facility"), "{table}");
    let mut feed = Feed::new(settings(false));
    feed.apply(EnergyRecord::GpuStatus {
        configured: "none".into(),
        unavailable: None,
        selection: None,
    });
    assert!(render_table(&feed.report(1.0)).contains("GPU source: none\n"));
}

#[test]
fn the_table_names_devices_domains_and_processes_by_their_short_identifiers() {
    // 100 W to 300 W over 10 s on a named device: 2000 J, mean 200 W, max 300 W; a
    // process holding a quarter of it.
    let mut feed = Feed::new(settings(false));
    let reading = |seconds: f64, watts: f64| {
        let device = DevicePower {
            power_field: None,
            id: "GPU-0123456789abcdef".into(),
            name: Some("H200".into()),
            shares: shares_of(ShareBasis::Memory, &[(4242, 0.25)]),
            ..gpu_a(watts)
        };
        nvml_reading(seconds, device)
    };
    feed.apply(reading(0.0, 100.0));
    feed.apply(reading(10.0, 300.0));
    let table = render_table(&feed.report(10.0));
    let row = table
        .lines()
        .find(|line| line.starts_with("H200 GPU-01234567 "))
        .unwrap_or_else(|| panic!("no device row: {table}"));
    let columns: Vec<&str> = row.split_whitespace().collect();
    // name, short id, energy (100 W to 300 W over 10 s: 2000 J), method (two words),
    // mean power, max power, covered, rate, gaps, cost (2000 J at 0.30/kWh)
    assert_eq!(
        &columns[2..],
        &[
            "2000",
            "J",
            "sparse",
            "trapezoid",
            "200",
            "W",
            "300",
            "W",
            "10.0s",
            "0.1",
            "0",
            "0.000167"
        ],
        "{row}"
    );
    // One 10 s interval from 100 W to 300 W: the change may lie anywhere in it, so the
    // interval's standard deviation is 200 W × 10 s / √12 (and a 1.2% floor of its
    // 200 W mean moving unseen, 0.3 × (2.4 W × 10 s)²): ±1131 J, ±57%.
    assert!(
        table.contains("Total: 2000 J ±57% (GPU 2000 J by sparse trapezoid)"),
        "{table}"
    );
    assert!(
        table.contains("process 4242     500 J on GPU-01234567 (by memory share)"),
        "{table}"
    );
    assert!(
        table.contains("unattributed     1500 J on GPU-01234567"),
        "{table}"
    );
    // At a PUE of 1 the facility figure is the total: no line of its own.
    assert!(!table.contains("Facility"), "{table}");
}

#[test]
fn the_regions_factor_is_named_with_its_dataset_and_where_carbon_region_was_set() {
    let germany = region_intensity("DE").unwrap().gco2e_per_kwh;
    let (report, _) = one_kilowatt_hour(region_settings("deu"));
    let table = render_table(&report);
    assert!(
        table.contains(&format!(
            "at carbon intensity {germany} gCO2e/kWh (region DE, Ember/OWID 2023, CC BY 4.0; \
             carbon_region set in code)"
        )),
        "{table}"
    );
}

#[test]
fn an_explicit_intensity_wins_and_the_table_says_over_what() {
    let mut settings = region_settings("FR");
    settings.config.carbon_intensity = 50.0;
    settings.carbon_intensity_origin = FactorOrigin::Environment("GENAI_CARBON_INTENSITY".into());
    let france = region_intensity("FR").unwrap();
    let (report, _) = one_kilowatt_hour(settings);
    let table = render_table(&report);
    assert!(
        table.contains(&format!(
            "at carbon intensity 50 gCO2e/kWh (from $GENAI_CARBON_INTENSITY, which wins over \
             carbon_region set in code: region FR, Ember/OWID {}, CC BY 4.0, {} gCO2e/kWh)",
            france.year, france.gco2e_per_kwh
        )),
        "{table}"
    );
}

#[test]
fn without_energy_the_table_still_names_the_factor() {
    let account = EnergyAccount::new(region_settings("SE"), 0, Utc::now());
    let table = render_table(&account.report(HOUR_NANOS, Utc::now()));
    assert!(
        table.contains("CO2: no energy measured; carbon intensity "),
        "{table}"
    );
    assert!(table.contains("(region SE, Ember/OWID"), "{table}");
}

#[test]
fn a_replay_prints_the_row_its_run_used() {
    let (_, mut records) = one_kilowatt_hour(region_settings("DE"));
    // A file written when the grid table said otherwise replays with what it said.
    let EnergyRecord::Started { settings, .. } = &mut records[0] else {
        panic!("the first record opens the account: {:?}", records[0]);
    };
    let pinned = settings.pinned_region.as_mut().expect("the row is pinned");
    pinned.gco2e_per_kwh = 123.0;
    pinned.year = 2019;
    let replayed = report_from_records(records).unwrap();
    assert!(render_table(&replayed).contains("Ember/OWID 2019"));
}

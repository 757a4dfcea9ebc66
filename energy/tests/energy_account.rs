//! The energy account fed record by record, as the energy actor and a replayed file
//! feed it: integration, windows, stale readings, scopes, processes, RAPL, totals.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_energy::account::EnergyAccount;
use wattline_energy::integrator::{EnergySource, JOULES_PER_KILOWATT_HOUR};
use wattline_energy::replay::report_from_records;
use wattline_model::energy::RaplZoneReading;
use wattline_model::energy::{
    DevicePower, EnergyRecord, Nanos, PowerRecord, ProcessShares, ShareBasis,
};
use wattline_model::report::{EnergyDomain, EnergyReport};

const SECOND: f64 = 1e9;

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

/// An account and every record it was given, so each test can also replay them.
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

    fn apply(&mut self, record: EnergyRecord) -> usize {
        let closed = self.account.apply(&record).len();
        self.records.push(record);
        closed
    }

    fn wall(&self, seconds: f64) -> DateTime<Utc> {
        self.epoch_wall + chrono::Duration::nanoseconds(at(seconds) as i64)
    }

    fn power(&mut self, source: &str, seconds: f64, devices: &[(&str, f64, Option<u64>)]) -> usize {
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
        }))
    }

    fn failed(&mut self, source: &str, seconds: f64) {
        self.apply(EnergyRecord::Power(PowerRecord {
            source: source.into(),
            at: at(seconds),
            devices: None,
            power_field: None,
        }));
    }

    fn from(&mut self, seconds: f64) {
        let wall = self.wall(seconds);
        self.apply(EnergyRecord::MeasuringFrom {
            at: at(seconds),
            wall,
        });
    }

    fn scope(&mut self, uuid: Uuid, name: &str, from: f64, to: Option<f64>) {
        let wall = self.wall(from);
        self.apply(EnergyRecord::ScopeStarted {
            uuid,
            name: name.into(),
            at: at(from),
            wall,
            parent: None,
            process_id: None,
            weight: None,
            traceparent: None,
        });
        if let Some(to) = to {
            self.end_scope(uuid, to);
        }
    }

    fn end_scope(&mut self, uuid: Uuid, seconds: f64) {
        let wall = self.wall(seconds);
        self.apply(EnergyRecord::ScopeEnded {
            uuid,
            at: at(seconds),
            wall,
            remote_call: None,
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

fn kwh(joules: f64) -> f64 {
    joules / JOULES_PER_KILOWATT_HOUR
}

fn close(actual: f64, expected: f64, relative: f64) -> bool {
    ((actual - expected) / expected).abs() < relative
}

#[test]
fn one_kilowatt_for_one_hour_is_one_kilowatt_hour_with_its_cost_and_co2() {
    let mut feed = Feed::new(settings(true));
    feed.power("nvml", 0.0, &[("GPU-a", 1000.0, None)]);
    feed.power("nvml", 3600.0, &[("GPU-a", 1000.0, None)]);
    let report = feed.report(3600.0);
    let device = &report.devices[0];
    // The reference multiplies kW by seconds and calls it Wh: 3.6 times too high.
    assert_eq!(device.energy_kwh, 1.0);
    assert_eq!(device.energy_source, EnergySource::SparseTrapezoid);
    assert_eq!(report.total.energy_kwh, Some(1.0));
    assert_eq!(report.total.gpu_energy_kwh, Some(1.0));
    assert!((report.total.cost.unwrap() - 0.30).abs() < 1e-12);
    assert!((report.total.co2_grams.unwrap() - 400.0).abs() < 1e-9);
    assert_eq!(report.domains.len(), 1);
    assert_eq!(report.domains[0].domain, EnergyDomain::Gpu);
}

#[test]
fn each_device_is_integrated_from_its_own_read_instant_not_its_records() {
    // Two records of two devices, stamped when each read began (0 and 2 s), while
    // device b's counter is read 30 ms later each time (its own `at`). Both counters
    // rise 2000 J between reads; the window opens at 1 s, the report is at 2.03 s.
    let mut feed = Feed::new(settings(false));
    feed.from(1.0);
    let device = |id: &str, joules: u64, read_at: Option<f64>| DevicePower {
        power_field: None,
        id: id.into(),
        counter_millijoules: Some(joules * 1000),
        at: read_at.map(at),
        ..gpu_a(1000.0)
    };
    for (seconds, joules) in [(0.0, 0), (2.0, 2000)] {
        feed.apply(EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: at(seconds),
            devices: Some(vec![
                device("GPU-a", joules, None),
                device("GPU-b", joules, Some(seconds + 0.03)),
            ]),
            power_field: None,
        }));
    }
    let report = feed.report(2.03);
    let joules = |id: &str| {
        report
            .devices
            .iter()
            .find(|device| device.device_identifier == id)
            .map(|device| device.energy_kwh * 3_600_000.0)
            .unwrap()
    };
    // a: 2000 J over its record instants [0, 2], the window keeps [1, 2]: 1000 J.
    assert!(close(joules("GPU-a"), 1000.0, 1e-9), "{}", joules("GPU-a"));
    // b: 2000 J over its reads [0.03, 2.03], the window keeps [1, 2.03]: 1030 J.
    // Stamped at the record instants it would be 1000 J.
    assert!(close(joules("GPU-b"), 1030.0, 1e-9), "{}", joules("GPU-b"));
}

#[test]
fn a_ramp_and_a_step_are_integrated_exactly_and_a_gap_is_not() {
    let mut feed = Feed::new(settings(false));
    // P(t) = 100 + 2t over [0, 300] s: E = 100*300 + 300^2 = 120000 J.
    for second in (0..=300).step_by(7).chain([300]) {
        let t = f64::from(second);
        feed.power("nvml", t, &[("GPU-a", 100.0 + 2.0 * t, None)]);
    }
    // A failed sample, then a separate run far later: the gap is not integrated.
    feed.failed("nvml", 400.0);
    feed.power("nvml", 1000.0, &[("GPU-a", 50.0, None)]);
    feed.power("nvml", 1010.0, &[("GPU-a", 150.0, None)]);
    let report = feed.report(1010.0);
    let device = &report.devices[0];
    assert!(close(device.energy_kwh, kwh(120_000.0 + 1000.0), 1e-12));
    assert_eq!(device.gaps, 1);
    assert!((device.covered_seconds - 310.0).abs() < 1e-9);
    assert_eq!(device.max_watts, Some(700.0));
}

#[test]
fn each_device_lists_the_power_figures_it_was_integrated_from_by_its_own_name_first() {
    let mut feed = Feed::new(settings(false));
    feed.from(0.0);
    let device = |id: &str, field: Option<&str>| DevicePower {
        power_field: field.map(str::to_owned),
        id: id.into(),
        name: None,
        watts: Some(100.0),
        counter_millijoules: None,
        shares: None,
        mig_enabled: None,
        at: None,
    };
    // Stream readings named by their record; a full answer naming each device's own
    // figure, one of them the mean; a reading that names nothing adds no name.
    for (seconds, record_field, devices) in [
        (
            0.0,
            Some("power.draw.instant"),
            vec![device("a", None), device("b", None)],
        ),
        (
            1.0,
            None,
            vec![
                device("a", Some("power.draw.instant")),
                device("b", Some("power.draw")),
            ],
        ),
        (2.0, None, vec![device("a", None), device("b", None)]),
    ] {
        feed.apply(EnergyRecord::Power(PowerRecord {
            source: "nvidia-smi".into(),
            at: at(seconds),
            devices: Some(devices),
            power_field: record_field.map(str::to_owned),
        }));
    }
    let report = feed.report(2.0);
    let fields = |id: &str| {
        report
            .devices
            .iter()
            .find(|d| d.device_identifier == id)
            .map(|d| d.power_fields.clone())
    };
    assert_eq!(fields("a"), Some(vec!["power.draw.instant".to_owned()]));
    assert_eq!(
        fields("b"),
        Some(vec![
            "power.draw".to_owned(),
            "power.draw.instant".to_owned()
        ])
    );
}

#[test]
fn a_device_missing_from_its_sources_answer_is_a_gap_but_not_from_another_source() {
    let mut feed = Feed::new(settings(false));
    feed.power(
        "nvml",
        0.0,
        &[("GPU-a", 100.0, None), ("GPU-b", 100.0, None)],
    );
    feed.power("drm", 1.0, &[("card0", 10.0, None)]);
    // GPU-b is missing from nvml's answer: a gap for it; drm's answer is no gap.
    feed.power("nvml", 10.0, &[("GPU-a", 100.0, None)]);
    feed.power(
        "nvml",
        20.0,
        &[("GPU-a", 100.0, None), ("GPU-b", 100.0, None)],
    );
    feed.power("drm", 21.0, &[("card0", 10.0, None)]);
    let report = feed.report(21.0);
    let energy = |id: &str| {
        report
            .devices
            .iter()
            .find(|d| d.device_identifier == id)
            .unwrap()
            .energy_kwh
    };
    assert!(close(energy("GPU-a"), kwh(2000.0), 1e-12));
    assert_eq!(energy("GPU-b"), 0.0);
    assert!(close(energy("card0"), kwh(200.0), 1e-12));
    assert_eq!(report.gpu_source.as_deref(), Some("drm+nvml"));
}

#[test]
fn a_cached_answer_seen_again_and_a_failure_older_than_the_newest_reading_add_nothing() {
    let mut feed = Feed::new(settings(false));
    feed.power("nvidia-smi", 0.3, &[("GPU-a", 200.0, None)]);
    assert_eq!(feed.power("nvidia-smi", 5.3, &[("GPU-a", 200.0, None)]), 1);
    // The same answer again (a poll read the cache): no interval, no reading.
    assert_eq!(feed.power("nvidia-smi", 5.3, &[("GPU-a", 200.0, None)]), 0);
    // A poll that read the cache before the newest answer, delivered after it.
    assert_eq!(feed.power("nvidia-smi", 0.3, &[("GPU-a", 200.0, None)]), 0);
    // A failure observed before the newest answer does not cut the run.
    feed.failed("nvidia-smi", 5.0);
    assert_eq!(feed.power("nvidia-smi", 10.3, &[("GPU-a", 200.0, None)]), 1);
    let device = &feed.report(10.3).devices[0];
    assert_eq!(device.readings, 3);
    assert_eq!(device.gaps, 0);
    assert!(close(device.energy_kwh, kwh(2000.0), 1e-12));
}

#[test]
fn the_window_runs_from_the_start_instant_to_the_report_instant() {
    // Readings 0.2 s before the command starts and 0.25 s after the report was asked
    // for (a fresh nvidia-smi run); constant 512.34 W over a 4 s command.
    let mut feed = Feed::new(settings(false));
    feed.power("nvidia-smi", 0.8, &[("GPU-a", 512.34, None)]);
    feed.from(1.0);
    feed.power("nvidia-smi", 3.3, &[("GPU-a", 512.34, None)]);
    feed.power("nvidia-smi", 5.25, &[("GPU-a", 512.34, None)]);
    let report = feed.report(5.0);
    let device = &report.devices[0];
    assert!(close(device.energy_kwh, kwh(512.34 * 4.0), 1e-12));
    assert!((device.covered_seconds - 4.0).abs() < 1e-9);
    assert_eq!(report.started_at, feed.wall(1.0));
    assert_eq!(report.ended_at, feed.wall(5.0));
    // A later report includes what the first left out.
    feed.power("nvidia-smi", 7.0, &[("GPU-a", 512.34, None)]);
    let later = feed.report(7.0);
    assert!(close(later.devices[0].energy_kwh, kwh(512.34 * 6.0), 1e-12));
}

#[test]
fn the_counter_is_primary_clipped_like_the_trapezoid_and_mixed_when_partial() {
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, Some(1_000_000))]);
    feed.power("nvml", 10.0, &[("GPU-a", 100.0, Some(2_050_000))]);
    let report = feed.report(10.0);
    let device = &report.devices[0];
    assert_eq!(device.energy_source, EnergySource::Counter);
    assert!(close(device.energy_kwh, kwh(1050.0), 1e-12));
    assert!(close(device.counter_kwh.unwrap(), kwh(1050.0), 1e-12));
    assert!(close(device.trapezoid_kwh.unwrap(), kwh(1000.0), 1e-12));
    // Half the interval: half the counter's energy (constant power).
    let half = feed.account.report(at(5.0), feed.wall(5.0));
    assert!(close(half.devices[0].energy_kwh, kwh(525.0), 1e-12));
    // One interval without a counter uses its trapezoid: mixed.
    feed.power("nvml", 20.0, &[("GPU-a", 100.0, None)]);
    let report = feed.report(20.0);
    assert_eq!(report.devices[0].energy_source, EnergySource::Mixed);
    assert!(close(report.devices[0].energy_kwh, kwh(2050.0), 1e-12));
    assert_eq!(report.devices[0].counter_kwh, None);
}

#[test]
fn a_scope_spanning_the_run_equals_the_total_and_overlapping_scopes_get_their_windows() {
    let mut feed = Feed::new(settings(false));
    let (whole, first, second) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, Some(0))]);
    feed.from(0.5);
    feed.scope(whole, "run", 0.5, None);
    feed.scope(first, "planner", 1.0, None);
    feed.power("nvml", 1.0, &[("GPU-a", 300.0, Some(200_000))]);
    feed.scope(second, "coder", 5.0, None);
    feed.power("nvml", 10.0, &[("GPU-a", 300.0, Some(2_900_000))]);
    feed.end_scope(first, 12.0);
    feed.power("nvml", 12.0, &[("GPU-a", 300.0, Some(3_500_000))]);
    feed.power("nvml", 20.5, &[("GPU-a", 300.0, Some(6_050_000))]);
    let report = feed.report(20.0);
    let scope = |name: &str| {
        report
            .agent_scopes
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .gpu_energy_kwh
            .unwrap()
    };
    let total = report.total.energy_kwh.unwrap();
    assert!(close(scope("run"), total, 1e-9));
    // planner: [1, 12] = 2700 J + 600 J of counter; coder: [5, 20] at 300 W by counter.
    assert!(close(scope("planner"), kwh(3300.0), 1e-9));
    assert!(close(scope("coder"), kwh(1500.0 + 600.0 + 2400.0), 1e-9));
    assert_eq!(report.agent_scopes.len(), 3);
}

#[test]
fn process_shares_and_the_unattributed_rest_add_up_to_the_device_exactly() {
    let mut feed = Feed::new(settings(false));
    let shares = |basis, pairs: &[(u32, f64)]| ProcessShares {
        basis: Some(basis),
        processes: pairs.iter().copied().collect::<BTreeMap<_, _>>(),
    };
    let reading = |seconds: f64, watts: f64, shares: Option<ProcessShares>| {
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: at(seconds),
            devices: Some(vec![DevicePower {
                power_field: None,
                id: "GPU-a".into(),
                name: None,
                watts: Some(watts),
                counter_millijoules: None,
                shares,
                mig_enabled: None,
                at: None,
            }]),
            power_field: None,
        })
    };
    feed.apply(reading(
        0.0,
        200.0,
        Some(shares(ShareBasis::Utilization, &[(41, 0.5), (42, 0.25)])),
    ));
    // The energy clock's own readings carry no shares: the nearest ones apply.
    feed.apply(reading(1.0, 200.0, None));
    feed.apply(reading(2.0, 250.0, None));
    feed.apply(reading(
        3.0,
        250.0,
        Some(shares(ShareBasis::Utilization, &[(41, 1.0)])),
    ));
    let report = feed.report(3.0);
    let device = &report.devices[0];
    let attributed: f64 = report.processes.iter().map(|p| p.gpu_energy_kwh).sum();
    assert!((attributed + device.unattributed_kwh - device.energy_kwh).abs() <= 1e-18);
    let process = |pid: u32| {
        report
            .processes
            .iter()
            .find(|p| p.process_id == pid)
            .unwrap()
            .gpu_energy_kwh
    };
    // [0,2]: shares 0.5/0.25 over 425 J; [2,3]: share 1.0 for 41 over 250 J.
    assert!(close(process(41), kwh(0.5 * 425.0 + 250.0), 1e-12));
    assert!(close(process(42), kwh(0.25 * 425.0), 1e-12));
    assert_eq!(device.attribution, Some(ShareBasis::Utilization));
}

#[test]
fn rapl_package_and_dram_add_to_the_total_sub_zones_do_not_and_the_wrap_is_handled() {
    let mut feed = Feed::new(settings(false));
    feed.apply(EnergyRecord::GpuStatus {
        configured: "nvml".into(),
        unavailable: Some("NVML library not found (libnvidia-ml.so.1)".into()),
        selection: None,
    });
    let zone = |zone: &str, name: &str, uj: u64| RaplZoneReading {
        zone: zone.into(),
        name: name.into(),
        energy_microjoules: uj,
        max_energy_range_microjoules: Some(262_143_328_850),
    };
    feed.apply(EnergyRecord::Rapl {
        at: at(0.0),
        zones: vec![
            zone("intel-rapl:0", "package-0", 262_140_000_000),
            zone("intel-rapl:0:0", "core", 1_000_000),
            zone("intel-rapl:0:1", "dram", 10_000_000),
        ],
    });
    feed.apply(EnergyRecord::Rapl {
        at: at(60.0),
        zones: vec![
            zone("intel-rapl:0", "package-0", 4_996_671_150),
            zone("intel-rapl:0:0", "core", 2_000_000_000),
            zone("intel-rapl:0:1", "dram", 610_000_000),
        ],
    });
    let mut with_pue = feed.account.settings().clone();
    with_pue.config.pue = 1.5;
    let report = feed.report(60.0);
    // 3_328_850 + 4_996_671_150 µJ = 5000 J package; 600 J DRAM; core not added.
    assert!(close(
        report.total.cpu_energy_kwh.unwrap(),
        kwh(5000.0),
        1e-12
    ));
    assert!(close(
        report.total.dram_energy_kwh.unwrap(),
        kwh(600.0),
        1e-12
    ));
    assert!(close(report.total.energy_kwh.unwrap(), kwh(5600.0), 1e-12));
    assert_eq!(report.total.gpu_energy_kwh, None);
    assert_eq!(
        report.gpu_unavailable.as_deref(),
        Some("NVML library not found (libnvidia-ml.so.1)")
    );
    assert!(
        report
            .domains
            .iter()
            .all(|d| d.method == EnergySource::Counter)
    );
    assert_eq!(report.cpu_zones.len(), 3);
    assert_eq!(report.total.facility_energy_kwh, report.total.energy_kwh);
    // PUE multiplies the facility figures only.
    let mut feed = Feed::new(with_pue);
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, None)]);
    feed.power("nvml", 36.0, &[("GPU-a", 100.0, None)]);
    let report = feed.report(36.0);
    assert!(close(report.total.energy_kwh.unwrap(), 0.001, 1e-12));
    assert!(close(
        report.total.facility_energy_kwh.unwrap(),
        0.0015,
        1e-12
    ));
    assert!(close(
        report.total.facility_cost.unwrap(),
        0.0015 * 0.30,
        1e-12
    ));
}

#[test]
fn nothing_measured_is_null_never_zero() {
    let mut feed = Feed::new(settings(true));
    feed.failed("nvml", 1.0);
    let report = feed.report(2.0);
    assert!(report.devices.is_empty());
    assert_eq!(report.total.energy_kwh, None);
    assert_eq!(report.total.gpu_energy_kwh, None);
    assert_eq!(report.total.cost, None);
    assert_eq!(report.total.co2_grams, None);
    assert_eq!(report.gpu_source, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["total"]["gpu_energy_kwh"].is_null());
    assert!(json["total"]["cost"].is_null());
}

#[test]
fn the_records_replayed_through_json_give_the_same_report() {
    let mut feed = Feed::new(settings(true));
    let scope = Uuid::now_v7();
    feed.power("nvml", 0.0, &[("GPU-a", 120.0, Some(5_000))]);
    feed.from(0.1);
    feed.scope(scope, "agent", 0.2, None);
    for step in 1_u32..40 {
        let t = f64::from(step) * 0.37;
        if step == 17 {
            feed.failed("nvml", t);
            continue;
        }
        let watts = 100.0 + f64::from(step % 5) * 31.0;
        feed.power(
            "nvml",
            t,
            &[("GPU-a", watts, Some(5_000 + u64::from(step) * 41_000))],
        );
    }
    let live = feed.report(14.0);
    let text: Vec<String> = feed
        .records
        .iter()
        .map(|record| serde_json::to_string(record).unwrap())
        .collect();
    let parsed = text
        .iter()
        .map(|line| serde_json::from_str::<EnergyRecord>(line).unwrap());
    let replayed = report_from_records(parsed).unwrap();
    assert_eq!(
        serde_json::to_value(&replayed).unwrap(),
        serde_json::to_value(&live).unwrap()
    );
}

#[test]
fn two_backends_reading_one_device_out_of_order_never_integrate_backwards() {
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, None)]);
    feed.power("nvml", 2.0, &[("GPU-a", 100.0, None)]);
    // A second backend's older reading of the same device: nothing, and no panic.
    assert_eq!(feed.power("other", 1.0, &[("GPU-a", 900.0, None)]), 0);
    feed.power("nvml", 3.0, &[("GPU-a", 100.0, None)]);
    let device = &feed.report(3.0).devices[0];
    assert!(close(device.energy_kwh, kwh(300.0), 1e-12));
}

#[test]
fn a_power_record_with_process_shares_reads_back_from_json() {
    // Found by fuzz_atof: inside the tagged record serde saw the pid keys as strings
    // and refused them, so `wattline report FILE` failed on any run with shares.
    let line = r#"{"record":"power","source":"nvml","at":0,"devices":[{"id":"GPU-a","name":null,"watts":null,"counter_millijoules":null,"shares":{"basis":null,"processes":{"0":0.5}}}],"power_field":null}"#;
    let record: EnergyRecord = serde_json::from_str(line).unwrap();
    let EnergyRecord::Power(power) = &record else {
        panic!("not a power record: {record:?}");
    };
    let shares = power.devices.as_ref().unwrap()[0].shares.as_ref().unwrap();
    assert_eq!(shares.processes, BTreeMap::from([(0, 0.5)]));
    // Written back, the keys are the same strings.
    assert_eq!(serde_json::to_string(&record).unwrap(), line);
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(
        serde_json::from_value::<EnergyRecord>(value).unwrap(),
        record
    );
    let bad = line.replace(r#""0":0.5"#, r#""pid":0.5"#);
    let error = serde_json::from_str::<EnergyRecord>(&bad).unwrap_err();
    assert!(error.to_string().contains("process id \"pid\""), "{error}");
}

#[test]
fn a_replayed_clock_at_the_end_of_time_is_the_edge_not_a_panic() {
    // Found by fuzz_atof: a file's `started` record at chrono's last instant made the
    // report's wall time overflow (`DateTime + TimeDelta` panicked).
    let records = vec![
        EnergyRecord::Started {
            at: 0,
            wall: DateTime::<Utc>::MAX_UTC,
            settings: Box::default(),
        },
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: 1,
            devices: None,
            power_field: None,
        }),
    ];
    let report = report_from_records(records).unwrap();
    assert_eq!(report.ended_at, DateTime::<Utc>::MAX_UTC);
    let account = EnergyAccount::new(
        EnergySettings::default(),
        u64::MAX,
        DateTime::<Utc>::MIN_UTC,
    );
    assert_eq!(account.wall_time(0), DateTime::<Utc>::MIN_UTC);
}

#[test]
fn an_interval_cut_by_the_window_keeps_the_energy_of_its_part_with_power_linear_or_shaped_by_its_counter()
 {
    // 100 W rising to 300 W over 10 s (2000 J by the trapezoid, 2400 J by the
    // counter); the window opens at 5 s. The trapezoid's part, power linear (200 W at
    // 5 s): (200 + 300) / 2 × 5 = 1250 J. The counter's mean, 240 W, says the power
    // rose early: a step giving it lies at 3 s (100 × 3 + 300 × 7 = 2400), and the
    // widest rise centred there that fits is over 0 to 6 s (100 → 300 W, then 300 W;
    // 1200 + 1200 = 2400 J). Its part from 5 s: (266.67 + 300) / 2 × 1 + 300 × 4.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, Some(1_000_000))]);
    feed.from(5.0);
    feed.power("nvml", 10.0, &[("GPU-a", 300.0, Some(3_400_000))]);
    let report = feed.report(10.0);
    let device = &report.devices[0];
    let counted = (100.0 + 200.0 * 5.0 / 6.0 + 300.0) / 2.0 + 300.0 * 4.0;
    assert!(close(device.energy_kwh, kwh(counted), 1e-12));
    assert!(close(device.counter_kwh.unwrap(), kwh(counted), 1e-12));
    assert!(close(device.trapezoid_kwh.unwrap(), kwh(1250.0), 1e-12));
    assert!((device.covered_seconds - 5.0).abs() < 1e-9);
    // Cut at both ends: 2.5 s to 7.5 s, power 150 W to 250 W: 1000 J of the 2000.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, None)]);
    feed.from(2.5);
    feed.power("nvml", 10.0, &[("GPU-a", 300.0, None)]);
    let report = feed.report(7.5);
    assert!(close(report.devices[0].energy_kwh, kwh(1000.0), 1e-12));
    // From an idle 0 W end: 0 W to 200 W over 10 s, from 5 s on: (100 + 200) / 2 × 5
    // = 750 J of the 1000.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 0.0, None)]);
    feed.from(5.0);
    feed.power("nvml", 10.0, &[("GPU-a", 200.0, None)]);
    let report = feed.report(10.0);
    assert!(close(report.devices[0].energy_kwh, kwh(750.0), 1e-12));
}

#[test]
fn a_window_closing_just_before_a_reading_gets_the_power_after_a_step_not_an_average() {
    // A job's power steps from 90 W to 640 W 50 ms into a 1 s interval, and the
    // window closes 40 ms before its end reading (a command exits; `run` reads right
    // after). The counter holds 90 × 0.05 + 640 × 0.95 = 612.5 J; the window's part is
    // 90 × 0.05 + 640 × 0.91 = 586.9 J. Power linear between the readings would have
    // given the last 40 ms (618 + 640) / 2 W instead of 640 W, and scaled the rest
    // down to fit the counter: 570.3 J, 2.8% short.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 90.0, Some(1_000_000))]);
    feed.from(0.0);
    feed.power("nvml", 1.0, &[("GPU-a", 640.0, Some(1_612_500))]);
    let report = feed.report(0.96);
    let device = &report.devices[0];
    assert!(close(
        device.energy_kwh,
        kwh(90.0 * 0.05 + 640.0 * 0.91),
        1e-9
    ));
    // The trapezoid's own figure keeps its shape: (90 + 618) / 2 × 0.96 of 365 J.
    assert!(close(
        device.trapezoid_kwh.unwrap(),
        kwh((90.0 + 618.0) / 2.0 * 0.96),
        1e-9
    ));
}

#[test]
fn a_counter_that_moved_while_power_read_zero_is_cut_by_time() {
    // Both ends read 0 W but the counter advanced 100 J: the part inside the window
    // is its share of the time (no power to weigh it by), never a division by zero.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 0.0, Some(1_000_000))]);
    feed.from(2.0);
    feed.power("nvml", 10.0, &[("GPU-a", 0.0, Some(1_100_000))]);
    let report = feed.report(10.0);
    assert!(close(report.devices[0].energy_kwh, kwh(80.0), 1e-12));
}

#[test]
fn a_report_as_of_an_earlier_instant_leaves_out_readings_up_to_two_minutes_newer() {
    // Readings every second to 100 s at 50 W; a report as of 10 s holds 10 s of it,
    // though 90 s of newer intervals have arrived since.
    let mut feed = Feed::new(settings(false));
    for second in 0..=100 {
        feed.power("nvml", f64::from(second), &[("GPU-a", 50.0, None)]);
    }
    let early = feed.account.report(at(10.0), feed.wall(10.0));
    assert!(close(early.devices[0].energy_kwh, kwh(500.0), 1e-12));
    assert!((early.devices[0].covered_seconds - 10.0).abs() < 1e-9);
}

#[test]
fn a_counter_read_out_of_order_by_two_readers_adds_up_to_the_counters_advance() {
    // The full read's counter (stamped 1.0 s, read later) is ahead of the dense
    // thread's (stamped 1.1 s, read earlier): no reset, no energy lost or doubled.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, Some(987_654_321))]);
    feed.power("nvml", 1.0, &[("GPU-a", 100.0, Some(987_754_321 + 5_000))]);
    feed.power("nvml", 1.1, &[("GPU-a", 100.0, Some(987_754_321 + 2_000))]);
    feed.power("nvml", 2.0, &[("GPU-a", 100.0, Some(987_854_321))]);
    let report = feed.report(2.0);
    assert!(close(report.devices[0].energy_kwh, kwh(200.0), 1e-12));
}

#[test]
fn the_sampling_rate_and_the_dense_or_sparse_label_follow_the_intervals_in_the_window() {
    // Readings 0.25 s apart: 4 Hz, dense. A report as of an earlier instant takes the
    // later intervals back out of the count too.
    let mut feed = Feed::new(settings(false));
    for step in 0..=40 {
        feed.power("nvml", f64::from(step) * 0.25, &[("GPU-a", 100.0, None)]);
    }
    let report = feed.account.report(at(5.0), feed.wall(5.0));
    let device = &report.devices[0];
    assert_eq!(device.energy_source, EnergySource::DenseTrapezoid);
    assert!(
        (device.sampling_rate_hz.unwrap() - 4.0).abs() < 1e-9,
        "{device:?}"
    );
    // Readings 2 s apart: 0.5 Hz, sparse.
    let mut feed = Feed::new(settings(false));
    for step in 0..=5 {
        feed.power("nvml", f64::from(step) * 2.0, &[("GPU-a", 100.0, None)]);
    }
    let report = feed.report(10.0);
    let device = &report.devices[0];
    assert_eq!(device.energy_source, EnergySource::SparseTrapezoid);
    assert!(
        (device.sampling_rate_hz.unwrap() - 0.5).abs() < 1e-9,
        "{device:?}"
    );
    // A report in the middle of an interval: that interval still counts, partly in
    // the window; the later ones do not. 1 s readings to 10 s, report at 5.5 s: six
    // intervals over 5.5 s.
    let mut feed = Feed::new(settings(false));
    for step in 0..=10 {
        feed.power("nvml", f64::from(step), &[("GPU-a", 100.0, None)]);
    }
    let report = feed.account.report(at(5.5), feed.wall(5.5));
    let device = &report.devices[0];
    assert!(
        (device.sampling_rate_hz.unwrap() - 6.0 / 5.5).abs() < 1e-9,
        "{device:?}"
    );
}

#[test]
fn a_process_gets_its_share_of_the_part_of_an_interval_inside_the_window() {
    // 100 W to 300 W over 10 s with process 7 holding a quarter; the window opens at
    // 5 s: the part inside holds 1250 J, the process 312.5 J.
    let mut feed = Feed::new(settings(false));
    let reading = |seconds: f64, watts: f64| {
        let shares = shares_of(ShareBasis::Memory, &[(7, 0.25)]);
        nvml_reading(
            seconds,
            DevicePower {
                power_field: None,
                shares,
                ..gpu_a(watts)
            },
        )
    };
    feed.apply(reading(0.0, 100.0));
    feed.from(5.0);
    feed.apply(reading(10.0, 300.0));
    let report = feed.report(10.0);
    assert!(close(report.processes[0].gpu_energy_kwh, kwh(312.5), 1e-12));
    assert!(close(report.devices[0].unattributed_kwh, kwh(937.5), 1e-12));
}

#[test]
fn a_file_cut_before_any_report_replays_as_of_its_newest_record() {
    // A run killed before it reported: its records end at 10 s; the replay holds all
    // ten seconds, ending at the newest record.
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, None)]);
    feed.power("nvml", 10.0, &[("GPU-a", 100.0, None)]);
    let report = report_from_records(feed.records.clone()).unwrap();
    assert!(close(report.devices[0].energy_kwh, kwh(1000.0), 1e-12));
    assert_eq!(report.ended_at, feed.wall(10.0));
}

/// `GPU-a` drawing `watts`, nothing else known: the tests set what they need with
/// struct update syntax.
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

/// One device's power record at `seconds`, with its MIG flag.
fn device_record(seconds: f64, watts: f64, mig_enabled: Option<bool>) -> EnergyRecord {
    nvml_reading(
        seconds,
        DevicePower {
            power_field: None,
            mig_enabled,
            at: None,
            ..gpu_a(watts)
        },
    )
}

#[test]
fn a_mig_board_is_marked_shared_once_any_reading_says_so_and_never_otherwise() {
    let mut feed = Feed::new(settings(false));
    feed.apply(device_record(0.0, 100.0, None));
    feed.apply(device_record(1.0, 100.0, Some(false)));
    assert!(!feed.report(1.0).devices[0].shared_board_power);
    feed.apply(device_record(2.0, 100.0, Some(true)));
    // Dense readings do not say: the board stays marked.
    feed.apply(device_record(3.0, 100.0, None));
    assert!(feed.report(3.0).devices[0].shared_board_power);
}

#[test]
fn a_negative_power_reading_is_a_gap_not_energy() {
    let mut feed = Feed::new(settings(false));
    feed.apply(device_record(0.0, 100.0, None));
    feed.apply(device_record(1.0, -5.0, None));
    feed.apply(device_record(2.0, 100.0, None));
    feed.apply(device_record(3.0, 100.0, None));
    let report = feed.report(3.0);
    let device = &report.devices[0];
    assert_eq!(device.gaps, 1);
    assert!(close(device.energy_kwh, kwh(100.0), 1e-12));
}

#[test]
fn each_closed_interval_carries_its_energy_in_kilowatt_hours() {
    // 100 W then 300 W over 10 s: the trapezoid is 2000 J, the counter 2400 J.
    let mut account = EnergyAccount::new(settings(false), 0, Utc::now());
    let reading = |seconds: f64, watts: f64, counter: u64| {
        let counter_millijoules = Some(counter);
        nvml_reading(
            seconds,
            DevicePower {
                power_field: None,
                counter_millijoules,
                ..gpu_a(watts)
            },
        )
    };
    assert!(account.apply(&reading(0.0, 100.0, 1_000_000)).is_empty());
    let closed = account.apply(&reading(10.0, 300.0, 3_400_000));
    assert_eq!(closed.len(), 1);
    assert!(close(closed[0].kilowatt_hours, kwh(2400.0), 1e-12));
    assert!(close(
        closed[0].trapezoid_kilowatt_hours.unwrap(),
        kwh(2000.0),
        1e-12
    ));
    assert!((closed[0].seconds - 10.0).abs() < 1e-12);
    assert!(closed[0].counter);
}

#[test]
fn a_scope_that_ended_between_two_readings_still_gets_its_part_of_the_next_interval() {
    // The scope runs 1 s to 5 s; its end is known before the reading at 4 s arrives,
    // and the interval 4 s to 10 s still holds its last second: 4 s at 100 W.
    let mut feed = Feed::new(settings(false));
    let uuid = Uuid::now_v7();
    feed.apply(device_record(0.0, 100.0, None));
    feed.scope(uuid, "step", 1.0, Some(5.0));
    feed.apply(device_record(4.0, 100.0, None));
    feed.apply(device_record(10.0, 100.0, None));
    let report = feed.report(10.0);
    let scope = &report.agent_scopes[0];
    assert!(close(scope.gpu_energy_kwh.unwrap(), kwh(400.0), 1e-12));
}

#[test]
fn mean_power_and_the_method_figures_are_absent_until_an_interval_closes() {
    let mut feed = Feed::new(settings(false));
    feed.power("nvml", 0.0, &[("GPU-a", 100.0, Some(1_000_000))]);
    let one = feed.report(0.0);
    let device = &one.devices[0];
    assert_eq!(device.counter_kwh, None);
    assert_eq!(device.trapezoid_kwh, None);
    assert_eq!(device.mean_watts, None);
    assert_eq!(device.sampling_rate_hz, None);
    // 100 W to 300 W over 10 s: a mean of 200 W by the trapezoid.
    feed.power("nvml", 10.0, &[("GPU-a", 300.0, Some(3_400_000))]);
    let report = feed.report(10.0);
    assert!(close(report.devices[0].mean_watts.unwrap(), 200.0, 1e-12));
}

#[test]
fn a_process_share_after_the_report_instant_is_taken_back_out() {
    // Process 9 holds half the device; 100 W constant, readings at 0 s and 10 s; a
    // report as of 4 s gives it half of 400 J.
    let mut feed = Feed::new(settings(false));
    let reading = |seconds: f64| {
        let shares = shares_of(ShareBasis::Utilization, &[(9, 0.5)]);
        nvml_reading(
            seconds,
            DevicePower {
                power_field: None,
                shares,
                ..gpu_a(100.0)
            },
        )
    };
    feed.apply(reading(0.0));
    feed.apply(reading(10.0));
    let early = feed.account.report(at(4.0), feed.wall(4.0));
    assert!(close(early.processes[0].gpu_energy_kwh, kwh(200.0), 1e-12));
    assert!(close(early.devices[0].unattributed_kwh, kwh(200.0), 1e-12));
}

#[test]
fn every_device_and_domain_carries_its_own_cost_and_co2() {
    // 2 kW for an hour on one device: 2 kWh, at 0.30 per kWh and 400 gCO2e per kWh.
    let mut feed = Feed::new(settings(true));
    feed.power("nvml", 0.0, &[("GPU-a", 2000.0, None)]);
    feed.power("nvml", 3600.0, &[("GPU-a", 2000.0, None)]);
    let report = feed.report(3600.0);
    let device = &report.devices[0];
    assert!(close(device.cost, 0.60, 1e-12));
    assert!(close(device.co2_grams.unwrap(), 800.0, 1e-12));
    let domain = &report.domains[0];
    assert!(close(domain.cost, 0.60, 1e-12));
    assert!(close(domain.co2_grams.unwrap(), 800.0, 1e-12));
}

#[test]
fn why_no_gpu_energy_was_measured_names_the_selection_before_the_sources() {
    use wattline_model::gpu_selection::GpuSelection;
    let status = |selectors: &[&str], given: &str| EnergyRecord::GpuStatus {
        configured: "nvml".into(),
        unavailable: Some("NVML library not found".into()),
        selection: (!selectors.is_empty()).then(|| GpuSelection {
            selectors: selectors.iter().map(|s| (*s).to_owned()).collect(),
            origin: "CUDA_VISIBLE_DEVICES".into(),
            given: given.into(),
        }),
    };
    // No selection: the sources' reason.
    let mut feed = Feed::new(settings(false));
    feed.apply(status(&[], ""));
    assert_eq!(
        feed.report(1.0).gpu_unavailable.as_deref(),
        Some("NVML library not found")
    );
    // A selection of no device, whether or not a source answered.
    let mut feed = Feed::new(settings(false));
    feed.apply(status(&["none"], "none"));
    assert_eq!(
        feed.report(1.0).gpu_unavailable.as_deref(),
        Some("no GPU is selected (CUDA_VISIBLE_DEVICES=none): none counted")
    );
    // A source answered, but with none of the selected devices.
    let mut feed = Feed::new(settings(false));
    feed.apply(status(&["7"], "7"));
    assert_eq!(
        feed.report(0.5).gpu_unavailable.as_deref(),
        Some("NVML library not found"),
        "before any source answered, the sources' reason"
    );
    feed.apply(EnergyRecord::Power(PowerRecord {
        source: "nvml".into(),
        at: at(1.0),
        devices: Some(Vec::new()),
        power_field: None,
    }));
    let report = feed.report(1.0);
    assert_eq!(
        report.gpu_unavailable.as_deref(),
        Some("no device matched the selection (CUDA_VISIBLE_DEVICES=7)")
    );
    assert_eq!(report.gpu_source.as_deref(), Some("nvml"));
}

#[test]
fn a_domain_of_one_method_keeps_it_and_of_several_is_mixed() {
    let mut feed = Feed::new(settings(false));
    feed.power(
        "nvml",
        0.0,
        &[("GPU-a", 100.0, Some(1_000)), ("GPU-b", 100.0, Some(1_000))],
    );
    feed.power(
        "nvml",
        1.0,
        &[
            ("GPU-a", 100.0, Some(101_000)),
            ("GPU-b", 100.0, Some(101_000)),
        ],
    );
    assert_eq!(feed.report(1.0).domains[0].method, EnergySource::Counter);
    let mut feed = Feed::new(settings(false));
    feed.power(
        "nvml",
        0.0,
        &[("GPU-a", 100.0, Some(1_000)), ("GPU-b", 100.0, None)],
    );
    feed.power(
        "nvml",
        1.0,
        &[("GPU-a", 100.0, Some(101_000)), ("GPU-b", 100.0, None)],
    );
    assert_eq!(feed.report(1.0).domains[0].method, EnergySource::Mixed);
}

#[test]
fn a_scopes_cost_and_co2_are_of_its_own_energy() {
    // 1 kW for an hour inside the scope: 1 kWh, 0.30 and 400 g.
    let mut feed = Feed::new(settings(true));
    let uuid = Uuid::now_v7();
    feed.power("nvml", 0.0, &[("GPU-a", 1000.0, None)]);
    feed.scope(uuid, "step", 0.0, Some(3600.0));
    feed.power("nvml", 7200.0, &[("GPU-a", 1000.0, None)]);
    let report = feed.report(7200.0);
    let scope = &report.agent_scopes[0];
    assert!(close(scope.energy_kwh.unwrap(), 1.0, 1e-12));
    assert!(close(scope.cost.unwrap(), 0.30, 1e-12));
    assert!(close(scope.co2_grams.unwrap(), 400.0, 1e-12));
}

#[test]
fn an_exporter_lost_data_when_it_dropped_failed_or_lost_anything_and_says_what() {
    use wattline_model::report::ExporterOutcome;
    let outcome = |dropped, failed, lost| ExporterOutcome {
        name: "atof".into(),
        exported: 10,
        dropped,
        failed,
        lost,
        last_error: None,
        slowest_answer_millis: None,
    };
    assert!(!outcome(0, 0, 0).lost_data());
    assert!(outcome(1, 0, 0).lost_data());
    assert!(outcome(0, 1, 0).lost_data());
    assert!(outcome(0, 0, 1).lost_data());
    let mut failing = outcome(3, 1, 2);
    assert_eq!(
        failing.loss_description(),
        "3 events dropped, 2 lost, 1 calls failed"
    );
    failing.last_error = Some("disk full".into());
    assert_eq!(
        failing.loss_description(),
        "3 events dropped, 2 lost, 1 calls failed (last error: disk full)"
    );
}

#[test]
fn each_domain_has_the_name_its_json_and_csv_use() {
    // The same names as the report's serialised form.
    for domain in [
        EnergyDomain::Gpu,
        EnergyDomain::CpuPackage,
        EnergyDomain::Dram,
        EnergyDomain::CpuPart,
    ] {
        assert_eq!(
            serde_json::to_value(domain).unwrap(),
            serde_json::Value::String(domain.as_str().to_owned())
        );
    }
    assert_eq!(EnergyDomain::CpuPackage.as_str(), "cpu_package");
}

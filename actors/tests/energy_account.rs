//! The energy account over GPU samples: device figures, CO2 only when tracked, Agent
//! scope and process attribution, gaps and RAPL.

use std::time::{Duration, Instant};

use chrono::Utc;
use uuid::Uuid;
use wattline_actors::energy::account::EnergyAccount;
use wattline_actors::energy::integrator::EnergySource;
use wattline_actors::gpu::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};
use wattline_actors::platform::linux::rapl::RaplZoneReading;
use wattline_config::energy::{EnergySettings, FactorOrigin};

fn device(id: &str, watts: f64, utilization: f64) -> GpuDeviceReading {
    let mut reading = GpuDeviceReading::new(GpuVendor::Nvidia, id);
    reading.name = Some("NVIDIA H200".into());
    reading.power_draw_watts = Some(watts);
    reading.compute_utilization_percent = Some(utilization);
    reading.memory_used_bytes = Some(1024 * 1024 * 1024);
    reading.temperature_celsius = Some(50.0);
    reading
}

fn sample(at: Instant, devices: Vec<GpuDeviceReading>) -> GpuSample {
    GpuSample {
        devices,
        processes: Vec::new(),
        taken_at: at,
    }
}

fn settings(co2: bool) -> EnergySettings {
    let mut settings = EnergySettings::default();
    settings.config.co2_tracking = co2;
    settings.config.cost_per_kwh = 0.2;
    settings.config.carbon_intensity = 400.0;
    settings
}

#[test]
fn one_kilowatt_hour_costs_and_emits_by_the_factors() {
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(true), Utc::now());
    account.add_gpu_sample(Some(&sample(start, vec![device("GPU-a", 1000.0, 50.0)])));
    let metrics = account.add_gpu_sample(Some(&sample(
        start + Duration::from_secs(3600),
        vec![device("GPU-a", 1000.0, 50.0)],
    )));
    let report = account.report(Utc::now());
    assert_eq!(report.devices.len(), 1);
    let gpu = &report.devices[0];
    assert_eq!(gpu.energy_kwh, 1.0);
    assert_eq!(gpu.energy_source, EnergySource::Trapezoid);
    assert!((gpu.cost - 0.2).abs() < 1e-12);
    assert_eq!(gpu.co2_grams, Some(400.0));
    assert_eq!(report.total.gpu_energy_kwh, 1.0);
    assert_eq!(
        report.carbon_intensity.as_ref().unwrap().origin,
        FactorOrigin::Default
    );
    let consumed = metrics
        .iter()
        .find(|m| m.name == "gen_ai.energy.consumed")
        .unwrap();
    assert_eq!(consumed.value.as_f64(), 1.0);
    assert_eq!(consumed.unit.as_deref(), Some("kWh"));
    assert!(
        metrics
            .iter()
            .any(|m| m.name == "gen_ai.co2.emissions" && m.value.as_f64() == 400.0)
    );
    assert!(
        metrics
            .iter()
            .any(|m| m.name == "gen_ai.power.cost" && (m.value.as_f64() - 0.2).abs() < 1e-12)
    );
}

#[test]
fn with_co2_off_there_is_no_co2_figure_anywhere() {
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    let mut all = Vec::new();
    for second in 0..5 {
        all.extend(account.add_gpu_sample(Some(&sample(
            start + Duration::from_secs(second),
            vec![device("GPU-a", 300.0, 10.0)],
        ))));
    }
    let report = account.report(Utc::now());
    assert!(report.carbon_intensity.is_none());
    assert!(report.total.co2_grams.is_none());
    assert!(report.devices.iter().all(|d| d.co2_grams.is_none()));
    assert!(all.iter().all(|m| !m.name.starts_with("gen_ai.co2")));
    let json = report.to_json().unwrap();
    assert!(!json.contains("gCO2e"), "{json}");
    assert!(report.to_table().contains("CO2: not tracked"));
}

#[test]
fn a_failed_sample_is_a_gap_for_every_device() {
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    let at = |s: u64| start + Duration::from_secs(s);
    account.add_gpu_sample(Some(&sample(at(0), vec![device("GPU-a", 100.0, 1.0)])));
    account.add_gpu_sample(Some(&sample(at(10), vec![device("GPU-a", 100.0, 1.0)])));
    account.add_gpu_sample(None);
    account.add_gpu_sample(Some(&sample(at(100), vec![device("GPU-a", 100.0, 1.0)])));
    account.add_gpu_sample(Some(&sample(at(110), vec![device("GPU-a", 100.0, 1.0)])));
    let gpu = &account.report(Utc::now()).devices[0];
    assert!((gpu.trapezoid_kwh.unwrap() * 3_600_000.0 - 2000.0).abs() < 1e-9);
    assert_eq!(gpu.gaps, 1);
}

#[test]
fn a_device_that_stops_reporting_is_not_integrated_across_its_absence() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    account.add_gpu_sample(Some(&sample(
        at(0),
        vec![device("GPU-a", 100.0, 1.0), device("GPU-b", 50.0, 1.0)],
    )));
    account.add_gpu_sample(Some(&sample(at(10), vec![device("GPU-a", 100.0, 1.0)])));
    let metrics = account.add_gpu_sample(Some(&sample(
        at(20),
        vec![device("GPU-a", 100.0, 1.0), device("GPU-b", 50.0, 1.0)],
    )));
    let report = account.report(Utc::now());
    let b = report
        .devices
        .iter()
        .find(|d| d.device_identifier == "GPU-b")
        .unwrap();
    assert_eq!(b.trapezoid_kwh, Some(0.0));
    assert_eq!(b.gaps, 1);
    // Its gauges reappear only with its readings.
    let powers: Vec<_> = metrics
        .iter()
        .filter(|m| m.name == "gen_ai.gpu.power")
        .collect();
    assert_eq!(powers.len(), 2);
    let count = metrics
        .iter()
        .find(|m| m.name == "gen_ai.gpu.aggregate.gpu_count")
        .unwrap();
    assert_eq!(count.value.as_f64(), 2.0);
}

#[test]
fn agent_scopes_get_the_energy_of_their_window_and_overlap() {
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    let first = Uuid::now_v7();
    let second = Uuid::now_v7();
    account.scope_started(first, "planner", at(0), Utc::now());
    account.scope_started(second, "coder", at(5), Utc::now());
    account.add_gpu_sample(Some(&sample(at(0), vec![device("GPU-a", 100.0, 1.0)])));
    account.add_gpu_sample(Some(&sample(at(10), vec![device("GPU-a", 100.0, 1.0)])));
    account.scope_ended(first, at(15), Utc::now());
    account.add_gpu_sample(Some(&sample(at(20), vec![device("GPU-a", 100.0, 1.0)])));
    let report = account.report(Utc::now());
    let joules = |name: &str| {
        report
            .agent_scopes
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .gpu_energy_kwh
            * 3_600_000.0
    };
    assert!(
        (joules("planner") - 1500.0).abs() < 1e-9,
        "{}",
        joules("planner")
    );
    assert!(
        (joules("coder") - 1500.0).abs() < 1e-9,
        "{}",
        joules("coder")
    );
    assert!((report.total.gpu_energy_kwh * 3_600_000.0 - 2000.0).abs() < 1e-9);
    assert!(
        report
            .agent_scopes
            .iter()
            .find(|s| s.name == "planner")
            .unwrap()
            .ended_at
            .is_some()
    );
}

#[test]
fn processes_get_their_share_of_gpu_utilization() {
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    account.add_gpu_sample(Some(&sample(start, vec![device("GPU-a", 200.0, 80.0)])));
    let mut second = sample(
        start + Duration::from_secs(10),
        vec![device("GPU-a", 200.0, 80.0)],
    );
    second.processes = vec![
        GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: "GPU-a".into(),
            device_index: Some(0),
            process_id: 42,
            memory_used_bytes: None,
            compute_utilization_percent: Some(60.0),
        },
        GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: "GPU-a".into(),
            device_index: Some(0),
            process_id: 43,
            memory_used_bytes: None,
            compute_utilization_percent: None,
        },
    ];
    account.add_gpu_sample(Some(&second));
    let report = account.report(Utc::now());
    assert_eq!(report.processes.len(), 1);
    assert_eq!(report.processes[0].process_id, 42);
    assert!((report.processes[0].gpu_energy_kwh * 3_600_000.0 - 2000.0 * 0.75).abs() < 1e-9);
}

#[test]
fn rapl_package_energy_handles_the_wrap() {
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    let zone = |energy: u64| RaplZoneReading {
        zone: "intel-rapl:0".into(),
        name: "package-0".into(),
        energy_microjoules: energy,
        max_energy_range_microjoules: Some(262_143_328_850),
    };
    account.add_rapl(start, &[zone(262_140_000_000)]);
    account.add_rapl(start + Duration::from_secs(60), &[zone(4_996_671_150)]);
    let report = account.report(Utc::now());
    let joules = report.cpu_zones[0].energy_kwh * 3_600_000.0;
    assert!((joules - 5_000.0).abs() < 1e-6, "{joules}");
    assert!((report.total.cpu_energy_kwh.unwrap() * 3_600_000.0 - 5_000.0).abs() < 1e-6);
    // GPU energy never includes the CPU.
    assert_eq!(report.total.gpu_energy_kwh, 0.0);
}

#[test]
fn no_rapl_means_no_cpu_figure_not_zero() {
    let account = EnergyAccount::new(settings(false), Utc::now());
    let report = account.report(Utc::now());
    assert!(report.total.cpu_energy_kwh.is_none());
    assert!(report.cpu_zones.is_empty());
}

#[test]
fn the_report_rebuilt_from_recorded_metrics_matches_the_live_one() {
    use wattline_actors::energy::replay::report_from_measurements;
    let start = Instant::now();
    let mut account = EnergyAccount::new(settings(true), Utc::now());
    let mut batches = Vec::new();
    let times = [0.0, 0.5, 1.7, 2.0, 4.25, 9.0];
    let watts = [120.0, 180.0, 175.5, 300.0, 90.0, 95.0];
    for (i, (t, w)) in times.iter().zip(watts).enumerate() {
        let wall = Utc::now() + chrono::Duration::milliseconds((t * 1000.0) as i64);
        if i == 3 {
            account.add_gpu_sample(None); // a gap
        }
        let sample = sample(
            start + Duration::from_secs_f64(*t),
            vec![device("GPU-a", w, 50.0), device("GPU-b", w / 2.0, 10.0)],
        );
        batches.push((wall, account.add_gpu_sample(Some(&sample))));
    }
    let live = account.report(Utc::now());
    let replayed = report_from_measurements(batches.iter().map(|(t, m)| (*t, m.as_slice())));
    assert_eq!(replayed.currency, "USD");
    assert_eq!(replayed.devices.len(), 2);
    for (live, replayed) in live.devices.iter().zip(&replayed.devices) {
        assert_eq!(live.device_identifier, replayed.device_identifier);
        assert!(((live.energy_kwh - replayed.energy_kwh) / live.energy_kwh).abs() < 1e-12);
        assert!(
            (live.covered_seconds - replayed.covered_seconds).abs() < 1e-9,
            "{} vs {}",
            live.covered_seconds,
            replayed.covered_seconds
        );
        assert_eq!(live.readings, replayed.readings);
        assert_eq!(live.max_watts, replayed.max_watts);
        assert_eq!(live.energy_source, replayed.energy_source);
    }
    assert!(
        ((live.total.gpu_energy_kwh - replayed.total.gpu_energy_kwh) / live.total.gpu_energy_kwh)
            .abs()
            < 1e-12
    );
    assert!(((live.total.cost - replayed.total.cost) / live.total.cost).abs() < 1e-12);
    assert!(
        ((live.total.co2_grams.unwrap() - replayed.total.co2_grams.unwrap())
            / live.total.co2_grams.unwrap())
        .abs()
            < 1e-12
    );
    assert!((replayed.cost_per_kwh.value - 0.2).abs() < 1e-12);
    assert!((replayed.carbon_intensity.unwrap().value - 400.0).abs() < 1e-9);
}

#[test]
fn an_empty_report_says_zero_not_negative_zero() {
    let account = EnergyAccount::new(settings(false), Utc::now());
    let report = account.report(Utc::now());
    assert!(report.total.gpu_energy_kwh.is_sign_positive());
    assert!(report.total.cost.is_sign_positive());
    assert!(!report.to_table().contains("-0.0"), "{}", report.to_table());
}

#[test]
fn ended_scopes_keep_their_energy_and_leave_the_per_interval_work() {
    let start = Instant::now();
    let at = |s: f64| start + Duration::from_secs_f64(s);
    let mut account = EnergyAccount::new(settings(false), Utc::now());
    account.add_gpu_sample(Some(&sample(at(0.0), vec![device("GPU-a", 100.0, 1.0)])));
    // 1000 short scopes, each live for one second of a constant 100 W.
    let uuids: Vec<Uuid> = (0..1000).map(|_| Uuid::now_v7()).collect();
    for (i, uuid) in uuids.iter().enumerate() {
        let begin = i as f64 * 0.01;
        account.scope_started(*uuid, &format!("step-{i}"), at(begin), Utc::now());
        account.scope_ended(*uuid, at(begin + 1.0), Utc::now());
    }
    for second in 1..=20 {
        account.add_gpu_sample(Some(&sample(
            at(f64::from(second)),
            vec![device("GPU-a", 100.0, 1.0)],
        )));
    }
    let report = account.report(Utc::now());
    assert_eq!(report.agent_scopes.len(), 1000);
    assert_eq!(report.agent_scopes[0].name, "step-0");
    assert_eq!(report.agent_scopes[999].name, "step-999");
    for scope in &report.agent_scopes {
        let joules = scope.gpu_energy_kwh * 3_600_000.0;
        assert!((joules - 100.0).abs() < 1e-6, "{}: {joules} J", scope.name);
    }
}

//! Receipts proven against a simulated truth: random GPU power traces at 1 ms, read by
//! stand-ins for each kind of source (`support/power_simulation.rs`), random step
//! schedules on top, all through the real energy account. Per kind of source, the 95%
//! intervals of the steps' and the device's energy must hold the trace's own energy in
//! 95% to 99.5% of cases, be narrow where the sources allow it, and flag every step
//! shorter than its sources resolve.

#[path = "support/power_simulation.rs"]
mod power_simulation;

use chrono::Utc;
use power_simulation::{Case, SourceKind};
use wattline_config::energy::EnergySettings;
use wattline_energy::account::EnergyAccount;
use wattline_model::receipt::{EnergyReceipt, Resolution};
use wattline_model::report::JOULES_PER_KILOWATT_HOUR;

/// One figure checked against the truth.
#[derive(Debug, Clone, Copy)]
struct Checked {
    /// Whether the stand-in failed any reads in its case.
    dropouts: bool,
    /// The window's length, s.
    seconds: f64,
    truth_joules: f64,
    figure_joules: f64,
    receipt: EnergyReceipt,
}

impl Checked {
    fn contains(&self) -> bool {
        self.receipt
            .contains(self.truth_joules / JOULES_PER_KILOWATT_HOUR)
    }

    /// The interval's width as a share of the true energy.
    fn width(&self) -> f64 {
        (self.receipt.high_kwh - self.receipt.low_kwh) * JOULES_PER_KILOWATT_HOUR
            / self.truth_joules
    }
}

/// Runs `case` through a fresh account and checks each step's window and the device's
/// total against the trace.
fn run(case: &Case) -> Vec<Checked> {
    let epoch = Utc::now();
    let mut account = EnergyAccount::new(EnergySettings::default(), 0, epoch);
    for record in &case.records {
        account.apply(record);
    }
    let at = (case.last_read * 1e9).round() as u64;
    let report = account.report(at, epoch);
    let dropouts = case.sampling.dropouts > 0.0;
    let mut checked = Vec::new();
    for scope in &case.scopes {
        let found = report
            .agent_scopes
            .iter()
            .find(|step| step.uuid == scope.uuid)
            .expect("every step is in the report");
        let (Some(kwh), Some(receipt)) = (found.energy_kwh, found.receipt) else {
            panic!("a measured step has a figure and a receipt: {found:?}")
        };
        checked.push(Checked {
            dropouts,
            seconds: scope.end - scope.start,
            truth_joules: case.truth.energy(scope.start, scope.end),
            figure_joules: kwh * JOULES_PER_KILOWATT_HOUR,
            receipt,
        });
    }
    let device = &report.devices[0];
    checked.push(Checked {
        dropouts,
        seconds: -1.0,
        truth_joules: case.truth.energy(case.first_read, case.last_read),
        figure_joules: device.energy_kwh * JOULES_PER_KILOWATT_HOUR,
        receipt: device.receipt.expect("the device's figure has a receipt"),
    });
    checked
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Cases per kind of source: 10,000 over the four kinds.
const CASES_PER_KIND: u64 = 2_500;

#[test]
fn intervals_hold_the_true_energy_in_95_to_99_5_percent_of_cases_per_kind_of_source() {
    let epoch = Utc::now();
    let mut failures = Vec::new();
    for kind in SourceKind::ALL {
        let mut all = Vec::new();
        for seed in 0..CASES_PER_KIND {
            let case = Case::generate(seed * 7919 + kind as u64, kind, epoch);
            all.extend(run(&case));
        }
        let steps: Vec<&Checked> = all.iter().filter(|c| c.seconds >= 0.0).collect();
        let coverage = steps.iter().filter(|c| c.contains()).count() as f64 / steps.len() as f64;
        let devices: Vec<&Checked> = all.iter().filter(|c| c.seconds < 0.0).collect();
        let device_coverage =
            devices.iter().filter(|c| c.contains()).count() as f64 / devices.len() as f64;
        let band = |low: f64, high: f64| {
            median(
                steps
                    .iter()
                    .filter(|c| c.seconds >= low && c.seconds < high && !c.dropouts)
                    .map(|c| c.width())
                    .collect(),
            )
        };
        let (long, middle) = (band(2.0, f64::INFINITY), band(0.2, 2.0));
        // What the stand-in cannot resolve: a counter's update period and the time
        // between reads, 100 ms; an average's window, 1 s.
        let resolves = if kind == SourceKind::Averaged {
            1.0
        } else {
            0.1
        };
        let unflagged_short = steps
            .iter()
            .filter(|c| c.seconds < resolves && c.receipt.resolution == Resolution::Resolved)
            .count();
        let error = |c: &&Checked| (c.figure_joules - c.truth_joules) / c.truth_joules;
        eprintln!(
            "{:>15}: {} steps, {:.2}% of intervals hold the truth (the device's: {:.2}%); median width, steps ≥ 2 s {:.2}%, 0.2–2 s {:.2}%; median |error| {:.2}%; unflagged below the resolution {}",
            kind.name(),
            steps.len(),
            coverage * 100.0,
            device_coverage * 100.0,
            long * 100.0,
            middle * 100.0,
            median(steps.iter().map(|c| error(c).abs()).collect()) * 100.0,
            unflagged_short,
        );
        if !(0.95..=0.995).contains(&coverage) {
            failures.push(format!(
                "{}: steps' coverage {:.2}%",
                kind.name(),
                coverage * 100.0
            ));
        }
        if !(0.95..=0.995).contains(&device_coverage) {
            failures.push(format!(
                "{}: device coverage {:.2}%",
                kind.name(),
                device_coverage * 100.0
            ));
        }
        if unflagged_short > 0 {
            failures.push(format!(
                "{}: {unflagged_short} steps below {resolves} s not flagged",
                kind.name()
            ));
        }
        // Instant power read every 100 ms, without failed reads: narrow.
        if kind == SourceKind::Instant && !(long <= 0.03 && middle <= 0.10) {
            failures.push(format!(
                "instant power: median widths {:.2}% (≥ 2 s) and {:.2}% (0.2–2 s)",
                long * 100.0,
                middle * 100.0
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Two steps live over the same 4 s of a constant 200 W: each one's window is 800 J
/// and its attributed share half of it, 400 J. The attributed receipt is the window's
/// interval halved (a share by rule, not a measurement), and each holds its own figure.
#[test]
fn an_attributed_receipt_is_the_windows_interval_scaled_by_the_share() {
    use wattline_model::energy::{DevicePower, EnergyRecord, PowerRecord};
    use wattline_model::receipt::ReceiptMethod;
    let epoch = Utc::now();
    let mut account = EnergyAccount::new(EnergySettings::default(), 0, epoch);
    let nanos = |seconds: f64| (seconds * 1e9).round() as u64;
    let wall = |seconds: f64| epoch + chrono::Duration::nanoseconds(nanos(seconds) as i64);
    let uuids = [uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2)];
    for tenth in 0..=100u64 {
        let t = tenth as f64 / 10.0;
        if tenth == 20 {
            for (index, uuid) in uuids.iter().enumerate() {
                account.apply(&EnergyRecord::ScopeStarted {
                    uuid: *uuid,
                    name: format!("step {index}").into(),
                    at: nanos(t),
                    wall: wall(t),
                    parent: None,
                    process_id: None,
                    weight: None,
                    traceparent: None,
                });
            }
        }
        account.apply(&EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: nanos(t),
            devices: Some(vec![DevicePower {
                id: "GPU-a".into(),
                name: None,
                watts: Some(200.0),
                counter_millijoules: None,
                shares: None,
                mig_enabled: None,
                at: None,
                power_field: Some("NVML_FI_DEV_POWER_INSTANT".into()),
            }]),
            power_field: None,
        }));
        if tenth == 60 {
            for uuid in uuids {
                account.apply(&EnergyRecord::ScopeEnded {
                    uuid,
                    at: nanos(t),
                    wall: wall(t),
                    remote_call: None,
                });
            }
        }
    }
    let report = account.report(nanos(10.0), wall(10.0));
    for step in &report.agent_scopes {
        let (window, attributed) = (
            step.energy_kwh.unwrap(),
            step.attributed_energy_kwh.unwrap(),
        );
        let joules = |kwh: f64| kwh * JOULES_PER_KILOWATT_HOUR;
        assert!((joules(window) - 800.0).abs() < 1e-6, "{step:?}");
        assert!((joules(attributed) - 400.0).abs() < 1e-6, "{step:?}");
        let window_receipt = step.receipt.unwrap();
        let attributed_receipt = step.attributed_receipt.unwrap();
        assert!(window_receipt.contains(window) && attributed_receipt.contains(attributed));
        assert_eq!(window_receipt.method, ReceiptMethod::InstantPower);
        assert_eq!(attributed_receipt.method, ReceiptMethod::Attributed);
        assert!((attributed_receipt.low_kwh - window_receipt.low_kwh / 2.0).abs() < 1e-15);
        assert!((attributed_receipt.high_kwh - window_receipt.high_kwh / 2.0).abs() < 1e-15);
        // Steady power: narrow, yet not a point.
        assert!(window_receipt.high_kwh > window_receipt.low_kwh);
        assert!(window_receipt.relative_half_width(window).unwrap() < 0.01);
    }
}

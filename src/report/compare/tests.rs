//! Two runs built record by record (one GPU at a constant power, named steps at known
//! times), so every expected figure is power × time, worked out here.

use chrono::{DateTime, Utc};
use wattline_config::energy::EnergySettings;
use wattline_energy::account::EnergyAccount;
use wattline_model::energy::{DevicePower, EnergyRecord, Nanos, PowerRecord};

use super::*;

const SECONDS: Nanos = 1_000_000_000;
const JOULES_PER_KWH: f64 = 3_600_000.0;
const PRICE: f64 = 0.30;

/// A 10 s run of one GPU at `watts` (a reading each second), with steps `plan` (0–1 s)
/// and `step` twice (2–4 s, 5–7 s): never two at once, so each attributed figure is
/// `watts` × its duration.
fn run_at(watts: f64) -> EnergyReport {
    let epoch: DateTime<Utc> = "2026-12-02T10:00:00Z".parse().unwrap();
    let wall = |at: Nanos| epoch + chrono::Duration::nanoseconds(at as i64);
    let mut settings = EnergySettings::default();
    settings.config.cost_per_kwh = PRICE;
    let mut account = EnergyAccount::new(settings, 0, epoch);
    let mut records = vec![EnergyRecord::MeasuringFrom { at: 0, wall: epoch }];
    let steps = [("plan", 0, 1), ("step", 2, 4), ("step", 5, 7)];
    for (index, (name, start, _)) in steps.iter().enumerate() {
        records.push(EnergyRecord::ScopeStarted {
            uuid: uuid::Uuid::from_u128(index as u128 + 1),
            name: (*name).into(),
            at: start * SECONDS,
            wall: wall(start * SECONDS),
            parent: None,
            process_id: None,
            weight: None,
            traceparent: None,
        });
    }
    for second in 0..=10u64 {
        records.push(EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: second * SECONDS,
            devices: Some(vec![DevicePower {
                power_field: None,
                id: "GPU-a".into(),
                name: None,
                watts: Some(watts),
                counter_millijoules: None,
                shares: None,
                mig_enabled: None,
                at: None,
            }]),
            power_field: None,
        }));
        for (index, (_, _, end)) in steps.iter().enumerate() {
            if *end == second {
                records.push(EnergyRecord::ScopeEnded {
                    uuid: uuid::Uuid::from_u128(index as u128 + 1),
                    at: end * SECONDS,
                    wall: wall(end * SECONDS),
                    remote_call: None,
                });
            }
        }
    }
    records.sort_by_key(|record| match record {
        EnergyRecord::MeasuringFrom { at, .. }
        | EnergyRecord::ScopeStarted { at, .. }
        | EnergyRecord::ScopeEnded { at, .. } => *at,
        EnergyRecord::Power(power) => power.at,
        _ => 0,
    });
    for record in &records {
        account.apply(record);
    }
    let end = 10 * SECONDS;
    account.apply(&EnergyRecord::Report {
        at: end,
        wall: wall(end),
    });
    account.report(end, wall(end))
}

fn kwh(joules: f64) -> f64 {
    joules / JOULES_PER_KWH
}

fn row<'a>(comparison: &'a RunComparison, part: ComparedPart, name: &str) -> &'a ComparedRow {
    comparison
        .rows
        .iter()
        .find(|row| row.part == part && row.name == name)
        .unwrap_or_else(|| panic!("no {part:?} row {name}"))
}

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("a figure");
    assert!(
        (actual - expected).abs() <= expected.abs() * 1e-9 + 1e-15,
        "{actual} != {expected}"
    );
}

#[test]
fn each_part_is_matched_and_its_change_is_new_less_base() {
    let comparison = compare_reports(&run_at(100.0), &run_at(300.0), "base.json", "new.jsonl");

    let run = row(&comparison, ComparedPart::Run, "run");
    close(run.energy_kwh.base, kwh(100.0 * 10.0));
    close(run.energy_kwh.new, kwh(300.0 * 10.0));
    close(run.energy_kwh.change, kwh(200.0 * 10.0));
    close(run.energy_kwh.change_percent, 200.0);
    close(run.cost.base, kwh(1_000.0) * PRICE);
    close(run.duration_seconds.base, 10.0);
    close(run.duration_seconds.change_percent, 0.0);

    let device = row(&comparison, ComparedPart::Device, "GPU-a");
    close(device.energy_kwh.new, kwh(3_000.0));
    let gpu = row(&comparison, ComparedPart::Domain, "gpu");
    close(gpu.energy_kwh.base, kwh(1_000.0));

    // Two `step` scopes in each run, 2 s each: summed.
    let step = row(&comparison, ComparedPart::AgentScope, "step");
    assert_eq!((step.base_count, step.new_count), (2, 2));
    close(step.energy_kwh.base, kwh(100.0 * 4.0));
    close(step.energy_kwh.new, kwh(300.0 * 4.0));
    close(step.cost.new, kwh(1_200.0) * PRICE);
    close(step.duration_seconds.base, 4.0);
    // CO2 tracking is off: two unknown figures sum to an unknown one, never to 0.
    assert_eq!((step.co2_grams.base, step.co2_grams.new), (None, None));
    let plan = row(&comparison, ComparedPart::AgentScope, "plan");
    close(plan.energy_kwh.change_percent, 200.0);
    assert_eq!(comparison.rows.len(), 5, "{:#?}", comparison.rows);
}

#[test]
fn a_gate_names_what_grew_past_it_and_only_that() {
    let comparison = compare_reports(&run_at(100.0), &run_at(300.0), "a", "b");
    let grown = regressions(&comparison, 150.0);
    assert_eq!(grown.len(), 3, "{grown:?}");
    assert!(grown[0].starts_with("run: "), "{grown:?}");
    assert!(grown.iter().any(|line| line.starts_with("step step: ")));
    assert!(regressions(&comparison, 200.5).is_empty());
    // The other way round, everything shrank by two thirds.
    let shrunk = compare_reports(&run_at(300.0), &run_at(100.0), "b", "a");
    assert!(regressions(&shrunk, 0.0).is_empty());
    close(
        row(&shrunk, ComparedPart::Run, "run")
            .energy_kwh
            .change_percent,
        -200.0 / 3.0,
    );
}

#[test]
fn a_name_only_one_run_has_is_marked_and_not_gated() {
    let base = run_at(100.0);
    let mut new = run_at(100.0);
    for scope in &mut new.agent_scopes {
        if scope.name == "plan" {
            scope.name = "think".into();
        }
    }
    let comparison = compare_reports(&base, &new, "a", "b");
    let plan = row(&comparison, ComparedPart::AgentScope, "plan");
    assert_eq!((plan.base_count, plan.new_count), (1, 0));
    assert_eq!(plan.energy_kwh.new, None);
    let think = row(&comparison, ComparedPart::AgentScope, "think");
    assert_eq!((think.base_count, think.new_count), (0, 1));
    assert!(regressions(&comparison, 0.0).is_empty());
    let table = render_comparison_table(&comparison);
    assert!(table.contains("step plan [only in base]"), "{table}");
    assert!(table.contains("step think [only in new]"), "{table}");
}

#[test]
fn the_table_and_page_write_figures_in_units_for_people() {
    let comparison = compare_reports(&run_at(100.0), &run_at(300.0), "a", "b<&>");
    let table = render_comparison_table(&comparison);
    // 1000 J → 3000 J over the run; 400 J → 1200 J for the two steps.
    assert!(table.contains("1000 J → 3000 J (+200.0%)"), "{table}");
    assert!(table.contains("400 J → 1200 J (+200.0%)"), "{table}");
    assert!(table.contains("step step [×2 → ×2]"), "{table}");
    let page = render_comparison_html(&comparison);
    assert!(page.contains("b&lt;&amp;&gt;"), "escaped");
    assert!(page.contains("1000 J → 3000 J (+200.0%)"));
    assert!(!page.contains("<script"));
}

#[test]
fn runs_priced_in_different_currencies_say_so_and_runs_in_one_do_not() {
    let base = run_at(100.0);
    let mut new = run_at(100.0);
    let same = compare_reports(&base, &new, "a", "b");
    assert!(same.notes.is_empty(), "{:?}", same.notes);
    new.currency = "EUR".into();
    let differ = compare_reports(&base, &new, "a", "b");
    assert_eq!(
        differ.notes,
        ["the runs' currencies differ (USD and EUR): costs are not comparable"]
    );
    assert_eq!(differ.currency, "EUR", "the new run's");
}

#[test]
fn a_change_inside_both_intervals_is_within_error_and_does_not_trip_the_gate() {
    // 300 W against 301 W, read each second: the figures' intervals (a 1.2% floor of
    // power moving unseen between readings, ±0.47% over the ten seconds) overlap.
    let close_runs = compare_reports(&run_at(300.0), &run_at(301.0), "a", "b");
    let run = row(&close_runs, ComparedPart::Run, "run");
    assert_eq!(run.within_error, Some(true));
    assert!(regressions(&close_runs, 0.1).is_empty());
    assert!(render_comparison_table(&close_runs).contains("within error"));
    // 300 W against 330 W: 10% more, far outside both intervals.
    let apart = compare_reports(&run_at(300.0), &run_at(330.0), "a", "b");
    assert_eq!(
        row(&apart, ComparedPart::Run, "run").within_error,
        Some(false)
    );
    assert!(!regressions(&apart, 5.0).is_empty());
}

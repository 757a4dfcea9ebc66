//! Agent scopes' attributed energy: concurrent scopes divide what they share, weights
//! and process shares divide it unevenly, a parent includes its children, and on any
//! schedule the scopes' parts plus what no scope held add up to the total, per domain.
//!
//! The expected figures come from the power traces (flat watts × seconds, split by
//! hand); the invariant is checked on random schedules.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use uuid::Uuid;
use wattline_config::energy::EnergySettings;
use wattline_energy::account::EnergyAccount;
use wattline_energy::integrator::JOULES_PER_KILOWATT_HOUR;
use wattline_model::energy::RaplZoneReading;
use wattline_model::energy::{
    DevicePower, EnergyRecord, Nanos, PowerRecord, ProcessShares, ShareBasis,
};
use wattline_model::report::{Distribution, EnergyDomain, EnergyReport, ScopeEnergy};
use wattline_model::scope_energy::SettledScope;

const HOST: u32 = 100;
const REMOTE: u32 = 200;

fn at(seconds: f64) -> Nanos {
    (seconds * 1e9).round() as Nanos
}

fn wall(nanos: Nanos) -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::nanoseconds(nanos as i64)
}

fn joules(kwh: f64) -> f64 {
    kwh * JOULES_PER_KILOWATT_HOUR
}

/// One scope of a schedule.
#[derive(Debug, Clone)]
struct Step {
    uuid: Uuid,
    parent: Option<Uuid>,
    start: Nanos,
    end: Option<Nanos>,
    process_id: Option<u32>,
    weight: Option<f64>,
}

impl Step {
    fn new(n: u128, start: f64, end: f64) -> Self {
        Step {
            uuid: Uuid::from_u128(n),
            parent: None,
            start: at(start),
            end: Some(at(end)),
            process_id: Some(HOST),
            weight: None,
        }
    }
}

/// A reading of device `GPU-a` at `watts`, with process shares when given.
fn gpu(nanos: Nanos, watts: Option<f64>, shares: Option<&[(u32, f64)]>) -> EnergyRecord {
    EnergyRecord::Power(PowerRecord {
        source: "nvml".into(),
        at: nanos,
        devices: watts.map(|watts| {
            vec![DevicePower {
                power_field: None,
                id: "GPU-a".into(),
                name: None,
                watts: Some(watts),
                counter_millijoules: None,
                shares: shares.map(|shares| ProcessShares {
                    basis: Some(ShareBasis::Utilization),
                    processes: shares.iter().copied().collect(),
                }),
                mig_enabled: None,
                at: None,
            }]
        }),
        power_field: None,
    })
}

fn rapl(nanos: Nanos, microjoules: u64) -> EnergyRecord {
    EnergyRecord::Rapl {
        at: nanos,
        zones: vec![RaplZoneReading {
            zone: "intel-rapl:0".into(),
            name: "package-0".into(),
            energy_microjoules: microjoules,
            max_energy_range_microjoules: None,
        }],
    }
}

/// The scope records of `steps`, each at its instant, merged in time order with
/// `readings` (scope boundaries first at a tie, as the pipeline sends them before the
/// boundary reading).
fn schedule(steps: &[Step], readings: Vec<EnergyRecord>) -> Vec<EnergyRecord> {
    let mut timed: Vec<(Nanos, u8, EnergyRecord)> = Vec::new();
    for step in steps {
        timed.push((
            step.start,
            0,
            EnergyRecord::ScopeStarted {
                uuid: step.uuid,
                // Two names, as steps of a few kinds repeat.
                name: format!("step-{}", step.uuid.as_u128() % 2).into(),
                at: step.start,
                wall: wall(step.start),
                parent: step.parent,
                process_id: step.process_id,
                weight: step.weight,
                traceparent: None,
            },
        ));
        if let Some(end) = step.end {
            timed.push((
                end,
                0,
                EnergyRecord::ScopeEnded {
                    uuid: step.uuid,
                    at: end,
                    wall: wall(end),
                    remote_call: None,
                },
            ));
        }
    }
    for reading in readings {
        let instant = reading.at().unwrap_or(0);
        timed.push((instant, 1, reading));
    }
    timed.sort_by_key(|(instant, order, _)| (*instant, *order));
    timed.into_iter().map(|(_, _, record)| record).collect()
}

fn report(records: &[EnergyRecord], report_at: Nanos) -> EnergyReport {
    report_keeping(
        records,
        report_at,
        EnergySettings::default().config.scopes_in_detail,
    )
}

fn report_keeping(records: &[EnergyRecord], report_at: Nanos, in_detail: usize) -> EnergyReport {
    let mut settings = EnergySettings::default();
    settings.config.scopes_in_detail = in_detail;
    let mut account = EnergyAccount::new(settings, 0, wall(0));
    for record in records {
        account.apply(record);
    }
    account.report(report_at, wall(report_at))
}

fn scope(report: &EnergyReport, n: u128) -> &ScopeEnergy {
    let uuid = Uuid::from_u128(n);
    report
        .agent_scopes
        .iter()
        .find(|scope| scope.uuid == uuid)
        .unwrap()
}

fn attributed_gpu_joules(report: &EnergyReport, n: u128) -> f64 {
    joules(scope(report, n).attributed_gpu_energy_kwh.unwrap())
}

/// 100 W flat from 0 to `seconds`, read every half second.
fn flat_gpu(seconds: f64, shares: Option<&[(u32, f64)]>) -> Vec<EnergyRecord> {
    (0..=(seconds * 2.0) as u32)
        .map(|half| gpu(at(f64::from(half) / 2.0), Some(100.0), shares))
        .collect()
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{actual} != {expected}"
    );
}

#[test]
fn four_concurrent_steps_split_what_they_share_and_a_solo_step_keeps_its_own() {
    // 100 W for 3 s = 300 J. Steps 1–4 run together 0–2 s (200 J among four), step 5
    // alone 2–3 s (100 J). Windows: 4 × 200 + 100 = 900 J, three times the total.
    let mut steps: Vec<Step> = (1..=4).map(|n| Step::new(n, 0.0, 2.0)).collect();
    steps.push(Step::new(5, 2.0, 3.0));
    let report = report(&schedule(&steps, flat_gpu(3.0, None)), at(3.0));
    for n in 1..=4 {
        assert_close(joules(scope(&report, n).gpu_energy_kwh.unwrap()), 200.0);
        assert_close(attributed_gpu_joules(&report, n), 50.0);
    }
    assert_close(attributed_gpu_joules(&report, 5), 100.0);
    let gpu = &report.domains[0];
    assert_eq!(gpu.domain, EnergyDomain::Gpu);
    assert_close(joules(gpu.energy_kwh), 300.0);
    assert_close(joules(gpu.unattributed_kwh), 0.0);
    assert_eq!(
        report.scope_attribution.as_deref(),
        Some("process-share-then-weight")
    );
    // Cost follows the attributed energy.
    let first = scope(&report, 1);
    assert_close(
        first.attributed_cost.unwrap(),
        first.attributed_energy_kwh.unwrap() * report.cost_per_kwh.value,
    );
}

#[test]
fn weights_divide_in_proportion_and_time_no_scope_held_is_unattributed() {
    // 0–1 s nothing live (100 J unattributed); 1–3 s weights 3 and 1 share 200 J.
    let mut heavy = Step::new(1, 1.0, 3.0);
    heavy.weight = Some(3.0);
    let light = Step::new(2, 1.0, 3.0);
    let report = report(&schedule(&[heavy, light], flat_gpu(3.0, None)), at(3.0));
    assert_close(attributed_gpu_joules(&report, 1), 150.0);
    assert_close(attributed_gpu_joules(&report, 2), 50.0);
    assert_close(joules(report.domains[0].unattributed_kwh), 100.0);
    assert_eq!(scope(&report, 1).weight, Some(3.0));
}

#[test]
fn a_parent_includes_its_children_and_only_innermost_steps_divide() {
    // Parent 0–3 s with child A 0.5–2.5 s and child B 1–2 s: A and B share 1–2 s
    // (50 J each); A alone 0.5–1 and 2–2.5 (100 J); the parent alone 0–0.5, 2.5–3.
    let parent = Step::new(1, 0.0, 3.0);
    let mut a = Step::new(2, 0.5, 2.5);
    a.parent = Some(parent.uuid);
    let mut b = Step::new(3, 1.0, 2.0);
    b.parent = Some(parent.uuid);
    let report = report(&schedule(&[parent, a, b], flat_gpu(3.0, None)), at(3.0));
    assert_close(attributed_gpu_joules(&report, 2), 150.0);
    assert_close(attributed_gpu_joules(&report, 3), 50.0);
    assert_close(attributed_gpu_joules(&report, 1), 300.0);
    assert_eq!(scope(&report, 2).parent_uuid, Some(Uuid::from_u128(1)));
}

#[test]
fn a_child_that_outlives_its_parent_keeps_receiving_and_the_parent_does_not() {
    // Parent 0–1 s, child 0.5–2 s (an unawaited task), 100 W read at 0 and 2 s only
    // (one interval holds every boundary): the parent alone 0–0.5 (50 J); the child
    // innermost 0.5–1 (50 J, counted in the parent too); the child alone 1–2 (100 J),
    // which the ended parent does not count.
    let parent = Step::new(1, 0.0, 1.0);
    let mut child = Step::new(2, 0.5, 2.0);
    child.parent = Some(parent.uuid);
    let readings = vec![
        gpu(at(0.0), Some(100.0), None),
        gpu(at(2.0), Some(100.0), None),
    ];
    let report = report(&schedule(&[parent, child], readings), at(2.0));
    assert_close(attributed_gpu_joules(&report, 1), 100.0);
    assert_close(attributed_gpu_joules(&report, 2), 150.0);
    assert_close(joules(report.domains[0].unattributed_kwh), 0.0);
}

#[test]
fn process_shares_go_to_that_process_scopes_and_the_rest_is_unattributed() {
    // The host holds 60% of the device, the remote worker 30%, 10% idle. Two host
    // steps and one remote step live 0–2 s: 200 J → 60 + 60, 60, 20 unattributed.
    let mut remote = Step::new(3, 0.0, 2.0);
    remote.process_id = Some(REMOTE);
    let steps = [Step::new(1, 0.0, 2.0), Step::new(2, 0.0, 2.0), remote];
    let shares: &[(u32, f64)] = &[(HOST, 0.6), (REMOTE, 0.3)];
    let report = report(&schedule(&steps, flat_gpu(2.0, Some(shares))), at(2.0));
    assert_close(attributed_gpu_joules(&report, 1), 60.0);
    assert_close(attributed_gpu_joules(&report, 2), 60.0);
    assert_close(attributed_gpu_joules(&report, 3), 60.0);
    assert_close(joules(report.domains[0].unattributed_kwh), 20.0);
}

#[test]
fn a_reading_that_names_no_process_divides_as_if_none_were_read() {
    // The driver named no process (idle, or processes out of its sight): the host
    // step (weight 1) and the remote one (weight 3), both live 0–2 s, share 200 J
    // 1:3, exactly as with no shares read; the device's processes hold none of it.
    let mut remote = Step::new(2, 0.0, 2.0);
    remote.process_id = Some(REMOTE);
    remote.weight = Some(3.0);
    let steps = [Step::new(1, 0.0, 2.0), remote];
    let named_none = report(&schedule(&steps, flat_gpu(2.0, Some(&[]))), at(2.0));
    assert_close(attributed_gpu_joules(&named_none, 1), 50.0);
    assert_close(attributed_gpu_joules(&named_none, 2), 150.0);
    assert_close(joules(named_none.domains[0].unattributed_kwh), 0.0);
    assert!(
        named_none.processes.is_empty(),
        "{:?}",
        named_none.processes
    );
    assert_close(joules(named_none.devices[0].attributed_kwh), 0.0);
    assert_close(joules(named_none.devices[0].unattributed_kwh), 200.0);
    let none_read = report(&schedule(&steps, flat_gpu(2.0, None)), at(2.0));
    assert_eq!(named_none.agent_scopes, none_read.agent_scopes);
    // One process named, even one with no step, and the rest is unattributed.
    let other = report(
        &schedule(&steps, flat_gpu(2.0, Some(&[(99, 0.25)]))),
        at(2.0),
    );
    assert_close(attributed_gpu_joules(&other, 1), 0.0);
    assert_close(joules(other.domains[0].unattributed_kwh), 200.0);
}

#[test]
fn a_report_before_the_newest_reading_leaves_out_what_lies_after_it() {
    // Readings at 0 and 4 s (100 W); report as of 2 s: 200 J, of which the step
    // (1–3 s) holds 1–2 s.
    let steps = [Step::new(1, 1.0, 3.0)];
    let readings = vec![
        gpu(at(0.0), Some(100.0), None),
        gpu(at(4.0), Some(100.0), None),
    ];
    let report = report(&schedule(&steps, readings), at(2.0));
    assert_close(joules(report.domains[0].energy_kwh), 200.0);
    assert_close(attributed_gpu_joules(&report, 1), 100.0);
    assert_close(joules(report.domains[0].unattributed_kwh), 100.0);
}

#[test]
fn finished_scopes_past_those_kept_in_detail_fold_into_per_name_aggregates() {
    // 60 steps of 0.2 s, back to back, alternating two names, at 100 W read every
    // 0.1 s; the newest 10 finished stay in detail.
    let steps: Vec<Step> = (0..60)
        .map(|n| {
            Step::new(
                n + 1,
                f64::from(n as u32) * 0.2,
                f64::from(n as u32 + 1) * 0.2,
            )
        })
        .map(|mut step| {
            if step.uuid.as_u128() % 2 == 0 {
                step.weight = Some(2.0);
            }
            step
        })
        .collect();
    let readings: Vec<EnergyRecord> = (0..=125)
        .map(|tenth| gpu(at(f64::from(tenth) / 10.0), Some(100.0), None))
        .collect();
    let records = schedule(&steps, readings);
    let detailed = report_keeping(&records, at(12.5), 1_000);
    let folded = report_keeping(&records, at(12.5), 10);
    assert_eq!(detailed.agent_scopes.len(), 60);
    assert!(detailed.folded_scopes.is_empty());
    assert_eq!(folded.agent_scopes.len(), 10);
    // The newest are kept: the last 10 steps.
    let kept: Vec<u128> = folded
        .agent_scopes
        .iter()
        .map(|scope| scope.uuid.as_u128())
        .collect();
    assert_eq!(kept, (51..=60).collect::<Vec<_>>());
    // Each folded name's count and attributed sum are those of its steps in detail.
    let total: u64 = folded.folded_scopes.iter().map(|f| f.count).sum();
    assert_eq!(total, 50);
    for aggregate in &folded.folded_scopes {
        let members: Vec<&ScopeEnergy> = detailed
            .agent_scopes
            .iter()
            .filter(|scope| !kept.contains(&scope.uuid.as_u128()))
            .filter(|scope| scope.name == aggregate.name)
            .collect();
        assert_eq!(aggregate.count, members.len() as u64);
        let sum: f64 = members
            .iter()
            .map(|s| s.attributed_energy_kwh.unwrap())
            .sum();
        assert_close(aggregate.attributed_energy_kwh.sum, sum);
        // Alone at 100 W for 0.2 s each: 20 J, whatever the weight.
        assert_eq!(aggregate.count, 25);
        // Quantiles within 1% (the sketch's bound).
        let p50 = joules(aggregate.attributed_energy_kwh.p50);
        assert!((p50 - 20.0).abs() <= 0.01 * 20.0, "{p50}");
        assert!((aggregate.duration_seconds.p99 - 0.2).abs() <= 0.01 * 0.2);
    }
    // The totals do not depend on what was folded.
    assert_eq!(detailed.domains, folded.domains);
}

/// The exact summary of `values` as a folded aggregate states it: sum, min, max, and
/// the values of nearest rank `q × (n − 1)` for p50, p95 and p99.
fn exact_distribution(mut values: Vec<f64>) -> Distribution {
    values.sort_by(f64::total_cmp);
    let rank = |q: f64| values[(q * (values.len() - 1) as f64).round() as usize];
    Distribution {
        sum: values.iter().sum(),
        min: values[0],
        max: values[values.len() - 1],
        p50: rank(0.50),
        p95: rank(0.95),
        p99: rank(0.99),
    }
}

/// Count, sum, min and max to rounding; the quantiles within the sketch's stated 1%.
fn assert_distribution(what: &str, folded: &Distribution, exact: &Distribution) {
    let to_rounding = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    let to_one_percent = |a: f64, b: f64| (a - b).abs() <= 0.01 * b.abs();
    assert!(
        to_rounding(folded.sum, exact.sum)
            && to_rounding(folded.min, exact.min)
            && to_rounding(folded.max, exact.max)
            && to_one_percent(folded.p50, exact.p50)
            && to_one_percent(folded.p95, exact.p95)
            && to_one_percent(folded.p99, exact.p99),
        "{what}: folded {folded:?}, the schedule's {exact:?}"
    );
}

#[test]
fn folded_steps_of_unequal_overlapping_energy_summarise_their_attributed_parts() {
    // 103 pairs of steps at 100 W, pair k starting together at 2k s: `step-0` of
    // weight 3 for 0.2 + 0.015k s and `step-1` of weight 1 for 1.9 − 0.016k s, so each
    // has its own energy and, sharing 3 : 1 the time both are live, an attributed part
    // below its window. A reading at every end (as the pipeline takes one) retires
    // the steps in the order they end; the newest 4 (the last two pairs) stay in
    // detail, the other 101 of each name fold.
    const PAIRS: u32 = 103;
    const WATTS: f64 = 100.0;
    let mut steps = Vec::new();
    for k in 0..PAIRS {
        let start = 2.0 * f64::from(k);
        let mut heavy = Step::new(
            2 * u128::from(k) + 2,
            start,
            start + 0.2 + 0.015 * f64::from(k),
        );
        heavy.weight = Some(3.0);
        let light = Step::new(
            2 * u128::from(k) + 3,
            start,
            start + 1.9 - 0.016 * f64::from(k),
        );
        steps.extend([heavy, light]);
    }
    let mut readings: Vec<EnergyRecord> = (0..=PAIRS * 20)
        .map(|tenth| gpu(at(f64::from(tenth) / 10.0), Some(WATTS), None))
        .collect();
    readings.extend(
        steps
            .iter()
            .map(|step| gpu(step.end.unwrap(), Some(WATTS), None)),
    );
    let records = schedule(&steps, readings);
    let report = report_keeping(&records, at(2.0 * f64::from(PAIRS)), 4);

    let kept: Vec<u128> = report
        .agent_scopes
        .iter()
        .map(|s| s.uuid.as_u128())
        .collect();
    let last_two_pairs = 2 * u128::from(PAIRS - 2) + 2..=2 * u128::from(PAIRS) + 1;
    assert_eq!(kept.len(), 4, "{kept:?}");
    assert!(kept.iter().all(|n| last_two_pairs.contains(n)), "{kept:?}");
    // The closed form of every folded step, from the schedule: a pair shares the
    // shorter one's time 3 : 1, and the longer one keeps the rest.
    let seconds = |step: &Step| (step.end.unwrap() - step.start) as f64 / 1e9;
    let mut attributed_kwh: [Vec<f64>; 2] = Default::default();
    let mut durations: [Vec<f64>; 2] = Default::default();
    for pair in steps[..steps.len() - 4].chunks(2) {
        let (heavy, light) = (seconds(&pair[0]), seconds(&pair[1]));
        let shared = heavy.min(light);
        let parts = [
            shared * 0.75 + (heavy - shared),
            shared * 0.25 + (light - shared),
        ];
        for (name, (part, duration)) in parts.into_iter().zip([heavy, light]).enumerate() {
            attributed_kwh[name].push(WATTS * part / JOULES_PER_KILOWATT_HOUR);
            durations[name].push(duration);
        }
    }
    let names: Vec<&str> = report
        .folded_scopes
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(names, ["step-0", "step-1"]);
    for (name, folded) in report.folded_scopes.iter().enumerate() {
        assert_eq!(folded.count, 101, "{}", folded.name);
        assert_distribution(
            &format!("{} attributed energy", folded.name),
            &folded.attributed_energy_kwh,
            &exact_distribution(attributed_kwh[name].clone()),
        );
        assert_distribution(
            &format!("{} duration", folded.name),
            &folded.duration_seconds,
            &exact_distribution(durations[name].clone()),
        );
    }
}

#[test]
fn without_a_gpu_reading_the_attributed_gpu_figure_is_null_not_zero() {
    // RAPL only: 1 J per second over 0–2 s, one step holding 1–2 s.
    let readings = (0..=2u64)
        .map(|s| rapl(at(s as f64), s * 1_000_000))
        .collect();
    let report = report(&schedule(&[Step::new(1, 1.0, 2.0)], readings), at(2.0));
    let step = scope(&report, 1);
    assert_eq!(step.gpu_energy_kwh, None);
    assert_eq!(step.attributed_gpu_energy_kwh, None);
    assert_close(joules(step.attributed_energy_kwh.unwrap()), 1.0);
    let package = &report.domains[0];
    assert_eq!(package.domain, EnergyDomain::CpuPackage);
    assert_close(joules(package.unattributed_kwh), 1.0);
}

/// Feeds `records` to an account that announces settled scopes, taking what settled
/// after each record: (index of the record after which it settled, the figures).
fn settling(records: &[EnergyRecord]) -> (EnergyAccount, Vec<(usize, SettledScope)>) {
    let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall(0));
    account.announce_settled_scopes();
    let mut settled = Vec::new();
    for (index, record) in records.iter().enumerate() {
        account.apply(record);
        settled.extend(
            account
                .take_settled_scopes()
                .into_iter()
                .map(|s| (index, s)),
        );
    }
    (account, settled)
}

#[test]
fn a_step_settles_once_the_first_reading_past_its_end_arrives_with_its_final_figures() {
    // 100 W read at 0, 1, 2, 3, 4 s. Steps 1 and 2 share 0.5–2.5 s (200 J window each,
    // 100 J attributed each); step 3 runs 2.5–3.5 s alone (100 J both ways).
    let steps = [
        Step::new(1, 0.5, 2.5),
        Step::new(2, 0.5, 2.5),
        Step::new(3, 2.5, 3.5),
    ];
    let readings: Vec<EnergyRecord> = (0..=4)
        .map(|s| gpu(at(f64::from(s)), Some(100.0), None))
        .collect();
    let records = schedule(&steps, readings);
    let (_, settled) = settling(&records);
    let by_uuid = |n: u128| {
        settled
            .iter()
            .find(|(_, s)| s.energy.uuid == Uuid::from_u128(n))
            .unwrap()
    };
    let reading_at = |seconds: f64| {
        records
            .iter()
            .position(|r| matches!(r, EnergyRecord::Power(p) if p.at == at(seconds)))
            .unwrap()
    };
    for (n, window, attributed, settles_at) in [
        (1, 200.0, 100.0, 3.0),
        (2, 200.0, 100.0, 3.0),
        (3, 100.0, 100.0, 4.0),
    ] {
        let (index, scope) = by_uuid(n);
        // Not before the reading that passes its end: before it an interval could
        // still reach back into the step.
        assert_eq!(*index, reading_at(settles_at), "step {n}");
        assert_close(joules(scope.energy.gpu_energy_kwh.unwrap()), window);
        assert_close(
            joules(scope.energy.attributed_gpu_energy_kwh.unwrap()),
            attributed,
        );
        assert_eq!(scope.attribution, "process-share-then-weight");
        assert_eq!(scope.meters, ["GPU-a"]);
        assert_eq!(
            scope.coverage,
            Some(1.0),
            "readings surround the whole step"
        );
        assert_eq!(
            scope.duration_seconds(),
            Some(if n == 3 { 1.0 } else { 2.0 })
        );
    }
    assert_eq!(settled.len(), 3, "each step is announced once");
}

#[test]
fn a_gap_inside_a_step_lowers_its_coverage() {
    // Readings at 0, 1, 3 and 4 s and a failed one at 2 s: no interval spans 1–3 s.
    // The step 0.5–3.5 s is covered 0.5–1 and 3–3.5 s: 1 s of its 3 s.
    let steps = [Step::new(1, 0.5, 3.5)];
    let readings = vec![
        gpu(at(0.0), Some(100.0), None),
        gpu(at(1.0), Some(100.0), None),
        gpu(at(2.0), None, None),
        gpu(at(3.0), Some(100.0), None),
        gpu(at(4.0), Some(100.0), None),
    ];
    let (_, settled) = settling(&schedule(&steps, readings));
    assert_eq!(settled.len(), 1);
    let coverage = settled[0].1.coverage.unwrap();
    assert!((coverage - 1.0 / 3.0).abs() < 1e-12, "{coverage}");
}

/// A reading of two GPUs at `nanos`, each at 100 W or failed (`None`).
fn two_gpus(nanos: Nanos, a: Option<f64>, b: Option<f64>) -> EnergyRecord {
    let device = |id: &str, watts: Option<f64>| DevicePower {
        power_field: None,
        id: id.into(),
        name: None,
        watts,
        counter_millijoules: None,
        shares: None,
        mig_enabled: None,
        at: None,
    };
    EnergyRecord::Power(PowerRecord {
        source: "nvml".into(),
        at: nanos,
        devices: Some(vec![device("GPU-a", a), device("GPU-b", b)]),
        power_field: None,
    })
}

#[test]
fn a_step_is_as_covered_as_its_worst_covered_meter() {
    // GPU-a is read every second; GPU-b fails at 2 s, so it has no interval in 1–3 s.
    // The step 0.5–3.5 s: GPU-a covers all 3 s of it, GPU-b 1 s.
    let steps = [Step::new(1, 0.5, 3.5)];
    let readings = (0..=4)
        .map(|s| {
            let b = (s != 2).then_some(100.0);
            two_gpus(at(f64::from(s)), Some(100.0), b)
        })
        .collect();
    let (_, settled) = settling(&schedule(&steps, readings));
    assert_eq!(settled.len(), 1);
    let coverage = settled[0].1.coverage.unwrap();
    assert!((coverage - 1.0 / 3.0).abs() < 1e-12, "{coverage}");
    assert_eq!(settled[0].1.meters, ["GPU-a", "GPU-b"]);
}

#[test]
fn the_final_report_settles_what_is_left_with_its_own_figures_and_nothing_twice() {
    // Step 1 (0.5–1.5 s) settles at the 2 s reading; step 2 ends at 2.5 s with no
    // reading after it: the final report at 2.5 s settles it with what it holds
    // (2–2.5 s taken from the interval 2–3 s once that reading arrived: none yet).
    let steps = [Step::new(1, 0.5, 1.5), Step::new(2, 1.0, 2.5)];
    let readings: Vec<EnergyRecord> = (0..=2)
        .map(|s| gpu(at(f64::from(s)), Some(100.0), None))
        .collect();
    let (mut account, mut settled) = settling(&schedule(&steps, readings));
    assert_eq!(settled.len(), 1);
    let final_report = account.report(at(2.5), wall(at(2.5)));
    account.settle_remaining_scopes(&final_report);
    settled.extend(account.take_settled_scopes().into_iter().map(|s| (0, s)));
    assert_eq!(settled.len(), 2);
    let last = &settled[1].1;
    assert_eq!(last.energy, *scope(&final_report, 2));
    // A later reading retires step 2 but does not announce it again.
    account.apply(&gpu(at(3.0), Some(100.0), None));
    assert!(account.take_settled_scopes().is_empty());
}

#[test]
fn a_replayed_account_keeps_no_settled_scopes_unless_asked() {
    let steps = [Step::new(1, 0.5, 1.5)];
    let readings: Vec<EnergyRecord> = (0..=2)
        .map(|s| gpu(at(f64::from(s)), Some(100.0), None))
        .collect();
    let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall(0));
    for record in schedule(&steps, readings) {
        account.apply(&record);
    }
    assert!(account.take_settled_scopes().is_empty());
}

/// A random schedule: readings (GPU power with gaps and shares, a RAPL counter), a
/// window start, scopes (top-level, nested inside a live parent, remote, weighted,
/// still live) and a report instant, possibly before the newest reading.
#[derive(Debug, Clone)]
struct Case {
    records: Vec<EnergyRecord>,
    report_at: Nanos,
}

fn case() -> impl Strategy<Value = Case> {
    let reading = (
        1u64..1_500,                             // ms since the previous reading
        prop::option::weighted(0.9, 0.0..700.0), // watts, or a failed read
        // Host and remote shares, none read, or a reading that names no process.
        prop_oneof![
            Just(None),
            Just(Some(Vec::new())),
            (0.0..0.6, 0.0..0.4)
                .prop_map(|(host, remote)| Some(vec![(HOST, host), (REMOTE, remote)])),
        ],
        0u64..2_000_000, // RAPL µJ since the previous one
    );
    let scope = (
        0.0..1.0f64,                           // start, as a fraction of the run
        0.0..1.2f64,                           // length, as a fraction of the run
        prop::option::weighted(0.8, Just(())), // ends (else still live)
        prop::option::weighted(0.4, any::<prop::sample::Index>()), // nests in
        prop_oneof![Just(Some(HOST)), Just(Some(REMOTE)), Just(None)],
        prop::option::of(0.25..8.0f64),
    );
    (
        prop::collection::vec(reading, 2..24),
        prop::collection::vec(scope, 0..10),
        0.0..0.5f64,
        0.5..1.0f64,
    )
        .prop_map(|(readings, scopes, from, report)| {
            let mut now = 0;
            let mut micro = 0;
            let mut records = Vec::new();
            for (step_ms, watts, shares, rapl_step) in readings {
                now += step_ms * 1_000_000;
                micro += rapl_step;
                records.push(gpu(now, watts, shares.as_deref()));
                records.push(rapl(now, micro));
            }
            let run = now as f64;
            let mut steps: Vec<Step> = Vec::new();
            for (n, (start, length, ends, nests, process_id, weight)) in
                scopes.into_iter().enumerate()
            {
                let mut step = Step {
                    uuid: Uuid::from_u128(n as u128 + 1),
                    parent: None,
                    start: (start * run) as Nanos,
                    end: ends.map(|()| ((start + length) * run) as Nanos),
                    process_id,
                    weight,
                };
                // A child lies inside its parent's window, as a `with` block's does.
                if let Some(index) = nests.filter(|_| !steps.is_empty()) {
                    let parent = &steps[index.index(steps.len())];
                    step.parent = Some(parent.uuid);
                    step.start = step.start.max(parent.start);
                    if let Some(parent_end) = parent.end {
                        step.start = step.start.min(parent_end);
                        step.end =
                            Some(step.end.unwrap_or(parent_end).clamp(step.start, parent_end));
                    }
                    step.end = step.end.map(|end| end.max(step.start));
                }
                steps.push(step);
            }
            let mut records = schedule(&steps, records);
            let from = (from * run) as Nanos;
            let position = records
                .iter()
                .position(|record| record.at().is_some_and(|instant| instant > from))
                .unwrap_or(records.len());
            records.insert(
                position,
                EnergyRecord::MeasuringFrom {
                    at: from,
                    wall: wall(from),
                },
            );
            Case {
                records,
                report_at: (report * run) as Nanos,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Σ attributed (top-level scopes: a parent already includes its children) plus
    /// unattributed equals the total, per domain and over all of them, to 1e-9.
    #[test]
    fn attributed_and_unattributed_add_up_to_the_total_on_any_schedule(case in case()) {
        let report = report(&case.records, case.report_at);
        let top_level = || report.agent_scopes.iter().filter(|scope| scope.parent_uuid.is_none());
        // 1e-9 relative; the floor (3.6 µJ) covers the float residue left where a report
        // takes back all of an interval it had booked.
        let tolerance = |total: f64| 1e-9 * total.abs() + 1e-15;
        let domains: BTreeMap<EnergyDomain, (f64, f64)> = report
            .domains
            .iter()
            .map(|d| (d.domain, (d.energy_kwh, d.unattributed_kwh)))
            .collect();
        if let Some((total, unattributed)) = domains.get(&EnergyDomain::Gpu) {
            let attributed: f64 = top_level()
                .map(|scope| scope.attributed_gpu_energy_kwh.unwrap())
                .sum();
            prop_assert!(
                (attributed + unattributed - total).abs() <= tolerance(*total),
                "gpu: {attributed} + {unattributed} != {total}"
            );
        }
        for (domain, (total, unattributed)) in &domains {
            // Never more handed out than there was.
            prop_assert!(*unattributed >= -tolerance(*total), "{domain:?}: {unattributed} < 0");
        }
        let total: f64 = domains.values().map(|(total, _)| total).sum();
        let unattributed: f64 = domains.values().map(|(_, unattributed)| unattributed).sum();
        let attributed: f64 = top_level()
            .filter_map(|scope| scope.attributed_energy_kwh)
            .sum();
        prop_assert!(
            (attributed + unattributed - total).abs() <= tolerance(total),
            "all: {attributed} + {unattributed} != {total}"
        );
        for scope in &report.agent_scopes {
            let (Some(window), Some(attributed)) = (scope.energy_kwh, scope.attributed_energy_kwh) else {
                continue;
            };
            // A part of what the device used while the scope was live, never more.
            prop_assert!(attributed >= -tolerance(total), "{attributed} < 0");
            prop_assert!(attributed <= window + tolerance(total), "{attributed} > window {window}");
        }
    }
}

#[test]
fn a_package_sub_zone_is_no_domain_or_meter_of_a_settled_scope_or_the_report() {
    // Package 10 W and its core sub-zone 4 W, read every second over 0–3 s; one step
    // holds 1–2 s. The sub-zone is inside the package: it counts for nothing.
    let zones = |s: u64| EnergyRecord::Rapl {
        at: at(s as f64),
        zones: vec![
            RaplZoneReading {
                zone: "intel-rapl:0".into(),
                name: "package-0".into(),
                energy_microjoules: s * 10_000_000,
                max_energy_range_microjoules: None,
            },
            RaplZoneReading {
                zone: "intel-rapl:0:0".into(),
                name: "core".into(),
                energy_microjoules: s * 4_000_000,
                max_energy_range_microjoules: None,
            },
        ],
    };
    let records = schedule(&[Step::new(1, 1.0, 2.0)], (0..=3).map(zones).collect());
    let (_, settled) = settling(&records);
    let [(_, step)] = &settled[..] else {
        panic!("one step settles: {settled:?}");
    };
    assert_eq!(
        step.methods.keys().copied().collect::<Vec<_>>(),
        [EnergyDomain::CpuPackage]
    );
    assert_eq!(step.meters, ["intel-rapl:0"]);
    assert_close(joules(step.energy.attributed_energy_kwh.unwrap()), 10.0);
    let report = report(&records, at(3.0));
    let domains: Vec<_> = report.domains.iter().map(|domain| domain.domain).collect();
    assert_eq!(domains, [EnergyDomain::CpuPackage]);
    assert_close(joules(report.total.energy_kwh.unwrap()), 30.0);
}

/// `records` (in time order) with the scope boundaries at `late` (positions among
/// the scope records, in order) booked after later readings: each moved past the
/// next `by` power readings, never past another record of its own scope, and the
/// account told first ([`EnergyRecord::LateBoundariesFrom`], in time order at the
/// earliest moved boundary's stamp), as the pipeline tells it before it stamps a
/// boundary in the past.
fn delivered_late(
    records: &[EnergyRecord],
    late: &[prop::sample::Index],
    by: usize,
) -> Vec<EnergyRecord> {
    let scope_of = |record: &EnergyRecord| match record {
        EnergyRecord::ScopeStarted { uuid, .. } | EnergyRecord::ScopeEnded { uuid, .. } => {
            Some(*uuid)
        }
        _ => None,
    };
    let boundaries: Vec<usize> = (0..records.len())
        .filter(|&i| scope_of(&records[i]).is_some())
        .collect();
    if boundaries.is_empty() {
        return records.to_vec();
    }
    let mut moved: Vec<usize> = late
        .iter()
        .map(|index| boundaries[index.index(boundaries.len())])
        .collect();
    moved.sort_unstable();
    moved.dedup();
    // Where each moved record goes: after the `by`-th power reading past it, before the
    // next record of its own scope.
    let mut after: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &position in &moved {
        let uuid = scope_of(&records[position]);
        let mut target = position;
        let mut readings = 0;
        for (next, record) in records.iter().enumerate().skip(position + 1) {
            if scope_of(record) == uuid {
                break;
            }
            target = next;
            if matches!(record, EnergyRecord::Power(_)) {
                readings += 1;
                if readings == by {
                    break;
                }
            }
        }
        after.entry(target).or_default().push(position);
    }
    let earliest = moved
        .iter()
        .filter_map(|&position| records[position].at())
        .min()
        .unwrap_or(0);
    let mut out = Vec::with_capacity(records.len() + 1);
    let mut told = false;
    for (position, record) in records.iter().enumerate() {
        if !told && record.at().is_some_and(|at| at >= earliest) {
            out.push(EnergyRecord::LateBoundariesFrom { at: earliest });
            told = true;
        }
        if !moved.contains(&position) {
            out.push(record.clone());
        }
        for &late in after.get(&position).into_iter().flatten() {
            out.push(records[late].clone());
        }
    }
    out
}

/// Every scope's settled figures when `records` are booked in order, then a final
/// report as of `final_at` settles what is left.
fn settled_by_uuid(
    records: &[EnergyRecord],
    final_at: Nanos,
) -> BTreeMap<Uuid, (usize, SettledScope)> {
    let (mut account, settled) = settling(records);
    let report = account.report(final_at, wall(final_at));
    account.settle_remaining_scopes(&report);
    let mut by_uuid: BTreeMap<Uuid, (usize, SettledScope)> = BTreeMap::new();
    for scope in settled
        .into_iter()
        .map(|(_, scope)| scope)
        .chain(account.take_settled_scopes())
    {
        let entry = by_uuid.entry(scope.energy.uuid).or_insert((0, scope));
        entry.0 += 1;
    }
    by_uuid
}

fn close_option(a: Option<f64>, b: Option<f64>, tolerance: f64) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= tolerance,
        (a, b) => a == b,
    }
}

/// The figures two reports (or settled scopes) must share: window and attributed,
/// GPU and all domains. A step no GPU interval reached (inside a gap) has a GPU window
/// of null or 0 J depending on whether it was still listed when the next interval was
/// booked, in time order as late: that one figure may be either.
fn same_scope_figures(a: &ScopeEnergy, b: &ScopeEnergy, tolerance: f64) -> bool {
    let gpu_window = |scope: &ScopeEnergy| scope.gpu_energy_kwh.or(Some(0.0));
    close_option(gpu_window(a), gpu_window(b), tolerance)
        && close_option(a.energy_kwh, b.energy_kwh, tolerance)
        && close_option(
            a.attributed_gpu_energy_kwh,
            b.attributed_gpu_energy_kwh,
            tolerance,
        )
        && close_option(a.attributed_energy_kwh, b.attributed_energy_kwh, tolerance)
        && a.ended_at == b.ended_at
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Boundaries booked after later readings (as the window's close and the ends
    /// stamped there are) leave the account as booking them in time order does: the
    /// same report, as of any instant, and every step settled once with the same
    /// figures, none before the boundaries that reach it.
    #[test]
    fn boundaries_booked_late_give_the_report_and_settled_figures_of_time_order(
        case in case(),
        late in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
        by in 1usize..4,
    ) {
        // Readings before any boundary, as the pipeline books them before any step can
        // start (a step settled before anything was measured has null figures, after
        // it zero: that depends on when it settles, not on how).
        let mut in_order = vec![gpu(0, Some(100.0), None), rapl(0, 0)];
        in_order.extend(case.records.iter().cloned());
        let in_order = &in_order;
        let late_records = delivered_late(in_order, &late, by);
        let delivered = late_records
            .iter()
            .filter(|record| !matches!(record, EnergyRecord::LateBoundariesFrom { .. }))
            .count();
        prop_assert_eq!(delivered, in_order.len(), "every record delivered once");
        let newest = in_order.iter().filter_map(EnergyRecord::at).max().unwrap_or(0);
        for report_at in [case.report_at, newest] {
            let expected = report(in_order, report_at);
            let seen = report(&late_records, report_at);
            let total: f64 = expected.domains.iter().map(|d| d.energy_kwh).sum();
            let tolerance = 1e-9 * total.abs() + 1e-15;
            prop_assert_eq!(&seen.domains.len(), &expected.domains.len());
            for (seen, expected) in seen.domains.iter().zip(&expected.domains) {
                prop_assert_eq!(seen.domain, expected.domain);
                prop_assert!((seen.energy_kwh - expected.energy_kwh).abs() <= tolerance);
                prop_assert!(
                    (seen.unattributed_kwh - expected.unattributed_kwh).abs() <= tolerance,
                    "{:?} unattributed {} != {}", seen.domain, seen.unattributed_kwh, expected.unattributed_kwh
                );
            }
            prop_assert_eq!(seen.agent_scopes.len(), expected.agent_scopes.len());
            for expected_scope in &expected.agent_scopes {
                let seen_scope = scope(&seen, expected_scope.uuid.as_u128());
                prop_assert!(
                    same_scope_figures(seen_scope, expected_scope, tolerance),
                    "as of {}: {:?} != {:?}", report_at, seen_scope, expected_scope
                );
            }
        }
        let expected = settled_by_uuid(in_order, newest);
        let seen = settled_by_uuid(&late_records, newest);
        let total: f64 = report(in_order, newest).domains.iter().map(|d| d.energy_kwh).sum();
        let tolerance = 1e-9 * total.abs() + 1e-15;
        prop_assert_eq!(seen.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>());
        for (uuid, (times, expected_scope)) in &expected {
            let (seen_times, seen_scope) = &seen[uuid];
            prop_assert_eq!((*times, *seen_times), (1, 1), "{} settled more than once", uuid);
            prop_assert!(
                same_scope_figures(&seen_scope.energy, &expected_scope.energy, tolerance),
                "{:?} != {:?}", seen_scope.energy, expected_scope.energy
            );
            prop_assert!(
                close_option(seen_scope.coverage, expected_scope.coverage, 1e-9),
                "coverage {:?} != {:?}", seen_scope.coverage, expected_scope.coverage
            );
        }
    }
}

#[test]
fn an_end_booked_after_later_readings_divides_them_again_and_holds_the_steps_it_reaches() {
    // 100 W read every half second, 0–4 s. A holds 0.5–3.5 s, B 1.5–2.5 s, C 2–3 s.
    // B's end is booked after every reading (as a step ended at the window's close
    // is), the account told first. By hand: 0.5–1.5 A alone 100 J; 1.5–2 A, B 25 J
    // each; 2–2.5 A, B, C 50/3 J each; 2.5–3 A, C 25 J each; 3–3.5 A alone 50 J.
    let steps = [
        Step::new(1, 0.5, 3.5),
        Step::new(2, 1.5, 2.5),
        Step::new(3, 2.0, 3.0),
    ];
    let in_order = schedule(&steps, flat_gpu(4.0, None));
    let late_end = in_order
        .iter()
        .position(
            |r| matches!(r, EnergyRecord::ScopeEnded { uuid, .. } if *uuid == Uuid::from_u128(2)),
        )
        .unwrap();
    let mut records = in_order.clone();
    let end = records.remove(late_end);
    records.insert(late_end, EnergyRecord::LateBoundariesFrom { at: at(2.5) });
    records.push(end);
    let (mut account, settled) = settling(&records);
    // C ends after B's end: it waits for it (A too); only B could settle before.
    assert!(
        settled
            .iter()
            .all(|(_, s)| s.energy.uuid == Uuid::from_u128(2)),
        "{settled:?}"
    );
    let report = account.report(at(4.0), wall(at(4.0)));
    account.settle_remaining_scopes(&report);
    let mut figures: BTreeMap<u128, SettledScope> = settled
        .into_iter()
        .map(|(_, s)| s)
        .chain(account.take_settled_scopes())
        .map(|s| (s.energy.uuid.as_u128(), s))
        .collect();
    assert_eq!(figures.len(), 3);
    for (n, window, attributed) in [
        (1, 300.0, 100.0 + 25.0 + 50.0 / 3.0 + 25.0 + 50.0),
        (2, 100.0, 25.0 + 50.0 / 3.0),
        (3, 100.0, 50.0 / 3.0 + 25.0),
    ] {
        let step = figures.remove(&n).unwrap();
        assert_close(joules(step.energy.gpu_energy_kwh.unwrap()), window);
        assert_close(
            joules(step.energy.attributed_gpu_energy_kwh.unwrap()),
            attributed,
        );
        assert_eq!(step.coverage, Some(1.0), "step {n}");
        assert_eq!(
            step.energy,
            *scope(&report, n),
            "step {n}: the report's figures"
        );
    }
    assert_close(joules(report.domains[0].unattributed_kwh), 100.0);
}

#[test]
fn a_start_booked_later_than_promised_divides_again_a_step_already_retired() {
    // 100 W read every half second, 0–4 s. A holds 0.5–1.5 s, B 1–2 s; B's start and
    // end reach the account only after every reading, untold (a boundary stamped
    // earlier than the pipeline promises), when A is retired already. By hand: 0.5–1 A
    // alone 50 J; 1–1.5 A and B 25 J each; 1.5–2 B alone 50 J. So A 75 J, B 75 J, and
    // the 400 J of the run less those 150 J unattributed.
    let steps = [Step::new(1, 0.5, 1.5), Step::new(2, 1.0, 2.0)];
    let in_order = schedule(&steps, flat_gpu(4.0, None));
    let is_b = |record: &EnergyRecord| match record {
        EnergyRecord::ScopeStarted { uuid, .. } | EnergyRecord::ScopeEnded { uuid, .. } => {
            *uuid == Uuid::from_u128(2)
        }
        _ => false,
    };
    let mut records: Vec<EnergyRecord> = in_order.iter().filter(|r| !is_b(r)).cloned().collect();
    records.extend(in_order.iter().filter(|r| is_b(r)).cloned());
    let report = report(&records, at(4.0));
    for (n, attributed) in [(1, 75.0), (2, 75.0)] {
        assert_close(
            joules(scope(&report, n).attributed_gpu_energy_kwh.unwrap()),
            attributed,
        );
    }
    assert_close(joules(report.domains[0].unattributed_kwh), 250.0);
}

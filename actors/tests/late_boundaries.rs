//! A step's announced figures are final: it settles only once no boundary stamped
//! before its end can still arrive. Each test runs a whole pipeline over a GPU drawing
//! a constant power, read every 10 ms, with steps live together, and holds a boundary
//! back on purpose: the caller of one step's end stalls right after its instant is
//! read (a thread preempted there), or a step is ended at the window's close after
//! readings past it were booked. Every step's announced figures must equal the final
//! report's, and both the closed form: each stretch's energy (power × its length)
//! split equally among the steps live in it, from the steps' own instants.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_actors::pipeline::RunningPipeline;
use wattline_config::energy::EnergySettings;
use wattline_gpu::{GpuSampleRequest, GpuSource};
use wattline_model::events::{CollectingEventSink, ENDED_AT_PROGRAM_EXIT, PipelineEvent};
use wattline_model::report::{EnergyReport, ScopeEnergy};
use wattline_model::scope_energy::SettledScope;
use wattline_model::snapshot::{GpuDeviceReading, GpuSample, GpuVendor};

mod pipeline_support;

const WATTS: f64 = 200.0;
const JOULES_PER_KILOWATT_HOUR: f64 = 3.6e6;

/// One device drawing [`WATTS`], read afresh at every call.
struct ConstantPower;

impl GpuSource for ConstantPower {
    fn name(&self) -> &str {
        "test-constant"
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-late-0");
        device.device_index = Some(0);
        device.power_draw_watts = Some(WATTS);
        Some(GpuSample {
            devices: if request.device_metrics {
                vec![device]
            } else {
                Vec::new()
            },
            processes: Vec::new(),
            taken_at: Instant::now(),
        })
    }
}

async fn spawn(sink: Arc<CollectingEventSink>) -> RunningPipeline {
    let mut energy = EnergySettings::default();
    energy.config.interval_millis = 10;
    let mut spec = pipeline_support::spec(None, Some(energy), None, sink);
    spec.gpu_source = Arc::new(|_| Some(Box::new(ConstantPower) as Box<dyn GpuSource>));
    let pipeline = RunningPipeline::spawn(spec).await.expect("the pipeline");
    // Readings under way before the first step, so they surround every step.
    tokio::time::sleep(Duration::from_millis(50)).await;
    pipeline
}

/// The steps' figures as announced (each step once), in the order they settled.
fn announced(sink: &CollectingEventSink) -> Vec<SettledScope> {
    sink.events()
        .into_iter()
        .filter_map(|event| match event {
            PipelineEvent::ScopeEnergy { settled, .. } => Some(*settled),
            _ => None,
        })
        .collect()
}

fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_nanoseconds().expect("a short run") as f64 / 1e9
}

/// Each step's attributed joules by the closed form: the stretches between the steps'
/// instants (clipped at `closes`, where the window ended), each worth [`WATTS`] × its
/// length, split equally among the steps live in it.
fn closed_form(steps: &[&ScopeEnergy], closes: DateTime<Utc>) -> Vec<f64> {
    let span = |step: &ScopeEnergy| {
        let end = step.ended_at.expect("ended").min(closes);
        (step.started_at, end)
    };
    let mut cuts: Vec<DateTime<Utc>> = steps
        .iter()
        .flat_map(|step| {
            let (start, end) = span(step);
            [start, end]
        })
        .collect();
    cuts.sort();
    cuts.dedup();
    let mut joules = vec![0.0; steps.len()];
    for stretch in cuts.windows(2) {
        let (a, b) = (stretch[0], stretch[1]);
        let live: Vec<usize> = (0..steps.len())
            .filter(|&i| {
                let (start, end) = span(steps[i]);
                start <= a && end >= b
            })
            .collect();
        for &i in &live {
            joules[i] += WATTS * seconds_between(a, b) / live.len() as f64;
        }
    }
    joules
}

fn attributed_joules(step: &ScopeEnergy) -> f64 {
    step.attributed_energy_kwh.expect("measured") * JOULES_PER_KILOWATT_HOUR
}

fn step(report: &EnergyReport, uuid: Uuid) -> &ScopeEnergy {
    report
        .agent_scopes
        .iter()
        .find(|scope| scope.uuid == uuid)
        .expect("the step is in the report")
}

/// Every step announced once, with the report's figures, and the closed form.
fn assert_final(
    report: &EnergyReport,
    announced: &[SettledScope],
    uuids: &[Uuid],
    closes: DateTime<Utc>,
) {
    assert_eq!(announced.len(), uuids.len(), "each step announced once");
    let steps: Vec<&ScopeEnergy> = uuids.iter().map(|uuid| step(report, *uuid)).collect();
    for (uuid, reported) in uuids.iter().zip(&steps) {
        let settled = announced
            .iter()
            .find(|settled| settled.energy.uuid == *uuid)
            .expect("announced");
        assert_eq!(
            settled.energy, **reported,
            "announced figures are the report's"
        );
        assert!(
            settled.coverage.is_some_and(|c| (c - 1.0).abs() < 1e-9),
            "readings surround {}: coverage {:?}",
            reported.name,
            settled.coverage
        );
    }
    let expected = closed_form(&steps, closes);
    let total: f64 = expected.iter().sum();
    for (reported, expected) in steps.iter().zip(expected) {
        let seen = attributed_joules(reported);
        // Instants are cut on the monotonic clock and shown on the wall clock: the two
        // are read apart (the close's by this test, a boundary's offset once a
        // second), so a few microseconds of the device's power either way, and 1e-6 of
        // the steps' energy for rounding. A boundary booked out of order would move
        // joules: the stall is 300 ms.
        let skew = WATTS * 20e-6;
        assert!(
            (seen - expected).abs() <= 1e-6 * total + skew,
            "{}: {seen} J attributed, {expected} J by the closed form",
            reported.name
        );
    }
}

/// The wall-clock instant `stamp` is within `slack` of the call made between `before`
/// and `after`.
fn stamped_within(stamp: DateTime<Utc>, before: SystemTime, after: SystemTime) -> bool {
    let slack = chrono::Duration::milliseconds(2);
    let (before, after) = (DateTime::<Utc>::from(before), DateTime::<Utc>::from(after));
    stamp >= before - slack && stamp <= after + slack
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_ended_by_a_caller_stalled_after_its_stamp_leaves_its_neighbours_figures_final() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = Arc::new(spawn(Arc::clone(&sink)).await);
    let a = pipeline.start_agent_scope("a");
    tokio::time::sleep(Duration::from_millis(40)).await;
    let b = pipeline.start_agent_scope("b");
    tokio::time::sleep(Duration::from_millis(40)).await;
    let c = pipeline.start_agent_scope("c");
    tokio::time::sleep(Duration::from_millis(60)).await;
    // B's caller stalls 300 ms right after its end's instant is read: thirty readings
    // are taken meanwhile, while A and C go on.
    pipeline.stall_next_boundary(Duration::from_millis(300));
    let before_b = SystemTime::now();
    let stalled = {
        let pipeline = Arc::clone(&pipeline);
        std::thread::spawn(move || pipeline.end_agent_scope(b))
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    pipeline.end_agent_scope(c);
    tokio::time::sleep(Duration::from_millis(250)).await;
    pipeline.end_agent_scope(a);
    stalled.join().expect("the stalled caller");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let report = pipeline.final_report().await.expect("a report");
    pipeline.shutdown().await;

    // B ended when its caller read the clock, before the stall.
    let ended_b = step(&report, b).ended_at.expect("ended");
    assert!(
        stamped_within(ended_b, before_b, before_b + Duration::from_millis(50)),
        "B's end {ended_b} is its stamp, not the stall's end"
    );
    // Every step ended before the report: the window closes after them all.
    assert_final(&report, &announced(&sink), &[a, b, c], report.ended_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_ended_at_the_window_close_after_later_readings_leaves_every_figure_final() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = spawn(Arc::clone(&sink)).await;
    let a = pipeline.start_agent_scope("a");
    tokio::time::sleep(Duration::from_millis(40)).await;
    let b = pipeline.start_agent_scope("b");
    tokio::time::sleep(Duration::from_millis(80)).await;
    // The window closes here (a measured command exited); A and B stay live for 200 ms
    // of readings, then B is ended at the close (its program left it open) and A ends
    // after it, outside the window.
    let closes = Instant::now();
    let closes_wall = Utc::now();
    pipeline.measuring_until(closes, closes_wall);
    tokio::time::sleep(Duration::from_millis(200)).await;
    pipeline.end_agent_scope_with(b, &[ENDED_AT_PROGRAM_EXIT]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    pipeline.end_agent_scope(a);
    tokio::time::sleep(Duration::from_millis(60)).await;
    let report = pipeline.final_report().await.expect("a report");
    pipeline.shutdown().await;

    let announced = announced(&sink);
    assert_eq!(
        step(&report, b).ended_at,
        Some(closes_wall),
        "B ends at the close"
    );
    assert!(
        announced
            .iter()
            .find(|settled| settled.energy.uuid == b)
            .is_some_and(|settled| settled.ended_at_program_exit),
        "B is flagged as ended at its program's exit"
    );
    assert_final(&report, &announced, &[a, b], closes_wall);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_taken_while_a_steps_end_is_stalled_after_its_stamp_has_that_end() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = Arc::new(spawn(Arc::clone(&sink)).await);
    let a = pipeline.start_agent_scope("a");
    tokio::time::sleep(Duration::from_millis(60)).await;
    // A's caller stalls 300 ms right after its end's instant is read; the report is
    // asked for once it has been read, so the report's instant is later.
    pipeline.stall_next_boundary(Duration::from_millis(300));
    let stalled = {
        let pipeline = Arc::clone(&pipeline);
        std::thread::spawn(move || pipeline.end_agent_scope(a))
    };
    while pipeline.boundary_stall_armed() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let report = pipeline.energy_report().await.expect("a report");
    stalled.join().expect("the stalled caller");
    pipeline.shutdown().await;

    let reported = step(&report, a);
    let ended = reported
        .ended_at
        .expect("the report has the end stamped before its instant");
    assert!(
        ended < report.ended_at,
        "{ended} after the report's instant"
    );
    // A settled once a reading passed its end (during the stall): its announced
    // figures are the report's, and the closed form's.
    assert_final(&report, &announced(&sink), &[a], report.ended_at);
}

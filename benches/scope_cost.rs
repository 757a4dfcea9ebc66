//! What one Agent scope costs the caller, opened and ended, against an OpenTelemetry
//! SDK span started and ended in the same process and runtime: the yardstick a host
//! already pays per step. Five rows, side by side in one run, as ratios to the span:
//! the span (the SDK's batch processor in front of an exporter that discards); the
//! span with a queue that drops none (below); a wattline scope with no GPU source; a
//! wattline scope with a GPU source (an instant stand-in, so the figure is wattline's
//! own, not a driver's); and a span with a `gen_ai.operation.name` that
//! `GenAiSpanProcessor` makes a step (no GPU source): the processor's cost per span.
//!
//! Each row runs `WATTLINE_SCOPE_COST_ROUNDS` rounds (default 20,000, after a tenth as
//! many to warm up) two ways:
//! - in bursts of `WATTLINE_SCOPE_COST_BURST` (default 1,000) with a 10 ms pause after
//!   each, untimed, in which the pipeline books the burst: a host's steps as they come,
//!   the pipeline keeping up;
//! - back to back, all rounds in one go: faster than the pipeline books them, so its
//!   queues grow while the loop runs (the SDK's queue drops spans instead, past 2,048).
//!   Twice: the first time, the process's heap grows to hold the backlog, and the
//!   first wattline row pays for the fresh pages its queue is written into (about a
//!   third more per scope on this project's VM); the second time every row finds the
//!   heap as a long-running host's is, the figure for a host past its first backlog.
//!
//! A second span row keeps every span (its queue is longer than the run): back to
//! back, the default SDK queue drops spans past 2,048, so that row is mostly the cost
//! of a dropped span, while wattline keeps every boundary. The `×k` columns are ratios
//! to this one.
//!
//! For each: wall time, the calling thread's CPU time (what opening and ending cost
//! the caller) and this process's CPU time per scope, and the calling thread's minor
//! page faults per 1,000 rounds (`faults/k`: fresh memory its pushes touched). In
//! bursts, the process's CPU counts the pauses too, less the process's CPU over as many
//! pauses without scopes (its idle work, taken once the warm-up is booked). Either way
//! it counts until the pipeline has booked every round (a flush, whose report comes
//! behind every boundary; the span rows: a force flush), so a backlog left after the
//! loop is counted, not lost; a second flush right after gives what a flush costs by
//! itself, which is taken off. Asserts nothing.
//!
//! Run: `cargo bench --bench scope_cost`.

mod common;

use std::time::{Duration, Instant};

use common::env_number;
use opentelemetry::trace::{Span, Tracer, TracerProvider};
use wattline::gpu::{GpuDeviceReading, GpuSample, GpuSampleRequest, GpuSource, GpuVendor};

/// Takes every batch of spans and keeps none: the span's own cost, a batch processor
/// included, without a collector's.
#[derive(Debug)]
struct DiscardSpans;

impl opentelemetry_sdk::trace::SpanExporter for DiscardSpans {
    async fn export(
        &self,
        _batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}

/// A GPU that answers at once: 300 W, one device.
struct InstantGpu;

impl GpuSource for InstantGpu {
    fn name(&self) -> &str {
        "instant"
    }

    fn sample(&mut self, _request: &GpuSampleRequest) -> Option<GpuSample> {
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-bench");
        device.power_draw_watts = Some(300.0);
        Some(GpuSample {
            devices: vec![device],
            processes: Vec::new(),
            taken_at: Instant::now(),
        })
    }
}

/// Wall time, the calling thread's CPU time and the process's CPU time per round;
/// the calling thread's page faults per 1,000 rounds.
struct Cost {
    wall: Duration,
    caller_cpu: Duration,
    cpu: Duration,
    caller_faults_per_thousand: f64,
}

/// How a row's rounds are run.
#[derive(Clone, Copy)]
enum Pace {
    /// This many rounds, then a pause the pipeline books them in (untimed for wall
    /// and the caller's CPU; counted in the process's).
    Bursts(u64),
    /// Every round in one go.
    BackToBack,
}

/// The pause after each burst.
const PAUSE: Duration = Duration::from_millis(10);

async fn measure<F, Fut, S, SFut>(rounds: u64, pace: Pace, mut round: F, mut settle: S) -> Cost
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = ()>,
    S: FnMut() -> SFut,
    SFut: std::future::Future<Output = ()>,
{
    for n in 0..(rounds / 10).max(1) {
        round(n).await;
    }
    // The warm-up's rounds booked before the idle figure is taken: none of it may count
    // as idle work (and be taken off the rounds' cost).
    settle().await;
    tokio::time::sleep(PAUSE).await;
    let burst = match pace {
        Pace::Bursts(burst) => burst.max(1),
        Pace::BackToBack => rounds,
    };
    // The process's CPU over as many pauses with no round in them (the pipeline's own
    // idle work: its clocks, a GPU source's dense power), taken off the bursts' CPU.
    let mut idle_cpu = 0.0;
    if matches!(pace, Pace::Bursts(_)) {
        let idle_at_start = common::cpu_seconds();
        for _ in 0..rounds.div_ceil(burst) {
            tokio::time::sleep(PAUSE).await;
        }
        idle_cpu = common::cpu_seconds() - idle_at_start;
    }
    let (mut wall, mut caller_cpu, mut caller_faults) = (Duration::ZERO, 0.0, 0);
    let cpu_at_start = common::cpu_seconds();
    let mut done = 0;
    while done < rounds {
        let this_burst = burst.min(rounds - done);
        let faults_at_start = common::thread_minor_faults();
        let (started, caller_at_start) = (Instant::now(), common::thread_cpu_seconds());
        for n in done..done + this_burst {
            round(n).await;
        }
        wall += started.elapsed();
        caller_cpu += common::thread_cpu_seconds() - caller_at_start;
        caller_faults += common::thread_minor_faults() - faults_at_start;
        done += this_burst;
        if matches!(pace, Pace::Bursts(_)) {
            tokio::time::sleep(PAUSE).await;
        }
    }
    // Whatever the rounds left to book is booked inside the process's figure: a settle
    // books it, a second one costs what a settle costs by itself, taken off.
    let loop_cpu = common::cpu_seconds() - cpu_at_start;
    let settled_at = common::cpu_seconds();
    settle().await;
    let backlog_and_settle = common::cpu_seconds() - settled_at;
    let again_at = common::cpu_seconds();
    settle().await;
    let settle_alone = common::cpu_seconds() - again_at;
    let process_cpu = loop_cpu + (backlog_and_settle - settle_alone).max(0.0) - idle_cpu;
    let per_round = |seconds: f64| Duration::from_secs_f64(seconds / rounds as f64);
    Cost {
        wall: wall / rounds as u32,
        caller_cpu: per_round(caller_cpu),
        cpu: per_round(process_cpu.max(0.0)),
        caller_faults_per_thousand: caller_faults as f64 * 1000.0 / rounds as f64,
    }
}

/// Spans started and ended by `tracer`, then flushed out of `provider`'s queue.
async fn spans(
    rounds: u64,
    pace: Pace,
    provider: &opentelemetry_sdk::trace::SdkTracerProvider,
    tracer: &opentelemetry_sdk::trace::SdkTracer,
) -> Cost {
    measure(
        rounds,
        pace,
        |_| {
            let mut span = tracer.start("step");
            span.end();
            std::future::ready(())
        },
        || {
            let _ = provider.force_flush();
            std::future::ready(())
        },
    )
    .await
}

async fn wattline_scopes(rounds: u64, pace: Pace, with_gpu: bool) -> Cost {
    let mut builder =
        wattline::Pipeline::builder().config(common::pipeline_config(1000, None, None));
    builder = if with_gpu {
        builder.gpu_source(|| Some(Box::new(InstantGpu)))
    } else {
        builder.gpu_source(|| None)
    };
    let pipeline = builder.spawn().await.expect("the pipeline");
    let names: Vec<String> = (0..10).map(|n| format!("step-{n}")).collect();
    let cost = measure(
        rounds,
        pace,
        |n| {
            let scope = pipeline
                .agent_scope(&names[(n % 10) as usize])
                .expect("a scope");
            scope.end().expect("its end");
            std::future::ready(())
        },
        // The report comes behind every boundary sent before it: once it is back, the
        // pipeline has booked them all.
        || async {
            let _ = pipeline.flush().await;
        },
    )
    .await;
    // Everything asked of the pipeline is done before the next row.
    let _ = pipeline.shutdown().await;
    cost
}

/// SDK spans with a `gen_ai.operation.name`, made steps by `GenAiSpanProcessor` in a
/// pipeline with no GPU source (the processor's cost: this row less the span's; its
/// span carries the one attribute the bare span has not).
async fn spans_made_steps(rounds: u64, pace: Pace) -> Cost {
    let pipeline = wattline::Pipeline::builder()
        .config(common::pipeline_config(1000, None, None))
        .gpu_source(|| None)
        .spawn()
        .await
        .expect("the pipeline");
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_span_processor(wattline::GenAiSpanProcessor::new(&pipeline))
        .with_batch_exporter(DiscardSpans)
        .build();
    let tracer = provider.tracer("bench");
    let attributes = [opentelemetry::KeyValue::new(
        "gen_ai.operation.name",
        "chat",
    )];
    let cost = measure(
        rounds,
        pace,
        |_| {
            let mut span = tracer
                .span_builder("chat model")
                .with_attributes(attributes.clone())
                .start(&tracer);
            span.end();
            std::future::ready(())
        },
        || async {
            let _ = provider.force_flush();
            let _ = pipeline.flush().await;
        },
    )
    .await;
    let _ = provider.shutdown();
    let _ = pipeline.shutdown().await;
    cost
}

#[tokio::main]
async fn main() {
    let rounds = env_number("WATTLINE_SCOPE_COST_ROUNDS", 20_000);
    let burst = env_number("WATTLINE_SCOPE_COST_BURST", 1_000);
    // As a host sets the SDK up: spans go to a batch processor, then an exporter.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(DiscardSpans)
        .build();
    let tracer = provider.tracer("bench");
    // The same, with a queue long enough to keep every span: back to back the default
    // queue (2,048) is full almost at once and the SDK drops the rest, so the default
    // row there times mostly a dropped span. Wattline's queues keep every boundary;
    // this row is the span that does the same.
    let keeping_provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_span_processor(
            opentelemetry_sdk::trace::BatchSpanProcessor::builder(DiscardSpans)
                .with_batch_config(
                    opentelemetry_sdk::trace::BatchConfigBuilder::default()
                        .with_max_queue_size(2 * rounds as usize + 1_000)
                        .build(),
                )
                .build(),
        )
        .build();
    let keeping_tracer = keeping_provider.tracer("bench");
    println!("scope_cost: {rounds} rounds each, open and end, one runtime, one process");
    for (title, pace) in [
        (
            format!(
                "in bursts of {burst}, a {} ms pause after each",
                PAUSE.as_millis()
            ),
            Pace::Bursts(burst),
        ),
        (
            "back to back, first time (the heap grows under the backlog)".to_owned(),
            Pace::BackToBack,
        ),
        (
            "back to back, again (the heap as the first time left it)".to_owned(),
            Pace::BackToBack,
        ),
    ] {
        let span = spans(rounds, pace, &provider, &tracer).await;
        let keeping_span = spans(rounds, pace, &keeping_provider, &keeping_tracer).await;
        let without_gpu = wattline_scopes(rounds, pace, false).await;
        let with_gpu = wattline_scopes(rounds, pace, true).await;
        let made_steps = spans_made_steps(rounds, pace).await;
        println!("\n{title}");
        println!(
            "{:<40} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>8}",
            "row",
            "wall µs",
            "caller",
            "CPU µs",
            "wall ×",
            "caller ×",
            "CPU ×",
            "wall ×k",
            "caller ×k",
            "faults/k"
        );
        for (label, cost) in [
            ("OpenTelemetry SDK span", &span),
            ("OpenTelemetry SDK span, dropping none", &keeping_span),
            ("wattline scope, no GPU source", &without_gpu),
            ("wattline scope, instant GPU source", &with_gpu),
            ("SDK span made a step, no GPU source", &made_steps),
        ] {
            let ratio = |of: Duration, to: Duration| of.as_secs_f64() / to.as_secs_f64().max(1e-12);
            println!(
                "{label:<40} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>9.2} {:>8.1}",
                cost.wall.as_secs_f64() * 1e6,
                cost.caller_cpu.as_secs_f64() * 1e6,
                cost.cpu.as_secs_f64() * 1e6,
                ratio(cost.wall, span.wall),
                ratio(cost.caller_cpu, span.caller_cpu),
                ratio(cost.cpu, span.cpu),
                ratio(cost.wall, keeping_span.wall),
                ratio(cost.caller_cpu, keeping_span.caller_cpu),
                cost.caller_faults_per_thousand,
            );
        }
    }
    let _ = provider.shutdown();
    let _ = keeping_provider.shutdown();
}

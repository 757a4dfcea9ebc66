//! One host of a fleet sending its steps' energy to an OpenTelemetry Collector: a few
//! concurrent workers each repeat a `request` step (in the caller's trace, with a
//! nested `tool` step) and a `background` step (a trace of its own) until the time is
//! up; then the final report is printed as JSON after a `run id: UUID` line.
//!
//! ```sh
//! # A library host: its own pipeline, metrics and spans over OTLP gRPC.
//! cargo run --example fleet_host -- --otlp http://127.0.0.1:4317 --seconds 30
//! # The same steps from a program measured by `wattline run`, over the host endpoint
//! # (no nesting there: `tool` is left out).
//! wattline run --otlp http://127.0.0.1:4317 --otlp-spans --report json -- \
//!     target/debug/examples/fleet_host --worker --seconds 30
//! ```
//!
//! Without arguments it runs one second without exporting anything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wattline::config::{OtlpEndpointConfig, OtlpTransport};
use wattline::{Pipeline, ScopeOptions};
use wattline_worker::HostConnection;

/// The caller's span every `request` step is a child of, unless `--traceparent` says.
const DEFAULT_CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// What the command line asks for.
struct Options {
    /// The collector (OTLP gRPC) a library host exports to; none: no export.
    otlp: Option<String>,
    /// How long the workers keep starting steps.
    run_for: Duration,
    /// Milliseconds between two metric exports.
    export_interval_millis: u64,
    /// The W3C `traceparent` of the caller's span.
    traceparent: String,
    /// Concurrent workers.
    workers: usize,
    /// Steps over the host endpoint of `wattline run` instead of an own pipeline.
    over_host_endpoint: bool,
}

fn options() -> Result<Options, Box<dyn std::error::Error>> {
    let mut options = Options {
        otlp: None,
        run_for: Duration::from_secs(1),
        export_interval_millis: 1000,
        traceparent: DEFAULT_CALLER.to_owned(),
        workers: 3,
        over_host_endpoint: false,
    };
    let mut arguments = std::env::args().skip(1);
    while let Some(argument) = arguments.next() {
        let mut value = || {
            arguments
                .next()
                .ok_or_else(|| format!("{argument} needs a value"))
        };
        match argument.as_str() {
            "--otlp" => options.otlp = Some(value()?),
            "--seconds" => options.run_for = Duration::from_secs_f64(value()?.parse()?),
            "--export-interval-millis" => options.export_interval_millis = value()?.parse()?,
            "--traceparent" => options.traceparent = value()?,
            "--workers" => options.workers = value()?.parse()?,
            "--worker" => options.over_host_endpoint = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(options)
}

/// Staggered step lengths, so the workers' steps overlap in ever-changing ways.
fn pause(worker: usize, round: u64) -> Duration {
    Duration::from_millis(80 + ((worker as u64 * 37 + round * 53) % 120))
}

/// One worker's steps in a library host, until `deadline`.
async fn host_worker(
    pipeline: Arc<Pipeline>,
    worker: usize,
    deadline: Instant,
    traceparent: String,
) -> Result<(), wattline::Error> {
    let mut round = 0;
    while Instant::now() < deadline {
        let request = pipeline.agent_scope_with(
            "request",
            ScopeOptions::default().with_traceparent(traceparent.clone()),
        )?;
        let tool = request.child("tool")?;
        tokio::time::sleep(pause(worker, round)).await;
        tool.end()?;
        tokio::time::sleep(pause(worker + 1, round)).await;
        request.end()?;
        let background = pipeline.agent_scope("background")?;
        tokio::time::sleep(pause(worker + 2, round)).await;
        background.end()?;
        round += 1;
    }
    Ok(())
}

/// One worker's steps over the host endpoint, until `deadline`.
async fn endpoint_worker(
    host: HostConnection,
    worker: usize,
    deadline: Instant,
    traceparent: String,
) -> Result<(), wattline_worker::AgentScopeError> {
    let mut round = 0;
    while Instant::now() < deadline {
        let request = host
            .traced_agent_scope("request", None, Some(&traceparent))
            .await?;
        tokio::time::sleep(pause(worker, round)).await;
        request.end().await?;
        let background = host.agent_scope("background").await?;
        tokio::time::sleep(pause(worker + 2, round)).await;
        background.end().await?;
        round += 1;
    }
    Ok(())
}

async fn library_host(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = wattline::load_config(None)?;
    if let Some(url) = &options.otlp {
        let mut opentelemetry = config.opentelemetry.clone().unwrap_or_default();
        opentelemetry.endpoints = vec![OtlpEndpointConfig::new(url.clone(), OtlpTransport::Grpc)];
        opentelemetry.export_interval_millis = options.export_interval_millis;
        opentelemetry.spans = true;
        config.opentelemetry = Some(opentelemetry);
    }
    let pipeline = Arc::new(Pipeline::builder().config(config).spawn().await?);
    run_workers(&options, |worker, deadline, traceparent| {
        host_worker(Arc::clone(&pipeline), worker, deadline, traceparent)
    })
    .await?;
    let run_id = pipeline.run_id();
    let report = pipeline
        .shutdown()
        .await?
        .ok_or("the energy component is off")?;
    println!("run id: {run_id}");
    println!("{}", report.to_json()?);
    Ok(())
}

async fn measured_program(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let host = HostConnection::from_env()?;
    run_workers(&options, |worker, deadline, traceparent| {
        endpoint_worker(host.clone(), worker, deadline, traceparent)
    })
    .await
}

/// Runs `options.workers` workers at once, each given its index, when to stop and the
/// caller's `traceparent`; returns once all have, with the first error.
async fn run_workers<Work, Failure>(
    options: &Options,
    worker: impl Fn(usize, Instant, String) -> Work,
) -> Result<(), Box<dyn std::error::Error>>
where
    Work: Future<Output = Result<(), Failure>> + Send + 'static,
    Failure: std::error::Error + Send + 'static,
{
    let deadline = Instant::now() + options.run_for;
    let workers: Vec<_> = (0..options.workers)
        .map(|index| tokio::spawn(worker(index, deadline, options.traceparent.clone())))
        .collect();
    for worker in workers {
        worker.await??;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = options()?;
    if options.over_host_endpoint {
        measured_program(options).await
    } else {
        library_host(options).await
    }
}

//! Poll every 200 ms and copy each poll's mark under every live Agent scope.
//!
//! Run: `cargo run --example agent_scopes`

use std::sync::Arc;
use std::time::Duration;

use wattline::config::{EffectiveConfig, ResourceMetricsConfig};
use wattline::events::{CollectingEventSink, PipelineEvent};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 200;
    let config = EffectiveConfig {
        resource_metrics: Some(resource),
        ..EffectiveConfig::default()
    };
    let events = Arc::new(CollectingEventSink::default());
    let pipeline = wattline::Pipeline::builder()
        .config(config)
        .event_sink(events.clone())
        .spawn()
        .await?;

    let planner = pipeline.agent_scope("planner")?;
    let coder = pipeline.agent_scope("coder")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    coder.end()?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(planner);
    pipeline.shutdown().await?;

    for event in events.events() {
        match event {
            PipelineEvent::Scope(scope) => {
                println!(
                    "scope {:?} {:<9} {}",
                    scope.scope_category, scope.name, scope.uuid
                )
            }
            // One poll's mark, copied under every live scope: the data is built once.
            PipelineEvent::MarkCopies(copies) => {
                for copy in &copies.copies {
                    println!(
                        "mark  {} under {} ({} measurements; copies of one poll share data and time)",
                        copies.timestamp,
                        copy.parent_uuid.map(|u| u.to_string()).unwrap_or_default(),
                        copies.data.measurements.len()
                    );
                }
            }
            PipelineEvent::Mark(mark) => println!(
                "mark  {} under {} ({} measurements; copies of one poll share data and time)",
                mark.timestamp,
                mark.parent_uuid.map(|u| u.to_string()).unwrap_or_default(),
                mark.data.measurements.len()
            ),
            PipelineEvent::Energy { .. } => {}
            // A step's final energy, once no later reading can change it (here no GPU
            // or RAPL is read, so it holds its duration only).
            PipelineEvent::ScopeEnergy { settled, .. } => println!(
                "energy {:<9} attributed {:?} kWh, window {:?} kWh, {:.3} s",
                settled.energy.name,
                settled.energy.attributed_energy_kwh,
                settled.energy.energy_kwh,
                settled.duration_seconds().unwrap_or_default()
            ),
            PipelineEvent::Metrics { measurements, .. } => {
                println!("metrics: {}", measurements.len())
            }
            // The energy stage's GPU and RAPL figures: the exporters name them
            // (`gen_ai.*`, `hw.*`).
            PipelineEvent::GpuTelemetry { telemetry, .. } => println!(
                "gpu   {} devices, {} intervals closed",
                telemetry.sample.devices.len(),
                telemetry.intervals.len()
            ),
            PipelineEvent::RaplIntervals { intervals, .. } => {
                println!("rapl  {} intervals closed", intervals.len())
            }
        }
    }
    Ok(())
}

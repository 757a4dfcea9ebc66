//! The README's library example, as it stands there (the block between the markers is
//! compared with the README by `tests/examples.rs`; the book includes it by its
//! anchor), then what it got.
//!
//! Run: `cargo run --example library_tour`

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // README: begin
    // ANCHOR: readme
    // Default components: resource_metrics on, polling off. With
    // `.config(wattline::load_config(None)?)` the plugins.toml layers decide instead:
    // collect() then needs a resource_metrics component in them.
    let pipeline = wattline::Pipeline::builder().spawn().await?;
    let snapshot = pipeline.collect().await?; // on-demand series, no mark
    let agent = pipeline.agent_scope("planner")?; // marks are copied under it while live
    // Traced with OpenTelemetry? Its GenAI spans become steps: an SDK tracer provider's
    // `.with_span_processor(wattline::GenAiSpanProcessor::new(&pipeline))`.
    let report = pipeline.flush().await?; // energy/cost report so far
    agent.end()?;
    pipeline.shutdown().await?; // final report
    // ANCHOR_END: readme
    // README: end
    println!(
        "snapshot scope: {}",
        serde_json::to_value(snapshot.measurement_scope)?
    );
    println!(
        "memory resident: {:?}",
        snapshot.memory.and_then(|memory| memory.resident)
    );
    println!("report agent scopes: {}", report.agent_scopes.len());
    Ok(())
}

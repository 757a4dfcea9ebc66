//! Collect one snapshot of this process's tree and print a few fields.
//!
//! Run: `cargo run --example collect_once`

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Defaults: resource_metrics on with polling off; the scope is the process tree
    // rooted at this process.
    let pipeline = wattline::Pipeline::builder().spawn().await?;
    let first = pipeline.collect().await?;
    // A rate needs two samples of the same series.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let second = pipeline.collect().await?;
    if let Some(cpu) = &second.cpu {
        println!("cpu total time: {:?}", cpu.total_time.map(|m| m.value));
        println!(
            "cpu consumption rate: {:?} (first sample: {:?})",
            cpu.consumption_rate.map(|m| m.value),
            first.cpu.as_ref().and_then(|c| c.consumption_rate)
        );
    }
    if let Some(memory) = &second.memory {
        println!("resident memory: {:?}", memory.resident);
    }
    println!("{}", serde_json::to_string_pretty(&second)?);
    pipeline.shutdown().await?;
    Ok(())
}

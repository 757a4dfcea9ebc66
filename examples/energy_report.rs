//! Measure GPU energy with a GPU source of your own and print the report.
//!
//! Run: `cargo run --example energy_report`
//!
//! On a machine with an NVIDIA GPU, drop `.gpu_source(...)` to use NVML (or
//! `nvidia-smi`) and DRM devices. Here a simulated device draws 300 W.

use std::time::{Duration, Instant};

use wattline::gpu::{GpuDeviceReading, GpuSample, GpuSampleRequest, GpuSource, GpuVendor};

/// A stand-in GPU that draws a steady 300 W.
struct SimulatedGpu;

impl GpuSource for SimulatedGpu {
    fn name(&self) -> &str {
        "simulated"
    }

    fn sample(&mut self, _request: &GpuSampleRequest) -> Option<GpuSample> {
        let mut device = GpuDeviceReading::new(
            GpuVendor::Nvidia,
            "GPU-00000000-0000-0000-0000-000000000000",
        );
        device.name = Some("Simulated H200".into());
        device.power_draw_watts = Some(300.0);
        device.compute_utilization_percent = Some(90.0);
        Some(GpuSample {
            devices: vec![device],
            processes: Vec::new(),
            taken_at: Instant::now(),
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = wattline::load_config(None)?;
    if let Some(energy) = &mut config.energy {
        // Sample every 100 ms for the demo; GENAI_GPU_COLLECTION_INTERVAL overrides it.
        energy.config.interval_millis = 100;
        energy.config.co2_tracking = true;
    }
    let pipeline = wattline::Pipeline::builder()
        .config(config)
        .gpu_source(|| Some(Box::new(SimulatedGpu)))
        .spawn()
        .await?;
    let agent = pipeline.agent_scope("training-step")?;
    tokio::time::sleep(Duration::from_millis(800)).await;
    agent.end()?;
    if let Some(report) = pipeline.shutdown().await? {
        print!("{}", wattline::report::render_table(&report));
        println!("{}", report.to_json()?);
    }
    Ok(())
}

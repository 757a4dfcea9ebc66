//! Snapshots without a pipeline: `wattline::Collector` keeps one on-demand series
//! across its calls (no rates on the first, rates on the second, from real work done
//! between them) and, with GPU reading enabled, always has the GPU group: the devices a
//! source answered, or none.

mod support;

use std::time::{Duration, Instant};

use wattline::config::ResourceMetricsConfig;
use wattline::{Collector, ScopeTarget};

/// Keeps this thread busy for `duration`: real CPU work between two snapshots.
fn busy(duration: Duration) -> u64 {
    let started = Instant::now();
    let mut state = 0u64;
    while started.elapsed() < duration {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    state
}

#[test]
fn one_series_across_calls_rates_from_the_second() {
    let target = wattline::resolve_target(
        wattline::config::MeasurementScopeSetting::ApplicationProcess,
        wattline::config::MeasurementScopeSetting::Global,
        Some(std::process::id()),
    )
    .unwrap();
    let mut collector = Collector::with_gpu_source(target, ResourceMetricsConfig::default(), None);
    let first = collector.collect();
    assert!(
        first.cpu.as_ref().unwrap().consumption_rate.is_none(),
        "no rate yet"
    );
    busy(Duration::from_millis(300));
    let second = collector.collect();
    let rate = second
        .cpu
        .as_ref()
        .unwrap()
        .consumption_rate
        .expect("a rate");
    // This thread was busy for most of the time between the two: well above idle.
    assert!(rate.value.as_f64() > 0.3, "{rate:?}");
}

#[test]
fn with_gpu_reading_enabled_the_group_is_there_with_the_devices_answered() {
    // The sources a pipeline would choose: on this machine (no GPU, no nvidia-smi on
    // PATH) none answers, as `wattline collect` shows the same.
    let none = Collector::new(ScopeTarget::Global, ResourceMetricsConfig::default()).collect();
    let group = none.gpu.expect("an enabled category is an object");
    assert_eq!(
        group.device_metrics.map(|devices| devices.len()),
        Some(0),
        "no backend answered: no devices"
    );

    let source = support::ConstantPowerGpu::new(123.0);
    let answered = Collector::with_gpu_source(
        ScopeTarget::Global,
        ResourceMetricsConfig::default(),
        Some(Box::new(source)),
    )
    .collect();
    let devices = answered.gpu.expect("the group").device_metrics;
    assert_eq!(
        devices.map(|devices| devices.len()),
        Some(1),
        "the one device the source answered"
    );

    let mut off = ResourceMetricsConfig::default();
    off.gpu.enabled = false;
    assert!(
        Collector::new(ScopeTarget::Global, off)
            .collect()
            .gpu
            .is_none(),
        "disabled: null"
    );
}

//! The `gen_ai.*` metric values of one GPU sample: per-device gauges, aggregates over
//! the devices that reported each value, and the energy, cost and CO2 of the intervals
//! the sample closed.

use std::collections::BTreeMap;

use wattline_config::energy::EnergySettings;

use super::account::ClosedInterval;
use crate::events::{AttributeValue, MetricKind, MetricMeasurement, MetricValue};
use crate::gpu::{GpuDeviceReading, GpuSample};
use crate::metric_names as names;

/// Bucket boundaries of `gen_ai.power.consumption`, W.
pub const POWER_HISTOGRAM_BOUNDARIES: [f64; 12] = [
    0.0, 25.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 500.0, 700.0, 1000.0, 1500.0,
];

const MEBIBYTE: f64 = 1024.0 * 1024.0;

pub use crate::metric_names::{INTERVAL_DURATION as INTERVAL_METRIC, METHOD_ATTRIBUTE};

fn measurement(
    name: &str,
    kind: MetricKind,
    value: f64,
    unit: &str,
    description: &str,
    attributes: BTreeMap<String, AttributeValue>,
) -> MetricMeasurement {
    MetricMeasurement {
        name: name.into(),
        kind,
        value_type: MetricValue::F64(value).value_type(),
        value: MetricValue::F64(value),
        unit: Some(unit.into()),
        description: Some(description.into()),
        attributes: Some(attributes),
        boundaries: None,
    }
}

fn device_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    BTreeMap::from([
        (
            "gpu_id".to_string(),
            AttributeValue::String(device.device_identifier.clone()),
        ),
        (
            "gpu_name".to_string(),
            AttributeValue::String(
                device
                    .name
                    .clone()
                    .unwrap_or_else(|| device.device_identifier.clone()),
            ),
        ),
    ])
}

/// The measurements of one sample. `closed` holds the intervals (by device) that this
/// sample ended.
pub fn sample_measurements(
    sample: &GpuSample,
    closed: &[ClosedInterval],
    settings: &EnergySettings,
) -> Vec<MetricMeasurement> {
    let mut out = Vec::new();
    let flag = |value: bool| if value { 1.0 } else { 0.0 };
    for device in &sample.devices {
        let attributes = device_attributes(device);
        let gauges: [(&str, Option<f64>, &str, &str); 16] = [
            (
                names::GPU_UTILIZATION,
                device.compute_utilization_percent,
                "%",
                "GPU utilization",
            ),
            (
                names::GPU_MEMORY_UTILIZATION,
                device.memory_utilization_percent,
                "%",
                "GPU memory controller utilization",
            ),
            (
                names::GPU_MEMORY_USED,
                device.memory_used_bytes.map(|b| b as f64 / MEBIBYTE),
                "MiB",
                "GPU memory used",
            ),
            (
                names::GPU_MEMORY_TOTAL,
                device.memory_total_bytes.map(|b| b as f64 / MEBIBYTE),
                "MiB",
                "GPU memory total",
            ),
            (
                names::GPU_TEMPERATURE,
                device.temperature_celsius,
                "Cel",
                "GPU temperature",
            ),
            (
                names::GPU_POWER,
                device.power_draw_watts,
                "W",
                "GPU power draw",
            ),
            (
                names::GPU_POWER_LIMIT,
                device.power_limit_watts,
                "W",
                "GPU power limit",
            ),
            (
                names::GPU_CLOCK_SM,
                device.sm_clock_mhz,
                "MHz",
                "GPU SM clock",
            ),
            (
                names::GPU_CLOCK_MEMORY,
                device.memory_clock_mhz,
                "MHz",
                "GPU memory clock",
            ),
            (
                names::GPU_FAN_SPEED,
                device.fan_speed_percent,
                "%",
                "GPU fan speed",
            ),
            (
                names::GPU_PERFORMANCE_STATE,
                device.performance_state.map(f64::from),
                "1",
                "GPU performance state, 0 to 15",
            ),
            (
                names::GPU_THROTTLE_THERMAL,
                device.throttle_thermal.map(flag),
                "1",
                "Thermal throttling, 1 or 0",
            ),
            (
                names::GPU_THROTTLE_POWER,
                device.throttle_power.map(flag),
                "1",
                "Power throttling, 1 or 0",
            ),
            (
                names::GPU_THROTTLE_HW_SLOWDOWN,
                device.throttle_hw_slowdown.map(flag),
                "1",
                "Hardware slowdown, 1 or 0",
            ),
            (
                names::GPU_ECC_ERRORS_CORRECTED,
                device.ecc_corrected.map(|c| c as f64),
                "1",
                "Corrected ECC errors (volatile)",
            ),
            (
                names::GPU_ECC_ERRORS_UNCORRECTED,
                device.ecc_uncorrected.map(|c| c as f64),
                "1",
                "Uncorrected ECC errors (volatile)",
            ),
        ];
        for (name, value, unit, description) in gauges {
            // What is not measured is not reported: no point for a missing value.
            if let Some(value) = value.filter(|v| v.is_finite()) {
                out.push(measurement(
                    name,
                    MetricKind::Gauge,
                    value,
                    unit,
                    description,
                    attributes.clone(),
                ));
            }
        }
        if let Some(watts) = device.power_draw_watts.filter(|w| w.is_finite()) {
            let mut histogram = measurement(
                names::POWER_CONSUMPTION,
                MetricKind::Histogram,
                watts,
                "W",
                "GPU power readings",
                attributes.clone(),
            );
            histogram.boundaries = Some(POWER_HISTOGRAM_BOUNDARIES.to_vec());
            out.push(histogram);
        }
    }
    aggregates(sample, &mut out);
    energy(closed, sample, settings, &mut out);
    out
}

fn aggregates(sample: &GpuSample, out: &mut Vec<MetricMeasurement>) {
    let devices = &sample.devices;
    if devices.is_empty() {
        return;
    }
    let none = BTreeMap::new;
    let utilizations: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.compute_utilization_percent)
        .collect();
    if !utilizations.is_empty() {
        let mean = utilizations.iter().sum::<f64>() / utilizations.len() as f64;
        out.push(measurement(
            names::GPU_AGGREGATE_MEAN_UTILIZATION,
            MetricKind::Gauge,
            mean,
            "%",
            "Mean utilization over the GPUs that reported it",
            none(),
        ));
    }
    let memory: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.memory_used_bytes)
        .map(|b| b as f64)
        .collect();
    if !memory.is_empty() {
        let gibibytes = memory.iter().sum::<f64>() / (MEBIBYTE * 1024.0);
        out.push(measurement(
            names::GPU_AGGREGATE_TOTAL_MEMORY_USED,
            MetricKind::Gauge,
            gibibytes,
            "GiB",
            "GPU memory used over the GPUs that reported it",
            none(),
        ));
    }
    let power: Vec<f64> = devices.iter().filter_map(|d| d.power_draw_watts).collect();
    if !power.is_empty() {
        out.push(measurement(
            names::GPU_AGGREGATE_TOTAL_POWER,
            MetricKind::Gauge,
            power.iter().sum(),
            "W",
            "Power over the GPUs that reported it",
            none(),
        ));
    }
    let temperatures: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.temperature_celsius)
        .collect();
    if let Some(max) = temperatures.iter().copied().reduce(f64::max) {
        out.push(measurement(
            names::GPU_AGGREGATE_MAX_TEMPERATURE,
            MetricKind::Gauge,
            max,
            "Cel",
            "Hottest GPU",
            none(),
        ));
    }
    out.push(measurement(
        names::GPU_AGGREGATE_GPU_COUNT,
        MetricKind::Gauge,
        devices.len() as f64,
        "1",
        "GPUs that reported",
        none(),
    ));
}

fn energy(
    closed: &[ClosedInterval],
    sample: &GpuSample,
    settings: &EnergySettings,
    out: &mut Vec<MetricMeasurement>,
) {
    if closed.is_empty() {
        return;
    }
    let config = &settings.config;
    // gen_ai.* are the spec's trapezoid; wattline.* the best figure (the counter where
    // readable), what the report shows.
    let mut trapezoid_kwh = 0.0;
    let mut best_kwh = 0.0;
    let mut total_seconds: f64 = 0.0;
    for interval in closed {
        best_kwh += interval.kilowatt_hours;
        total_seconds = total_seconds.max(interval.seconds);
        let mut attributes = sample
            .devices
            .iter()
            .find(|d| d.device_identifier == interval.device)
            .map(device_attributes)
            .unwrap_or_default();
        attributes.insert("component".into(), AttributeValue::String("gpu".into()));
        // The interval's length and method let a reader of the event file rebuild the
        // report: covered time and which figure the energy is.
        let mut best_attributes = attributes.clone();
        let method = if interval.counter {
            "counter"
        } else {
            "trapezoid"
        };
        best_attributes.insert(
            METHOD_ATTRIBUTE.into(),
            AttributeValue::String(method.into()),
        );
        out.push(measurement(
            INTERVAL_METRIC,
            MetricKind::Gauge,
            interval.seconds,
            "s",
            "Length of the power interval the energy covers",
            best_attributes.clone(),
        ));
        out.push(measurement(
            names::WATTLINE_ENERGY_CONSUMED,
            MetricKind::Counter,
            interval.kilowatt_hours,
            "kWh",
            "Energy consumed: the hardware counter where readable, else the trapezoid",
            best_attributes,
        ));
        if let Some(kwh) = interval.trapezoid_kilowatt_hours {
            trapezoid_kwh += kwh;
            out.push(measurement(
                names::ENERGY_CONSUMED,
                MetricKind::Counter,
                kwh,
                "kWh",
                "Energy consumed: mean of the two power readings times the interval",
                attributes,
            ));
        }
    }
    let none = BTreeMap::new;
    for (total, cost, co2, kwh) in [
        (
            names::ENERGY_TOTAL,
            names::POWER_COST,
            names::CO2_EMISSIONS,
            trapezoid_kwh,
        ),
        (
            names::WATTLINE_ENERGY_TOTAL,
            names::WATTLINE_ENERGY_COST,
            names::WATTLINE_CO2_EMISSIONS,
            best_kwh,
        ),
    ] {
        out.push(measurement(
            total,
            MetricKind::Counter,
            kwh,
            "kWh",
            "GPU energy only; CPU and RAM are not in this figure",
            none(),
        ));
        out.push(measurement(
            cost,
            MetricKind::Counter,
            kwh * config.cost_per_kwh,
            &config.currency,
            "Cost of the energy consumed",
            none(),
        ));
        if config.co2_tracking {
            out.push(measurement(
                co2,
                MetricKind::Counter,
                kwh * config.carbon_intensity,
                "gCO2e",
                "Energy times the configured carbon intensity (a factor)",
                none(),
            ));
        }
    }
    if config.co2_tracking && total_seconds > 0.0 {
        out.push(measurement(
            names::CO2_EMISSIONS_RATE,
            MetricKind::Gauge,
            trapezoid_kwh * config.carbon_intensity / total_seconds,
            "gCO2e/s",
            "CO2 rate over the last interval",
            none(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuVendor;

    fn value_of(measurements: &[MetricMeasurement], name: &str) -> Option<f64> {
        measurements
            .iter()
            .find(|m| m.name == name)
            .map(|m| match m.value {
                MetricValue::F64(value) => value,
                ref other => panic!("{name}: {other:?}"),
            })
    }

    #[test]
    fn gen_ai_energy_is_the_trapezoid_and_wattlines_the_counter_beside_it() {
        // 100 W then 200 W over 10 s: the trapezoid says 1500 J; the counter 1800 J.
        let joules = |j: f64| j / 3_600_000.0;
        let closed = [ClosedInterval {
            device: "GPU-0".into(),
            kilowatt_hours: joules(1800.0),
            trapezoid_kilowatt_hours: Some(joules(1500.0)),
            seconds: 10.0,
            counter: true,
        }];
        let mut sample = GpuSample::empty();
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-0");
        device.power_draw_watts = Some(200.0);
        sample.devices.push(device);
        let mut settings = EnergySettings::default();
        settings.config.cost_per_kwh = 2.0;
        settings.config.co2_tracking = true;
        settings.config.carbon_intensity = 100.0;
        let out = sample_measurements(&sample, &closed, &settings);
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-15);
        assert!(close(
            value_of(&out, names::ENERGY_CONSUMED),
            joules(1500.0)
        ));
        assert!(close(value_of(&out, names::ENERGY_TOTAL), joules(1500.0)));
        assert!(close(
            value_of(&out, names::POWER_COST),
            2.0 * joules(1500.0)
        ));
        assert!(close(
            value_of(&out, names::CO2_EMISSIONS),
            100.0 * joules(1500.0)
        ));
        assert!(close(
            value_of(&out, names::WATTLINE_ENERGY_CONSUMED),
            joules(1800.0)
        ));
        assert!(close(
            value_of(&out, names::WATTLINE_ENERGY_TOTAL),
            joules(1800.0)
        ));
        assert!(close(
            value_of(&out, names::WATTLINE_ENERGY_COST),
            2.0 * joules(1800.0)
        ));
        let best = out
            .iter()
            .find(|m| m.name == names::WATTLINE_ENERGY_CONSUMED)
            .unwrap();
        assert_eq!(
            best.attributes.as_ref().unwrap()[METHOD_ATTRIBUTE],
            AttributeValue::String("counter".into())
        );
        let spec = out
            .iter()
            .find(|m| m.name == names::ENERGY_CONSUMED)
            .unwrap();
        assert_eq!(
            spec.attributes.as_ref().unwrap()["component"],
            AttributeValue::String("gpu".into())
        );
    }
}

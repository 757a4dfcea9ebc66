//! The `gen_ai.*` metric values of one GPU sample, exactly as the GPU spec's reference
//! (`genai-otel-instrument`) exports them: per-device gauges keyed by `gpu_id` (the
//! device index) and `gpu_name`, aggregates carrying `gpu_count`, and the energy, cost
//! and CO2 of the intervals the sample closed. What wattline knows beyond the reference
//! (UUIDs, per-device energy by the best figure, hardware throttle reasons) goes under
//! `wattline.*` names, never into a `gen_ai.*` series.

use std::collections::BTreeMap;

use wattline_config::energy::EnergySettings;

use super::account::ClosedInterval;
use super::integrator::JOULES_PER_KILOWATT_HOUR;
use super::rapl_intervals::RaplInterval;
use super::report::EnergyDomain;
use wattline_model::events::{AttributeValue, MetricKind, MetricMeasurement, MetricValue};
use wattline_model::metric_names as names;
use wattline_model::snapshot::{GpuDeviceReading, GpuSample};

/// Bucket boundaries of `gen_ai.power.consumption`, W.
pub const POWER_HISTOGRAM_BOUNDARIES: [f64; 12] = [
    0.0, 25.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 500.0, 700.0, 1000.0, 1500.0,
];

const MEBIBYTE: f64 = 1024.0 * 1024.0;

pub use wattline_model::metric_names::{INTERVAL_DURATION as INTERVAL_METRIC, METHOD_ATTRIBUTE};

/// The gauges the reference exports as integers (NVML answers them in whole units):
/// their points are `as_int` on the wire, as the reference's are.
const INTEGER_GAUGES: &[&str] = &[
    names::GPU_UTILIZATION,
    names::GPU_MEMORY_UTILIZATION,
    names::GPU_TEMPERATURE,
    names::GPU_CLOCK_SM,
    names::GPU_CLOCK_MEMORY,
    names::GPU_FAN_SPEED,
    names::GPU_PERFORMANCE_STATE,
    names::GPU_THROTTLE_THERMAL,
    names::GPU_THROTTLE_POWER,
    names::GPU_THROTTLE_HW_SLOWDOWN,
    names::GPU_ECC_ERRORS_CORRECTED,
    names::GPU_ECC_ERRORS_UNCORRECTED,
    names::GPU_AGGREGATE_MAX_TEMPERATURE,
];

/// One measurement with its unit, description and attributes: an integer for the
/// [`INTEGER_GAUGES`] (rounded), `f64` otherwise.
pub(crate) fn measurement(
    name: &str,
    kind: MetricKind,
    value: f64,
    unit: &str,
    description: &str,
    attributes: BTreeMap<String, AttributeValue>,
) -> MetricMeasurement {
    let value = if INTEGER_GAUGES.contains(&name) {
        MetricValue::I64(value.round() as i64)
    } else {
        MetricValue::F64(value)
    };
    MetricMeasurement {
        name: name.into(),
        kind,
        value_type: value.value_type(),
        value,
        unit: Some(unit.into()),
        description: Some(description.into()),
        attributes: Some(attributes),
        boundaries: None,
    }
}

/// The reference's device attributes: `gpu_id` is the device index as a string (the
/// backend's identifier for a device without one), `gpu_name` its name.
fn device_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    let gpu_id = device.device_index.map_or_else(
        || device.device_identifier.clone(),
        |index| index.to_string(),
    );
    BTreeMap::from([
        ("gpu_id".to_string(), AttributeValue::String(gpu_id)),
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

/// [`device_attributes`] with the backend's identifier (NVML: the UUID) as `gpu_uuid`,
/// for the `wattline.*` per-device series.
fn wattline_device_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    let mut attributes = device_attributes(device);
    attributes.insert(
        GPU_UUID_ATTRIBUTE.into(),
        AttributeValue::String(device.device_identifier.clone()),
    );
    attributes
}

/// The attribute holding the backend's device identifier on `wattline.*` series.
pub const GPU_UUID_ATTRIBUTE: &str = "gpu_uuid";

fn component_gpu() -> BTreeMap<String, AttributeValue> {
    component("gpu")
}

/// The reference's `component` attribute: `cpu`, `gpu` or `ram`.
fn component(name: &str) -> BTreeMap<String, AttributeValue> {
    BTreeMap::from([("component".into(), AttributeValue::String(name.into()))])
}

/// `gen_ai.energy.consumed` (kWh) and `gen_ai.power.consumption` (W, mean over the
/// interval) of RAPL `intervals`, as the reference's codecarbon mode sends its CPU and
/// RAM figures: one point per component, `component = cpu` (the CPU packages summed)
/// and `component = ram` (the DRAM zones summed); a component with no interval, or no
/// energy, sends no point (the reference skips a zero too).
pub fn rapl_measurements(intervals: &[RaplInterval]) -> Vec<MetricMeasurement> {
    let mut out = Vec::new();
    for (domain, name) in [
        (EnergyDomain::CpuPackage, "cpu"),
        (EnergyDomain::Dram, "ram"),
    ] {
        let of_domain = || intervals.iter().filter(|i| i.domain == domain);
        let joules: f64 = of_domain().map(|i| i.joules).sum();
        if of_domain().next().is_none() || joules <= 0.0 {
            continue;
        }
        let watts: f64 = of_domain().map(RaplInterval::watts).sum();
        let mut histogram = measurement(
            names::POWER_CONSUMPTION,
            MetricKind::Histogram,
            watts,
            "W",
            "RAPL power, mean over the interval",
            component(name),
        );
        histogram.boundaries = Some(POWER_HISTOGRAM_BOUNDARIES.to_vec());
        out.push(histogram);
        out.push(measurement(
            names::ENERGY_CONSUMED,
            MetricKind::Counter,
            joules / JOULES_PER_KILOWATT_HOUR,
            "kWh",
            "Energy consumed: the RAPL counters' increase",
            component(name),
        ));
    }
    out
}

/// One per-device `gen_ai.gpu.*` gauge: how it is named and described, and how to read
/// it from a device's reading (`None`: not measured, no point).
struct DeviceGauge {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
}

/// A throttle reason as the reference writes it: 1 or 0.
fn flag(value: bool) -> f64 {
    if value { 1.0 } else { 0.0 }
}

/// The reference's per-device gauges, in the order they are sent.
const DEVICE_GAUGES: [DeviceGauge; 16] = [
    DeviceGauge {
        name: names::GPU_UTILIZATION,
        unit: "%",
        description: "GPU utilization",
        value: |device| device.compute_utilization_percent,
    },
    DeviceGauge {
        name: names::GPU_MEMORY_UTILIZATION,
        unit: "%",
        description: "GPU memory controller utilization",
        value: |device| device.memory_utilization_percent,
    },
    DeviceGauge {
        name: names::GPU_MEMORY_USED,
        unit: "MiB",
        description: "GPU memory used",
        value: |device| device.memory_used_bytes.map(|b| b as f64 / MEBIBYTE),
    },
    DeviceGauge {
        name: names::GPU_MEMORY_TOTAL,
        unit: "MiB",
        description: "GPU memory total",
        value: |device| device.memory_total_bytes.map(|b| b as f64 / MEBIBYTE),
    },
    DeviceGauge {
        name: names::GPU_TEMPERATURE,
        unit: "Cel",
        description: "GPU temperature",
        value: |device| device.temperature_celsius,
    },
    DeviceGauge {
        name: names::GPU_POWER,
        unit: "W",
        description: "GPU power draw",
        value: |device| device.power_draw_watts,
    },
    DeviceGauge {
        name: names::GPU_POWER_LIMIT,
        unit: "W",
        description: "GPU power limit",
        value: |device| device.power_limit_watts,
    },
    DeviceGauge {
        name: names::GPU_CLOCK_SM,
        unit: "MHz",
        description: "GPU SM clock",
        value: |device| device.sm_clock_mhz,
    },
    DeviceGauge {
        name: names::GPU_CLOCK_MEMORY,
        unit: "MHz",
        description: "GPU memory clock",
        value: |device| device.memory_clock_mhz,
    },
    DeviceGauge {
        name: names::GPU_FAN_SPEED,
        unit: "%",
        description: "GPU fan speed",
        value: |device| device.fan_speed_percent,
    },
    DeviceGauge {
        name: names::GPU_PERFORMANCE_STATE,
        unit: "1",
        description: "GPU performance state, 0 to 15",
        value: |device| device.performance_state.map(f64::from),
    },
    DeviceGauge {
        name: names::GPU_THROTTLE_THERMAL,
        unit: "1",
        description: "Thermal throttling, 1 or 0",
        value: |device| device.throttle_thermal.map(flag),
    },
    DeviceGauge {
        name: names::GPU_THROTTLE_POWER,
        unit: "1",
        description: "Power throttling, 1 or 0",
        value: |device| device.throttle_power.map(flag),
    },
    DeviceGauge {
        name: names::GPU_THROTTLE_HW_SLOWDOWN,
        unit: "1",
        description: "Hardware slowdown, 1 or 0",
        value: |device| device.throttle_hw_slowdown.map(flag),
    },
    DeviceGauge {
        name: names::GPU_ECC_ERRORS_CORRECTED,
        unit: "1",
        description: "Corrected ECC errors (volatile)",
        value: |device| device.ecc_corrected.map(|c| c as f64),
    },
    DeviceGauge {
        name: names::GPU_ECC_ERRORS_UNCORRECTED,
        unit: "1",
        description: "Uncorrected ECC errors (volatile)",
        value: |device| device.ecc_uncorrected.map(|c| c as f64),
    },
];

/// A hardware throttle reason the reference does not export, sent per device under a
/// `wattline.*` name.
struct HardwareFlag {
    name: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<bool>,
}

/// The `wattline.*` throttle flags, in the order they are sent.
const HARDWARE_FLAGS: [HardwareFlag; 2] = [
    HardwareFlag {
        name: names::WATTLINE_GPU_THROTTLE_HW_THERMAL,
        description: "Hardware thermal slowdown, 1 or 0",
        value: |device| device.throttle_hw_thermal,
    },
    HardwareFlag {
        name: names::WATTLINE_GPU_THROTTLE_HW_POWER_BRAKE,
        description: "Hardware power brake slowdown, 1 or 0",
        value: |device| device.throttle_hw_power_brake,
    },
];

/// The measurements of one sample. `closed` holds the intervals (by device) that this
/// sample ended.
pub fn sample_measurements(
    sample: &GpuSample,
    closed: &[ClosedInterval],
    settings: &EnergySettings,
) -> Vec<MetricMeasurement> {
    let mut out = Vec::new();
    for device in &sample.devices {
        device_measurements(device, &mut out);
    }
    // One power reading of the whole GPU side per sample, as the reference's
    // (codecarbon's GPU power, `component = gpu`).
    let powers: Vec<f64> = sample
        .devices
        .iter()
        .filter_map(|device| device.power_draw_watts.filter(|w| w.is_finite()))
        .collect();
    if !powers.is_empty() {
        let mut histogram = measurement(
            names::POWER_CONSUMPTION,
            MetricKind::Histogram,
            powers.iter().sum(),
            "W",
            "GPU power readings",
            component_gpu(),
        );
        histogram.boundaries = Some(POWER_HISTOGRAM_BOUNDARIES.to_vec());
        out.push(histogram);
    }
    aggregates(sample, &mut out);
    energy(closed, sample, settings, &mut out);
    out
}

/// One device's gauges ([`DEVICE_GAUGES`]) and throttle flags ([`HARDWARE_FLAGS`]).
fn device_measurements(device: &GpuDeviceReading, out: &mut Vec<MetricMeasurement>) {
    let attributes = device_attributes(device);
    for gauge in &DEVICE_GAUGES {
        // What is not measured is not reported: no point for a missing value.
        if let Some(value) = (gauge.value)(device).filter(|v| v.is_finite()) {
            out.push(measurement(
                gauge.name,
                MetricKind::Gauge,
                value,
                gauge.unit,
                gauge.description,
                attributes.clone(),
            ));
        }
    }
    for hardware_flag in &HARDWARE_FLAGS {
        if let Some(value) = (hardware_flag.value)(device) {
            out.push(measurement(
                hardware_flag.name,
                MetricKind::Gauge,
                flag(value),
                "1",
                hardware_flag.description,
                wattline_device_attributes(device),
            ));
        }
    }
}

fn aggregates(sample: &GpuSample, out: &mut Vec<MetricMeasurement>) {
    let devices = &sample.devices;
    if devices.is_empty() {
        return;
    }
    // The reference's `gpu_count`: how many devices the aggregate is over.
    let over = |count: usize| {
        BTreeMap::from([(
            "gpu_count".to_string(),
            AttributeValue::String(count.to_string()),
        )])
    };
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
            over(utilizations.len()),
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
            over(memory.len()),
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
            over(power.len()),
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
            over(temperatures.len()),
        ));
    }
}

/// The energy, cost and CO2 of the intervals `closed`: per interval, then the totals.
fn energy(
    closed: &[ClosedInterval],
    sample: &GpuSample,
    settings: &EnergySettings,
    out: &mut Vec<MetricMeasurement>,
) {
    if closed.is_empty() {
        return;
    }
    let carbon_intensity = settings.carbon_intensity().gco2e_per_kwh;
    // gen_ai.* are the spec's trapezoid in the reference's shapes; wattline.* the best
    // figure (the counter where readable), what the report shows, per device.
    let mut totals = EnergyTotals::default();
    for interval in closed {
        totals.best_kwh += interval.kilowatt_hours;
        totals.seconds = totals.seconds.max(interval.seconds);
        let device = sample
            .devices
            .iter()
            .find(|d| d.device_identifier == interval.device);
        if let Some(kwh) = interval_measurements(interval, device, settings, carbon_intensity, out)
        {
            totals.trapezoid_kwh += kwh;
        }
    }
    total_measurements(&totals, settings, carbon_intensity, out);
}

/// What the intervals of one sample add up to.
#[derive(Default)]
struct EnergyTotals {
    /// The spec's trapezoid figure, kWh.
    trapezoid_kwh: f64,
    /// The report's figure (the counter where readable), kWh.
    best_kwh: f64,
    /// The longest interval, s.
    seconds: f64,
}

/// One interval's measurements (on `device`, when the sample has it); its trapezoid
/// energy, kWh, when it has one.
fn interval_measurements(
    interval: &ClosedInterval,
    device: Option<&GpuDeviceReading>,
    settings: &EnergySettings,
    carbon_intensity: f64,
    out: &mut Vec<MetricMeasurement>,
) -> Option<f64> {
    let config = &settings.config;
    let reference_attributes = device.map(device_attributes).unwrap_or_else(|| {
        BTreeMap::from([(
            "gpu_id".to_string(),
            AttributeValue::String(interval.device.clone()),
        )])
    });
    let best_attributes = interval_attributes(interval, device);
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
    let kwh = interval.trapezoid_kilowatt_hours?;
    // The reference's shapes: energy by component, cost per device, CO2 per device
    // (its manual carbon-intensity mode, the spec's formula).
    out.push(measurement(
        names::ENERGY_CONSUMED,
        MetricKind::Counter,
        kwh,
        "kWh",
        "Energy consumed: mean of the two power readings times the interval",
        component_gpu(),
    ));
    out.push(measurement(
        names::POWER_COST,
        MetricKind::Counter,
        kwh * config.cost_per_kwh,
        &config.currency,
        "Cost of the energy consumed",
        reference_attributes.clone(),
    ));
    if config.co2_tracking {
        let gpu_id = reference_attributes
            .get("gpu_id")
            .cloned()
            .map(|id| BTreeMap::from([("gpu_id".to_string(), id)]))
            .unwrap_or_default();
        out.push(measurement(
            names::CO2_EMISSIONS,
            MetricKind::Counter,
            kwh * carbon_intensity,
            "gCO2e",
            "Energy times the configured carbon intensity (a factor)",
            gpu_id,
        ));
    }
    Some(kwh)
}

/// The `wattline.*` attributes of an interval's energy: the device, `component = gpu`,
/// and the method. The interval's length and method let a reader of the event file
/// rebuild the report: covered time and which figure the energy is.
fn interval_attributes(
    interval: &ClosedInterval,
    device: Option<&GpuDeviceReading>,
) -> BTreeMap<String, AttributeValue> {
    let mut attributes = device.map(wattline_device_attributes).unwrap_or_else(|| {
        BTreeMap::from([(
            GPU_UUID_ATTRIBUTE.to_string(),
            AttributeValue::String(interval.device.clone()),
        )])
    });
    attributes.insert("component".into(), AttributeValue::String("gpu".into()));
    let method = if interval.counter {
        "counter"
    } else {
        "trapezoid"
    };
    attributes.insert(
        METHOD_ATTRIBUTE.into(),
        AttributeValue::String(method.into()),
    );
    attributes
}

/// The sample's totals: the reference's (trapezoid) and wattline's (best figure).
fn total_measurements(
    totals: &EnergyTotals,
    settings: &EnergySettings,
    carbon_intensity: f64,
    out: &mut Vec<MetricMeasurement>,
) {
    let config = &settings.config;
    let none = BTreeMap::new;
    out.push(measurement(
        names::ENERGY_TOTAL,
        MetricKind::Counter,
        totals.trapezoid_kwh,
        "kWh",
        "GPU energy only; CPU and RAM are not in this figure",
        none(),
    ));
    if config.co2_tracking && totals.seconds > 0.0 {
        out.push(measurement(
            names::CO2_EMISSIONS_RATE,
            MetricKind::Histogram,
            totals.trapezoid_kwh * carbon_intensity / totals.seconds,
            "gCO2e/s",
            "CO2 rate over the last interval",
            none(),
        ));
    }
    out.push(measurement(
        names::WATTLINE_ENERGY_TOTAL,
        MetricKind::Counter,
        totals.best_kwh,
        "kWh",
        "GPU energy only, by the report's figure",
        none(),
    ));
    out.push(measurement(
        names::WATTLINE_ENERGY_COST,
        MetricKind::Counter,
        totals.best_kwh * config.cost_per_kwh,
        &config.currency,
        "Cost of the GPU energy, by the report's figure",
        none(),
    ));
    if config.co2_tracking {
        out.push(measurement(
            names::WATTLINE_CO2_EMISSIONS,
            MetricKind::Counter,
            totals.best_kwh * carbon_intensity,
            "gCO2e",
            "GPU energy times the configured carbon intensity (a factor)",
            none(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::snapshot::GpuVendor;

    fn value_of(measurements: &[MetricMeasurement], name: &str) -> Option<f64> {
        measurements
            .iter()
            .find(|m| m.name == name)
            .map(|m| match m.value {
                MetricValue::F64(value) => value,
                MetricValue::I64(value) if INTEGER_GAUGES.contains(&name) => value as f64,
                ref other => panic!("{name}: {other:?}"),
            })
    }

    #[test]
    fn device_gauges_in_the_references_units_and_aggregates_over_the_devices_that_said() {
        // Two devices: 3 GiB and 1 GiB used of 80 GiB, 40% and 80% busy, 300 W and
        // 100 W, 60 and 75 Cel; a third device that said nothing counts in no aggregate.
        let gib = 1024 * 1024 * 1024;
        let mut a = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-a");
        a.device_index = Some(0);
        a.memory_used_bytes = Some(3 * gib);
        a.memory_total_bytes = Some(80 * gib);
        a.compute_utilization_percent = Some(40.0);
        a.power_draw_watts = Some(300.0);
        a.temperature_celsius = Some(60.0);
        let mut b = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-b");
        b.device_index = Some(1);
        b.memory_used_bytes = Some(gib);
        b.compute_utilization_percent = Some(80.0);
        b.power_draw_watts = Some(100.0);
        b.temperature_celsius = Some(75.0);
        let silent = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-c");
        let sample = GpuSample {
            devices: vec![a, b, silent],
            processes: Vec::new(),
            taken_at: std::time::Instant::now(),
        };
        let out = sample_measurements(&sample, &[], &EnergySettings::default());
        let all = |name: &str| -> Vec<f64> {
            out.iter()
                .filter(|m| m.name == name)
                .map(|m| m.value.as_f64())
                .collect()
        };
        assert_eq!(all(names::GPU_MEMORY_USED), vec![3072.0, 1024.0]);
        assert_eq!(all(names::GPU_MEMORY_TOTAL), vec![81920.0]);
        assert_eq!(all(names::GPU_AGGREGATE_MEAN_UTILIZATION), vec![60.0]);
        assert_eq!(all(names::GPU_AGGREGATE_TOTAL_MEMORY_USED), vec![4.0]);
        assert_eq!(all(names::GPU_AGGREGATE_TOTAL_POWER), vec![400.0]);
        assert_eq!(all(names::GPU_AGGREGATE_MAX_TEMPERATURE), vec![75.0]);
        assert_eq!(all(names::POWER_CONSUMPTION), vec![400.0]);
        let count = out
            .iter()
            .find(|m| m.name == names::GPU_AGGREGATE_MEAN_UTILIZATION)
            .and_then(|m| m.attributes.as_ref())
            .and_then(|attributes| attributes.get("gpu_count").cloned());
        assert_eq!(count, Some(AttributeValue::String("2".into())));
        // No device said anything: no aggregate, no power histogram, not zeros.
        let quiet = GpuSample {
            devices: vec![GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-c")],
            processes: Vec::new(),
            taken_at: std::time::Instant::now(),
        };
        let out = sample_measurements(&quiet, &[], &EnergySettings::default());
        for name in [
            names::GPU_AGGREGATE_MEAN_UTILIZATION,
            names::GPU_AGGREGATE_TOTAL_MEMORY_USED,
            names::GPU_AGGREGATE_TOTAL_POWER,
            names::GPU_AGGREGATE_MAX_TEMPERATURE,
            names::POWER_CONSUMPTION,
        ] {
            assert!(out.iter().all(|m| m.name != name), "{name}");
        }
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
        device.device_index = Some(3);
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
        assert_eq!(
            best.attributes.as_ref().unwrap()[GPU_UUID_ATTRIBUTE],
            AttributeValue::String("GPU-0".into())
        );
        // The reference's shapes: energy by component; cost per device by index; CO2
        // per device.
        let attributes = |name: &str| {
            let found = out.iter().find(|m| m.name == name).unwrap();
            found.attributes.clone().unwrap()
        };
        assert_eq!(
            attributes(names::ENERGY_CONSUMED),
            BTreeMap::from([("component".into(), AttributeValue::String("gpu".into()))])
        );
        let cost = attributes(names::POWER_COST);
        assert_eq!(cost["gpu_id"], AttributeValue::String("3".into()));
        assert_eq!(cost.len(), 2, "gpu_id and gpu_name: {cost:?}");
        assert_eq!(
            attributes(names::CO2_EMISSIONS),
            BTreeMap::from([("gpu_id".into(), AttributeValue::String("3".into()))])
        );
        let rate = out
            .iter()
            .find(|m| m.name == names::CO2_EMISSIONS_RATE)
            .unwrap();
        assert_eq!(rate.kind, MetricKind::Histogram);
        // 1500 J at 100 gCO2e/kWh over 10 s.
        assert!(close(
            value_of(&out, names::CO2_EMISSIONS_RATE),
            100.0 * joules(1500.0) / 10.0
        ));
        // An interval of no length has no rate (never a division by zero); without
        // CO2 tracking there is none either.
        let instant = [ClosedInterval {
            seconds: 0.0,
            ..closed[0].clone()
        }];
        let out = sample_measurements(&sample, &instant, &settings);
        assert!(out.iter().all(|m| m.name != names::CO2_EMISSIONS_RATE));
        settings.config.co2_tracking = false;
        let out = sample_measurements(&sample, &closed, &settings);
        assert!(out.iter().all(|m| m.name != names::CO2_EMISSIONS_RATE));
    }
}

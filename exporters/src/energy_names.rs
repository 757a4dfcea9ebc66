//! The energy stage's telemetry
//! ([`PipelineEvent::GpuTelemetry`](wattline_model::events::PipelineEvent::GpuTelemetry),
//! [`PipelineEvent::RaplIntervals`](wattline_model::events::PipelineEvent::RaplIntervals)) under the specification's names, exactly as the GPU
//! spec's reference (`genai-otel-instrument`) exports them, with wattline's `wattline.*`
//! series beside them: every exporter sends these (the ATOF file writes them as a
//! metrics mark). Names, units and descriptions are the naming table's
//! ([`wattline_model::telemetry_names`]); this module picks the rows and builds the
//! attributes.

use std::collections::BTreeMap;

use wattline_model::energy_telemetry::{ClosedInterval, EnergyFactors, GpuTelemetry, RaplInterval};
use wattline_model::metric_measurements::{AttributeValue, MetricMeasurement, MetricValue};
use wattline_model::metric_names::METHOD_ATTRIBUTE;
use wattline_model::report::{EnergyDomain, JOULES_PER_KILOWATT_HOUR};
use wattline_model::snapshot::{GpuDeviceReading, GpuSample};
use wattline_model::telemetry_names::{
    self as table, COMPONENT_ATTRIBUTE, DEVICE_SERIES, DeviceAttributes, GPU_COUNT_ATTRIBUTE,
    GPU_ID_ATTRIBUTE, GPU_NAME_ATTRIBUTE, GPU_UUID_ATTRIBUTE, Series,
};

/// Attributes of a measurement.
pub(crate) type Attributes = BTreeMap<String, AttributeValue>;

/// One measurement of `series`, its unit the series' (`currency` for a cost): an
/// integer (rounded) where the series is one, `f64` otherwise.
pub(crate) fn measurement(
    series: &Series,
    currency: &str,
    value: f64,
    attributes: Attributes,
) -> MetricMeasurement {
    let value = if series.integer {
        MetricValue::I64(value.round() as i64)
    } else {
        MetricValue::F64(value)
    };
    MetricMeasurement {
        name: series.name.into(),
        kind: series.kind,
        value_type: value.value_type(),
        value,
        unit: Some(series.unit(currency).into()),
        description: Some(series.description.into()),
        attributes: Some(attributes),
        boundaries: series.boundaries.map(<[f64]>::to_vec),
    }
}

/// [`measurement`] of a series whose unit is not the currency.
fn fixed(series: &Series, value: f64, attributes: Attributes) -> MetricMeasurement {
    measurement(series, "", value, attributes)
}

/// One string attribute.
fn attribute(key: &str, value: impl Into<String>) -> Attributes {
    BTreeMap::from([(key.to_string(), AttributeValue::String(value.into()))])
}

/// The reference's device attributes: `gpu_id` is the device index as a string (the
/// backend's identifier for a device without one), `gpu_name` its name.
fn device_attributes(device: &GpuDeviceReading) -> Attributes {
    let gpu_id = device.device_index.map_or_else(
        || device.device_identifier.clone(),
        |index| index.to_string(),
    );
    let mut attributes = attribute(GPU_ID_ATTRIBUTE, gpu_id);
    attributes.insert(
        GPU_NAME_ATTRIBUTE.into(),
        AttributeValue::String(
            device
                .name
                .clone()
                .unwrap_or_else(|| device.device_identifier.clone()),
        ),
    );
    attributes
}

/// [`device_attributes`] with the backend's identifier (NVML: the UUID) as `gpu_uuid`,
/// for the `wattline.*` per-device series.
fn wattline_device_attributes(device: &GpuDeviceReading) -> Attributes {
    let mut attributes = device_attributes(device);
    attributes.insert(
        GPU_UUID_ATTRIBUTE.into(),
        AttributeValue::String(device.device_identifier.clone()),
    );
    attributes
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
        out.push(fixed(
            &table::RAPL_POWER,
            watts,
            attribute(COMPONENT_ATTRIBUTE, name),
        ));
        out.push(fixed(
            &table::RAPL_ENERGY,
            joules / JOULES_PER_KILOWATT_HOUR,
            attribute(COMPONENT_ATTRIBUTE, name),
        ));
    }
    out
}

/// The measurements of one GPU gauge sample and the intervals it closed.
pub fn gpu_measurements(telemetry: &GpuTelemetry) -> Vec<MetricMeasurement> {
    let sample = &telemetry.sample;
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
        out.push(fixed(
            &table::GPU_POWER_READINGS,
            powers.iter().sum(),
            attribute(COMPONENT_ATTRIBUTE, "gpu"),
        ));
    }
    aggregates(sample, &mut out);
    energy(&telemetry.intervals, sample, &telemetry.factors, &mut out);
    out
}

/// One device's rows of the table, in its order.
fn device_measurements(device: &GpuDeviceReading, out: &mut Vec<MetricMeasurement>) {
    let reference = device_attributes(device);
    for row in &DEVICE_SERIES {
        // What is not measured is not reported: no point for a missing value.
        let Some(value) = (row.value)(device).filter(|v| v.is_finite()) else {
            continue;
        };
        let attributes = match row.attributes {
            DeviceAttributes::Reference => reference.clone(),
            DeviceAttributes::WithUuid => wattline_device_attributes(device),
        };
        out.push(fixed(&row.series, value, attributes));
    }
}

/// The aggregates over the devices, each over those that reported its figure.
fn aggregates(sample: &GpuSample, out: &mut Vec<MetricMeasurement>) {
    let devices = &sample.devices;
    if devices.is_empty() {
        return;
    }
    let over = |count: usize| attribute(GPU_COUNT_ATTRIBUTE, count.to_string());
    let utilizations: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.compute_utilization_percent)
        .collect();
    if !utilizations.is_empty() {
        let mean = utilizations.iter().sum::<f64>() / utilizations.len() as f64;
        out.push(fixed(
            &table::GPU_MEAN_UTILIZATION,
            mean,
            over(utilizations.len()),
        ));
    }
    let memory: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.memory_used_bytes)
        .map(|b| b as f64)
        .collect();
    if !memory.is_empty() {
        let gibibytes = memory.iter().sum::<f64>() / (1024.0 * 1024.0 * 1024.0);
        out.push(fixed(
            &table::GPU_TOTAL_MEMORY_USED,
            gibibytes,
            over(memory.len()),
        ));
    }
    let power: Vec<f64> = devices.iter().filter_map(|d| d.power_draw_watts).collect();
    if !power.is_empty() {
        out.push(fixed(
            &table::GPU_TOTAL_POWER,
            power.iter().sum(),
            over(power.len()),
        ));
    }
    let temperatures: Vec<f64> = devices
        .iter()
        .filter_map(|d| d.temperature_celsius)
        .collect();
    if let Some(max) = temperatures.iter().copied().reduce(f64::max) {
        out.push(fixed(
            &table::GPU_MAX_TEMPERATURE,
            max,
            over(temperatures.len()),
        ));
    }
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

/// The energy, cost and CO2 of the intervals `closed`: per interval, then the totals.
fn energy(
    closed: &[ClosedInterval],
    sample: &GpuSample,
    factors: &EnergyFactors,
    out: &mut Vec<MetricMeasurement>,
) {
    if closed.is_empty() {
        return;
    }
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
        if let Some(kwh) = interval_measurements(interval, device, factors, out) {
            totals.trapezoid_kwh += kwh;
        }
    }
    total_measurements(&totals, factors, out);
}

/// One interval's measurements (on `device`, when the sample has it); its trapezoid
/// energy, kWh, when it has one.
fn interval_measurements(
    interval: &ClosedInterval,
    device: Option<&GpuDeviceReading>,
    factors: &EnergyFactors,
    out: &mut Vec<MetricMeasurement>,
) -> Option<f64> {
    let reference_attributes = device
        .map(device_attributes)
        .unwrap_or_else(|| attribute(GPU_ID_ATTRIBUTE, interval.device.clone()));
    let best_attributes = interval_attributes(interval, device);
    out.push(fixed(
        &table::INTERVAL_LENGTH,
        interval.seconds,
        best_attributes.clone(),
    ));
    out.push(fixed(
        &table::INTERVAL_ENERGY,
        interval.kilowatt_hours,
        best_attributes,
    ));
    let kwh = interval.trapezoid_kilowatt_hours?;
    // The reference's shapes: energy by component, cost per device, CO2 per device
    // (its manual carbon-intensity mode, the spec's formula).
    out.push(fixed(
        &table::INTERVAL_TRAPEZOID_ENERGY,
        kwh,
        attribute(COMPONENT_ATTRIBUTE, "gpu"),
    ));
    out.push(measurement(
        &table::INTERVAL_COST,
        &factors.currency,
        kwh * factors.cost_per_kwh,
        reference_attributes.clone(),
    ));
    if let Some(carbon_intensity) = factors.carbon_intensity {
        let gpu_id = reference_attributes
            .get(GPU_ID_ATTRIBUTE)
            .cloned()
            .map(|id| BTreeMap::from([(GPU_ID_ATTRIBUTE.to_string(), id)]))
            .unwrap_or_default();
        out.push(fixed(&table::INTERVAL_CO2, kwh * carbon_intensity, gpu_id));
    }
    Some(kwh)
}

/// The `wattline.*` attributes of an interval's energy: the device, `component = gpu`,
/// and the method. The interval's length and method let a reader of the event file
/// rebuild the report: covered time and which figure the energy is.
fn interval_attributes(interval: &ClosedInterval, device: Option<&GpuDeviceReading>) -> Attributes {
    let mut attributes = device
        .map(wattline_device_attributes)
        .unwrap_or_else(|| attribute(GPU_UUID_ATTRIBUTE, interval.device.clone()));
    attributes.insert(
        COMPONENT_ATTRIBUTE.into(),
        AttributeValue::String("gpu".into()),
    );
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
    factors: &EnergyFactors,
    out: &mut Vec<MetricMeasurement>,
) {
    let none = BTreeMap::new;
    out.push(fixed(
        &table::TOTAL_TRAPEZOID_ENERGY,
        totals.trapezoid_kwh,
        none(),
    ));
    if let Some(carbon_intensity) = factors.carbon_intensity.filter(|_| totals.seconds > 0.0) {
        out.push(fixed(
            &table::CO2_RATE,
            totals.trapezoid_kwh * carbon_intensity / totals.seconds,
            none(),
        ));
    }
    out.push(fixed(&table::TOTAL_ENERGY, totals.best_kwh, none()));
    out.push(measurement(
        &table::TOTAL_COST,
        &factors.currency,
        totals.best_kwh * factors.cost_per_kwh,
        none(),
    ));
    if let Some(carbon_intensity) = factors.carbon_intensity {
        out.push(fixed(
            &table::TOTAL_CO2,
            totals.best_kwh * carbon_intensity,
            none(),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use wattline_config::energy::{EnergySettings, FactorOrigin};
    use wattline_config::grid_intensity::region_intensity;
    use wattline_model::metric_measurements::MetricKind;
    use wattline_model::metric_names::{self as names, METHOD_ATTRIBUTE};
    use wattline_model::snapshot::GpuVendor;

    /// The sample and its closed intervals as the energy stage sends them, priced by
    /// `settings`.
    fn sample_measurements(
        sample: &GpuSample,
        closed: &[ClosedInterval],
        settings: &EnergySettings,
    ) -> Vec<MetricMeasurement> {
        gpu_measurements(&GpuTelemetry {
            sample: Arc::new(sample.clone()),
            intervals: closed.to_vec(),
            factors: Arc::new(EnergyFactors::of(settings)),
        })
    }

    fn value_of(measurements: &[MetricMeasurement], name: &str) -> Option<f64> {
        measurements
            .iter()
            .find(|m| m.name == name)
            .map(|m| match m.value {
                MetricValue::F64(value) => value,
                MetricValue::I64(value) if integer(name) => value as f64,
                ref other => panic!("{name}: {other:?}"),
            })
    }

    /// Whether the table sends `name` as an integer.
    fn integer(name: &str) -> bool {
        DEVICE_SERIES
            .iter()
            .map(|row| row.series)
            .chain([table::GPU_MAX_TEMPERATURE])
            .any(|series| series.name == name && series.integer)
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

    #[test]
    fn the_gen_ai_co2_metrics_use_the_regions_factor() {
        let mut settings = EnergySettings::default();
        settings.config.co2_tracking = true;
        settings.config.carbon_region = Some("DE".into());
        settings.carbon_region_origin = FactorOrigin::Code;
        let germany = region_intensity("DE").unwrap().gco2e_per_kwh;
        let kilowatt_hour = ClosedInterval {
            device: "GPU-0".into(),
            kilowatt_hours: 1.0,
            trapezoid_kilowatt_hours: Some(1.0),
            seconds: 3600.0,
            counter: false,
        };
        let mut sample = GpuSample::empty();
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-0");
        device.device_index = Some(0);
        device.power_draw_watts = Some(1000.0);
        sample.devices.push(device);
        let out = sample_measurements(&sample, &[kilowatt_hour], &settings);
        for name in [names::CO2_EMISSIONS, names::WATTLINE_CO2_EMISSIONS] {
            let value = out
                .iter()
                .find(|measurement| measurement.name == name)
                .map(|measurement| measurement.value);
            assert_eq!(value, Some(MetricValue::F64(germany)), "{name}");
        }
    }

    /// Every measurement's `(value, component)` of `name`.
    fn by_component(measurements: &[MetricMeasurement], name: &str) -> Vec<(f64, String)> {
        measurements
            .iter()
            .filter(|m| m.name == name)
            .map(|m| {
                let attributes = m.attributes.clone().unwrap_or_default();
                let keys: Vec<&String> = attributes.keys().collect();
                assert_eq!(keys, ["component"], "{name}: the reference's key only");
                let component = match &attributes["component"] {
                    AttributeValue::String(value) => value.clone(),
                    other => panic!("{other:?}"),
                };
                (m.value.as_f64(), component)
            })
            .collect()
    }

    #[test]
    fn rapl_packages_and_dram_become_gen_ai_cpu_and_ram_points() {
        // Two seconds of two packages (40 J and 20 J) and DRAM (6 J), as the energy
        // actor sends them from a powercap tree (its test: `actors/src/energy/actor.rs`).
        let interval = |zone: &str, name: &str, domain, joules| RaplInterval {
            zone: zone.into(),
            name: name.into(),
            domain,
            joules,
            seconds: 2.0,
        };
        let measurements = rapl_measurements(&[
            interval("intel-rapl:0", "package-0", EnergyDomain::CpuPackage, 40.0),
            interval("intel-rapl:0:2", "dram", EnergyDomain::Dram, 6.0),
            interval("intel-rapl:1", "package-1", EnergyDomain::CpuPackage, 20.0),
        ]);
        let energy = by_component(&measurements, names::ENERGY_CONSUMED);
        let power = by_component(&measurements, names::POWER_CONSUMPTION);
        let kwh = |joules: f64| joules / JOULES_PER_KILOWATT_HOUR;
        assert_eq!(energy.len(), 2, "{energy:?}");
        assert_eq!(energy[0].1, "cpu");
        assert!((energy[0].0 - kwh(60.0)).abs() < 1e-15, "{energy:?}");
        assert_eq!(energy[1].1, "ram");
        assert!((energy[1].0 - kwh(6.0)).abs() < 1e-15, "{energy:?}");
        assert_eq!(power.len(), 2, "{power:?}");
        assert_eq!(power[0].1, "cpu");
        assert!((power[0].0 - 30.0).abs() < 1e-9, "{power:?}");
        assert_eq!(power[1].1, "ram");
        assert!((power[1].0 - 3.0).abs() < 1e-9, "{power:?}");
        // Only the spec's names: `hw.*` is the metrics exporters' choice
        // (`semconv_names.rs`).
        assert!(measurements.iter().all(|m| !m.name.starts_with("hw.")));
    }
}

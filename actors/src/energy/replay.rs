//! The energy report rebuilt from recorded `gen_ai.*` measurements alone (an event
//! file): per-device energy, covered time, readings and peak power; cost and CO2 from
//! the recorded figures, so the factors need not be known.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use wattline_config::energy::FactorOrigin;

use super::genai::{INTERVAL_METRIC, METHOD_ATTRIBUTE};
use super::integrator::EnergySource;
use super::report::{DeviceEnergy, EnergyReport, EnergyTotals, Factor};
use crate::events::{AttributeValue, MetricMeasurement};

#[derive(Debug, Default)]
struct ReplayedDevice {
    name: Option<String>,
    kwh: f64,
    covered_seconds: f64,
    readings: u64,
    max_watts: Option<f64>,
    counter_intervals: u64,
    intervals: u64,
}

fn text(measurement: &MetricMeasurement, key: &str) -> Option<String> {
    match measurement.attributes.as_ref()?.get(key)? {
        AttributeValue::String(value) => Some(value.clone()),
        _ => None,
    }
}

/// Rebuilds the report from `(timestamp, measurements)` batches in file order. The
/// currency is the unit of the recorded `gen_ai.power.cost` (`USD` when none was).
pub fn report_from_measurements<'a>(
    batches: impl IntoIterator<Item = (DateTime<Utc>, &'a [MetricMeasurement])>,
) -> EnergyReport {
    let mut currency = String::from("USD");
    let mut devices: BTreeMap<String, ReplayedDevice> = BTreeMap::new();
    let (mut cost, mut co2, mut first, mut last) = (0.0, None::<f64>, None, None);
    for (timestamp, measurements) in batches {
        first.get_or_insert(timestamp);
        last = Some(timestamp);
        for measurement in measurements {
            let value = measurement.value.as_f64();
            let device = text(measurement, "gpu_id").map(|id| {
                let device = devices.entry(id).or_default();
                if let Some(name) = text(measurement, "gpu_name") {
                    device.name = Some(name);
                }
                device
            });
            match (measurement.name.as_str(), device) {
                ("gen_ai.energy.consumed", Some(device)) => device.kwh += value,
                (INTERVAL_METRIC, Some(device)) => {
                    device.covered_seconds += value;
                    device.intervals += 1;
                    if text(measurement, METHOD_ATTRIBUTE).as_deref() == Some("counter") {
                        device.counter_intervals += 1;
                    }
                }
                ("gen_ai.gpu.power", Some(device)) => {
                    device.readings += 1;
                    device.max_watts = Some(device.max_watts.map_or(value, |max| max.max(value)));
                }
                ("gen_ai.power.cost", None) => {
                    cost += value;
                    if let Some(unit) = &measurement.unit {
                        currency.clone_from(unit);
                    }
                }
                ("gen_ai.co2.emissions", None) => *co2.get_or_insert(0.0) += value,
                _ => {}
            }
        }
    }
    let total_kwh = devices.values().fold(0.0, |total, d| total + d.kwh);
    let price = if total_kwh > 0.0 {
        cost / total_kwh
    } else {
        0.0
    };
    let intensity = co2.map(|grams| {
        if total_kwh > 0.0 {
            grams / total_kwh
        } else {
            0.0
        }
    });
    let now = Utc::now();
    EnergyReport {
        started_at: first.unwrap_or(now),
        ended_at: last.unwrap_or(now),
        gpu_source: None,
        devices: devices
            .into_iter()
            .map(|(identifier, device)| DeviceEnergy {
                device_identifier: identifier,
                name: device.name,
                energy_kwh: device.kwh,
                energy_source: match (device.counter_intervals, device.intervals) {
                    (0, _) => EnergySource::Trapezoid,
                    (counted, all) if counted == all => EnergySource::Counter,
                    _ => EnergySource::Mixed,
                },
                counter_kwh: None,
                trapezoid_kwh: (device.counter_intervals == 0).then_some(device.kwh),
                mean_watts: (device.covered_seconds > 0.0)
                    .then(|| device.kwh * 3_600_000.0 / device.covered_seconds),
                max_watts: device.max_watts,
                covered_seconds: device.covered_seconds,
                readings: device.readings,
                gaps: 0,
                cost: device.kwh * price,
                co2_grams: intensity.map(|factor| device.kwh * factor),
            })
            .collect(),
        total: EnergyTotals {
            gpu_energy_kwh: total_kwh,
            cost,
            co2_grams: co2,
            cpu_energy_kwh: None,
        },
        cpu_zones: Vec::new(),
        agent_scopes: Vec::new(),
        processes: Vec::new(),
        cost_per_kwh: Factor {
            value: price,
            unit: format!("{currency}/kWh"),
            origin: FactorOrigin::File("recorded cost / recorded energy".into()),
        },
        currency,
        carbon_intensity: intensity.map(|value| Factor {
            value,
            unit: "gCO2e/kWh".into(),
            origin: FactorOrigin::File("recorded CO2 / recorded energy".into()),
        }),
        ignored_variables: Vec::new(),
        diagnostics: None,
        exporter_drops: Vec::new(),
    }
}

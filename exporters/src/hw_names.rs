//! The energy stage's telemetry under OpenTelemetry's hardware semantic-convention names
//! (`hw.*`), for the `opentelemetry` component's `metric_names = "semconv" | "both"`:
//! each device reading's `hw.*` column of the naming table
//! ([`wattline_model::telemetry_names`]), the intervals' energy as `hw.energy`, RAPL
//! zones as `hw.energy`/`hw.power`. Values are in the conventions' units: fractions as
//! `1`, bytes as `By`, joules, watts, degrees Celsius as `Cel`.
//!
//! The conventions make memory usage and limit up-down counters and errors a counter,
//! while the driver gives levels and totals since it loaded; the increments are worked
//! out here, per device, so a collector's sum is the driver's figure.

use std::collections::{BTreeMap, HashMap};

use wattline_model::energy_telemetry::{GpuTelemetry, RaplInterval};
use wattline_model::metric_measurements::{AttributeValue, MetricMeasurement};
use wattline_model::report::{EnergyDomain, JOULES_PER_KILOWATT_HOUR};
use wattline_model::snapshot::GpuDeviceReading;
use wattline_model::telemetry_names::{
    self as table, DEVICE_SERIES, HW_ID_ATTRIBUTE, HW_MODEL_ATTRIBUTE, HW_NAME_ATTRIBUTE,
    HW_PARENT_ATTRIBUTE, HW_SENSOR_LOCATION_ATTRIBUTE, HW_TYPE_ATTRIBUTE, HW_VENDOR_ATTRIBUTE,
    HardwareAttributes, HardwareIdentity, HardwareShape,
};

use crate::energy_names::{Attributes, measurement};

/// What the `hw.*` series were last: the base of the next increments.
#[derive(Debug, Default)]
pub struct HardwareNames {
    /// Last level or total per (metric, device, error type).
    last: HashMap<(&'static str, String, &'static str), f64>,
}

impl HardwareNames {
    /// `hw.energy` (J, the counter's increment) and `hw.power` (W, over the interval)
    /// of RAPL `intervals`: CPU packages as `hw.type = cpu`, DRAM as `memory`.
    pub fn rapl_measurements(&self, intervals: &[RaplInterval]) -> Vec<MetricMeasurement> {
        let mut out = Vec::new();
        for interval in intervals {
            let hardware_type = match interval.domain {
                EnergyDomain::Dram => "memory",
                _ => "cpu",
            };
            let mut attributes = identity(&interval.zone, &interval.name);
            attributes.insert(HW_TYPE_ATTRIBUTE.into(), string(hardware_type));
            out.push(measurement(
                &table::HW_RAPL_ENERGY,
                "",
                interval.joules,
                attributes.clone(),
            ));
            out.push(measurement(
                &table::HW_RAPL_POWER,
                "",
                interval.watts(),
                attributes,
            ));
        }
        out
    }

    /// The `hw.*` measurements of one GPU sample and the intervals it closed.
    pub fn gpu_measurements(&mut self, telemetry: &GpuTelemetry) -> Vec<MetricMeasurement> {
        let sample = &telemetry.sample;
        let mut out = Vec::new();
        for device in &sample.devices {
            self.device_measurements(device, &mut out);
        }
        for interval in &telemetry.intervals {
            let attributes = sample
                .devices
                .iter()
                .find(|device| device.device_identifier == interval.device)
                .map(|device| with_gpu_type(common_attributes(device)))
                .unwrap_or_else(|| {
                    BTreeMap::from([
                        (HW_ID_ATTRIBUTE.to_string(), string(&interval.device)),
                        (HW_TYPE_ATTRIBUTE.to_string(), string("gpu")),
                    ])
                });
            out.push(measurement(
                &table::HW_GPU_ENERGY,
                "",
                interval.kilowatt_hours * JOULES_PER_KILOWATT_HOUR,
                attributes,
            ));
        }
        out
    }

    /// One device's `hw.*` column, row by row.
    fn device_measurements(&mut self, device: &GpuDeviceReading, out: &mut Vec<MetricMeasurement>) {
        for hardware in DEVICE_SERIES.iter().filter_map(|row| row.semconv.as_ref()) {
            let Some(value) = (hardware.value)(device).filter(|v| v.is_finite()) else {
                continue;
            };
            let part = hardware.attributes.extra.map_or("", |(_, value)| value);
            let id = &device.device_identifier;
            let value = match hardware.shape {
                HardwareShape::Gauge => value,
                HardwareShape::Level => {
                    self.change(hardware.name, id, part, value, Start::FromZero)
                }
                // Errors before the run are the driver's history, not this run's.
                HardwareShape::TotalSinceLoad => {
                    self.change(hardware.name, id, part, value, Start::AtFirst)
                }
            };
            let attributes = attributes(device, hardware.attributes);
            out.push(measurement(&hardware.series(), "", value, attributes));
        }
    }

    /// The increment from the last value of a series to `value`. A total that went
    /// down (a driver reload) counts from zero again.
    fn change(
        &mut self,
        name: &'static str,
        device: &str,
        part: &'static str,
        value: f64,
        start: Start,
    ) -> f64 {
        let previous = self.last.insert((name, device.to_owned(), part), value);
        match (previous, start) {
            (Some(previous), Start::FromZero) => value - previous,
            (Some(previous), Start::AtFirst) if value >= previous => value - previous,
            (Some(_), Start::AtFirst) => value,
            (None, Start::FromZero) => value,
            (None, Start::AtFirst) => 0.0,
        }
    }
}

/// Where a series' first increment counts from.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// A level: the first increment is the whole level.
    FromZero,
    /// A total with history before the run: the first increment is zero.
    AtFirst,
}

fn string(value: &str) -> AttributeValue {
    AttributeValue::String(value.into())
}

/// The attributes a row names for `device`.
fn attributes(device: &GpuDeviceReading, wanted: HardwareAttributes) -> Attributes {
    let mut attributes = match wanted.identity {
        HardwareIdentity::Device => common_attributes(device),
        HardwareIdentity::Gpu => gpu_attributes(device),
        HardwareIdentity::Sensor => sensor_attributes(device),
    };
    if wanted.gpu_type {
        attributes = with_gpu_type(attributes);
    }
    if let Some((key, value)) = wanted.extra {
        attributes.insert(key.into(), string(value));
    }
    attributes
}

/// `hw.id` and `hw.name`.
fn identity(id: &str, name: &str) -> Attributes {
    BTreeMap::from([
        (HW_ID_ATTRIBUTE.to_string(), string(id)),
        (HW_NAME_ATTRIBUTE.to_string(), string(name)),
    ])
}

/// The device's name, its identifier without one.
fn device_name(device: &GpuDeviceReading) -> &str {
    device.name.as_deref().unwrap_or(&device.device_identifier)
}

/// `hw.id` and `hw.name` of the device: what every GPU series carries.
fn common_attributes(device: &GpuDeviceReading) -> Attributes {
    identity(&device.device_identifier, device_name(device))
}

/// The GPU metrics' set: the common one with `hw.vendor` and, where known, `hw.model`.
fn gpu_attributes(device: &GpuDeviceReading) -> Attributes {
    let mut attributes = common_attributes(device);
    attributes.insert(HW_VENDOR_ATTRIBUTE.into(), string(device.vendor.as_str()));
    if let Some(model) = &device.name {
        attributes.insert(HW_MODEL_ATTRIBUTE.into(), string(model));
    }
    attributes
}

/// The GPU's temperature sensor: a component of its own under the GPU.
fn sensor_attributes(device: &GpuDeviceReading) -> Attributes {
    let mut attributes = identity(
        &format!("{}/temperature", device.device_identifier),
        &format!("{} temperature", device_name(device)),
    );
    attributes.insert(
        HW_PARENT_ATTRIBUTE.into(),
        string(&device.device_identifier),
    );
    attributes.insert(HW_SENSOR_LOCATION_ATTRIBUTE.into(), string("gpu"));
    attributes
}

fn with_gpu_type(mut attributes: Attributes) -> Attributes {
    attributes.insert(HW_TYPE_ATTRIBUTE.into(), string("gpu"));
    attributes
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use wattline_model::energy_telemetry::{ClosedInterval, EnergyFactors};
    use wattline_model::metric_measurements::MetricValue;
    use wattline_model::snapshot::{GpuSample, GpuVendor};
    use wattline_model::telemetry_names::{
        HW_ENERGY, HW_ERRORS, HW_GPU_MEMORY_LIMIT, HW_GPU_MEMORY_USAGE, HW_GPU_UTILIZATION,
        HW_POWER, HW_TEMPERATURE,
    };

    /// A sample and the intervals it closed, as the energy stage sends them.
    trait SampleMeasurements {
        fn sample_measurements(
            &mut self,
            sample: &GpuSample,
            closed: &[ClosedInterval],
        ) -> Vec<MetricMeasurement>;
    }

    impl SampleMeasurements for HardwareNames {
        fn sample_measurements(
            &mut self,
            sample: &GpuSample,
            closed: &[ClosedInterval],
        ) -> Vec<MetricMeasurement> {
            self.gpu_measurements(&GpuTelemetry {
                sample: Arc::new(sample.clone()),
                intervals: closed.to_vec(),
                factors: Arc::new(EnergyFactors::of(&Default::default())),
            })
        }
    }
    fn sample(used: u64, corrected: u64) -> GpuSample {
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-aaaa");
        device.name = Some("NVIDIA H100 80GB HBM3".into());
        device.compute_utilization_percent = Some(98.0);
        device.memory_used_bytes = Some(used);
        device.memory_total_bytes = Some(80 << 30);
        device.power_draw_watts = Some(612.5);
        device.temperature_celsius = Some(81.0);
        device.ecc_corrected = Some(corrected);
        GpuSample {
            devices: vec![device],
            processes: Vec::new(),
            taken_at: Instant::now(),
        }
    }

    fn value(measurements: &[MetricMeasurement], name: &str, part: Option<&str>) -> f64 {
        let found = measurements
            .iter()
            .find(|m| {
                m.name == name
                    && part.is_none_or(|part| {
                        m.attributes.as_ref().unwrap()["error.type"]
                            == AttributeValue::String(part.into())
                    })
            })
            .unwrap_or_else(|| panic!("{name} missing"));
        match found.value {
            MetricValue::F64(value) => value,
            _ => panic!("not f64"),
        }
    }

    #[test]
    fn rapl_packages_and_dram_become_hw_energy_and_power() {
        let interval = |zone: &str, name: &str, domain, joules| RaplInterval {
            zone: zone.into(),
            name: name.into(),
            domain,
            joules,
            seconds: 2.0,
        };
        let metrics = HardwareNames::default();
        let sent = metrics.rapl_measurements(&[
            interval("intel-rapl:0", "package-0", EnergyDomain::CpuPackage, 30.0),
            interval("intel-rapl:0:2", "dram", EnergyDomain::Dram, 4.0),
        ]);
        assert_eq!(
            sent.len(),
            4,
            "package and DRAM, energy and power: {sent:?}"
        );
        let find = |name: &str, kind: &str| {
            sent.iter()
                .find(|m| {
                    m.name == name
                        && m.attributes.as_ref().unwrap()["hw.type"]
                            == AttributeValue::String(kind.into())
                })
                .map(|m| match m.value {
                    MetricValue::F64(value) => value,
                    _ => panic!("not f64"),
                })
                .unwrap()
        };
        assert!((find(HW_ENERGY, "cpu") - 30.0).abs() < 1e-6);
        assert!((find(HW_POWER, "cpu") - 15.0).abs() < 1e-6);
        assert!((find(HW_ENERGY, "memory") - 4.0).abs() < 1e-9);
        assert!((find(HW_POWER, "memory") - 2.0).abs() < 1e-9);
    }

    #[test]
    fn units_are_the_conventions_and_levels_become_increments() {
        let mut metrics = HardwareNames::default();
        let closed = [ClosedInterval {
            device: "GPU-aaaa".into(),
            kilowatt_hours: 0.001,
            trapezoid_kilowatt_hours: Some(0.001),
            seconds: 5.0,
            counter: true,
        }];
        let first = metrics.sample_measurements(&sample(1000, 7), &closed);
        assert!((value(&first, HW_GPU_UTILIZATION, None) - 0.98).abs() < 1e-12);
        assert_eq!(value(&first, HW_GPU_MEMORY_USAGE, None), 1000.0);
        assert_eq!(value(&first, HW_POWER, None), 612.5);
        assert_eq!(value(&first, HW_ENERGY, None), 3600.0);
        assert_eq!(
            value(&first, HW_ERRORS, Some("corrected")),
            0.0,
            "history before the run is not counted"
        );
        let power = first.iter().find(|m| m.name == HW_POWER).unwrap();
        let attributes = power.attributes.as_ref().unwrap();
        assert_eq!(
            attributes["hw.id"],
            AttributeValue::String("GPU-aaaa".into())
        );
        assert_eq!(attributes["hw.type"], AttributeValue::String("gpu".into()));
        assert!(
            !attributes.contains_key("hw.vendor"),
            "not in hw.power's set"
        );
        let utilization = first.iter().find(|m| m.name == HW_GPU_UTILIZATION).unwrap();
        let attributes = utilization.attributes.as_ref().unwrap();
        assert_eq!(
            attributes["hw.vendor"],
            AttributeValue::String("nvidia".into())
        );
        assert!(!attributes.contains_key("hw.type"), "not in hw.gpu.*'s set");
        let temperature = first.iter().find(|m| m.name == HW_TEMPERATURE).unwrap();
        let attributes = temperature.attributes.as_ref().unwrap();
        assert_eq!(
            attributes["hw.parent"],
            AttributeValue::String("GPU-aaaa".into())
        );
        assert!(
            !attributes.contains_key("hw.type"),
            "a sensor has no hw.type"
        );

        // The interval's energy carries its device's name (from the sample's reading
        // of that device); a device the sample lacks gets its identifier alone.
        let energy = first.iter().find(|m| m.name == HW_ENERGY).unwrap();
        assert_eq!(
            energy.attributes.as_ref().unwrap()["hw.name"],
            AttributeValue::String("NVIDIA H100 80GB HBM3".into())
        );
        let elsewhere = [ClosedInterval {
            device: "GPU-bbbb".into(),
            ..closed[0].clone()
        }];
        let other = HardwareNames::default().sample_measurements(&sample(1000, 7), &elsewhere);
        let energy = other.iter().find(|m| m.name == HW_ENERGY).unwrap();
        assert_eq!(
            energy.attributes.as_ref().unwrap(),
            &BTreeMap::from([
                (
                    "hw.id".to_string(),
                    AttributeValue::String("GPU-bbbb".into())
                ),
                ("hw.type".to_string(), AttributeValue::String("gpu".into())),
            ])
        );

        let second = metrics.sample_measurements(&sample(400, 9), &[]);
        assert_eq!(value(&second, HW_GPU_MEMORY_USAGE, None), -600.0);
        assert_eq!(value(&second, HW_GPU_MEMORY_LIMIT, None), 0.0);
        assert_eq!(value(&second, HW_ERRORS, Some("corrected")), 2.0);
        // The driver reloaded: its count went down to 4, which counts from zero.
        let third = metrics.sample_measurements(&sample(400, 4), &[]);
        assert_eq!(value(&third, HW_ERRORS, Some("corrected")), 4.0);
        assert!(second.iter().all(|m| m.name != HW_ENERGY));
    }
}

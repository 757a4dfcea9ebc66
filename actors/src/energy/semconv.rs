//! The GPU figures of one sample under OpenTelemetry's hardware semantic-convention
//! names (`hw.*`), beside the `gen_ai.*` ones, for the `opentelemetry` component's
//! `metric_names = "semconv" | "both"`.
//!
//! Checked against semantic conventions v1.44.0 (`model/hardware/*.yaml`), where every
//! `hw.*` metric and attribute is still in development. Every series carries `hw.id`
//! (the backend's identifier: the NVML UUID, the DRM PCI address) and `hw.name`; the
//! GPU metrics (`hw.gpu.*`, `hw.errors`) add `hw.model` and `hw.vendor`; `hw.power`,
//! `hw.energy` and `hw.errors` carry `hw.type = gpu`. `hw.temperature` has no `hw.type`:
//! it is a sensor, so it gets its own `hw.id` (`<gpu id>/temperature`) with the GPU as
//! `hw.parent`. Values are in the conventions' units: fractions as `1`, bytes as `By`,
//! joules, watts, degrees Celsius as `Cel`. No whole-host figure exists here, so
//! `hw.host.*` is never sent: GPU and RAPL power are parts, not the host. RAPL CPU
//! packages and DRAM are sent as `hw.energy`/`hw.power` with `hw.type = cpu`/`memory`.
//!
//! The conventions make memory usage and limit up-down counters and errors a counter,
//! while the driver gives levels and totals since it loaded; the increments are
//! worked out here, per device, so a collector's sum is the driver's figure.

use std::collections::{BTreeMap, HashMap};

use super::account::ClosedInterval;
use super::genai::measurement;
use super::integrator::JOULES_PER_KILOWATT_HOUR;
use super::rapl_intervals::RaplInterval;
use super::report::EnergyDomain;
use wattline_model::events::{AttributeValue, MetricKind, MetricMeasurement};
use wattline_model::snapshot::{GpuDeviceReading, GpuSample};

/// `hw.gpu.utilization`.
pub const HW_GPU_UTILIZATION: &str = "hw.gpu.utilization";
/// `hw.gpu.memory.usage`.
pub const HW_GPU_MEMORY_USAGE: &str = "hw.gpu.memory.usage";
/// `hw.gpu.memory.limit`.
pub const HW_GPU_MEMORY_LIMIT: &str = "hw.gpu.memory.limit";
/// `hw.power`.
pub const HW_POWER: &str = "hw.power";
/// `hw.energy`.
pub const HW_ENERGY: &str = "hw.energy";
/// `hw.temperature`.
pub const HW_TEMPERATURE: &str = "hw.temperature";
/// `hw.errors`.
pub const HW_ERRORS: &str = "hw.errors";

/// What the `hw.*` series were last: the base of the next increments.
#[derive(Debug, Default)]
pub struct SemconvMetrics {
    /// Last level or total per (metric, device, error type).
    last: HashMap<(&'static str, String, &'static str), f64>,
}

impl SemconvMetrics {
    /// `hw.energy` (J, the counter's increment) and `hw.power` (W, over the interval)
    /// of RAPL `intervals`: CPU packages as `hw.type = cpu`, DRAM as `memory`.
    pub fn rapl_measurements(&self, intervals: &[RaplInterval]) -> Vec<MetricMeasurement> {
        let mut out = Vec::new();
        for interval in intervals {
            let hardware_type = match interval.domain {
                EnergyDomain::Dram => "memory",
                _ => "cpu",
            };
            let attributes = BTreeMap::from([
                (
                    "hw.id".to_string(),
                    AttributeValue::String(interval.zone.clone()),
                ),
                (
                    "hw.name".to_string(),
                    AttributeValue::String(interval.name.clone()),
                ),
                (
                    "hw.type".to_string(),
                    AttributeValue::String(hardware_type.into()),
                ),
            ]);
            out.push(measurement(
                HW_ENERGY,
                MetricKind::Counter,
                interval.joules,
                "J",
                "Energy of a RAPL zone: its counter's increase",
                attributes.clone(),
            ));
            out.push(measurement(
                HW_POWER,
                MetricKind::Gauge,
                interval.watts(),
                "W",
                "Mean power of a RAPL zone since its previous reading",
                attributes,
            ));
        }
        out
    }

    /// The `hw.*` measurements of one sample; `closed` holds the intervals it ended.
    pub fn sample_measurements(
        &mut self,
        sample: &GpuSample,
        closed: &[ClosedInterval],
    ) -> Vec<MetricMeasurement> {
        let mut out = Vec::new();
        for device in &sample.devices {
            self.device_measurements(device, &mut out);
        }
        for interval in closed {
            let attributes = sample
                .devices
                .iter()
                .find(|device| device.device_identifier == interval.device)
                .map(|device| with_gpu_type(&common_attributes(device)))
                .unwrap_or_else(|| {
                    BTreeMap::from([
                        (
                            "hw.id".to_string(),
                            AttributeValue::String(interval.device.clone()),
                        ),
                        ("hw.type".to_string(), AttributeValue::String("gpu".into())),
                    ])
                });
            out.push(measurement(
                HW_ENERGY,
                MetricKind::Counter,
                interval.kilowatt_hours * JOULES_PER_KILOWATT_HOUR,
                "J",
                "GPU energy: the hardware counter where readable, else the trapezoid",
                attributes,
            ));
        }
        out
    }

    /// One device's utilization, memory, power, temperature and errors.
    fn device_measurements(&mut self, device: &GpuDeviceReading, out: &mut Vec<MetricMeasurement>) {
        let identity = gpu_attributes(device);
        if let Some(percent) = device.compute_utilization_percent {
            let mut attributes = identity.clone();
            attributes.insert(
                "hw.gpu.task".into(),
                AttributeValue::String("general".into()),
            );
            out.push(measurement(
                HW_GPU_UTILIZATION,
                MetricKind::Gauge,
                percent / 100.0,
                "1",
                "Fraction of time the GPU was busy",
                attributes,
            ));
        }
        self.memory_measurements(device, &identity, out);
        if let Some(watts) = device.power_draw_watts.filter(|w| w.is_finite()) {
            out.push(measurement(
                HW_POWER,
                MetricKind::Gauge,
                watts,
                "W",
                "GPU power draw",
                with_gpu_type(&common_attributes(device)),
            ));
        }
        if let Some(celsius) = device.temperature_celsius {
            out.push(measurement(
                HW_TEMPERATURE,
                MetricKind::Gauge,
                celsius,
                "Cel",
                "GPU core temperature",
                sensor_attributes(device),
            ));
        }
        self.error_measurements(device, &identity, out);
    }

    /// Memory used and installed, as up-down counters: the change since the last
    /// sample (from zero at the first).
    fn memory_measurements(
        &mut self,
        device: &GpuDeviceReading,
        identity: &BTreeMap<String, AttributeValue>,
        out: &mut Vec<MetricMeasurement>,
    ) {
        let levels = [
            (
                HW_GPU_MEMORY_USAGE,
                device.memory_used_bytes,
                "GPU memory used",
            ),
            (
                HW_GPU_MEMORY_LIMIT,
                device.memory_total_bytes,
                "GPU memory installed",
            ),
        ];
        for (name, bytes, description) in levels {
            if let Some(bytes) = bytes {
                let id = &device.device_identifier;
                let change = self.change(name, id, "", bytes as f64, Start::FromZero);
                out.push(measurement(
                    name,
                    MetricKind::UpDownCounter,
                    change,
                    "By",
                    description,
                    identity.clone(),
                ));
            }
        }
    }

    /// ECC errors, corrected and uncorrected, as counters: the increase since the
    /// last sample.
    fn error_measurements(
        &mut self,
        device: &GpuDeviceReading,
        identity: &BTreeMap<String, AttributeValue>,
        out: &mut Vec<MetricMeasurement>,
    ) {
        let errors = [
            ("corrected", device.ecc_corrected),
            ("uncorrected", device.ecc_uncorrected),
        ];
        for (error_type, total) in errors {
            let Some(total) = total else { continue };
            let id = &device.device_identifier;
            // Errors before the run are the driver's history, not this run's.
            let change = self.change(HW_ERRORS, id, error_type, total as f64, Start::AtFirst);
            let mut attributes = with_gpu_type(identity);
            attributes.insert(
                "error.type".into(),
                AttributeValue::String(error_type.into()),
            );
            out.push(measurement(
                HW_ERRORS,
                MetricKind::Counter,
                change,
                "{error}",
                "ECC errors of the GPU memory",
                attributes,
            ));
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

/// `hw.id` and `hw.name`: what every hardware series carries.
fn common_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    let name = device
        .name
        .clone()
        .unwrap_or_else(|| device.device_identifier.clone());
    BTreeMap::from([
        (
            "hw.id".to_string(),
            AttributeValue::String(device.device_identifier.clone()),
        ),
        ("hw.name".to_string(), AttributeValue::String(name)),
    ])
}

/// The GPU metrics' set: the common one with `hw.vendor` and, where known, `hw.model`.
fn gpu_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    let mut attributes = common_attributes(device);
    attributes.insert(
        "hw.vendor".into(),
        AttributeValue::String(device.vendor.as_str().into()),
    );
    if let Some(model) = &device.name {
        attributes.insert("hw.model".into(), AttributeValue::String(model.clone()));
    }
    attributes
}

/// The GPU's temperature sensor: a component of its own under the GPU.
fn sensor_attributes(device: &GpuDeviceReading) -> BTreeMap<String, AttributeValue> {
    let name = device.name.as_deref().unwrap_or(&device.device_identifier);
    BTreeMap::from([
        (
            "hw.id".to_string(),
            AttributeValue::String(format!("{}/temperature", device.device_identifier)),
        ),
        (
            "hw.name".to_string(),
            AttributeValue::String(format!("{name} temperature")),
        ),
        (
            "hw.parent".to_string(),
            AttributeValue::String(device.device_identifier.clone()),
        ),
        (
            "hw.sensor_location".to_string(),
            AttributeValue::String("gpu".into()),
        ),
    ])
}

fn with_gpu_type(
    attributes: &BTreeMap<String, AttributeValue>,
) -> BTreeMap<String, AttributeValue> {
    let mut typed = attributes.clone();
    typed.insert("hw.type".into(), AttributeValue::String("gpu".into()));
    typed
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use wattline_model::events::MetricValue;
    use wattline_model::snapshot::GpuVendor;

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
        let metrics = SemconvMetrics::default();
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
        let mut metrics = SemconvMetrics::default();
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
        let other = SemconvMetrics::default().sample_measurements(&sample(1000, 7), &elsewhere);
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

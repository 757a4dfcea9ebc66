//! The naming table of the energy stage's telemetry ([`crate::energy_telemetry`]): every
//! series a GPU sample, the intervals it closed and the RAPL intervals are sent as, with
//! its name, kind, unit and description, and for each device reading its `hw.*`
//! semantic-convention column, the way each resource gauge's row carries its
//! `process.*`/`system.*` one ([`crate::semconv`]). The exporters build the
//! measurements from these rows; nothing upstream of them names a series.
//!
//! The `gen_ai.*` series are the GPU spec's reference's (`genai-otel-instrument`):
//! per-device gauges keyed by `gpu_id` (the device index) and `gpu_name`, aggregates
//! carrying `gpu_count`, energy, cost and CO2 in its shapes. What wattline knows beyond
//! it (UUIDs, per-device energy by the best figure, hardware throttle reasons) goes
//! under `wattline.*` names, never into a `gen_ai.*` series.
//!
//! The `hw.*` column follows semantic conventions v1.44.0 (`model/hardware/*.yaml`,
//! every metric and attribute still in development). Every series carries `hw.id` (the
//! backend's identifier: the NVML UUID, the DRM PCI address) and `hw.name`; the GPU
//! metrics (`hw.gpu.*`, `hw.errors`) add `hw.vendor` and `hw.model`; `hw.power`,
//! `hw.energy` and `hw.errors` carry `hw.type = gpu`. `hw.temperature` is a sensor: its
//! own `hw.id` (`<gpu id>/temperature`) with the GPU as `hw.parent`. No whole-host
//! figure exists here, so `hw.host.*` is never sent: GPU and RAPL power are parts, not
//! the host. RAPL CPU packages and DRAM are `hw.energy`/`hw.power` with `hw.type =
//! cpu`/`memory`.

use crate::metric_measurements::MetricKind;
use crate::metric_names as names;
use crate::snapshot::GpuDeviceReading;

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

/// The reference's device attribute: the device index as a string (the backend's
/// identifier for a device without one).
pub const GPU_ID_ATTRIBUTE: &str = "gpu_id";
/// The reference's device attribute: the device's name (its identifier without one).
pub const GPU_NAME_ATTRIBUTE: &str = "gpu_name";
/// The backend's device identifier (NVML: the UUID), on the `wattline.*` series.
pub const GPU_UUID_ATTRIBUTE: &str = "gpu_uuid";
/// The reference's `component`: `gpu`, `cpu` or `ram`.
pub const COMPONENT_ATTRIBUTE: &str = "component";
/// The reference's `gpu_count`: how many devices an aggregate is over.
pub const GPU_COUNT_ATTRIBUTE: &str = "gpu_count";
/// `hw.id`.
pub const HW_ID_ATTRIBUTE: &str = "hw.id";
/// `hw.name`.
pub const HW_NAME_ATTRIBUTE: &str = "hw.name";
/// `hw.type`.
pub const HW_TYPE_ATTRIBUTE: &str = "hw.type";
/// `hw.vendor`.
pub const HW_VENDOR_ATTRIBUTE: &str = "hw.vendor";
/// `hw.model`.
pub const HW_MODEL_ATTRIBUTE: &str = "hw.model";
/// `hw.parent`.
pub const HW_PARENT_ATTRIBUTE: &str = "hw.parent";
/// `hw.sensor_location`.
pub const HW_SENSOR_LOCATION_ATTRIBUTE: &str = "hw.sensor_location";

/// Bucket boundaries of `gen_ai.power.consumption`, W.
pub const POWER_HISTOGRAM_BOUNDARIES: [f64; 12] = [
    0.0, 25.0, 50.0, 100.0, 150.0, 200.0, 300.0, 400.0, 500.0, 700.0, 1000.0, 1500.0,
];

/// A series' unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesUnit {
    /// This unit (UCUM, or the reference's word for it).
    Fixed(&'static str),
    /// The configured currency (the cost series').
    Currency,
}

/// One series: what a figure is sent as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Series {
    /// Its full name.
    pub name: &'static str,
    /// Gauge, counter, up-down counter or histogram.
    pub kind: MetricKind,
    /// Its unit.
    pub unit: SeriesUnit,
    /// Its description.
    pub description: &'static str,
    /// Sent as an integer (rounded): the reference's `as_int` points, for what NVML
    /// answers in whole units.
    pub integer: bool,
    /// A histogram's bucket boundaries.
    pub boundaries: Option<&'static [f64]>,
}

impl Series {
    /// Its unit, `currency` for a cost.
    pub fn unit<'a>(&self, currency: &'a str) -> &'a str {
        match self.unit {
            SeriesUnit::Fixed(unit) => unit,
            SeriesUnit::Currency => currency,
        }
    }

    /// A floating-point series with no boundaries.
    const fn new(
        name: &'static str,
        kind: MetricKind,
        unit: &'static str,
        description: &'static str,
    ) -> Self {
        Series {
            name,
            kind,
            unit: SeriesUnit::Fixed(unit),
            description,
            integer: false,
            boundaries: None,
        }
    }

    /// A gauge of whole units (see [`Series::integer`]).
    const fn integer_gauge(
        name: &'static str,
        unit: &'static str,
        description: &'static str,
    ) -> Self {
        Series {
            integer: true,
            ..Series::new(name, MetricKind::Gauge, unit, description)
        }
    }

    /// A counter in the configured currency.
    const fn cost(name: &'static str, description: &'static str) -> Self {
        Series {
            unit: SeriesUnit::Currency,
            ..Series::new(name, MetricKind::Counter, "", description)
        }
    }

    /// A power histogram over [`POWER_HISTOGRAM_BOUNDARIES`].
    const fn power_histogram(description: &'static str) -> Self {
        Series {
            boundaries: Some(&POWER_HISTOGRAM_BOUNDARIES),
            ..Series::new(
                names::POWER_CONSUMPTION,
                MetricKind::Histogram,
                "W",
                description,
            )
        }
    }
}

/// Which attributes a device series carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceAttributes {
    /// The reference's: [`GPU_ID_ATTRIBUTE`] and [`GPU_NAME_ATTRIBUTE`].
    Reference,
    /// The reference's with [`GPU_UUID_ATTRIBUTE`]: a `wattline.*` series.
    WithUuid,
}

/// How a device's figure becomes an `hw.*` series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardwareShape {
    /// A gauge of the reading.
    Gauge,
    /// A level (memory in use, installed): an up-down counter of its changes, the first
    /// the whole level.
    Level,
    /// A total since the driver loaded (ECC errors): a counter of its increases, the
    /// first zero (what came before the run is not the run's), a decrease (a driver
    /// reload) counting from zero again.
    TotalSinceLoad,
}

impl HardwareShape {
    /// The metric kind the shape is sent as.
    pub fn kind(self) -> MetricKind {
        match self {
            HardwareShape::Gauge => MetricKind::Gauge,
            HardwareShape::Level => MetricKind::UpDownCounter,
            HardwareShape::TotalSinceLoad => MetricKind::Counter,
        }
    }
}

/// Whose identity an `hw.*` series names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardwareIdentity {
    /// [`HW_ID_ATTRIBUTE`] and [`HW_NAME_ATTRIBUTE`] of the GPU.
    Device,
    /// The device's with [`HW_VENDOR_ATTRIBUTE`] and, where known, [`HW_MODEL_ATTRIBUTE`]:
    /// the GPU metrics' set.
    Gpu,
    /// The GPU's temperature sensor, a component of its own under the GPU
    /// ([`HW_PARENT_ATTRIBUTE`]).
    Sensor,
}

/// The attributes of an `hw.*` series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HardwareAttributes {
    /// Whose identity.
    pub identity: HardwareIdentity,
    /// Whether it carries `hw.type = gpu`.
    pub gpu_type: bool,
    /// One more attribute the convention adds (`error.type = corrected`).
    pub extra: Option<(&'static str, &'static str)>,
}

/// The `hw.*` column of a device reading.
#[derive(Debug, Clone, Copy)]
pub struct HardwareSeries {
    /// Its name.
    pub name: &'static str,
    /// The convention's unit.
    pub unit: &'static str,
    /// Its description.
    pub description: &'static str,
    /// The figure in that unit (`None`: not measured).
    pub value: fn(&GpuDeviceReading) -> Option<f64>,
    /// Gauge, level or total.
    pub shape: HardwareShape,
    /// Its attributes.
    pub attributes: HardwareAttributes,
}

impl HardwareSeries {
    /// The series it is sent as.
    pub fn series(&self) -> Series {
        Series::new(self.name, self.shape.kind(), self.unit, self.description)
    }
}

/// One reading of a GPU device and every name it is sent under.
#[derive(Debug, Clone, Copy)]
pub struct DeviceSeries {
    /// The specification's series (a gauge).
    pub series: Series,
    /// The reading in the series' unit (`None`: not measured, no point).
    pub value: fn(&GpuDeviceReading) -> Option<f64>,
    /// Its attributes.
    pub attributes: DeviceAttributes,
    /// Its semantic-convention equivalent, sent under `metric_names = "semconv"` or
    /// `"both"`; under `"semconv"` in place of the specification's.
    pub semconv: Option<HardwareSeries>,
}

const MEBIBYTE: f64 = 1024.0 * 1024.0;

/// A throttle reason as the reference writes it: 1 or 0.
fn flag(value: bool) -> f64 {
    if value { 1.0 } else { 0.0 }
}

/// The GPU metrics' attributes, with `extra`.
const fn gpu(extra: Option<(&'static str, &'static str)>) -> HardwareAttributes {
    HardwareAttributes {
        identity: HardwareIdentity::Gpu,
        gpu_type: false,
        extra,
    }
}

/// A volatile ECC error count: the reference's integer gauge, and `hw.errors` of its
/// `error.type` (the GPU's attributes and `hw.type`).
const fn ecc_errors(
    name: &'static str,
    description: &'static str,
    error_type: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
) -> DeviceSeries {
    DeviceSeries {
        semconv: Some(HardwareSeries {
            name: HW_ERRORS,
            unit: "{error}",
            description: "ECC errors of the GPU memory",
            value,
            shape: HardwareShape::TotalSinceLoad,
            attributes: HardwareAttributes {
                identity: HardwareIdentity::Gpu,
                gpu_type: true,
                extra: Some(("error.type", error_type)),
            },
        }),
        ..whole(name, "1", description, value)
    }
}

/// `hw.gpu.memory.*`: a level in bytes with the GPU's attributes.
const fn memory(
    name: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
) -> HardwareSeries {
    HardwareSeries {
        name,
        unit: "By",
        description,
        value,
        shape: HardwareShape::Level,
        attributes: gpu(None),
    }
}

/// A device gauge the reference sends as a float.
const fn float(
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
) -> DeviceSeries {
    DeviceSeries {
        series: Series::new(name, MetricKind::Gauge, unit, description),
        value,
        attributes: DeviceAttributes::Reference,
        semconv: None,
    }
}

/// A device gauge the reference sends as an integer.
const fn whole(
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
) -> DeviceSeries {
    DeviceSeries {
        series: Series::integer_gauge(name, unit, description),
        ..float(name, unit, description, value)
    }
}

/// A throttle reason the reference does not send, as a `wattline.*` flag per device.
const fn hardware_flag(
    name: &'static str,
    description: &'static str,
    value: fn(&GpuDeviceReading) -> Option<f64>,
) -> DeviceSeries {
    DeviceSeries {
        attributes: DeviceAttributes::WithUuid,
        ..float(name, "1", description, value)
    }
}

/// Every device series, in the order each device's are sent: the reference's gauges,
/// then the `wattline.*` throttle flags. The `hw.*` ones follow the same order.
pub const DEVICE_SERIES: [DeviceSeries; 18] = [
    DeviceSeries {
        semconv: Some(HardwareSeries {
            name: HW_GPU_UTILIZATION,
            unit: "1",
            description: "Fraction of time the GPU was busy",
            value: |device| {
                device
                    .compute_utilization_percent
                    .map(|percent| percent / 100.0)
            },
            shape: HardwareShape::Gauge,
            attributes: gpu(Some(("hw.gpu.task", "general"))),
        }),
        ..whole(names::GPU_UTILIZATION, "%", "GPU utilization", |device| {
            device.compute_utilization_percent
        })
    },
    whole(
        names::GPU_MEMORY_UTILIZATION,
        "%",
        "GPU memory controller utilization",
        |device| device.memory_utilization_percent,
    ),
    DeviceSeries {
        semconv: Some(memory(HW_GPU_MEMORY_USAGE, "GPU memory used", |device| {
            device.memory_used_bytes.map(|bytes| bytes as f64)
        })),
        ..float(names::GPU_MEMORY_USED, "MiB", "GPU memory used", |device| {
            device.memory_used_bytes.map(|b| b as f64 / MEBIBYTE)
        })
    },
    DeviceSeries {
        semconv: Some(memory(
            HW_GPU_MEMORY_LIMIT,
            "GPU memory installed",
            |device| device.memory_total_bytes.map(|bytes| bytes as f64),
        )),
        ..float(
            names::GPU_MEMORY_TOTAL,
            "MiB",
            "GPU memory total",
            |device| device.memory_total_bytes.map(|b| b as f64 / MEBIBYTE),
        )
    },
    DeviceSeries {
        semconv: Some(HardwareSeries {
            name: HW_TEMPERATURE,
            unit: "Cel",
            description: "GPU core temperature",
            value: |device| device.temperature_celsius,
            shape: HardwareShape::Gauge,
            attributes: HardwareAttributes {
                identity: HardwareIdentity::Sensor,
                gpu_type: false,
                extra: None,
            },
        }),
        ..whole(names::GPU_TEMPERATURE, "Cel", "GPU temperature", |device| {
            device.temperature_celsius
        })
    },
    DeviceSeries {
        semconv: Some(HardwareSeries {
            name: HW_POWER,
            unit: "W",
            description: "GPU power draw",
            value: |device| device.power_draw_watts,
            shape: HardwareShape::Gauge,
            attributes: HardwareAttributes {
                identity: HardwareIdentity::Device,
                gpu_type: true,
                extra: None,
            },
        }),
        ..float(names::GPU_POWER, "W", "GPU power draw", |device| {
            device.power_draw_watts
        })
    },
    float(names::GPU_POWER_LIMIT, "W", "GPU power limit", |device| {
        device.power_limit_watts
    }),
    whole(names::GPU_CLOCK_SM, "MHz", "GPU SM clock", |device| {
        device.sm_clock_mhz
    }),
    whole(
        names::GPU_CLOCK_MEMORY,
        "MHz",
        "GPU memory clock",
        |device| device.memory_clock_mhz,
    ),
    whole(names::GPU_FAN_SPEED, "%", "GPU fan speed", |device| {
        device.fan_speed_percent
    }),
    whole(
        names::GPU_PERFORMANCE_STATE,
        "1",
        "GPU performance state, 0 to 15",
        |device| device.performance_state.map(f64::from),
    ),
    whole(
        names::GPU_THROTTLE_THERMAL,
        "1",
        "Thermal throttling, 1 or 0",
        |device| device.throttle_thermal.map(flag),
    ),
    whole(
        names::GPU_THROTTLE_POWER,
        "1",
        "Power throttling, 1 or 0",
        |device| device.throttle_power.map(flag),
    ),
    whole(
        names::GPU_THROTTLE_HW_SLOWDOWN,
        "1",
        "Hardware slowdown, 1 or 0",
        |device| device.throttle_hw_slowdown.map(flag),
    ),
    ecc_errors(
        names::GPU_ECC_ERRORS_CORRECTED,
        "Corrected ECC errors (volatile)",
        "corrected",
        |device| device.ecc_corrected.map(|count| count as f64),
    ),
    ecc_errors(
        names::GPU_ECC_ERRORS_UNCORRECTED,
        "Uncorrected ECC errors (volatile)",
        "uncorrected",
        |device| device.ecc_uncorrected.map(|count| count as f64),
    ),
    hardware_flag(
        names::WATTLINE_GPU_THROTTLE_HW_THERMAL,
        "Hardware thermal slowdown, 1 or 0",
        |device| device.throttle_hw_thermal.map(flag),
    ),
    hardware_flag(
        names::WATTLINE_GPU_THROTTLE_HW_POWER_BRAKE,
        "Hardware power brake slowdown, 1 or 0",
        |device| device.throttle_hw_power_brake.map(flag),
    ),
];

/// `gen_ai.power.consumption` of a GPU sample: every device's power summed,
/// `component = gpu` (codecarbon's GPU power, as the reference sends it).
pub const GPU_POWER_READINGS: Series = Series::power_histogram("GPU power readings");
/// The mean utilization over the devices that reported one, with `gpu_count`.
pub const GPU_MEAN_UTILIZATION: Series = Series::new(
    names::GPU_AGGREGATE_MEAN_UTILIZATION,
    MetricKind::Gauge,
    "%",
    "Mean utilization over the GPUs that reported it",
);
/// The memory used over the devices that reported it, with `gpu_count`.
pub const GPU_TOTAL_MEMORY_USED: Series = Series::new(
    names::GPU_AGGREGATE_TOTAL_MEMORY_USED,
    MetricKind::Gauge,
    "GiB",
    "GPU memory used over the GPUs that reported it",
);
/// The power over the devices that reported it, with `gpu_count`.
pub const GPU_TOTAL_POWER: Series = Series::new(
    names::GPU_AGGREGATE_TOTAL_POWER,
    MetricKind::Gauge,
    "W",
    "Power over the GPUs that reported it",
);
/// The hottest device's temperature, with `gpu_count`.
pub const GPU_MAX_TEMPERATURE: Series =
    Series::integer_gauge(names::GPU_AGGREGATE_MAX_TEMPERATURE, "Cel", "Hottest GPU");

/// An interval's length, with its device, `component` and method.
pub const INTERVAL_LENGTH: Series = Series::new(
    names::INTERVAL_DURATION,
    MetricKind::Gauge,
    "s",
    "Length of the power interval the energy covers",
);
/// An interval's energy by the best figure, with its device, `component` and method.
pub const INTERVAL_ENERGY: Series = Series::new(
    names::WATTLINE_ENERGY_CONSUMED,
    MetricKind::Counter,
    "kWh",
    "Energy consumed: the hardware counter where readable, else the trapezoid",
);
/// An interval's trapezoid energy, `component = gpu` (the reference's shape).
pub const INTERVAL_TRAPEZOID_ENERGY: Series = Series::new(
    names::ENERGY_CONSUMED,
    MetricKind::Counter,
    "kWh",
    "Energy consumed: mean of the two power readings times the interval",
);
/// The cost of an interval's trapezoid energy, per device (the reference's shape).
pub const INTERVAL_COST: Series = Series::cost(names::POWER_COST, "Cost of the energy consumed");
/// The CO2 of an interval's trapezoid energy, by `gpu_id` (the reference's manual
/// carbon-intensity mode, the spec's formula).
pub const INTERVAL_CO2: Series = Series::new(
    names::CO2_EMISSIONS,
    MetricKind::Counter,
    "gCO2e",
    "Energy times the configured carbon intensity (a factor)",
);
/// The trapezoid energy of a sample's intervals.
pub const TOTAL_TRAPEZOID_ENERGY: Series = Series::new(
    names::ENERGY_TOTAL,
    MetricKind::Counter,
    "kWh",
    "GPU energy only; CPU and RAM are not in this figure",
);
/// The CO2 rate of a sample's trapezoid energy over its longest interval.
pub const CO2_RATE: Series = Series::new(
    names::CO2_EMISSIONS_RATE,
    MetricKind::Histogram,
    "gCO2e/s",
    "CO2 rate over the last interval",
);
/// The best-figure energy of a sample's intervals.
pub const TOTAL_ENERGY: Series = Series::new(
    names::WATTLINE_ENERGY_TOTAL,
    MetricKind::Counter,
    "kWh",
    "GPU energy only, by the report's figure",
);
/// The cost of [`TOTAL_ENERGY`].
pub const TOTAL_COST: Series = Series::cost(
    names::WATTLINE_ENERGY_COST,
    "Cost of the GPU energy, by the report's figure",
);
/// The CO2 of [`TOTAL_ENERGY`].
pub const TOTAL_CO2: Series = Series::new(
    names::WATTLINE_CO2_EMISSIONS,
    MetricKind::Counter,
    "gCO2e",
    "GPU energy times the configured carbon intensity (a factor)",
);

/// The RAPL power of a component (`cpu`: the packages summed, `ram`: the DRAM zones),
/// as the reference's codecarbon mode sends it.
pub const RAPL_POWER: Series = Series::power_histogram("RAPL power, mean over the interval");
/// The RAPL energy of a component, as [`RAPL_POWER`].
pub const RAPL_ENERGY: Series = Series::new(
    names::ENERGY_CONSUMED,
    MetricKind::Counter,
    "kWh",
    "Energy consumed: the RAPL counters' increase",
);

/// `hw.energy` of a GPU interval, by the best figure.
pub const HW_GPU_ENERGY: Series = Series::new(
    HW_ENERGY,
    MetricKind::Counter,
    "J",
    "GPU energy: the hardware counter where readable, else the trapezoid",
);
/// `hw.energy` of a RAPL zone.
pub const HW_RAPL_ENERGY: Series = Series::new(
    HW_ENERGY,
    MetricKind::Counter,
    "J",
    "Energy of a RAPL zone: its counter's increase",
);
/// `hw.power` of a RAPL zone.
pub const HW_RAPL_POWER: Series = Series::new(
    HW_POWER,
    MetricKind::Gauge,
    "W",
    "Mean power of a RAPL zone since its previous reading",
);

/// The energy series `hw.energy` carries the figure of (the GPU intervals' and the RAPL
/// zones').
const REPLACED_BY_HW_ENERGY: [&str; 2] = [names::ENERGY_CONSUMED, names::WATTLINE_ENERGY_CONSUMED];

/// Whether the specification's series `name` is left out under `metric_names =
/// "semconv"`: an `hw.*` series carries its figure.
pub fn replaced_by_semconv(name: &str) -> bool {
    REPLACED_BY_HW_ENERGY.contains(&name)
        || DEVICE_SERIES
            .iter()
            .any(|row| row.semconv.is_some() && row.series.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_device_series_is_named_once_and_only_the_replaced_have_a_column() {
        let mut seen = std::collections::HashSet::new();
        for row in &DEVICE_SERIES {
            assert!(seen.insert(row.series.name), "{} twice", row.series.name);
            assert_eq!(row.series.kind, MetricKind::Gauge, "{}", row.series.name);
        }
        let replaced: Vec<&str> = DEVICE_SERIES
            .iter()
            .map(|row| row.series.name)
            .filter(|name| replaced_by_semconv(name))
            .collect();
        assert_eq!(
            replaced,
            [
                "gen_ai.gpu.utilization",
                "gen_ai.gpu.memory.used",
                "gen_ai.gpu.memory.total",
                "gen_ai.gpu.temperature",
                "gen_ai.gpu.power",
                "gen_ai.gpu.ecc.errors.corrected",
                "gen_ai.gpu.ecc.errors.uncorrected",
            ]
        );
        assert!(replaced_by_semconv("gen_ai.energy.consumed"));
        assert!(replaced_by_semconv("wattline.energy.consumed"));
        assert!(!replaced_by_semconv("gen_ai.power.cost"));
        assert!(!replaced_by_semconv("gen_ai.power.consumption"));
    }
}

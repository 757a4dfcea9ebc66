//! The `nemo.relay.metric_measurements` v1 data a mark carries: measurements with
//! their kind, number type, unit, attributes and histogram boundaries. Marks, metric
//! batches and a step's histogram observations are all made of these.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The data schema of metric marks.
pub const METRIC_MEASUREMENTS_SCHEMA: &str = "nemo.relay.metric_measurements";
/// Its version.
pub const METRIC_MEASUREMENTS_SCHEMA_VERSION: &str = "1";

/// The instrument kind of a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A monotonic sum.
    Counter,
    /// A sum that can go down.
    UpDownCounter,
    /// A point-in-time value (every resource measurement, cumulative ones included).
    Gauge,
    /// A distribution.
    Histogram,
}

/// The number type of a measurement; one name keeps one type across polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricValueType {
    /// Unsigned, at most `i64::MAX` in a mark.
    U64,
    /// Signed.
    I64,
    /// Floating point.
    F64,
}

/// A measurement's number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetricValue {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// Floating point.
    F64(f64),
}

impl MetricValue {
    /// The value's type.
    pub fn value_type(self) -> MetricValueType {
        match self {
            MetricValue::U64(_) => MetricValueType::U64,
            MetricValue::I64(_) => MetricValueType::I64,
            MetricValue::F64(_) => MetricValueType::F64,
        }
    }

    /// As `f64` (lossy above 2^53).
    pub fn as_f64(self) -> f64 {
        match self {
            MetricValue::U64(value) => value as f64,
            MetricValue::I64(value) => value as f64,
            MetricValue::F64(value) => value,
        }
    }
}

/// An attribute value: a primitive or a homogeneous non-empty array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum AttributeValue {
    /// Boolean.
    Bool(bool),
    /// Integer.
    Int(i64),
    /// Float.
    Float(f64),
    /// String.
    String(String),
    /// Array of strings.
    StringArray(Vec<String>),
}

/// One measurement of a metric mark (`nemo.relay.metric_measurements` v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricMeasurement {
    /// Metric name, e.g. `nemo.relay.resource.cpu.total_time`.
    pub name: String,
    /// Instrument kind.
    pub kind: MetricKind,
    /// Number type; always the type of `value`.
    pub value_type: MetricValueType,
    /// The number. For a histogram, one observation.
    pub value: MetricValue,
    /// snake_case unit name (`kibibytes`) or UCUM-style unit (`W`, `kWh`).
    pub unit: Option<String>,
    /// What the metric means.
    pub description: Option<String>,
    /// Attributes, sorted by key.
    pub attributes: Option<BTreeMap<String, AttributeValue>>,
    /// Histogram bucket boundaries, strictly increasing, at most 64.
    pub boundaries: Option<Vec<f64>>,
}

/// The payload of a metric mark.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricMeasurements {
    /// The measurements.
    pub measurements: Vec<MetricMeasurement>,
}

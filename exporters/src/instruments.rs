//! Maps metric measurements to OpenTelemetry instruments by name (one mapping for the
//! OTLP and stdout exporters): gauges to gauges, counters to counters, histograms to
//! histograms with their boundaries, in a capped table that counts what it refuses.
//!
//! Number types: a gauge keeps its measurement's type (`f64`, `u64`, `i64`); a counter
//! is `f64` or `u64` (a non-negative `i64` counts as `u64`); an up-down counter is
//! `f64` or `i64`; a histogram is `f64` or `u64` (an `i64` one records as `f64`). A
//! counter's value is the increment since its previous measurement. The first
//! measurement of a name fixes its kind, number type, unit, description and
//! boundaries; a later one that disagrees on kind or number type is refused.

use std::borrow::Cow;
use std::collections::HashMap;

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use wattline_config::opentelemetry::DEFAULT_MAX_INSTRUMENTS as CONFIGURED_DEFAULT;
use wattline_model::events::PipelineEvent;
use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricValue, MetricValueType,
};

use crate::energy_names;
use crate::exporter::ExportError;
use crate::metric_schema::{check_metric_name, check_unit};

/// Default most instruments one table creates (the `opentelemetry` component's
/// `max_instruments` default).
pub const DEFAULT_MAX_INSTRUMENTS: usize = CONFIGURED_DEFAULT;

/// The measurements an event carries under the specification's names: a mark's data,
/// a metrics batch, the energy stage's telemetry or a step's histogram observations;
/// none for a scope.
pub fn measurements_of(event: &PipelineEvent) -> Cow<'_, [MetricMeasurement]> {
    match event {
        PipelineEvent::GpuTelemetry { telemetry, .. } => {
            Cow::Owned(energy_names::gpu_measurements(telemetry))
        }
        PipelineEvent::RaplIntervals { intervals, .. } => {
            Cow::Owned(energy_names::rapl_measurements(intervals))
        }
        PipelineEvent::Scope(_) | PipelineEvent::Energy { .. } => Cow::Borrowed(&[]),
        PipelineEvent::Mark(mark) => Cow::Borrowed(&mark.data.measurements),
        // Every copy carries the same measurements: they are recorded once.
        PipelineEvent::MarkCopies(copies) => Cow::Borrowed(&copies.data.measurements),
        PipelineEvent::Metrics { measurements, .. } => Cow::Borrowed(measurements),
        // Made here, by what records them, not by the energy actor for every scope.
        PipelineEvent::ScopeEnergy {
            settled,
            name_folded,
        } => Cow::Owned(settled.measurements(settled.metric_name(*name_folded))),
    }
}

/// A measurement's attributes as OpenTelemetry key-values.
pub fn attributes(measurement: &MetricMeasurement) -> Vec<KeyValue> {
    let Some(attributes) = &measurement.attributes else {
        return Vec::new();
    };
    attributes
        .iter()
        .map(|(key, value)| {
            let value = match value {
                AttributeValue::Bool(value) => Value::Bool(*value),
                AttributeValue::Int(value) => Value::I64(*value),
                AttributeValue::Float(value) => Value::F64(*value),
                AttributeValue::String(value) => Value::String(value.clone().into()),
                AttributeValue::StringArray(values) => Value::Array(Array::String(
                    values.iter().cloned().map(StringValue::from).collect(),
                )),
            };
            KeyValue::new(key.clone(), value)
        })
        .collect()
}

enum Instrument {
    F64Gauge(Gauge<f64>),
    U64Gauge(Gauge<u64>),
    I64Gauge(Gauge<i64>),
    F64Counter(Counter<f64>),
    U64Counter(Counter<u64>),
    F64UpDownCounter(UpDownCounter<f64>),
    I64UpDownCounter(UpDownCounter<i64>),
    F64Histogram(Histogram<f64>),
    U64Histogram(Histogram<u64>),
}

struct Entry {
    kind: MetricKind,
    value_type: MetricValueType,
    instrument: Instrument,
}

/// The instruments of one meter, by lower-cased metric name.
pub struct InstrumentTable {
    meter: Meter,
    entries: HashMap<String, Entry>,
    max_instruments: usize,
    refused: u64,
}

impl std::fmt::Debug for InstrumentTable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("InstrumentTable")
            .field("instruments", &self.entries.len())
            .field("max_instruments", &self.max_instruments)
            .field("refused", &self.refused)
            .finish()
    }
}

impl InstrumentTable {
    /// A table creating at most `max_instruments` instruments from `meter`.
    pub fn new(meter: Meter, max_instruments: usize) -> Self {
        InstrumentTable {
            meter,
            entries: HashMap::new(),
            max_instruments,
            refused: 0,
        }
    }

    /// Instruments created so far.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no instrument was created yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Measurements refused since the table was made (bad name, table full, kind or type
    /// conflict, value the instrument cannot take).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Records every measurement it can; the others are counted and the first reason is
    /// returned in [`ExportError::MeasurementsRefused`]. Never blocks.
    pub fn record_all(&mut self, measurements: &[MetricMeasurement]) -> Result<(), ExportError> {
        let mut refused = 0;
        let mut first = None;
        for measurement in measurements {
            if let Err(reason) = self.record(measurement) {
                refused += 1;
                first.get_or_insert(format!("{}: {reason}", measurement.name));
            }
        }
        self.refused += refused as u64;
        match first {
            None => Ok(()),
            Some(first) => Err(ExportError::MeasurementsRefused { refused, first }),
        }
    }

    fn record(&mut self, measurement: &MetricMeasurement) -> Result<(), String> {
        let key = measurement.name.to_ascii_lowercase();
        if !self.entries.contains_key(&key) {
            if self.entries.len() >= self.max_instruments {
                return Err(format!(
                    "instrument limit of {} reached",
                    self.max_instruments
                ));
            }
            let entry = self.create(measurement)?;
            self.entries.insert(key.clone(), entry);
        }
        let Some(entry) = self.entries.get(&key) else {
            return Err("instrument vanished".into());
        };
        if entry.kind != measurement.kind || entry.value_type != measurement.value_type {
            return Err(format!(
                "already a {:?} of {:?}, got a {:?} of {:?}",
                entry.kind, entry.value_type, measurement.kind, measurement.value_type
            ));
        }
        let attributes = attributes(measurement);
        match (&entry.instrument, measurement.value) {
            (Instrument::F64Gauge(gauge), MetricValue::F64(value)) => {
                gauge.record(finite(value)?, &attributes)
            }
            (Instrument::U64Gauge(gauge), MetricValue::U64(value)) => {
                gauge.record(value, &attributes)
            }
            (Instrument::I64Gauge(gauge), MetricValue::I64(value)) => {
                gauge.record(value, &attributes)
            }
            (Instrument::F64Counter(counter), MetricValue::F64(value)) => {
                counter.add(non_negative(finite(value)?)?, &attributes)
            }
            (Instrument::U64Counter(counter), MetricValue::U64(value)) => {
                counter.add(value, &attributes)
            }
            (Instrument::U64Counter(counter), MetricValue::I64(value)) => counter.add(
                u64::try_from(value).map_err(|_| format!("counter increment {value} < 0"))?,
                &attributes,
            ),
            (Instrument::F64UpDownCounter(counter), MetricValue::F64(value)) => {
                counter.add(finite(value)?, &attributes)
            }
            (Instrument::I64UpDownCounter(counter), MetricValue::I64(value)) => {
                counter.add(value, &attributes)
            }
            (Instrument::I64UpDownCounter(counter), MetricValue::U64(value)) => counter.add(
                i64::try_from(value).map_err(|_| format!("{value} is above i64::MAX"))?,
                &attributes,
            ),
            (Instrument::F64Histogram(histogram), MetricValue::F64(value)) => {
                histogram.record(finite(value)?, &attributes)
            }
            (Instrument::F64Histogram(histogram), MetricValue::I64(value)) => {
                histogram.record(value as f64, &attributes)
            }
            (Instrument::U64Histogram(histogram), MetricValue::U64(value)) => {
                histogram.record(value, &attributes)
            }
            _ => {
                return Err(format!(
                    "value type {:?} does not match its value",
                    measurement.value_type
                ));
            }
        }
        Ok(())
    }

    fn create(&self, measurement: &MetricMeasurement) -> Result<Entry, String> {
        check_metric_name(&measurement.name)?;
        if let Some(unit) = &measurement.unit {
            check_unit(unit)?;
        }
        let name = measurement.name.clone();
        let unit = measurement.unit.clone().unwrap_or_default();
        let description = measurement.description.clone().unwrap_or_default();
        let boundaries = measurement.boundaries.clone();
        let meter = &self.meter;
        // Every instrument builder takes the same unit and description; histograms also
        // take the boundaries when the measurement has them.
        macro_rules! build {
            ($method:ident) => {
                meter
                    .$method(name)
                    .with_unit(unit)
                    .with_description(description)
                    .build()
            };
            ($method:ident, histogram) => {{
                let builder = meter
                    .$method(name)
                    .with_unit(unit)
                    .with_description(description);
                match boundaries {
                    Some(boundaries) => builder.with_boundaries(boundaries).build(),
                    None => builder.build(),
                }
            }};
        }
        use MetricKind as K;
        use MetricValueType as T;
        let instrument = match (measurement.kind, measurement.value_type) {
            (K::Gauge, T::F64) => Instrument::F64Gauge(build!(f64_gauge)),
            (K::Gauge, T::U64) => Instrument::U64Gauge(build!(u64_gauge)),
            (K::Gauge, T::I64) => Instrument::I64Gauge(build!(i64_gauge)),
            (K::Counter, T::F64) => Instrument::F64Counter(build!(f64_counter)),
            (K::Counter, T::U64 | T::I64) => Instrument::U64Counter(build!(u64_counter)),
            (K::UpDownCounter, T::F64) => Instrument::F64UpDownCounter(build!(f64_up_down_counter)),
            (K::UpDownCounter, T::U64 | T::I64) => {
                Instrument::I64UpDownCounter(build!(i64_up_down_counter))
            }
            (K::Histogram, T::F64 | T::I64) => {
                Instrument::F64Histogram(build!(f64_histogram, histogram))
            }
            (K::Histogram, T::U64) => Instrument::U64Histogram(build!(u64_histogram, histogram)),
        };
        Ok(Entry {
            kind: measurement.kind,
            value_type: measurement.value_type,
            instrument,
        })
    }
}

fn finite(value: f64) -> Result<f64, String> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{value} is not finite"))
    }
}

fn non_negative(value: f64) -> Result<f64, String> {
    if value >= 0.0 {
        Ok(value)
    } else {
        Err(format!("counter increment {value} < 0"))
    }
}

//! A snapshot as `nemo.relay.metric_measurements` v1 data: every available measurement
//! under its `nemo.relay.resource.*` name, each a gauge, with the scope attributes.
//!
//! This file holds what every category's gauges share (the number-type rule, the
//! builder, limit events, the sample count and process coverage); each category's
//! gauges are a table of full metric names in its own file under `crate::snapshot`,
//! so every name a mark can carry is written out once and greppable.

use std::collections::BTreeMap;

use wattline_config::units::MeasurementValue;

use crate::measurement::{LimitEvent, LimitEventKind, LimitResource, Measurement};
use crate::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue,
};
use crate::semconv::SemconvEquivalent;

/// Whether a measurement's unit can ever produce a fraction, which fixes its number
/// type for every poll (`f64`), or always gives whole numbers (`u64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberType {
    Whole,
    Fractional,
}

/// A value ready for a mark: the number, its unit's name and its number type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MarkValue {
    value: MeasurementValue,
    unit: &'static str,
    number: NumberType,
}

/// One gauge of a table: its full metric name, what it says, where its value comes
/// from in the category's metrics `T`, and its semantic-convention equivalent.
pub(crate) struct Gauge<T> {
    pub name: &'static str,
    pub description: &'static str,
    pub value: fn(&T) -> Option<MarkValue>,
    /// What the mark becomes under `process.*` / `system.*` names; `None` when the
    /// conventions have no equivalent.
    pub semconv: Option<SemconvEquivalent>,
}

/// The semantic-convention equivalent of the gauge named `mark` in `table`, if the
/// table holds that gauge and it has one.
pub(crate) fn semconv_in<T>(
    table: &'static [Gauge<T>],
    mark: &str,
) -> Option<&'static SemconvEquivalent> {
    table
        .iter()
        .find(|gauge| gauge.name == mark)
        .and_then(|gauge| gauge.semconv.as_ref())
}

/// The value of `measurement`, whose source reads in steps of `resolution` base units.
pub(crate) fn at<U: UnitNumber>(
    measurement: &Option<Measurement<U>>,
    resolution: u64,
) -> Option<MarkValue> {
    measurement.map(|measurement| MarkValue {
        value: measurement.value,
        unit: measurement.unit.unit_name(),
        number: measurement.unit.number_type(resolution),
    })
}

/// The value of a measurement read in whole base units.
pub(crate) fn whole_base<U: UnitNumber>(measurement: &Option<Measurement<U>>) -> Option<MarkValue> {
    at(measurement, 1)
}

/// A count the mark states itself (a sample, processes), always whole.
pub(crate) fn count(value: u64, unit: &'static str) -> MarkValue {
    MarkValue {
        value: MeasurementValue::Integer(value),
        unit,
        number: NumberType::Whole,
    }
}

/// Builds the measurements of one mark.
pub(crate) struct MarkBuilder {
    common: BTreeMap<String, AttributeValue>,
    measurements: Vec<MetricMeasurement>,
}

impl MarkBuilder {
    /// An empty mark whose every measurement carries `common`.
    pub(crate) fn new(common: BTreeMap<String, AttributeValue>) -> Self {
        MarkBuilder {
            common,
            measurements: Vec::with_capacity(64),
        }
    }

    /// The measurements built.
    pub(crate) fn finish(self) -> MetricMeasurements {
        MetricMeasurements {
            measurements: self.measurements,
        }
    }

    pub(crate) fn push(
        &mut self,
        name: &'static str,
        value: MarkValue,
        description: &'static str,
        extra: &[(&'static str, AttributeValue)],
    ) {
        let unit = value.unit;
        let value = match (value.number, value.value) {
            (NumberType::Fractional, value) => match value.as_f64() {
                decimal if decimal.is_finite() => MetricValue::F64(decimal),
                _ => return,
            },
            // The event format cannot carry an integer above i64::MAX: omit it.
            (NumberType::Whole, MeasurementValue::Integer(integer))
                if integer <= i64::MAX as u64 =>
            {
                MetricValue::U64(integer)
            }
            (NumberType::Whole, _) => return,
        };
        let mut attributes = self.common.clone();
        for (key, attribute) in extra {
            attributes.insert((*key).to_string(), attribute.clone());
        }
        self.measurements.push(MetricMeasurement {
            name: name.to_string(),
            kind: MetricKind::Gauge,
            value_type: value.value_type(),
            value,
            unit: Some(unit.to_string()),
            description: Some(description.to_string()),
            attributes: Some(attributes),
            boundaries: None,
        });
    }

    /// Every gauge of `table` that `metrics` has a value for.
    pub(crate) fn gauges<T>(
        &mut self,
        table: &[Gauge<T>],
        metrics: &T,
        extra: &[(&'static str, AttributeValue)],
    ) {
        for gauge in table {
            if let Some(value) = (gauge.value)(metrics) {
                self.push(gauge.name, value, gauge.description, extra);
            }
        }
    }

    pub(crate) fn limit_events(&mut self, events: &[LimitEvent]) {
        for event in events {
            let resource = match event.resource {
                LimitResource::Cpu => "cpu",
                LimitResource::Memory => "memory",
                LimitResource::Processes => "processes",
            };
            let kind = match event.event {
                LimitEventKind::Throttled => "throttled",
                LimitEventKind::High => "high",
                LimitEventKind::Maximum => "maximum",
                LimitEventKind::OutOfMemory => "out_of_memory",
                LimitEventKind::Terminated => "terminated",
            };
            if let Some(value) = whole_base(&event.count) {
                self.push(
                    "nemo.relay.resource.limit.event_count",
                    value,
                    "Cumulative limit events of the measured environment",
                    &[
                        (
                            "nemo_relay.resource.limit.resource",
                            AttributeValue::String(resource.into()),
                        ),
                        (
                            "nemo_relay.resource.limit.event",
                            AttributeValue::String(kind.into()),
                        ),
                    ],
                );
            }
        }
    }
}

/// A unit as the mark needs it: its name, and its size in its family's base unit
/// (`None` for a rate or share, which can always be fractional).
pub(crate) trait UnitNumber: Copy {
    fn unit_name(self) -> &'static str;
    fn base_units(self) -> Option<u64>;

    /// Whole when every reading, a multiple of the source's `resolution` (in base
    /// units), converts to a whole number of this unit; else a decimal, even for a
    /// reading that happens to be whole, so one name keeps one number type (the
    /// reference's rule: milliseconds and microseconds of CPU time stay whole, seconds
    /// do not; kibibytes of `/proc` memory stay whole, mebibytes do not).
    fn number_type(self, resolution: u64) -> NumberType {
        match self.base_units() {
            Some(size) if size > 0 && resolution.is_multiple_of(size) => NumberType::Whole,
            _ => NumberType::Fractional,
        }
    }
}

macro_rules! unit_number {
    ($unit:ty, |$u:ident| $size:expr) => {
        impl UnitNumber for $unit {
            fn unit_name(self) -> &'static str {
                self.name()
            }
            fn base_units(self) -> Option<u64> {
                let $u = self;
                $size
            }
        }
    };
}

use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, UtilizationUnit,
};
// The sizes are config's unit factors: one home for them.
unit_number!(DurationUnit, |unit| u64::try_from(
    unit.microseconds_per_unit()
)
.ok());
unit_number!(CapacityUnit, |unit| u64::try_from(unit.bytes_per_unit())
    .ok());
unit_number!(DataUnit, |unit| u64::try_from(unit.bytes_per_unit()).ok());
unit_number!(BandwidthUnit, |_unit| None);
unit_number!(CpuUnit, |_unit| None);
unit_number!(UtilizationUnit, |_unit| None);
unit_number!(CountUnit, |_unit| Some(1));

/// CPU times come from clock ticks, at least a millisecond (µs).
pub(crate) const CPU_TIME_RESOLUTION: u64 = 1_000;
/// Linux reports process and system memory in kibibytes (bytes).
pub(crate) const PROC_MEMORY_RESOLUTION: u64 = 1024;

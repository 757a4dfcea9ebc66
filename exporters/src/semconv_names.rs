//! The `opentelemetry` component's `metric_names`: which names the metrics exporters
//! send, and the resource marks under OpenTelemetry's `process.*` / `system.*`
//! semantic-convention names (v1.44.0: `process.*` release candidates, `system.*` in
//! development), the energy stage's telemetry under `hw.*` ones.
//!
//! Each mark's convention name, unit and shape is the semconv column of its gauge table
//! row in the model ([`wattline_model::snapshot::semconv_equivalent`]); each GPU
//! reading's `hw.*` name is the semconv column of its row in the naming table
//! ([`wattline_model::telemetry_names`], built in `hw_names.rs`). The marks are
//! translated here, where their units are known from each measurement. A mark in
//! `global` scope becomes `system.*`, one in a process scope `process.*` (for a process
//! tree: the sum over the tree, with the mark's scope attributes). The conventions make
//! times, bytes moved and errors counters and memory levels up-down counters; the marks
//! carry totals and levels, so the increments are worked out here, per series.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use wattline_config::opentelemetry::MetricNames;
use wattline_model::events::PipelineEvent;
use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricValue,
};
use wattline_model::semconv::SemconvShape;
use wattline_model::snapshot::semconv_equivalent;
use wattline_model::telemetry_names::replaced_by_semconv as telemetry_replaced;

use crate::hw_names::HardwareNames;
use crate::instruments::measurements_of;

const SCOPE_ATTRIBUTE: &str = "nemo_relay.resource.measurement_scope";
const INTERFACE_ATTRIBUTE: &str = "nemo_relay.resource.network.interface_name";

/// Picks the names each batch is sent under and translates resource marks, keeping
/// what the increments need between batches.
#[derive(Debug, Default)]
pub struct MetricNameSelection {
    names: MetricNames,
    /// Last value per translated series (name and attributes, in order).
    last: HashMap<String, f64>,
    /// The `hw.*` series' last values.
    hardware: HardwareNames,
}

impl MetricNameSelection {
    /// A selection sending `names`.
    pub fn new(names: MetricNames) -> Self {
        MetricNameSelection {
            names,
            last: HashMap::new(),
            hardware: HardwareNames::default(),
        }
    }

    /// The measurements to send for `event`: its own under the specification's names
    /// ([`measurements_of`]) with, where wanted, the energy stage's telemetry under
    /// `hw.*` names after them, then [`MetricNameSelection::select`]ed.
    pub fn event_measurements<'a>(
        &mut self,
        event: &'a PipelineEvent,
    ) -> Cow<'a, [MetricMeasurement]> {
        let mut measurements = measurements_of(event);
        if self.names.sends_semconv() {
            let hardware = match event {
                PipelineEvent::GpuTelemetry { telemetry, .. } => {
                    self.hardware.gpu_measurements(telemetry)
                }
                PipelineEvent::RaplIntervals { intervals, .. } => {
                    self.hardware.rapl_measurements(intervals)
                }
                _ => Vec::new(),
            };
            if !hardware.is_empty() {
                measurements.to_mut().extend(hardware);
            }
        }
        match measurements {
            Cow::Borrowed(measurements) => self.select(measurements),
            Cow::Owned(measurements) => {
                // Made for this event: kept as they are unless the selection changed them.
                let selected = match self.select(&measurements) {
                    Cow::Owned(selected) => Some(selected),
                    Cow::Borrowed(_) => None,
                };
                Cow::Owned(selected.unwrap_or(measurements))
            }
        }
    }

    /// The measurements to send for one batch.
    pub fn select<'a>(
        &mut self,
        measurements: &'a [MetricMeasurement],
    ) -> Cow<'a, [MetricMeasurement]> {
        match self.names {
            MetricNames::Genai => Cow::Borrowed(measurements),
            MetricNames::Both => {
                let translated = self.translate(measurements);
                if translated.is_empty() {
                    return Cow::Borrowed(measurements);
                }
                let mut all = measurements.to_vec();
                all.extend(translated);
                Cow::Owned(all)
            }
            MetricNames::Semconv => {
                let translated = self.translate(measurements);
                let mut kept: Vec<MetricMeasurement> = measurements
                    .iter()
                    .filter(|measurement| !replaced_by_semconv(&measurement.name))
                    .cloned()
                    .collect();
                kept.extend(translated);
                Cow::Owned(kept)
            }
        }
    }

    fn translate(&mut self, measurements: &[MetricMeasurement]) -> Vec<MetricMeasurement> {
        measurements
            .iter()
            .filter_map(|measurement| self.translate_one(measurement))
            .collect()
    }

    fn translate_one(&mut self, measurement: &MetricMeasurement) -> Option<MetricMeasurement> {
        let translation = semconv_equivalent(&measurement.name)?;
        let attributes = measurement.attributes.as_ref();
        let global = attributes
            .and_then(|attributes| attributes.get(SCOPE_ATTRIBUTE))
            .is_some_and(|scope| *scope == AttributeValue::String("global".into()));
        let name = if global {
            translation.system
        } else {
            translation.process
        }?;
        let value = base_value(measurement, translation.unit)?;
        let mut converted: BTreeMap<String, AttributeValue> = attributes
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|(key, _)| key != INTERFACE_ATTRIBUTE)
            .collect();
        if let Some(interface) = attributes.and_then(|a| a.get(INTERFACE_ATTRIBUTE)) {
            converted.insert("network.interface.name".into(), interface.clone());
        }
        if let Some((key, attribute)) = translation.attribute {
            converted.insert(key.into(), AttributeValue::String(attribute.into()));
        }
        let key = format!("{name}{converted:?}");
        let previous = self.last.insert(key, value);
        let (kind, change) = match translation.shape {
            // A total that went down (a process of the tree exited) adds nothing.
            SemconvShape::Total => (
                MetricKind::Counter,
                previous.map_or(value, |previous| (value - previous).max(0.0)),
            ),
            SemconvShape::Level => (
                MetricKind::UpDownCounter,
                previous.map_or(value, |previous| value - previous),
            ),
        };
        Some(MetricMeasurement {
            name: name.into(),
            kind,
            value_type: MetricValue::F64(change).value_type(),
            value: MetricValue::F64(change),
            unit: Some(translation.unit.into()),
            description: measurement.description.clone(),
            attributes: Some(converted),
            boundaries: None,
        })
    }
}

/// Whether a specification's name is not sent under `semconv`: a mark with a
/// `process.*`/`system.*` equivalent, or a series of the energy stage's with an `hw.*`
/// one.
fn replaced_by_semconv(name: &str) -> bool {
    telemetry_replaced(name) || semconv_equivalent(name).is_some()
}

/// The measurement's value in the convention's unit (`s`, `By`, or a count), from
/// the unit word the mark carries (`milliseconds`, `kibibytes`, ...).
fn base_value(measurement: &MetricMeasurement, target: &str) -> Option<f64> {
    let value = match measurement.value {
        MetricValue::F64(value) => value,
        MetricValue::U64(value) => value as f64,
        MetricValue::I64(value) => value as f64,
    };
    let unit = measurement.unit.as_deref().unwrap_or_default();
    let factor = match target {
        "s" => time_factor(unit)?,
        "By" => capacity_factor(unit)?,
        _ => 1.0,
    };
    Some(value * factor).filter(|value| value.is_finite())
}

fn time_factor(unit: &str) -> Option<f64> {
    Some(match unit {
        "nanoseconds" => 1e-9,
        "microseconds" => 1e-6,
        "milliseconds" => 1e-3,
        "seconds" => 1.0,
        "minutes" => 60.0,
        _ => return None,
    })
}

fn capacity_factor(unit: &str) -> Option<f64> {
    const KI: f64 = 1024.0;
    Some(match unit {
        "bytes" => 1.0,
        "kilobytes" => 1e3,
        "megabytes" => 1e6,
        "gigabytes" => 1e9,
        "terabytes" => 1e12,
        "kibibytes" => KI,
        "mebibytes" => KI * KI,
        "gibibytes" => KI * KI * KI,
        "tebibytes" => KI * KI * KI * KI,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::metric_measurements::MetricValueType;
    use wattline_model::metric_names as names;

    const RESOURCE: &str = "nemo.relay.resource.";

    fn gauge(name: &str, value: f64, unit: &str, scope: &str) -> MetricMeasurement {
        MetricMeasurement {
            name: format!("{RESOURCE}{name}"),
            kind: MetricKind::Gauge,
            value_type: MetricValueType::F64,
            value: MetricValue::F64(value),
            unit: Some(unit.into()),
            description: None,
            attributes: Some(BTreeMap::from([(
                SCOPE_ATTRIBUTE.to_string(),
                AttributeValue::String(scope.into()),
            )])),
            boundaries: None,
        }
    }

    fn value(measurement: &MetricMeasurement) -> f64 {
        match measurement.value {
            MetricValue::F64(value) => value,
            _ => panic!("not f64"),
        }
    }

    #[test]
    fn genai_sends_the_batch_untouched() {
        let batch = [gauge(
            "cpu.user_time",
            120.0,
            "milliseconds",
            "process_tree",
        )];
        let mut selection = MetricNameSelection::new(MetricNames::Genai);
        assert!(matches!(selection.select(&batch), Cow::Borrowed(_)));
    }

    #[test]
    fn a_process_scope_becomes_process_names_in_base_units_as_increments() {
        let mut selection = MetricNameSelection::new(MetricNames::Semconv);
        let first = [
            gauge("cpu.user_time", 120.0, "milliseconds", "process_tree"),
            gauge("memory.resident", 2.0, "kibibytes", "process_tree"),
        ];
        let sent = selection.select(&first).into_owned();
        assert_eq!(sent.len(), 2, "the marks are replaced: {sent:?}");
        assert_eq!(sent[0].name, "process.cpu.time");
        assert_eq!(sent[0].kind, MetricKind::Counter);
        assert_eq!(sent[0].unit.as_deref(), Some("s"));
        assert!((value(&sent[0]) - 0.12).abs() < 1e-12);
        assert_eq!(
            sent[0].attributes.as_ref().unwrap()["cpu.mode"],
            AttributeValue::String("user".into())
        );
        assert_eq!(sent[1].name, "process.memory.usage");
        assert_eq!(sent[1].kind, MetricKind::UpDownCounter);
        assert_eq!(value(&sent[1]), 2048.0);

        let second = [
            gauge("cpu.user_time", 100.0, "milliseconds", "process_tree"),
            gauge("memory.resident", 1.0, "kibibytes", "process_tree"),
        ];
        let sent = selection.select(&second).into_owned();
        assert_eq!(value(&sent[0]), 0.0, "a total never goes back");
        assert_eq!(value(&sent[1]), -1024.0, "a level's change");
    }

    #[test]
    fn global_scope_becomes_system_names_and_both_keeps_the_originals() {
        let mut selection = MetricNameSelection::new(MetricNames::Both);
        let batch = [
            gauge("memory.system.used", 1.0, "gibibytes", "global"),
            gauge("memory.resident", 1.0, "gibibytes", "global"),
        ];
        let sent = selection.select(&batch).into_owned();
        let names: Vec<&str> = sent.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "nemo.relay.resource.memory.system.used",
                "nemo.relay.resource.memory.resident",
                "system.memory.usage"
            ],
            "resident memory has no system-wide convention"
        );
        assert_eq!(
            sent[2].attributes.as_ref().unwrap()["system.memory.state"],
            AttributeValue::String("used".into())
        );
    }

    #[test]
    fn rapl_intervals_become_hw_energy_when_semconv_names_are_wanted() {
        use wattline_model::energy_telemetry::RaplInterval;
        use wattline_model::report::EnergyDomain;
        let event = PipelineEvent::RaplIntervals {
            timestamp: chrono::Utc::now(),
            intervals: vec![RaplInterval {
                zone: "intel-rapl:0".into(),
                name: "package-0".into(),
                domain: EnergyDomain::CpuPackage,
                joules: 30.0,
                seconds: 1.0,
            }],
        };
        let sent = |names| -> Vec<String> {
            let mut selection = MetricNameSelection::new(names);
            let sent = selection.event_measurements(&event);
            sent.iter().map(|m| m.name.clone()).collect()
        };
        assert_eq!(
            sent(MetricNames::Genai),
            ["gen_ai.power.consumption", "gen_ai.energy.consumed"]
        );
        assert_eq!(
            sent(MetricNames::Semconv),
            ["gen_ai.power.consumption", "hw.energy", "hw.power"]
        );
        assert_eq!(
            sent(MetricNames::Both),
            [
                "gen_ai.power.consumption",
                "gen_ai.energy.consumed",
                "hw.energy",
                "hw.power"
            ]
        );
    }

    #[test]
    fn semconv_drops_the_gen_ai_names_that_have_an_equivalent_only() {
        let mut power = gauge("x", 1.0, "W", "global");
        power.name = names::GPU_POWER.into();
        let mut cost = power.clone();
        cost.name = names::POWER_COST.into();
        let mut selection = MetricNameSelection::new(MetricNames::Semconv);
        let sent = selection.select(&[power, cost]).into_owned();
        let names: Vec<&str> = sent.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [names::POWER_COST]);
    }
}

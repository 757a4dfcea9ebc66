//! A step's energy once it is final: the [`SettledScope`] the energy stage announces
//! when no later reading can change an Agent scope's figures, and the observations of
//! the per-step histograms made from it (one per figure, under the scope's name), which
//! metric exporters record and an event file keeps as a mark under the scope.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricValue, MetricValueType,
};
use crate::report::{EnergyDomain, EnergySource, JOULES_PER_KILOWATT_HOUR, ScopeEnergy};

/// Attributed energy of a step (its children's included), J.
pub const SCOPE_ATTRIBUTED_ENERGY: &str = "wattline.scope.energy.attributed";
/// Window energy of a step (the device's while it was live), J.
pub const SCOPE_WINDOW_ENERGY: &str = "wattline.scope.energy.window";
/// How long a step was live, s.
pub const SCOPE_DURATION: &str = "wattline.scope.duration";
/// The cost of a step's attributed energy, in the configured currency.
pub const SCOPE_ATTRIBUTED_COST: &str = "wattline.scope.cost.attributed";
/// The CO2 of a step's attributed energy, gCO2e (with CO2 tracking on).
pub const SCOPE_ATTRIBUTED_CO2: &str = "wattline.scope.co2.attributed";
/// The estimated energy of a step's model call served by another machine, J: two
/// observations per call, its range's low and high ends ([`ESTIMATE_BOUND_ATTRIBUTE`]).
/// Never part of the measured figures.
pub const SCOPE_REMOTE_ESTIMATED_ENERGY: &str = "wattline.scope.energy.remote_estimated";
/// Which end of an estimate's range an observation is: `low` or `high`.
pub const ESTIMATE_BOUND_ATTRIBUTE: &str = "wattline.estimate.bound";
/// Steps whose name was folded into [`OTHER_SCOPE_NAME`] because the metrics already
/// carried as many names as configured.
pub const SCOPE_NAMES_FOLDED: &str = "wattline.scope.names_folded";
/// The attribute naming the step on the per-step histograms.
pub const SCOPE_NAME_ATTRIBUTE: &str = "wattline.scope.name";
/// The name every step past the metrics' name limit is counted under.
pub const OTHER_SCOPE_NAME: &str = "other";
/// The mark name a settled scope's observations are written under in an event file.
pub const SCOPE_ENERGY_MARK_NAME: &str = "wattline.scope_energy";

/// Bucket boundaries of the energy histograms, J: 1-2-5 steps from 1 mJ to 5 MJ.
const ENERGY_BOUNDARIES: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
    200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6,
];
/// Of the duration histogram, s: 1 ms to 2 h.
const DURATION_BOUNDARIES: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
    200.0, 500.0, 1e3, 2e3, 5e3,
];
/// Of the cost histogram: a step's cost is a tiny fraction of a currency unit.
const COST_BOUNDARIES: &[f64] = &[
    1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0,
];
/// Of the CO2 histogram, g.
const CO2_BOUNDARIES: &[f64] = &[
    1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1e3, 1e4,
];

/// One per-step histogram: its name, unit (`None`: the configured currency), meaning
/// and buckets.
struct ScopeHistogram {
    name: &'static str,
    unit: Option<&'static str>,
    description: &'static str,
    boundaries: &'static [f64],
}

const ATTRIBUTED_ENERGY_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_ATTRIBUTED_ENERGY,
    unit: Some("J"),
    description: "Attributed energy of an Agent scope (its children's included)",
    boundaries: ENERGY_BOUNDARIES,
};
const WINDOW_ENERGY_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_WINDOW_ENERGY,
    unit: Some("J"),
    description: "Energy of the measured devices while an Agent scope was live",
    boundaries: ENERGY_BOUNDARIES,
};
const REMOTE_ESTIMATED_ENERGY_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_REMOTE_ESTIMATED_ENERGY,
    unit: Some("J"),
    description: "Estimated energy of an Agent scope's model call served by another machine \
                  (an estimate, not measured; low and high ends of its range)",
    boundaries: ENERGY_BOUNDARIES,
};
const DURATION_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_DURATION,
    unit: Some("s"),
    description: "How long an Agent scope was live",
    boundaries: DURATION_BOUNDARIES,
};
const ATTRIBUTED_COST_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_ATTRIBUTED_COST,
    unit: None,
    description: "Cost of an Agent scope's attributed energy",
    boundaries: COST_BOUNDARIES,
};
const ATTRIBUTED_CO2_HISTOGRAM: ScopeHistogram = ScopeHistogram {
    name: SCOPE_ATTRIBUTED_CO2,
    unit: Some("g"),
    description: "gCO2e of an Agent scope's attributed energy",
    boundaries: CO2_BOUNDARIES,
};

/// An Agent scope's figures once final: it ended and every meter has read past its
/// end (or the run's final report was taken), so nothing can add to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettledScope {
    /// The figures, as the report has them.
    pub energy: ScopeEnergy,
    /// How attributed energy was divided among scopes
    /// ([`crate::report::SCOPE_ATTRIBUTION`]).
    pub attribution: String,
    /// Each counted domain's method (counter, dense or sparse trapezoid, mixed).
    pub methods: BTreeMap<EnergyDomain, EnergySource>,
    /// The meters counted: GPU devices and RAPL zones, by identifier.
    pub meters: Vec<String>,
    /// The currency of the cost figures.
    pub currency: String,
    /// Its program exited with it open, and wattline ended it then.
    pub ended_at_program_exit: bool,
    /// Where its span sits (the caller's trace, its parent scope's, or its own).
    #[serde(default)]
    pub trace: Option<crate::trace_context::ScopeTrace>,
    /// The share of its window that power readings covered, on its worst-covered
    /// meter (0 to 1); `None` when nothing was measured.
    #[serde(default)]
    pub coverage: Option<f64>,
}

impl SettledScope {
    /// The name its histogram observations carry: its own, or [`OTHER_SCOPE_NAME`] when
    /// `name_folded` (past the configured limit of scope names).
    pub fn metric_name(&self, name_folded: bool) -> &str {
        if name_folded {
            OTHER_SCOPE_NAME
        } else {
            &self.energy.name
        }
    }

    /// Seconds from start to end; `None` while live (never, once settled from a
    /// retired scope; a live scope at the final report has ended by then).
    pub fn duration_seconds(&self) -> Option<f64> {
        let ended = self.energy.ended_at?;
        let nanos = (ended - self.energy.started_at).num_nanoseconds()?;
        Some(nanos.max(0) as f64 / 1e9)
    }

    /// One observation per figure the scope has (a figure that was not measured is
    /// left out, never zero), each a histogram observation carrying `metric_name` as
    /// [`SCOPE_NAME_ATTRIBUTE`]: the scope's name, or [`OTHER_SCOPE_NAME`] past the
    /// configured limit.
    pub fn measurements(&self, metric_name: &str) -> Vec<MetricMeasurement> {
        let energy = &self.energy;
        let observations = [
            (
                &ATTRIBUTED_ENERGY_HISTOGRAM,
                joules(energy.attributed_energy_kwh),
            ),
            (&WINDOW_ENERGY_HISTOGRAM, joules(energy.energy_kwh)),
            (&DURATION_HISTOGRAM, self.duration_seconds()),
            (&ATTRIBUTED_COST_HISTOGRAM, energy.attributed_cost),
            (&ATTRIBUTED_CO2_HISTOGRAM, energy.attributed_co2_grams),
        ];
        let attributes = BTreeMap::from([(
            SCOPE_NAME_ATTRIBUTE.to_owned(),
            AttributeValue::String(metric_name.to_owned()),
        )]);
        let estimate = energy
            .remote_call
            .as_ref()
            .and_then(|call| call.estimate.as_ref());
        let estimated = estimate.into_iter().flat_map(|estimate| {
            [("low", estimate.low_kwh), ("high", estimate.high_kwh)].map(|(bound, kwh)| {
                let mut attributes = attributes.clone();
                attributes.insert(
                    ESTIMATE_BOUND_ATTRIBUTE.to_owned(),
                    AttributeValue::String(bound.to_owned()),
                );
                (
                    &REMOTE_ESTIMATED_ENERGY_HISTOGRAM,
                    joules(Some(kwh)),
                    attributes,
                )
            })
        });
        observations
            .into_iter()
            .map(|(histogram, value)| (histogram, value, attributes.clone()))
            .chain(estimated)
            .filter_map(|(histogram, value, attributes)| {
                let value = value.filter(|value| value.is_finite())?;
                Some(MetricMeasurement {
                    name: histogram.name.to_owned(),
                    kind: MetricKind::Histogram,
                    value_type: MetricValueType::F64,
                    value: MetricValue::F64(value.max(0.0)),
                    unit: Some(histogram.unit.unwrap_or(&self.currency).to_owned()),
                    description: Some(histogram.description.to_owned()),
                    attributes: Some(attributes),
                    boundaries: Some(histogram.boundaries.to_vec()),
                })
            })
            .collect()
    }
}

/// `kwh` in joules, the unit of the per-step figures on the wire.
pub fn joules(kwh: Option<f64>) -> Option<f64> {
    kwh.map(|kwh| kwh * JOULES_PER_KILOWATT_HOUR)
}

/// The count of steps whose name was folded into [`OTHER_SCOPE_NAME`]: one observation
/// of a counter, added to the run's cumulative total.
pub fn names_folded_measurement() -> MetricMeasurement {
    MetricMeasurement {
        name: SCOPE_NAMES_FOLDED.to_owned(),
        kind: MetricKind::Counter,
        value_type: MetricValueType::U64,
        value: MetricValue::U64(1),
        unit: Some("scopes".to_owned()),
        description: Some(format!(
            "Agent scopes counted under the name `{OTHER_SCOPE_NAME}` past the metrics' name limit"
        )),
        attributes: None,
        boundaries: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn settled(attributed_kwh: Option<f64>) -> SettledScope {
        let started_at = Utc.timestamp_opt(1_700_000_000, 0).single().unwrap();
        SettledScope {
            energy: ScopeEnergy {
                uuid: uuid::Uuid::from_u128(1),
                name: "plan".into(),
                parent_uuid: None,
                process_id: None,
                weight: None,
                gpu_energy_kwh: None,
                energy_kwh: attributed_kwh.map(|kwh| kwh * 2.0),
                cost: None,
                co2_grams: None,
                attributed_gpu_energy_kwh: None,
                attributed_energy_kwh: attributed_kwh,
                attributed_cost: attributed_kwh.map(|kwh| kwh * 0.5),
                attributed_co2_grams: None,
                started_at,
                ended_at: Some(started_at + chrono::Duration::milliseconds(1500)),
                remote_call: None,
                receipt: None,
                attributed_receipt: None,
            },
            attribution: "process-share-then-weight".into(),
            methods: BTreeMap::new(),
            meters: Vec::new(),
            currency: "EUR".into(),
            ended_at_program_exit: false,
            trace: None,
            coverage: None,
        }
    }

    fn value(measurements: &[MetricMeasurement], name: &str) -> Option<f64> {
        measurements
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value.as_f64())
    }

    #[test]
    fn observations_are_in_joules_seconds_and_currency_and_carry_the_name_given() {
        // 1 Wh attributed = 3600 J; the window is twice that; 1.5 s long.
        let measurements = settled(Some(0.001)).measurements(OTHER_SCOPE_NAME);
        assert_eq!(value(&measurements, SCOPE_ATTRIBUTED_ENERGY), Some(3600.0));
        assert_eq!(value(&measurements, SCOPE_WINDOW_ENERGY), Some(7200.0));
        assert_eq!(value(&measurements, SCOPE_DURATION), Some(1.5));
        assert_eq!(value(&measurements, SCOPE_ATTRIBUTED_COST), Some(0.0005));
        let cost = measurements
            .iter()
            .find(|m| m.name == SCOPE_ATTRIBUTED_COST)
            .unwrap();
        assert_eq!(cost.unit.as_deref(), Some("EUR"));
        for measurement in &measurements {
            assert_eq!(measurement.kind, MetricKind::Histogram);
            assert_eq!(
                measurement.attributes.as_ref().unwrap()[SCOPE_NAME_ATTRIBUTE],
                AttributeValue::String("other".into())
            );
            let boundaries = measurement.boundaries.as_ref().unwrap();
            assert!(boundaries.len() <= 64 && boundaries.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn a_remote_estimate_is_its_own_series_with_a_low_and_a_high_observation() {
        let mut scope = settled(Some(0.001));
        scope.energy.remote_call = Some(Box::new(crate::remote_call::RemoteCall {
            operation: "chat".into(),
            provider: None,
            model: Some("m".into()),
            input_tokens: Some(1),
            output_tokens: Some(1),
            estimate: Some(crate::remote_call::RemoteEstimate {
                low_kwh: 0.002,
                high_kwh: 0.005,
                method: crate::remote_call::ESTIMATED.into(),
                estimator: "factor-table".into(),
                source: "s".into(),
            }),
        }));
        let measurements = scope.measurements("plan");
        let estimated: Vec<(f64, &AttributeValue)> = measurements
            .iter()
            .filter(|m| m.name == SCOPE_REMOTE_ESTIMATED_ENERGY)
            .map(|m| {
                let bound = &m.attributes.as_ref().unwrap()[ESTIMATE_BOUND_ATTRIBUTE];
                (m.value.as_f64(), bound)
            })
            .collect();
        // 2 Wh and 5 Wh in joules; the measured figures are unchanged beside them.
        assert_eq!(
            estimated,
            [
                (7200.0, &AttributeValue::String("low".into())),
                (18000.0, &AttributeValue::String("high".into()))
            ]
        );
        assert_eq!(value(&measurements, SCOPE_ATTRIBUTED_ENERGY), Some(3600.0));
    }

    #[test]
    fn a_figure_not_measured_is_left_out_not_zero() {
        let measurements = settled(None).measurements("plan");
        let names: Vec<&str> = measurements.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [SCOPE_DURATION]);
    }
}

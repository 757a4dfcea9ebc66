//! Finished Agent scopes past the number kept in detail, folded into one aggregate per
//! name (count, and the distributions of attributed energy and of duration), so an
//! account that sees scopes all day holds a bounded amount whatever their number.

use std::collections::BTreeMap;

use crate::quantile_sketch::QuantileSketch;
use wattline_model::report::{Distribution, FoldedScopes};

/// At most this many names keep an aggregate of their own; scopes of further names
/// fold into [`OTHER_NAMES`] (a name per request would otherwise grow without bound).
pub const MAX_FOLDED_NAMES: usize = 1000;

/// The aggregate of the scopes whose names came after [`MAX_FOLDED_NAMES`] others.
pub const OTHER_NAMES: &str = "(other names)";

#[derive(Debug, Default)]
struct NameAggregate {
    attributed_kwh: QuantileSketch,
    duration_seconds: QuantileSketch,
}

/// The folded scopes of one account.
#[derive(Debug, Default)]
pub struct FoldedScopeAggregates {
    by_name: BTreeMap<String, NameAggregate>,
}

impl FoldedScopeAggregates {
    /// Folds one finished scope in.
    pub fn fold(&mut self, name: &str, attributed_kwh: f64, duration_seconds: f64) {
        let key = if self.by_name.contains_key(name) || self.by_name.len() < MAX_FOLDED_NAMES {
            name
        } else {
            OTHER_NAMES
        };
        let aggregate = self.by_name.entry(key.to_owned()).or_default();
        aggregate.attributed_kwh.add(attributed_kwh);
        aggregate.duration_seconds.add(duration_seconds);
    }

    /// How many scopes were folded.
    pub fn count(&self) -> u64 {
        self.by_name
            .values()
            .map(|aggregate| aggregate.duration_seconds.count())
            .sum()
    }

    /// The aggregates as the report shows them, by name.
    pub fn summaries(&self) -> Vec<FoldedScopes> {
        self.by_name
            .iter()
            .map(|(name, aggregate)| FoldedScopes {
                name: name.clone(),
                count: aggregate.duration_seconds.count(),
                attributed_energy_kwh: distribution(&aggregate.attributed_kwh),
                duration_seconds: distribution(&aggregate.duration_seconds),
            })
            .collect()
    }
}

fn distribution(sketch: &QuantileSketch) -> Distribution {
    Distribution {
        sum: sketch.sum(),
        min: sketch.min().unwrap_or(0.0),
        max: sketch.max().unwrap_or(0.0),
        p50: sketch.quantile(0.50).unwrap_or(0.0),
        p95: sketch.quantile(0.95).unwrap_or(0.0),
        p99: sketch.quantile(0.99).unwrap_or(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_limit_share_one_aggregate() {
        let mut folded = FoldedScopeAggregates::default();
        for n in 0..MAX_FOLDED_NAMES + 5 {
            folded.fold(&format!("request-{n}"), 1.0, 2.0);
        }
        folded.fold("request-0", 3.0, 4.0);
        let summaries = folded.summaries();
        assert_eq!(summaries.len(), MAX_FOLDED_NAMES + 1);
        let other = summaries.iter().find(|s| s.name == OTHER_NAMES).unwrap();
        assert_eq!(other.count, 5);
        let first = summaries.iter().find(|s| s.name == "request-0").unwrap();
        assert_eq!(first.count, 2);
        assert_eq!(first.attributed_energy_kwh.sum, 4.0);
        assert_eq!(first.duration_seconds.max, 4.0);
        assert_eq!(folded.count(), MAX_FOLDED_NAMES as u64 + 6);
    }
}

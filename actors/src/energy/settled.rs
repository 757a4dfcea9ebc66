//! Announcing a step's final energy: each scope the account settles becomes one
//! [`PipelineEvent::ScopeEnergy`], its histogram observations named by the scope's name
//! while the metrics carry fewer names than configured, and `other` after that (each
//! such step also counted), so a host naming every request differently cannot grow
//! the collector's series without bound.

use std::collections::HashSet;

use uuid::Uuid;
use wattline_model::events::PipelineEvent;
use wattline_model::scope_energy::{OTHER_SCOPE_NAME, SettledScope, names_folded_measurement};

/// The scope names the per-step metrics carry, the first `limit` seen.
#[derive(Debug)]
pub struct MetricScopeNames {
    names: HashSet<String>,
    limit: usize,
}

impl MetricScopeNames {
    /// Names for at most `limit` distinct scope names.
    pub fn new(limit: usize) -> Self {
        MetricScopeNames {
            names: HashSet::new(),
            limit,
        }
    }

    /// The name the metrics carry a step named `name` by, and whether it was folded
    /// into [`OTHER_SCOPE_NAME`].
    pub fn metric_name<'a>(&mut self, name: &'a str) -> (&'a str, bool) {
        if self.names.contains(name) {
            return (name, false);
        }
        if self.names.len() < self.limit {
            self.names.insert(name.to_owned());
            return (name, false);
        }
        (OTHER_SCOPE_NAME, true)
    }
}

/// Sends the events announcing `settled` to `send`: one
/// [`PipelineEvent::ScopeEnergy`] per scope, then a batch counting the scopes whose name
/// was folded, when any was. A scope in `ended_at_program_exit` is flagged so (and
/// forgotten there).
pub fn send_settled_scope_events(
    settled: impl IntoIterator<Item = SettledScope>,
    names: &mut MetricScopeNames,
    ended_at_program_exit: &mut HashSet<Uuid>,
    mut send: impl FnMut(PipelineEvent),
) {
    let mut folded = Vec::new();
    for mut scope in settled {
        if !ended_at_program_exit.is_empty() {
            scope.ended_at_program_exit = ended_at_program_exit.remove(&scope.energy.uuid);
        }
        let (_, name_folded) = names.metric_name(&scope.energy.name);
        if name_folded {
            folded.push(names_folded_measurement());
        }
        send(PipelineEvent::ScopeEnergy {
            settled: Box::new(scope),
            name_folded,
        });
    }
    if !folded.is_empty() {
        send(PipelineEvent::Metrics {
            timestamp: chrono::Utc::now(),
            measurements: folded,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_limit_are_folded_into_other_and_known_ones_stay() {
        let mut names = MetricScopeNames::new(2);
        assert_eq!(names.metric_name("plan"), ("plan", false));
        assert_eq!(names.metric_name("act"), ("act", false));
        assert_eq!(names.metric_name("reflect"), ("other", true));
        assert_eq!(names.metric_name("plan"), ("plan", false));
        assert_eq!(names.metric_name("reflect"), ("other", true));
    }

    #[test]
    fn a_limit_of_zero_folds_every_name() {
        let mut names = MetricScopeNames::new(0);
        assert_eq!(names.metric_name("plan"), ("other", true));
    }
}

//! Announcing scopes whose figures became final, and where each scope's span sits.

use std::collections::HashMap;

use uuid::Uuid;
use wattline_model::report::{EnergyReport, ScopeEnergy};
use wattline_model::scope_energy::SettledScope;
use wattline_model::trace_context::{ScopeTrace, parse_traceparent};

use super::{EnergyAccount, ScopeAccount};

impl EnergyAccount {
    /// Where scope `uuid`'s span sits: under the caller's `traceparent` (one that does
    /// not parse is left out: the API refuses it before it gets here), else under its
    /// live `parent` scope's span, else in a trace of its own.
    pub(super) fn scope_trace(
        &self,
        uuid: Uuid,
        parent: Option<Uuid>,
        traceparent: Option<&str>,
    ) -> ScopeTrace {
        let caller = traceparent.and_then(|value| parse_traceparent(value).ok());
        let parent_trace = parent.and_then(|parent| {
            self.scopes
                .iter()
                .rev()
                .find(|scope| scope.uuid == parent)
                .and_then(|scope| Some((parent, scope.trace.as_ref()?)))
        });
        ScopeTrace::resolve(uuid, caller.as_ref(), parent_trace)
    }

    /// From now on, every scope whose figures become final (it ended and no later
    /// interval can reach it) is kept for [`Self::take_settled_scopes`].
    pub fn announce_settled_scopes(&mut self) {
        self.settled.get_or_insert_with(Vec::new);
    }

    /// The scopes settled since the last call, in the order they settled.
    pub fn take_settled_scopes(&mut self) -> Vec<SettledScope> {
        let mut settled = Vec::new();
        self.drain_settled_scopes_into(&mut settled);
        settled
    }

    /// Appends the scopes settled since the last call to `into`, in the order they
    /// settled. An empty `into` trades places with the account's list, so a caller
    /// that keeps its buffer (and empties it) lets both lists keep their capacity:
    /// no list is grown again from nothing for every batch of steps.
    pub fn drain_settled_scopes_into(&mut self, into: &mut Vec<SettledScope>) {
        let Some(pending) = &mut self.settled else {
            return;
        };
        if into.is_empty() {
            std::mem::swap(pending, into);
        } else {
            into.append(pending);
        }
    }

    /// The run's final word: every scope not yet announced is settled with its figures
    /// as `report` (the final report) has them, and never announced again.
    pub fn settle_remaining_scopes(&mut self, report: &EnergyReport) {
        if self.settled.is_none() {
            return;
        }
        let figures: HashMap<Uuid, &ScopeEnergy> = report
            .agent_scopes
            .iter()
            .map(|scope| (scope.uuid, scope))
            .collect();
        let remaining = |scope: &&ScopeAccount| !scope.announced;
        let settled: Vec<SettledScope> = self
            .scopes
            .iter()
            .filter(remaining)
            .filter_map(|scope| {
                let energy = figures.get(&scope.uuid)?;
                Some(self.settled_with(ScopeEnergy::clone(energy), scope, scope.trace.clone()))
            })
            .collect();
        for scope in &mut self.scopes {
            if figures.contains_key(&scope.uuid) {
                scope.announced = true;
            }
        }
        if let Some(pending) = &mut self.settled {
            pending.extend(settled);
        }
    }
}

//! A scope boundary booked after readings taken later than it: the window's close
//! and the ends of the scopes still live then (stamped at the close, booked once the
//! pipeline gets to them), or a boundary a test delivers late. The intervals it reaches
//! were divided without it; each is divided again from the boundary on, what it held
//! taken back out as it was booked and put in as it is now, so the account ends up as
//! it would have with the boundary in time order. Intervals older than what the
//! account keeps (two minutes) are not reached.
//!
//! A boundary booked in time order reaches no interval: that path costs one
//! comparison.

use wattline_model::energy::Nanos;
use wattline_model::report::EnergyDomain;

use super::{Boundary, EnergyAccount, Fractions, ScopeAccount, Segment, divide_segment, seconds};
use crate::attribution::Claimant;

impl Boundary {
    fn at(&self) -> Nanos {
        match self {
            Boundary::Start(scope) => scope.start,
            Boundary::End { at, .. } => *at,
        }
    }
}

/// Where a scope that held part of a reached interval is kept.
#[derive(Clone, Copy)]
enum Holder {
    /// Retired already: only a boundary later than promised reaches one (see
    /// [`EnergyAccount::book_boundary`]).
    Finished(usize),
    Live(usize),
}

/// An interval a boundary reaches: its meter's domain and number, and the interval.
struct Reached {
    domain: EnergyDomain,
    meter: u32,
    segment: Segment,
}

impl EnergyAccount {
    /// Books a scope's start or end, dividing again the intervals already booked past
    /// its instant.
    ///
    /// Scopes retired already are divided again too, so the report stays exact; their
    /// announced figures cannot change. That happens only when a boundary comes stamped
    /// before a step that had settled (its end at most the settle limit): the pipeline
    /// announces [`wattline_model::energy::EnergyRecord::LateBoundariesFrom`] before it
    /// stamps any boundary in the past, so its own never do.
    pub(super) fn book_boundary(&mut self, boundary: Boundary) {
        let at = boundary.at();
        if at >= self.booked_until {
            self.apply_boundary(boundary);
            return;
        }
        let reached = self.reached_after(at);
        if reached.is_empty() {
            self.apply_boundary(boundary);
            return;
        }
        let holders = self.holders_after(at);
        let before: Vec<Claimant> = holders.iter().map(|h| self.holder(*h).claimant()).collect();
        let mut after_holders = holders;
        match &boundary {
            Boundary::Start(_) => {
                after_holders.push(Holder::Live(self.scopes.len()));
                self.apply_boundary(boundary);
                let index = self.scopes.len() - 1;
                self.add_window_after(index, at, &reached, 1.0);
            }
            Boundary::End { index, .. } => {
                // Booked while it was live: its window from its end on comes back out.
                let index = *index;
                self.add_window_after(index, at, &reached, -1.0);
                self.apply_boundary(boundary);
            }
        }
        let after: Vec<Claimant> = after_holders
            .iter()
            .map(|h| self.holder(*h).claimant())
            .collect();
        for interval in &reached {
            // From where it was booked, as booking divided it.
            let from = interval.segment.booked_from.max(at);
            let old = divide_segment(&interval.segment, from, Nanos::MAX, &before);
            let new = divide_segment(&interval.segment, from, Nanos::MAX, &after);
            for (position, holder) in after_holders.iter().enumerate() {
                let was = old.inclusive.get(position).copied().unwrap_or(0.0);
                let is = new.inclusive[position];
                if is != was {
                    self.holder_mut(*holder)
                        .attributed
                        .add(interval.domain, is - was);
                }
            }
            *self.unattributed.entry(interval.domain).or_default() +=
                new.unattributed - old.unattributed;
        }
    }

    /// Puts `boundary` into the scope list, as booking in time order does.
    fn apply_boundary(&mut self, boundary: Boundary) {
        match boundary {
            Boundary::Start(scope) => self.scopes.push(scope),
            Boundary::End { index, at, wall } => self.scopes[index].end = Some((at, wall)),
        }
    }

    /// The booked intervals of the counted meters that end after `at`.
    fn reached_after(&self, at: Nanos) -> Vec<Reached> {
        self.meters
            .iter()
            .filter(|((domain, _), _)| domain.is_counted())
            .flat_map(|((domain, _), meter)| {
                meter.after(at).map(|segment| Reached {
                    domain: *domain,
                    meter: meter.number,
                    segment: segment.clone(),
                })
            })
            .collect()
    }

    /// Every scope that can hold energy after `at`: the finished ones still live then
    /// (kept in detail) and the scopes not yet retired that are. A scope that ended by
    /// `at` holds nothing after it; the finished ones are looked at only when one can
    /// have ended after `at` (the pipeline's own late boundaries never reach one).
    fn holders_after(&self, at: Nanos) -> Vec<Holder> {
        let mut holders = Vec::new();
        if at < self.finished_until {
            holders.extend(
                self.finished_scopes
                    .iter()
                    .enumerate()
                    .filter(|(_, scope)| scope.until() > at)
                    .map(|(index, _)| Holder::Finished(index)),
            );
        }
        holders.extend(
            self.scopes
                .iter()
                .enumerate()
                .filter(|(_, scope)| scope.until() > at)
                .map(|(index, _)| Holder::Live(index)),
        );
        holders
    }

    fn holder(&self, holder: Holder) -> &ScopeAccount {
        match holder {
            Holder::Finished(index) => &self.finished_scopes[index],
            Holder::Live(index) => &self.scopes[index],
        }
    }

    fn holder_mut(&mut self, holder: Holder) -> &mut ScopeAccount {
        match holder {
            Holder::Finished(index) => &mut self.finished_scopes[index],
            Holder::Live(index) => &mut self.scopes[index],
        }
    }

    /// Adds `sign` times the window energy and coverage the reached intervals give
    /// the live scope at `index` from `at` on (while it is live): a start's, or, as it
    /// was booked, an end's.
    fn add_window_after(&mut self, index: usize, at: Nanos, reached: &[Reached], sign: f64) {
        let scope = &mut self.scopes[index];
        let from = at.max(scope.start);
        for interval in reached {
            let Fractions { energy, time, .. } = interval.segment.fractions(from, scope.until());
            let joules = interval.segment.best_joules() * energy;
            scope.joules.add(interval.domain, sign * joules);
            if time > 0.0 {
                let covered = seconds(interval.segment.length() * time);
                scope.add_covered(interval.meter, sign * covered);
            }
        }
    }
}

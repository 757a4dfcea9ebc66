//! Samplers: one per category, each owning its state (rate baselines per sampling
//! series) and turning OS readings into base-unit readings for one tick.

pub mod cpu;

use std::sync::Arc;
use std::time::Instant;

use crate::readings::{FieldCoverage, SamplingSeries};
use crate::scope::{ResolvedScope, ScopeTarget};

/// What a sampler is asked for on a tick.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    /// The series whose baselines this sample uses and updates.
    pub series: SamplingSeries,
    /// The processes of this tick, shared by every sampler.
    pub scope: Arc<ResolvedScope>,
    /// The monotonic time of the tick, for rates.
    pub taken_at: Instant,
}

/// A sampler's answer: its category reading and the coverage of its process sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SamplerOutput<R> {
    /// The category in base units.
    pub reading: R,
    /// How many processes supplied each process-summed field.
    pub coverage: FieldCoverage,
}

/// Baselines for the two sampling series, reset when the target changes.
#[derive(Debug)]
pub struct SeriesBaselines<B> {
    target: Option<ScopeTarget>,
    baselines: [Option<B>; 2],
}

impl<B> Default for SeriesBaselines<B> {
    fn default() -> Self {
        SeriesBaselines {
            target: None,
            baselines: [None, None],
        }
    }
}

impl<B> SeriesBaselines<B> {
    /// Takes the previous baseline of `series` for `target`; a retarget clears both
    /// series.
    pub fn take(&mut self, target: ScopeTarget, series: SamplingSeries) -> Option<B> {
        if self.target != Some(target) {
            self.target = Some(target);
            self.baselines = [None, None];
        }
        self.baselines[series.index()].take()
    }

    /// Stores the baseline the next sample of `series` compares against.
    pub fn store(&mut self, series: SamplingSeries, baseline: B) {
        self.baselines[series.index()] = Some(baseline);
    }
}

/// Adds `values`, `None` when there are none or the sum overflows.
pub fn checked_sum(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut total: Option<u64> = None;
    for value in values {
        total = Some(total.unwrap_or(0).checked_add(value)?);
    }
    total
}

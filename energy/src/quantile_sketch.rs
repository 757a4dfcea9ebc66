//! A mergeable quantile sketch with a relative-error guarantee, for the distributions of
//! folded scopes (attributed energy, duration): values fall into logarithmic buckets,
//! so any quantile is known to within 1% of its value in a few kilobytes, however many
//! values went in.

use std::collections::BTreeMap;

/// Relative accuracy of a quantile: the answer is within this fraction of a true value
/// of that rank.
pub const RELATIVE_ACCURACY: f64 = 0.01;

/// A sketch of non-negative values (negative ones count as zero).
#[derive(Debug, Clone, PartialEq)]
pub struct QuantileSketch {
    /// Bucket `i` holds values in `(γ^(i-1), γ^i]`.
    buckets: BTreeMap<i32, u64>,
    zeros: u64,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Default for QuantileSketch {
    fn default() -> Self {
        QuantileSketch {
            buckets: BTreeMap::new(),
            zeros: 0,
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

/// γ = (1 + α) / (1 − α): a bucket's upper bound over its lower.
fn gamma() -> f64 {
    (1.0 + RELATIVE_ACCURACY) / (1.0 - RELATIVE_ACCURACY)
}

/// Below this a value counts as zero (kWh and seconds are far above it when not zero).
const SMALLEST: f64 = 1e-30;

impl QuantileSketch {
    /// Adds one value; a value that is not finite is left out.
    pub fn add(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        let value = value.max(0.0);
        self.count += 1;
        self.sum += value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        if value < SMALLEST {
            self.zeros += 1;
        } else {
            let index = (value.ln() / gamma().ln()).ceil() as i32;
            *self.buckets.entry(index).or_default() += 1;
        }
    }

    /// How many values went in.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Their sum.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// The smallest, exactly; `None` when empty.
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    /// The largest, exactly; `None` when empty.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// The value of rank `q` (0 to 1; the nearest rank), within
    /// [`RELATIVE_ACCURACY`] of it, clamped to the exact min and max; `None` when
    /// empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * (self.count - 1) as f64).round() as u64;
        if rank < self.zeros {
            return Some(0.0_f64.max(self.min));
        }
        let mut seen = self.zeros;
        for (index, count) in &self.buckets {
            seen += count;
            if rank < seen {
                // The bucket's midpoint in relative terms: within α of every value in it.
                let upper = gamma().powi(*index);
                let estimate = 2.0 * upper / (1.0 + gamma());
                return Some(estimate.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of rank `q` among `sorted`, as `quantile` ranks.
    fn exact(sorted: &[f64], q: f64) -> f64 {
        sorted[(q * (sorted.len() - 1) as f64).round() as usize]
    }

    #[test]
    fn quantiles_are_within_one_percent_of_the_exact_ones() {
        // A wide spread: 1 µ to 1000, log-uniform-ish, plus zeros.
        let mut values: Vec<f64> = (0..20_000)
            .map(|i| 1e-6 * 1.001_f64.powi(i % 20_721))
            .collect();
        values.extend([0.0; 100]);
        let mut sketch = QuantileSketch::default();
        for value in &values {
            sketch.add(*value);
        }
        values.sort_by(f64::total_cmp);
        for q in [0.0, 0.01, 0.5, 0.95, 0.99, 1.0] {
            let (estimate, truth) = (sketch.quantile(q).unwrap(), exact(&values, q));
            assert!(
                (estimate - truth).abs() <= RELATIVE_ACCURACY * truth + 1e-300,
                "q {q}: {estimate} against {truth}"
            );
        }
        assert_eq!(sketch.count(), 20_100);
        assert_eq!(sketch.min(), Some(0.0));
        assert_eq!(sketch.max(), values.last().copied());
    }

    #[test]
    fn an_empty_sketch_has_no_quantiles_and_non_finite_values_are_left_out() {
        let mut sketch = QuantileSketch::default();
        assert_eq!(sketch.quantile(0.5), None);
        assert_eq!((sketch.min(), sketch.max()), (None, None));
        sketch.add(f64::NAN);
        sketch.add(f64::INFINITY);
        assert_eq!(sketch.count(), 0);
        assert_eq!((sketch.min(), sketch.max()), (None, None));
    }

    #[test]
    fn the_least_and_greatest_values_are_exact() {
        let mut sketch = QuantileSketch::default();
        for value in [3.25, 2.5, 7.75, 4.0] {
            sketch.add(value);
        }
        assert_eq!((sketch.min(), sketch.max()), (Some(2.5), Some(7.75)));
        assert_eq!(sketch.quantile(0.0), Some(2.5));
        assert_eq!(sketch.quantile(1.0), Some(7.75));
        assert_eq!(sketch.sum(), 17.5);
        // Nearest rank among the four sorted (2.5, 3.25, 4, 7.75): q 0.4 is rank 1.2,
        // the second; q 0.5 is rank 1.5, the third.
        let near = |q: f64, truth: f64| {
            let estimate = sketch.quantile(q).unwrap();
            assert!(
                (estimate - truth).abs() <= RELATIVE_ACCURACY * truth,
                "q {q}: {estimate} against {truth}"
            );
        };
        near(0.4, 3.25);
        near(0.5, 4.0);
        // Two zeros first: rank 2 (q 2/3 of the three steps) is the first value after.
        let mut with_zeros = QuantileSketch::default();
        for value in [0.0, 5.0, 0.0, 6.0] {
            with_zeros.add(value);
        }
        let estimate = with_zeros.quantile(2.0 / 3.0).unwrap();
        assert!(
            (estimate - 5.0).abs() <= RELATIVE_ACCURACY * 5.0,
            "{estimate}"
        );
        assert_eq!(with_zeros.quantile(0.0), Some(0.0));
    }
}

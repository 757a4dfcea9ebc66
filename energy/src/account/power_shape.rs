//! How an interval's energy is spread over its time, for cutting the interval at a
//! window's or a scope's edge. Two power readings bound an interval; between them the
//! power is unknown. Without a counter the trapezoid's own assumption holds: power
//! linear from one reading to the other. With a counter the interval's energy is
//! known too, and says *where* the power changed: a mean nearer the end reading means
//! the change came early, nearer the start reading late. A GPU's power mostly moves in steps (a
//! kernel starts, a job ends), and an interval cut a few milliseconds from a reading
//! (the reading `run` takes right after a command exits) would, under the linear
//! assumption, give that sliver the average of both readings' power instead of the
//! near one's.
//!
//! The shape used with a counter: the start power, a linear change to the end power
//! centred where a single step would give the counter's energy, as wide as fits
//! inside the interval, then the end power. A change centred in the middle is the
//! linear shape itself (so a ramp whose counter agrees with its trapezoid cuts
//! exactly); one near an end is nearly a step there (so a cut farther from the step
//! than the step is from its reading is exact). A mean beyond both readings (the
//! power went past them in between, or the readings are averages that lag a step)
//! is taken at the nearer reading: a step at that end, so the shape moves
//! continuously with the counter, never jumping back to linear.
//! Whatever the shape, every cut is a difference of one cumulative function whose
//! total is the interval's energy: the parts of an interval add up to it exactly.

/// Power over one interval, in units of the interval's length (0 at its start, 1 at
/// its end): `start_watts` until `change_from`, linear to `end_watts` at `change_to`,
/// then `end_watts`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PowerShape {
    start_watts: f64,
    end_watts: f64,
    change_from: f64,
    change_to: f64,
}

impl PowerShape {
    /// Power linear between the readings: the trapezoid's shape. `None` without power
    /// to weigh by (a reading missing, or both 0 W): the cut goes by time.
    pub(super) fn linear(start_watts: Option<f64>, end_watts: Option<f64>) -> Option<Self> {
        let (start_watts, end_watts) = (start_watts?, end_watts?);
        (start_watts >= 0.0 && end_watts >= 0.0 && start_watts + end_watts > 0.0).then_some(
            PowerShape {
                start_watts,
                end_watts,
                change_from: 0.0,
                change_to: 1.0,
            },
        )
    }

    /// The shape that gives the interval `mean_watts` (a counter's energy over its
    /// length), taken within the readings: the change centred where a step would give
    /// that mean, as wide as fits. The linear shape where the readings are equal (no
    /// change to place) or the mean is not a positive number.
    pub(super) fn with_mean(
        start_watts: Option<f64>,
        end_watts: Option<f64>,
        mean_watts: f64,
    ) -> Option<Self> {
        let linear = Self::linear(start_watts, end_watts)?;
        let (low, high) = (
            linear.start_watts.min(linear.end_watts),
            linear.start_watts.max(linear.end_watts),
        );
        if linear.start_watts == linear.end_watts || mean_watts.is_nan() || mean_watts <= 0.0 {
            return Some(linear);
        }
        let mean_watts = mean_watts.clamp(low, high);
        // A step at `centre` gives start × centre + end × (1 − centre) = mean.
        let centre = (linear.end_watts - mean_watts) / (linear.end_watts - linear.start_watts);
        let half_width = centre.min(1.0 - centre);
        Some(PowerShape {
            change_from: centre - half_width,
            change_to: centre + half_width,
            ..linear
        })
    }

    /// Energy from the interval's start to `x` (0 to 1), in watts × interval length.
    fn cumulative(&self, x: f64) -> f64 {
        let change = self.end_watts - self.start_watts;
        let width = self.change_to - self.change_from;
        if x <= self.change_from {
            self.start_watts * x
        } else if x >= self.change_to {
            // start × x + change × (x − centre), without the cancellation.
            self.end_watts * x - change * (self.change_from + self.change_to) / 2.0
        } else {
            self.start_watts * x + change * (x - self.change_from).powi(2) / (2.0 * width)
        }
    }

    /// The fraction of the interval's energy between `from` and `to` (0 to 1).
    pub(super) fn energy_between(&self, from: f64, to: f64) -> f64 {
        let total = self.cumulative(1.0);
        if total > 0.0 {
            (self.cumulative(to) - self.cumulative(from)) / total
        } else {
            to - from
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn linear_power_cuts_as_the_trapezoid_does() {
        // 100 W to 300 W: from the middle (200 W) on, (200 + 300) / 2 × ½ of the
        // interval's (100 + 300) / 2.
        let shape = PowerShape::linear(Some(100.0), Some(300.0)).unwrap();
        assert!(close(shape.energy_between(0.5, 1.0), 125.0 / 200.0));
        // A counter that agrees with the trapezoid changes nothing.
        let counted = PowerShape::with_mean(Some(100.0), Some(300.0), 200.0).unwrap();
        assert_eq!(counted, shape);
    }

    #[test]
    fn a_step_near_a_reading_leaves_a_cut_beyond_it_exact() {
        // 90 W, then 640 W from 5% of the interval on: mean 90 × 0.05 + 640 × 0.95.
        let mean = 90.0 * 0.05 + 640.0 * 0.95;
        let shape = PowerShape::with_mean(Some(90.0), Some(640.0), mean).unwrap();
        // The last 4% (past the change, which is at most 10% wide): 640 W × 0.04.
        assert!(close(shape.energy_between(0.96, 1.0), 640.0 * 0.04 / mean));
        // The linear shape gives that sliver over 1.6 times as much.
        let linear = PowerShape::linear(Some(90.0), Some(640.0)).unwrap();
        assert!(linear.energy_between(0.96, 1.0) > 1.6 * 640.0 * 0.04 / mean);
        // A fall late in the interval, seen from the start: 500 W until 80%, then 50 W.
        let mean = 500.0 * 0.8 + 50.0 * 0.2;
        let shape = PowerShape::with_mean(Some(500.0), Some(50.0), mean).unwrap();
        assert!(close(shape.energy_between(0.0, 0.5), 500.0 * 0.5 / mean));
    }

    #[test]
    fn the_whole_is_the_counters_energy_continuous_and_its_parts_add_up_to_it() {
        // Mean 300 W between 90 and 640 W: a step (640 − 300) / 550 = 0.618 of the way
        // would give it; the change is centred there, as wide as fits: 0.236 to 1.
        let shape = PowerShape::with_mean(Some(90.0), Some(640.0), 300.0).unwrap();
        assert!(close(shape.cumulative(1.0), 300.0));
        let centre = (640.0 - 300.0) / 550.0;
        let (from, to) = (centre - (1.0 - centre), 1.0);
        assert!(close(shape.change_from, from) && close(shape.change_to, to));
        // Falling power: a step at (50 − 320) / (50 − 500) = 0.6 would give 320 W; the
        // change spans 0.2 to 1, and the power is continuous where it begins.
        let falling = PowerShape::with_mean(Some(500.0), Some(50.0), 320.0).unwrap();
        assert!(close(falling.change_from, 0.2));
        assert!(close(falling.cumulative(1.0), 320.0));
        let (below, above) = (
            falling.cumulative(0.2 - 1e-9),
            falling.cumulative(0.2 + 1e-9),
        );
        assert!((above - below - 500.0 * 2e-9).abs() < 1e-9, "a jump at 0.2");
        let cuts = [0.0, 0.013, 0.2, 0.37, 0.5, 0.81, 1.0];
        for shape in [shape, falling] {
            let parts: Vec<f64> = cuts
                .windows(2)
                .map(|pair| shape.energy_between(pair[0], pair[1]))
                .collect();
            assert!(close(parts.iter().sum(), 1.0));
            assert!(parts.iter().all(|part| *part >= 0.0));
        }
    }

    #[test]
    fn a_mean_beyond_the_readings_is_a_step_at_the_nearer_one_and_equal_readings_stay_linear() {
        // 450 W above readings of 100 and 300 W: taken as 300 W, the power at the end
        // reading from the start on, so the cut goes by time.
        let above = PowerShape::with_mean(Some(100.0), Some(300.0), 450.0).unwrap();
        assert!(close(above.energy_between(0.0, 0.25), 0.25));
        // 40 W below both: the start reading's power throughout.
        let below = PowerShape::with_mean(Some(100.0), Some(300.0), 40.0).unwrap();
        assert!(close(below.energy_between(0.0, 0.25), 0.25));
        // Continuous as the mean crosses a reading: just inside gives nearly the same.
        let inside = PowerShape::with_mean(Some(100.0), Some(300.0), 299.999).unwrap();
        assert!((inside.energy_between(0.0, 0.25) - 0.25).abs() < 1e-4);
        let flat = PowerShape::linear(Some(100.0), Some(100.0)).unwrap();
        assert_eq!(
            PowerShape::with_mean(Some(100.0), Some(100.0), 105.0),
            Some(flat)
        );
        let linear = PowerShape::linear(Some(100.0), Some(300.0)).unwrap();
        assert_eq!(
            PowerShape::with_mean(Some(100.0), Some(300.0), f64::NAN),
            Some(linear)
        );
        // No power to weigh by: no shape, the cut goes by time.
        assert_eq!(PowerShape::with_mean(Some(0.0), Some(0.0), 10.0), None);
        assert_eq!(PowerShape::linear(None, Some(10.0)), None);
    }

    #[test]
    fn a_step_at_a_reading_is_flat_power_after_it() {
        // The counter says 640 W throughout though the first reading said 90 W.
        let shape = PowerShape::with_mean(Some(90.0), Some(640.0), 640.0).unwrap();
        assert!(close(shape.energy_between(0.0, 0.25), 0.25));
        let shape = PowerShape::with_mean(Some(90.0), Some(640.0), 90.0).unwrap();
        assert!(close(shape.energy_between(0.0, 0.25), 0.25));
    }
}

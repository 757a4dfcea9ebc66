//! Energy from power samples, exactly: the trapezoid between consecutive samples, and
//! the delta of a hardware energy counter where one is readable.
//!
//! Between two samples power is taken to change linearly, so the energy of the
//! interval is the mean of its two ends times its length (W·s), and `W·s / 3 600 000`
//! is kWh. A failed sample is a gap: the interval that spans it is not integrated.

use std::time::Instant;

/// Joules in one kilowatt-hour.
pub const JOULES_PER_KILOWATT_HOUR: f64 = 3_600_000.0;

/// One power sample of one device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerPoint {
    /// Monotonic time of the sample.
    pub at: Instant,
    /// Power draw, W.
    pub watts: f64,
    /// Hardware energy counter, mJ, where readable.
    pub counter_millijoules: Option<u64>,
}

/// One integrated interval: its ends and its energy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The earlier sample.
    pub start: PowerPoint,
    /// The later sample.
    pub end: PowerPoint,
    /// Trapezoid energy, J.
    pub trapezoid_joules: f64,
    /// Counter energy, J, when both ends had a counter.
    pub counter_joules: Option<f64>,
}

impl Interval {
    /// The interval's best energy: the counter delta where known, else the trapezoid, J.
    pub fn best_joules(&self) -> f64 {
        self.counter_joules.unwrap_or(self.trapezoid_joules)
    }

    /// Length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end
            .at
            .saturating_duration_since(self.start.at)
            .as_secs_f64()
    }

    /// Trapezoid energy within `[from, to]` clipped to this interval, J: the exact
    /// integral of the linear power between the two ends over the overlap.
    pub fn joules_between(&self, from: Instant, to: Instant) -> f64 {
        let length = self.seconds();
        if length <= 0.0 {
            return 0.0;
        }
        let clip = |t: Instant| t.clamp(self.start.at, self.end.at);
        let (a, b) = (clip(from), clip(to));
        if b <= a {
            return 0.0;
        }
        let power_at = |t: Instant| {
            let fraction = t.saturating_duration_since(self.start.at).as_secs_f64() / length;
            self.start.watts + (self.end.watts - self.start.watts) * fraction
        };
        (power_at(a) + power_at(b)) / 2.0 * b.saturating_duration_since(a).as_secs_f64()
    }
}

/// Energy counted by a hardware counter between two readings, J. A counter that went
/// backwards wrapped (when `wrap_at` is known and the earlier value was in its upper
/// half) or was reset (then the later value is the energy since the reset).
pub fn counter_delta_joules(
    before: u64,
    after: u64,
    units_per_joule: f64,
    wrap_at: Option<u64>,
) -> f64 {
    let units = if after >= before {
        after - before
    } else {
        match wrap_at {
            Some(range) if before > range / 2 => range.saturating_sub(before).saturating_add(after),
            _ => after,
        }
    };
    units as f64 / units_per_joule
}

/// Running energy of one device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceIntegrator {
    last: Option<PowerPoint>,
    /// Trapezoid energy over every integrated interval, J.
    pub trapezoid_joules: f64,
    /// Counter energy over the intervals that had counters at both ends, J.
    pub counter_joules: f64,
    /// Best energy per interval (its counter delta where known, else its trapezoid), J.
    pub best_joules: f64,
    /// Intervals integrated.
    pub intervals: u64,
    /// Intervals whose counter energy was known.
    pub counter_intervals: u64,
    /// Seconds covered by integrated intervals.
    pub covered_seconds: f64,
    /// Gaps (failed samples) seen.
    pub gaps: u64,
    /// Highest power reading, W.
    pub max_watts: Option<f64>,
    /// Power readings taken.
    pub readings: u64,
}

impl DeviceIntegrator {
    /// Adds a sample; returns the interval it closed, if any. A sample no later than the
    /// previous one (the same reading seen twice) closes nothing.
    pub fn add(&mut self, point: PowerPoint) -> Option<Interval> {
        if !point.watts.is_finite() || point.watts < 0.0 {
            self.gap();
            return None;
        }
        if let Some(last) = self.last
            && point.at <= last.at
        {
            return None;
        }
        self.readings += 1;
        self.max_watts = Some(
            self.max_watts
                .map_or(point.watts, |max| max.max(point.watts)),
        );
        let closed = self.last.map(|start| {
            let seconds = point.at.saturating_duration_since(start.at).as_secs_f64();
            let counter_joules = match (start.counter_millijoules, point.counter_millijoules) {
                (Some(before), Some(after)) => {
                    Some(counter_delta_joules(before, after, 1000.0, Some(u64::MAX)))
                }
                _ => None,
            };
            Interval {
                start,
                end: point,
                trapezoid_joules: (start.watts + point.watts) / 2.0 * seconds,
                counter_joules,
            }
        });
        if let Some(interval) = &closed {
            self.trapezoid_joules += interval.trapezoid_joules;
            self.covered_seconds += interval.seconds();
            self.intervals += 1;
            if let Some(joules) = interval.counter_joules {
                self.counter_joules += joules;
                self.counter_intervals += 1;
            }
            self.best_joules += interval.best_joules();
        }
        self.last = Some(point);
        closed
    }

    /// A failed sample: the next sample starts a new run, nothing spans the gap.
    pub fn gap(&mut self) {
        if self.last.take().is_some() {
            self.gaps += 1;
        }
    }

    /// Trapezoid energy, kWh.
    pub fn trapezoid_kilowatt_hours(&self) -> f64 {
        self.trapezoid_joules / JOULES_PER_KILOWATT_HOUR
    }

    /// Counter energy, kWh, when every integrated interval had a counter.
    pub fn counter_kilowatt_hours(&self) -> Option<f64> {
        (self.intervals > 0 && self.counter_intervals == self.intervals)
            .then(|| self.counter_joules / JOULES_PER_KILOWATT_HOUR)
    }

    /// The primary figure: each interval's counter delta where the counter was readable
    /// at both ends, its trapezoid otherwise; and which method that amounts to.
    pub fn kilowatt_hours(&self) -> (f64, EnergySource) {
        let source = if self.intervals > 0 && self.counter_intervals == self.intervals {
            EnergySource::Counter
        } else if self.counter_intervals == 0 {
            EnergySource::Trapezoid
        } else {
            EnergySource::Mixed
        };
        (self.best_joules / JOULES_PER_KILOWATT_HOUR, source)
    }

    /// Mean power over the covered time, W.
    pub fn mean_watts(&self) -> Option<f64> {
        (self.covered_seconds > 0.0).then(|| self.trapezoid_joules / self.covered_seconds)
    }

    /// The latest sample, if the run is open.
    pub fn last(&self) -> Option<PowerPoint> {
        self.last
    }
}

/// Where an energy figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// A hardware energy counter (NVML total energy).
    Counter,
    /// The trapezoid between power samples.
    Trapezoid,
    /// RAPL powercap counters.
    Rapl,
    /// Counter deltas for some intervals, the trapezoid for the rest.
    Mixed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(start: Instant, seconds: f64) -> Instant {
        start + Duration::from_secs_f64(seconds)
    }

    fn point(start: Instant, seconds: f64, watts: f64) -> PowerPoint {
        PowerPoint {
            at: at(start, seconds),
            watts,
            counter_millijoules: None,
        }
    }

    fn relative_error(actual: f64, expected: f64) -> f64 {
        ((actual - expected) / expected).abs()
    }

    #[test]
    fn one_kilowatt_for_one_hour_is_exactly_one_kilowatt_hour() {
        // The reference multiplies kW by seconds and calls it Wh: 3.6x too high.
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        device.add(point(start, 0.0, 1000.0));
        device.add(point(start, 3600.0, 1000.0));
        assert_eq!(device.trapezoid_kilowatt_hours(), 1.0);
        assert_eq!(device.kilowatt_hours(), (1.0, EnergySource::Trapezoid));
    }

    #[test]
    fn constant_power_over_many_samples() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        for second in 0..=600 {
            device.add(point(start, f64::from(second), 250.0));
        }
        assert!(relative_error(device.trapezoid_joules, 250.0 * 600.0) < 1e-12);
        assert_eq!(
            device.mean_watts().map(|w| (w - 250.0).abs() < 1e-9),
            Some(true)
        );
    }

    #[test]
    fn a_linear_ramp_is_integrated_exactly() {
        // P(t) = 100 + 2t over [0, 300]: E = 100*300 + 300^2 = 120000 J.
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        for second in (0..=300).step_by(7).chain([300]) {
            let t = f64::from(second);
            device.add(point(start, t, 100.0 + 2.0 * t));
        }
        assert!(relative_error(device.trapezoid_joules, 120_000.0) < 1e-12);
    }

    #[test]
    fn a_step_between_samples_is_the_mean_of_the_ends() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        device.add(point(start, 0.0, 100.0));
        device.add(point(start, 10.0, 100.0));
        device.add(point(start, 20.0, 300.0));
        device.add(point(start, 30.0, 300.0));
        // 100*10 + (100+300)/2*10 + 300*10
        assert!(relative_error(device.trapezoid_joules, 1000.0 + 2000.0 + 3000.0) < 1e-12);
        assert_eq!(device.max_watts, Some(300.0));
    }

    #[test]
    fn a_gap_in_the_middle_is_not_integrated() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        device.add(point(start, 0.0, 200.0));
        device.add(point(start, 5.0, 200.0));
        device.gap();
        device.add(point(start, 60.0, 200.0));
        device.add(point(start, 65.0, 200.0));
        assert!(relative_error(device.trapezoid_joules, 2000.0) < 1e-12);
        assert_eq!(device.gaps, 1);
        assert!((device.covered_seconds - 10.0).abs() < 1e-9);
    }

    #[test]
    fn irregular_intervals_sum_exactly() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        let times = [0.0, 0.37, 1.9, 2.0, 7.25, 7.3, 12.0];
        let watts = [50.0, 80.0, 80.0, 120.0, 60.0, 61.0, 90.0];
        let mut expected = 0.0;
        for i in 0..times.len() {
            device.add(point(start, times[i], watts[i]));
            if i > 0 {
                expected += (watts[i - 1] + watts[i]) / 2.0 * (times[i] - times[i - 1]);
            }
        }
        assert!(relative_error(device.trapezoid_joules, expected) < 1e-12);
    }

    #[test]
    fn the_counter_is_primary_and_the_trapezoid_cross_checks() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        let counter = |mj| Some(mj);
        device.add(PowerPoint {
            at: at(start, 0.0),
            watts: 100.0,
            counter_millijoules: counter(1_000_000),
        });
        device.add(PowerPoint {
            at: at(start, 10.0),
            watts: 100.0,
            counter_millijoules: counter(2_050_000),
        });
        assert_eq!(
            device.counter_kilowatt_hours(),
            Some(1050.0 / JOULES_PER_KILOWATT_HOUR)
        );
        assert_eq!(device.kilowatt_hours().1, EnergySource::Counter);
        assert_eq!(device.trapezoid_joules, 1000.0);
        // One interval without a counter: that interval uses its trapezoid.
        device.add(point(start, 20.0, 100.0));
        assert_eq!(device.counter_kilowatt_hours(), None);
        assert_eq!(
            device.kilowatt_hours(),
            (
                (1050.0 + 1000.0) / JOULES_PER_KILOWATT_HOUR,
                EnergySource::Mixed
            )
        );
    }

    #[test]
    fn counter_wrap_and_reset() {
        // Wrap: the earlier reading was near the top of the range.
        assert_eq!(
            counter_delta_joules(u64::MAX - 500, 1500, 1000.0, Some(u64::MAX)),
            2.0
        );
        // Reset: a low earlier reading; the later value is what accrued since.
        assert_eq!(
            counter_delta_joules(9_000, 3_000, 1000.0, Some(u64::MAX)),
            3.0
        );
        // RAPL microjoules with a small range.
        assert_eq!(
            counter_delta_joules(262_000_000, 1_000_000, 1e6, Some(262_143_328_850)),
            1.0
        );
        assert_eq!(
            counter_delta_joules(262_143_000_000, 1_000_000, 1e6, Some(262_143_328_850)),
            1.32885
        );
    }

    #[test]
    fn a_repeated_reading_adds_nothing() {
        let start = Instant::now();
        let mut device = DeviceIntegrator::default();
        device.add(point(start, 0.0, 100.0));
        device.add(point(start, 1.0, 100.0));
        assert_eq!(device.add(point(start, 1.0, 100.0)), None);
        assert_eq!(device.trapezoid_joules, 100.0);
        assert_eq!(device.readings, 2);
    }

    #[test]
    fn energy_within_a_window_follows_the_linear_power() {
        let start = Instant::now();
        let interval = Interval {
            start: point(start, 0.0, 0.0),
            end: point(start, 10.0, 100.0),
            trapezoid_joules: 500.0,
            counter_joules: None,
        };
        // Over [5, 10]: power 50..100, mean 75, 5 s.
        assert!(
            relative_error(
                interval.joules_between(at(start, 5.0), at(start, 20.0)),
                375.0
            ) < 1e-12
        );
        assert_eq!(
            interval.joules_between(at(start, 11.0), at(start, 20.0)),
            0.0
        );
        assert!(relative_error(interval.joules_between(start, at(start, 10.0)), 500.0) < 1e-12);
    }
}

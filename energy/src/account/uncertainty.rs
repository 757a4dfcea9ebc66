//! The error model behind each figure's receipt: how far the true energy of a window
//! may lie from the figure, from what decides it for each kind of source.
//!
//! Each interval between two readings contributes a variance for the part of it a
//! window holds, and each window edge inside an interval one more; a figure's 95%
//! interval is its value ± 1.96 standard deviations, then widened by the most the
//! meter could have drawn while it was not read (gaps). The terms, each from the
//! readings themselves:
//!
//! - **Power between readings** (instant or averaged power): the trapezoid assumes the
//!   power went straight from one reading to the next. What it did is unknown; the
//!   readings show how far it moved (the two readings' difference) and how much it
//!   moves from one reading to the next on this meter (`movement`, a running mean of
//!   that squared difference, which a burst or a jittery reading raises). A part of
//!   `ℓ` seconds has a variance of `ℓ² × (difference² / 12 + ½ movement²)`: the first
//!   term a change anywhere between the readings, the second what moves between
//!   readings unseen.
//! - **A counter** knows an interval's total: its parts' errors cancel from one interval
//!   to the next, and only a cut inside an interval (the smaller side of the cut, by the
//!   term above) and each window edge count. At an edge the counter's value is as old as
//!   its update period (100 ms for NVML's, 1 ms for RAPL's) and rounded to its quantum
//!   (1 mJ, about 61 µJ).
//! - **An average** (a 1 s mean) lags the power: at each edge of a window it shifts a
//!   change of power by up to half its window; the readings' usual change across one
//!   window says how large such changes are.
//! - **Gaps**: nothing is known of the power while a meter was not read; the interval's
//!   high end holds the meter's highest reading for that time.
//!
//! How wide each term is taken is checked against a simulated truth
//! (`energy/tests/receipts.rs`): 95% intervals that hold the true energy in 95% to
//! 99.5% of random cases, per kind of source.

use wattline_model::receipt::{EnergyReceipt, ReceiptMethod, Resolution};

/// Standard deviations of a two-sided 95% normal interval.
pub(super) const Z95: f64 = 1.96;

/// How a meter's readings behave: what decides the error of energy from them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ReadingModel {
    /// A hardware counter whose value moves every `update_seconds`, in steps of
    /// `quantum_joules`.
    Counter {
        update_seconds: f64,
        quantum_joules: f64,
    },
    /// Instantaneous power readings.
    InstantPower,
    /// Power averaged over `window_seconds` before each reading.
    AveragedPower { window_seconds: f64 },
}

/// NVML's energy counter: whole millijoules, updated about every 100 ms.
pub(super) const GPU_COUNTER: ReadingModel = ReadingModel::Counter {
    update_seconds: 0.1,
    quantum_joules: 0.001,
};
/// RAPL: updated about every millisecond, in units of about 61 µJ.
pub(super) const RAPL_COUNTER: ReadingModel = ReadingModel::Counter {
    update_seconds: 0.001,
    quantum_joules: 6.1e-5,
};

/// The power fields that are a mean over the last second (Ampere and newer).
const AVERAGED_FIELDS: [&str; 2] = ["power.draw", "nvmlDeviceGetPowerUsage"];

/// The model of power readings named `field` (instant unless it is known to average).
pub(super) fn power_model(field: Option<&str>) -> ReadingModel {
    match field {
        Some(field) if AVERAGED_FIELDS.contains(&field) => ReadingModel::AveragedPower {
            window_seconds: 1.0,
        },
        _ => ReadingModel::InstantPower,
    }
}

impl ReadingModel {
    pub(super) fn method(self) -> ReceiptMethod {
        match self {
            ReadingModel::Counter { .. } => ReceiptMethod::Counter,
            ReadingModel::InstantPower => ReceiptMethod::InstantPower,
            ReadingModel::AveragedPower { .. } => ReceiptMethod::AveragedPower,
        }
    }

    /// How long a figure from these readings lags the power, on average, s (see
    /// [`IntervalError::lag_seconds`]).
    pub(super) fn lag_seconds(self) -> f64 {
        match self {
            ReadingModel::Counter { update_seconds, .. } => update_seconds / 2.0,
            ReadingModel::InstantPower => 0.0,
            ReadingModel::AveragedPower { window_seconds } => window_seconds / 2.0,
        }
    }

    /// The shortest window these readings resolve, given the longest time between two
    /// of them: a counter's update period; the time between power readings (a shorter
    /// step may fall between two), and an average's window if longer.
    pub(super) fn resolution_seconds(self, longest_interval_seconds: f64) -> f64 {
        match self {
            ReadingModel::Counter { update_seconds, .. } => update_seconds,
            ReadingModel::InstantPower => longest_interval_seconds,
            ReadingModel::AveragedPower { window_seconds } => {
                window_seconds.max(longest_interval_seconds)
            }
        }
    }
}

/// How wide the readings' usual movement is taken between two readings, as a share of
/// its mean square: what bursts and jitter the readings only sometimes catch add.
const ROUGHNESS_SHARE: f64 = 0.4;
/// The least power taken to move unseen between two readings, as a share of the
/// interval's mean: what readings 100 ms apart cannot rule out on a quiet trace (a
/// burst of a few milliseconds that no reading happened to catch).
const UNSEEN_FLOOR: f64 = 0.012;
/// How much of an average's change across its window one edge may shift.
const LAG_SHARE: f64 = 0.25;

/// What the error of one interval between two readings depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct IntervalError {
    pub(super) model: ReadingModel,
    /// Its length, s.
    pub(super) seconds: f64,
    /// The difference of its two readings' power (or of its mean from the previous
    /// interval's, for a meter without power readings), W.
    pub(super) difference_watts: f64,
    /// The meter's usual movement from one reading to the next: the root of a running
    /// mean of the squared difference, W.
    pub(super) roughness_watts: f64,
    /// Its mean power, W.
    pub(super) mean_watts: f64,
    /// For an average: the root of a running mean of the squared change of the
    /// readings across one averaging window, W.
    pub(super) window_change_watts: f64,
}

impl IntervalError {
    /// The variance (J²) of the energy of the part of this interval from `from` to `to`
    /// seconds after its start (`0 <= from <= to <= seconds`), with a window edge at
    /// `from` when `starts_window` and at `to` when `ends_window`.
    pub(super) fn part_variance(
        &self,
        from: f64,
        to: f64,
        starts_window: bool,
        ends_window: bool,
    ) -> f64 {
        let part = (to - from).max(0.0);
        let shape_seconds = match self.model {
            // The total is known: a cut's error is that of its smaller side; a whole
            // interval's cancels against its neighbours'.
            ReadingModel::Counter { .. } => part.min(self.seconds - part).max(0.0),
            _ => part,
        };
        // A difference beyond the usual movement is a change (a step, a ramp) somewhere
        // between the readings; the usual movement is noise and what passes unseen.
        let change = (self.difference_watts - self.roughness_watts).max(0.0);
        let unseen = self.roughness_watts.max(UNSEEN_FLOOR * self.mean_watts);
        let shape =
            shape_seconds.powi(2) * (change.powi(2) / 12.0 + ROUGHNESS_SHARE * unseen.powi(2));
        let edges = f64::from(u8::from(starts_window) + u8::from(ends_window));
        shape + edges * self.edge_variance()
    }

    /// How long a figure from these readings lags the power, on average, s: half a
    /// counter's update period, half an average's window, none for instant power. At
    /// each edge of a window the figure takes that long of the power from before it, so
    /// a window whose power differs at its two edges is off by the lag times the
    /// difference.
    pub(super) fn lag_seconds(&self) -> f64 {
        self.model.lag_seconds()
    }

    /// The variance (J²) a window edge inside this interval adds.
    pub(super) fn edge_variance(&self) -> f64 {
        match self.model {
            ReadingModel::Counter {
                update_seconds,
                quantum_joules,
            } => ((self.mean_watts * update_seconds).powi(2) + quantum_joules.powi(2)) / 12.0,
            ReadingModel::InstantPower => 0.0,
            ReadingModel::AveragedPower { window_seconds } => {
                (LAG_SHARE * self.window_change_watts * window_seconds).powi(2)
            }
        }
    }
}

/// A figure's receipt from its joules, the variance of their error, the joules the
/// meters may have missed in gaps (at most), how it was obtained and whether it was
/// resolved.
pub(super) fn receipt(
    joules: f64,
    variance: f64,
    unseen_joules: f64,
    method: ReceiptMethod,
    resolution: Resolution,
) -> EnergyReceipt {
    let half = Z95 * variance.max(0.0).sqrt();
    let kwh = |joules: f64| joules / wattline_model::report::JOULES_PER_KILOWATT_HOUR;
    EnergyReceipt {
        method,
        low_kwh: kwh((joules - half).max(0.0)),
        high_kwh: kwh(joules + half + unseen_joules.max(0.0)),
        resolution,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_counter_interval_adds_no_shape_error_and_a_cut_its_smaller_side() {
        let interval = IntervalError {
            model: GPU_COUNTER,
            seconds: 0.1,
            difference_watts: 120.0,
            roughness_watts: 10.0,
            mean_watts: 300.0,
            window_change_watts: 0.0,
        };
        assert_eq!(interval.part_variance(0.0, 0.1, false, false), 0.0);
        // A cut at 0.08 s: the 0.02 s side, (0.02 s)² × ((120 − 10 W)² / 12 + 0.4 ×
        // (10 W)²): the change beyond the usual movement, and that movement; plus the
        // edge, the counter 100 ms old at 300 W and its 1 mJ quantum.
        let edge = ((300.0f64 * 0.1).powi(2) + 1e-6) / 12.0;
        let cut = interval.part_variance(0.0, 0.08, false, true);
        let side = 0.02f64.powi(2) * (110.0f64.powi(2) / 12.0 + 0.4 * 100.0);
        assert!((cut - (side + edge)).abs() < 1e-9, "{cut}");
    }

    #[test]
    fn power_readings_spread_over_the_whole_part() {
        let interval = IntervalError {
            model: ReadingModel::InstantPower,
            seconds: 0.1,
            difference_watts: 60.0,
            roughness_watts: 20.0,
            mean_watts: 200.0,
            window_change_watts: 0.0,
        };
        let whole = interval.part_variance(0.0, 0.1, false, false);
        // (0.1 s)² × ((60 − 20 W)² / 12 + 0.4 × (20 W)²).
        let expected = 0.01 * (1600.0 / 12.0 + 0.4 * 400.0);
        assert!((whole - expected).abs() < 1e-12, "{whole}");
        assert_eq!(interval.edge_variance(), 0.0);
        // Quiet readings: at least 1.2% of the 200 W mean moves unseen.
        let quiet = IntervalError {
            difference_watts: 0.0,
            roughness_watts: 0.0,
            ..interval
        };
        let floor = quiet.part_variance(0.0, 0.1, false, false);
        assert!(
            (floor - 0.01 * 0.4 * 2.4f64.powi(2)).abs() < 1e-12,
            "{floor}"
        );
    }

    #[test]
    fn a_receipt_is_the_figure_plus_minus_196_deviations_and_the_gaps_on_top() {
        // 3600 J ± 1.96 × 100 J, and up to 360 J unseen: in kWh.
        let receipt = receipt(
            3600.0,
            100.0 * 100.0,
            360.0,
            ReceiptMethod::InstantPower,
            Resolution::Resolved,
        );
        assert!((receipt.low_kwh - (3600.0 - 196.0) / 3.6e6).abs() < 1e-15);
        assert!((receipt.high_kwh - (3600.0 + 196.0 + 360.0) / 3.6e6).abs() < 1e-15);
        let zero = super::receipt(
            10.0,
            1e6,
            0.0,
            ReceiptMethod::Counter,
            Resolution::Unresolved,
        );
        assert_eq!(zero.low_kwh, 0.0);
    }

    #[test]
    fn averaged_fields_are_known_by_name() {
        assert_eq!(
            power_model(Some("nvmlDeviceGetPowerUsage")),
            ReadingModel::AveragedPower {
                window_seconds: 1.0
            }
        );
        assert_eq!(
            power_model(Some("power.draw.instant")),
            ReadingModel::InstantPower
        );
        assert_eq!(power_model(None), ReadingModel::InstantPower);
    }
}

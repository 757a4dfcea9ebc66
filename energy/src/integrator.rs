//! The arithmetic of energy: joules per kWh, hardware counter deltas (wrap and reset),
//! and the names of the methods a figure can come from. The trapezoid between power
//! samples, and clipping an interval to a window, live with the intervals in
//! [`super::account`].

pub use wattline_model::report::{DENSE_INTERVAL_SECONDS, EnergySource, JOULES_PER_KILOWATT_HOUR};

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

/// Energy counted between two readings of a counter that more than one reader shares,
/// J; `None` when the later-stamped reading holds the lower value without having
/// wrapped or been reset (it is below the earlier value but at least half of it).
/// Readers stamp a reading before their calls, so a reading stamped later can have
/// been taken earlier (NVML's full telemetry read stamps its sample first and reaches
/// the energy counter after dozens of other calls, while the dense power thread reads
/// the same counter); such a pair counted no energy, and the higher value stays the
/// baseline for the next reading, so the deltas still add up to the counter's advance.
/// A real reset leaves the counter near zero, far below half its former value.
pub fn shared_counter_delta_joules(
    before: u64,
    after: u64,
    units_per_joule: f64,
    wrap_at: Option<u64>,
) -> Option<f64> {
    let wrapped = wrap_at.is_some_and(|range| before > range / 2);
    if after < before && !wrapped && after >= before / 2 {
        return None;
    }
    Some(counter_delta_joules(
        before,
        after,
        units_per_joule,
        wrap_at,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_shared_counter_read_out_of_order_counts_nothing_a_reset_or_wrap_still_counts() {
        // NVML millijoules: a value 2 J lower than the baseline was read first.
        assert_eq!(
            shared_counter_delta_joules(987_654_321, 987_652_321, 1000.0, Some(u64::MAX)),
            None
        );
        // Exactly half is still out of order; just below half is a reset.
        assert_eq!(
            shared_counter_delta_joules(10_000, 5_000, 1000.0, Some(u64::MAX)),
            None
        );
        assert_eq!(
            shared_counter_delta_joules(10_000, 4_999, 1000.0, Some(u64::MAX)),
            Some(4.999)
        );
        // Forwards, wrapped, reset: as the plain counter.
        assert_eq!(
            shared_counter_delta_joules(1_000, 3_500, 1000.0, Some(u64::MAX)),
            Some(2.5)
        );
        assert_eq!(
            shared_counter_delta_joules(u64::MAX - 500, 1500, 1000.0, Some(u64::MAX)),
            Some(2.0)
        );
        assert_eq!(
            shared_counter_delta_joules(
                262_143_000_000,
                262_142_000_000,
                1e6,
                Some(262_143_328_850)
            ),
            Some(262_142.328_85)
        );
    }
}

//! The instant of a scope boundary on both clocks, for one clock reading: the
//! monotonic one (what energy is cut at) read each time, the wall clock worked out from
//! it.
//!
//! The two clocks advance at the same rate (NTP's slewing adjusts both); they part
//! only when the wall clock is set, stepped. So the difference between them is read
//! once and reused, and read again whenever it is older than [`REREAD_AFTER`]: a
//! boundary's wall time is then the system's to within a step made in that last
//! second. A boundary asks the clock once instead of twice (reading both clocks at each
//! boundary was a fifth of what opening and ending a scope cost its caller).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::scope_boundary::WallNanos;

/// How long one reading of the two clocks' difference is reused.
pub const REREAD_AFTER: Duration = Duration::from_secs(1);

/// Wall-clock times worked out from the monotonic clock (see the module).
#[derive(Debug)]
pub struct BoundaryClock {
    /// The monotonic instant offsets count from.
    epoch: Instant,
    /// Wall-clock nanoseconds since the Unix epoch, less monotonic nanoseconds since
    /// `epoch`, as last read.
    offset_nanos: AtomicI64,
    /// When (monotonic nanoseconds since `epoch`) the offset was read; `u64::MAX`
    /// before the first reading.
    read_at_nanos: AtomicU64,
}

impl Default for BoundaryClock {
    fn default() -> Self {
        BoundaryClock {
            epoch: Instant::now(),
            offset_nanos: AtomicI64::new(0),
            read_at_nanos: AtomicU64::new(u64::MAX),
        }
    }
}

impl BoundaryClock {
    /// This instant on the monotonic clock and on the wall clock (as a boundary keeps
    /// it: worked out in nanoseconds, never through a `SystemTime`). Boundaries read
    /// the monotonic clock under the scope stream's lock and ask [`Self::wall_at`].
    #[cfg(test)]
    pub fn now(&self) -> (Instant, WallNanos) {
        let at = Instant::now();
        (at, self.wall_at(at))
    }

    /// Monotonic `at` (a reading just taken: not before the last one this clock
    /// worked from) on the wall clock.
    pub fn wall_at(&self, at: Instant) -> WallNanos {
        let since_epoch = nanos(at.saturating_duration_since(self.epoch));
        let read_at = self.read_at_nanos.load(Ordering::Relaxed);
        if read_at != u64::MAX && since_epoch.saturating_sub(read_at) < nanos(REREAD_AFTER) {
            let offset = self.offset_nanos.load(Ordering::Relaxed);
            if let Some(wall) = wall_nanos(since_epoch, offset) {
                return WallNanos::from_nanos(wall);
            }
        }
        self.read_offset(since_epoch).into()
    }

    /// Reads the wall clock now (monotonic `since_epoch`), keeps the two clocks'
    /// difference and returns the reading.
    fn read_offset(&self, since_epoch: u64) -> SystemTime {
        let wall = SystemTime::now();
        // A wall clock before 1970 (or past 2262) is used as read, never offset.
        if let Some(wall_nanos) = wall
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|since_unix| i64::try_from(since_unix.as_nanos()).ok())
            && let Ok(monotonic) = i64::try_from(since_epoch)
        {
            // Two stores, not one: a reader between them takes the previous offset,
            // which is as good as it was a moment ago.
            self.offset_nanos
                .store(wall_nanos - monotonic, Ordering::Relaxed);
            self.read_at_nanos.store(since_epoch, Ordering::Relaxed);
        }
        wall
    }
}

/// Whole nanoseconds of `duration` (585 years fit).
fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// The wall-clock time, nanoseconds since 1970, `since_epoch` monotonic nanoseconds
/// in, given the clocks' difference `offset`; `None` where it would fall before 1970 or
/// past 2262 (the clock is then read instead).
fn wall_nanos(since_epoch: u64, offset: i64) -> Option<i64> {
    i64::try_from(since_epoch)
        .ok()?
        .checked_add(offset)
        .filter(|wall| *wall >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far apart two readings of the wall clock taken around one `now` may be.
    fn within(wall: SystemTime, before: SystemTime, after: SystemTime) -> bool {
        // The monotonic reading lies between the two; the worked-out wall time may
        // land a few microseconds either side of them through rounding.
        let slack = Duration::from_millis(1);
        wall + slack >= before && wall <= after + slack
    }

    #[test]
    fn wall_times_match_the_system_clock_first_and_when_reused() {
        let clock = BoundaryClock::default();
        for _ in 0..1_000 {
            let before = SystemTime::now();
            let (_, wall) = clock.now();
            let after = SystemTime::now();
            let wall = SystemTime::from(wall);
            assert!(
                within(wall, before, after),
                "{wall:?} not in {before:?}..{after:?}"
            );
        }
    }

    #[test]
    fn a_stale_difference_is_reused_for_a_second_and_read_again_after_it() {
        // An epoch well in the past, so a reading can be made older than the limit.
        let clock = BoundaryClock {
            epoch: Instant::now()
                .checked_sub(Duration::from_secs(10))
                .expect("a monotonic clock ten seconds into its count"),
            ..BoundaryClock::default()
        };
        let _ = clock.now();
        // As if the wall clock had been stepped an hour back after the last reading.
        let hour = Duration::from_secs(3600);
        let true_offset = clock.offset_nanos.load(Ordering::Relaxed);
        clock
            .offset_nanos
            .store(true_offset + nanos(hour) as i64, Ordering::Relaxed);
        let (_, wall) = clock.now();
        assert!(
            SystemTime::from(wall) > SystemTime::now() + hour - Duration::from_secs(1),
            "the offset is reused within {REREAD_AFTER:?}"
        );
        // Its reading made older than the reuse limit: the next boundary reads again.
        let (at, _) = clock.now();
        let since_epoch = nanos(at.saturating_duration_since(clock.epoch));
        clock.read_at_nanos.store(
            since_epoch.saturating_sub(nanos(REREAD_AFTER)),
            Ordering::Relaxed,
        );
        let before = SystemTime::now();
        let (_, wall) = clock.now();
        let after = SystemTime::now();
        let wall = SystemTime::from(wall);
        assert!(within(wall, before, after), "read again: {wall:?}");
        assert!((clock.offset_nanos.load(Ordering::Relaxed) - true_offset).abs() < 1_000_000);
    }

    #[test]
    fn monotonic_and_wall_times_of_one_boundary_agree_with_each_other() {
        let clock = BoundaryClock::default();
        let (first_at, first_wall) = clock.now();
        std::thread::sleep(Duration::from_millis(20));
        let (second_at, second_wall) = clock.now();
        let monotonic = second_at - first_at;
        let wall = SystemTime::from(second_wall)
            .duration_since(SystemTime::from(first_wall))
            .expect("later on the wall clock too");
        // The same reading, so the same interval on both (to rounding).
        let difference = monotonic.abs_diff(wall);
        assert!(difference < Duration::from_micros(1), "{difference:?}");
    }

    #[test]
    fn wall_times_before_1970_or_past_2262_are_refused() {
        assert_eq!(wall_nanos(0, -1), None);
        assert_eq!(wall_nanos(u64::MAX, 0), None);
        assert_eq!(wall_nanos(1, i64::MAX), None);
        assert_eq!(wall_nanos(5, 10), Some(15));
    }
}

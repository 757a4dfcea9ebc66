//! A pause armed by a test and taken by the next scope boundary's caller right after
//! its instant is read: what a thread preempted at the worst moment does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The pause the next boundary takes, in microseconds (0: none).
#[derive(Debug, Default)]
pub(super) struct BoundaryStall(AtomicU64);

impl BoundaryStall {
    /// The next boundary pauses for `pause`.
    pub(super) fn arm(&self, pause: Duration) {
        let micros = u64::try_from(pause.as_micros()).unwrap_or(u64::MAX);
        self.0.store(micros, Ordering::SeqCst);
    }

    /// Whether it is armed still: no boundary has read its instant since.
    pub(super) fn is_armed(&self) -> bool {
        self.0.load(Ordering::SeqCst) != 0
    }

    /// Called right after a boundary's instant is read: pauses, once, if armed.
    pub(super) fn after_stamp(&self) {
        // A load first: every boundary passes here, and an unarmed stall must not make
        // concurrent callers fight over the cache line a swap would write.
        if self.0.load(Ordering::Relaxed) == 0 {
            return;
        }
        let micros = self.0.swap(0, Ordering::SeqCst);
        if micros > 0 {
            std::thread::sleep(Duration::from_micros(micros));
        }
    }
}

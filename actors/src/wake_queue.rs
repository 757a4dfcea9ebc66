//! A queue an actor takes at the start of every message it handles, woken by one
//! message per batch: how a scope's start and end reach the merger and the energy
//! actor without a message (an allocation, a mailbox slot, a wake-up) per boundary.
//!
//! The API pushes and, only when the queue was idle, sends the actor one wake-up
//! message; the actor drains the queue before it handles any message. So a boundary
//! pushed before some message was sent (a poll, a reading, a report) is taken before
//! that message is handled: the order a mailbox gave, at a fraction of the cost. State
//! still moves only to the actor, which books what it drains without any lock held.
//!
//! A busy queue is held: after a wake-up that found items, the actor keeps the flag set
//! (pushes wake nothing) and sends itself the next wake-up [`HOLD`] later, until one
//! finds nothing new and releases the queue. A host opening scopes back to back then
//! pays a push per boundary, never a wake-up (a futex and a reschedule, several times
//! the push), and the actor takes them in batches; an isolated boundary is still taken
//! at once.
//!
//! The queue is two buffers that trade places: pushes append to one under a lock held
//! only for the append, and a drain swaps it for the actor's emptied one. Both keep
//! their capacity, so once a queue has seen its busiest batch, a push allocates
//! nothing and touches no fresh memory (a lock-free segmented queue allocated and
//! zeroed a block every few dozen items, and on a busy queue that, with the page
//! faults behind it, was most of a scope's cost to its caller).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a busy queue is held between the actor's own wake-ups: the most a
/// boundary pushed while it is held waits (a poll, a reading or a report still takes
/// it first, since every message drains the queue).
pub const HOLD: Duration = Duration::from_millis(1);

/// What both halves share, under one lock.
struct Shared<T> {
    /// Pushed, not yet drained, oldest first.
    items: Vec<T>,
    /// Set by the first push after the queue was released; cleared by the release.
    wake_pending: bool,
    /// The actor's half is gone: pushes are dropped.
    closed: bool,
}

/// A new queue: the pushing half for the API, the draining half for the actor.
pub fn wake_queue<T>() -> (WakeSender<T>, WakeReceiver<T>) {
    let shared = Arc::new(Mutex::new(Shared {
        items: Vec::new(),
        wake_pending: false,
        closed: false,
    }));
    (
        WakeSender(Arc::clone(&shared)),
        WakeReceiver {
            shared,
            taken_since_wake_up: 0,
        },
    )
}

/// Locks `shared`; a push or a swap cannot leave it half-done, so a poisoned lock's
/// contents are still whole.
fn lock<T>(shared: &Mutex<Shared<T>>) -> std::sync::MutexGuard<'_, Shared<T>> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The API's half of a [`wake_queue`].
pub struct WakeSender<T>(Arc<Mutex<Shared<T>>>);

impl<T> Clone for WakeSender<T> {
    fn clone(&self) -> Self {
        WakeSender(Arc::clone(&self.0))
    }
}

impl<T> WakeSender<T> {
    /// Queues `item`; `true` when the caller must send the actor a wake-up message
    /// (the first push since the queue was released). An actor gone drops it: `false`.
    #[must_use = "the first push after a release must wake the actor"]
    pub fn push(&self, item: T) -> bool {
        let mut shared = lock(&self.0);
        if shared.closed {
            return false;
        }
        shared.items.push(item);
        !std::mem::replace(&mut shared.wake_pending, true)
    }
}

/// The actor's half of a [`wake_queue`].
pub struct WakeReceiver<T> {
    shared: Arc<Mutex<Shared<T>>>,
    /// Items drained since the last wake-up message was handled.
    taken_since_wake_up: usize,
}

/// What the actor does after handling a wake-up message ([`WakeReceiver::woken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a held queue needs the next wake-up; a released one a last drain"]
pub enum AfterWakeUp {
    /// Items came since the last wake-up: the queue stays held (pushes wake nothing),
    /// and the actor sends itself the next wake-up [`HOLD`] from now.
    Hold,
    /// Nothing came: the queue is released (the next push wakes the actor), and the
    /// actor drains it once more, for pushes that raced the release.
    Released,
}

impl<T> WakeReceiver<T> {
    /// Moves every item queued so far into `batch` (empty: its capacity goes to the
    /// pushers), oldest first. The wake-up flag is left as it is: a wake-up message
    /// sent, or the hold, still takes what is pushed next.
    pub fn drain_into(&mut self, batch: &mut Vec<T>) {
        debug_assert!(batch.is_empty(), "a batch is booked before the next drain");
        batch.clear();
        std::mem::swap(&mut lock(&self.shared).items, batch);
        self.taken_since_wake_up += batch.len();
    }

    /// Called for every wake-up message (the pushers' and the actor's own), after
    /// the drain that starts each message: holds the queue while items keep coming,
    /// releases it once a wake-up finds none.
    pub fn woken(&mut self) -> AfterWakeUp {
        if std::mem::take(&mut self.taken_since_wake_up) > 0 {
            return AfterWakeUp::Hold;
        }
        // Cleared before the caller's last drain: a push racing with it is either
        // taken by that drain or finds the flag clear and sends a new wake-up.
        lock(&self.shared).wake_pending = false;
        AfterWakeUp::Released
    }
}

impl<T> Drop for WakeReceiver<T> {
    /// Nothing will take the queue any more: later pushes are dropped at once, and
    /// what is queued is freed with the last sender.
    fn drop(&mut self) {
        lock(&self.shared).closed = true;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// What one drain takes.
    fn drained<T>(receiver: &mut WakeReceiver<T>) -> Vec<T> {
        let mut batch = Vec::new();
        receiver.drain_into(&mut batch);
        batch
    }

    #[test]
    fn a_busy_queue_is_held_until_a_wake_up_finds_nothing_new() {
        let (sender, mut receiver) = wake_queue();
        assert!(sender.push(1));
        assert!(!sender.push(2));
        // The pushers' wake-up: items came, so the queue is held.
        assert_eq!(drained(&mut receiver), [1, 2]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        assert!(!sender.push(3), "held: pushes wake nothing");
        // The actor's own wake-up: one more came, still held.
        assert_eq!(drained(&mut receiver), [3]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        // The next finds nothing: released, and the next push wakes the actor.
        assert_eq!(drained(&mut receiver).len(), 0);
        assert_eq!(receiver.woken(), AfterWakeUp::Released);
        assert!(sender.push(4));
        assert!(!sender.push(5));
        assert_eq!(drained(&mut receiver), [4, 5]);
        drop(receiver);
        assert!(!sender.push(6), "nobody to wake");
    }

    #[test]
    fn the_two_buffers_trade_places_so_a_steady_queue_allocates_nothing() {
        let (sender, mut receiver) = wake_queue();
        let mut batch = Vec::new();
        let mut fill_and_drain = |batch: &mut Vec<u64>| {
            for n in 0..64 {
                let _ = sender.push(n);
            }
            receiver.drain_into(batch);
            assert_eq!(*batch, (0..64).collect::<Vec<_>>());
            let buffer = batch.as_ptr();
            batch.clear();
            buffer
        };
        let first = fill_and_drain(&mut batch);
        let second = fill_and_drain(&mut batch);
        assert_ne!(first, second, "the pushers got the actor's (empty) buffer");
        // From here on, each buffer comes back with its capacity: no allocation.
        assert_eq!(fill_and_drain(&mut batch), first);
        assert_eq!(fill_and_drain(&mut batch), second);
    }

    #[test]
    fn a_push_racing_the_release_is_taken_by_the_last_drain() {
        let (sender, mut receiver) = wake_queue();
        assert!(sender.push(1));
        assert_eq!(drained(&mut receiver), [1]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        // The next wake-up's drain finds nothing; a push lands before the release and
        // sends no wake-up, since the queue is still held.
        assert_eq!(drained(&mut receiver).len(), 0);
        assert!(!sender.push(2));
        assert_eq!(receiver.woken(), AfterWakeUp::Released);
        assert_eq!(drained(&mut receiver), [2]);
        assert!(sender.push(3), "released: the next push wakes");
    }

    #[test]
    fn concurrent_pushes_lose_nothing_and_keep_each_producers_order() {
        const PRODUCERS: usize = 8;
        const EACH: usize = 5_000;
        let (sender, mut receiver) = wake_queue();
        let wake_ups = Arc::new(AtomicUsize::new(0));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|producer| {
                let (sender, wake_ups) = (sender.clone(), Arc::clone(&wake_ups));
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        if sender.push((producer, n)) {
                            wake_ups.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        // Drained while they push, as the actor does for each wake-up: a drain, then
        // held or released (and a last drain).
        let mut taken = Vec::new();
        let mut releases = 0;
        while taken.len() < PRODUCERS * EACH {
            taken.extend(drained(&mut receiver));
            if receiver.woken() == AfterWakeUp::Released {
                releases += 1;
                taken.extend(drained(&mut receiver));
            }
            std::thread::yield_now();
        }
        for producer in producers {
            producer.join().expect("a producer panicked");
        }
        assert_eq!(drained(&mut receiver).len(), 0);
        assert_eq!(taken.len(), PRODUCERS * EACH);
        for producer in 0..PRODUCERS {
            let own: Vec<usize> = taken
                .iter()
                .filter(|(from, _)| *from == producer)
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(own, (0..EACH).collect::<Vec<_>>(), "producer {producer}");
        }
        // A wake-up needs the flag clear: at most one per release, and one before any.
        assert!(wake_ups.load(Ordering::Relaxed) <= releases + 1);
    }
}

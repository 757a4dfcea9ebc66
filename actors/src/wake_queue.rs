//! A queue an actor takes at the start of every message it handles, woken by one
//! message per batch: how a scope's start and end reach the merger and the energy
//! actor without a message (an allocation, a mailbox slot, a wake-up) per boundary.
//!
//! The API pushes and, only when the queue was idle, sends the actor one wake-up
//! message; the actor drains the queue before it handles any message. So a boundary
//! pushed before some message was sent (a poll, a reading, a report) is taken before
//! that message is handled: the order a mailbox gave, at a fraction of the cost. No
//! lock is shared between the API and the actor; state still moves only to the actor.
//! The queue is a lock-free segmented queue: a push is one compare-and-swap and a
//! store, with no waker or permit to update (a channel's cost), and no allocation but
//! one block per 31 items.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::SegQueue;

/// What both halves share.
struct Shared<T> {
    items: SegQueue<T>,
    /// Set by the first push after a drain; cleared by the drain.
    wake_pending: AtomicBool,
    /// The actor's half is gone: pushes are dropped.
    closed: AtomicBool,
}

/// A new queue: the pushing half for the API, the draining half for the actor.
pub fn wake_queue<T>() -> (WakeSender<T>, WakeReceiver<T>) {
    let shared = Arc::new(Shared {
        items: SegQueue::new(),
        wake_pending: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    (WakeSender(Arc::clone(&shared)), WakeReceiver(shared))
}

/// The API's half of a [`wake_queue`].
pub struct WakeSender<T>(Arc<Shared<T>>);

impl<T> Clone for WakeSender<T> {
    fn clone(&self) -> Self {
        WakeSender(Arc::clone(&self.0))
    }
}

impl<T> WakeSender<T> {
    /// Queues `item`; `true` when the caller must send the actor a wake-up message
    /// (the first push since its last drain). An actor gone drops it: `false`.
    #[must_use = "the first push after a drain must wake the actor"]
    pub fn push(&self, item: T) -> bool {
        if self.0.closed.load(Ordering::Relaxed) {
            return false;
        }
        self.0.items.push(item);
        // A swap, not a load: the drain's swap then reads this write and sees the item
        // pushed before it (a plain load could read a stale `true`, and the item would
        // wait for the next message).
        !self.0.wake_pending.swap(true, Ordering::AcqRel)
    }
}

/// The actor's half of a [`wake_queue`].
pub struct WakeReceiver<T>(Arc<Shared<T>>);

impl<T> WakeReceiver<T> {
    /// Takes every item queued so far, oldest first. The flag is cleared first, so a
    /// push racing with the drain either is taken now or sends a new wake-up.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.0.wake_pending.swap(false, Ordering::AcqRel);
        std::iter::from_fn(|| self.0.items.pop())
    }
}

impl<T> Drop for WakeReceiver<T> {
    /// Nothing will take the queue any more: later pushes are dropped at once, and
    /// what is queued is freed with the last sender.
    fn drop(&mut self) {
        self.0.closed.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn only_the_first_push_after_a_drain_asks_for_a_wake_up() {
        let (sender, mut receiver) = wake_queue();
        assert!(sender.push(1));
        assert!(!sender.push(2));
        assert!(!sender.push(3));
        assert_eq!(receiver.drain().collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(receiver.drain().count(), 0);
        assert!(sender.push(4));
        assert!(!sender.push(5));
        assert_eq!(receiver.drain().collect::<Vec<_>>(), [4, 5]);
        drop(receiver);
        assert!(!sender.push(6), "nobody to wake");
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
        // Drained while they push, as the actor does.
        let mut taken = Vec::new();
        let mut drains = 0;
        while taken.len() < PRODUCERS * EACH {
            drains += 1;
            taken.extend(receiver.drain());
            std::thread::yield_now();
        }
        for producer in producers {
            producer.join().expect("a producer panicked");
        }
        assert_eq!(receiver.drain().count(), 0);
        assert_eq!(taken.len(), PRODUCERS * EACH);
        for producer in 0..PRODUCERS {
            let own: Vec<usize> = taken
                .iter()
                .filter(|(from, _)| *from == producer)
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(own, (0..EACH).collect::<Vec<_>>(), "producer {producer}");
        }
        // A wake-up needs the flag clear: at most one per drain, and one before any.
        assert!(wake_ups.load(Ordering::Relaxed) <= drains + 1);
    }
}

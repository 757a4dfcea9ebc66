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
//! The queue is a list of fixed-size chunks: pushes append to the last under a lock
//! held only for the append, and a drain takes the whole list at once. A full chunk is
//! never moved or regrown: the next push starts another, taken from the chunks the
//! actor emptied and gave back. So a queue that grows faster than the actor books it
//! (a host opening scopes back to back) costs a push one chunk allocation every
//! [`CHUNK_ITEMS`] items, never a copy of everything queued so far into fresh pages
//! (a single growing buffer did that at each doubling, and with the page faults behind
//! it that was a third of a scope's cost to its caller), and once the queue has seen
//! its busiest batch, a push allocates nothing.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a busy queue is held between the actor's own wake-ups: the most a
/// boundary pushed while it is held waits (a poll, a reading or a report still takes
/// it first, since every message drains the queue).
pub const HOLD: Duration = Duration::from_millis(1);

/// Items per chunk: small enough that a chunk comes from the allocator's heap, not a
/// mapping of its own (a scope boundary is about a hundred bytes), large enough that
/// starting one is rare.
pub const CHUNK_ITEMS: usize = 256;

/// Emptied chunks kept for the pushers beyond those in use: enough for a burst of
/// thousands of boundaries without allocating, while a backlog far past that (a loop
/// much faster than the actor, for a long time) is given back to the allocator once
/// booked.
const SPARE_CHUNKS: usize = 64;

/// What both halves share, under one lock.
struct Shared<T> {
    /// Full chunks pushed, not yet drained, oldest first.
    full: Vec<Vec<T>>,
    /// The chunk pushes append to (capacity [`CHUNK_ITEMS`], or none before the first).
    filling: Vec<T>,
    /// Emptied chunks, ready to be filled again.
    spare: Vec<Vec<T>>,
    /// Set by the first push after the queue was released; cleared by the release.
    wake_pending: bool,
    /// The actor's half is gone: pushes are dropped.
    closed: bool,
}

impl<T> Shared<T> {
    /// Makes room for one more item in `filling`: a full chunk joins `full`, and a
    /// spare (or new) chunk takes its place.
    fn room_for_one(&mut self) {
        if self.filling.len() < self.filling.capacity() {
            return;
        }
        let next = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_ITEMS));
        let full = std::mem::replace(&mut self.filling, next);
        if !full.is_empty() {
            self.full.push(full);
        }
    }
}

/// A new queue: the pushing half for the API, the draining half for the actor.
pub fn wake_queue<T>() -> (WakeSender<T>, WakeReceiver<T>) {
    let shared = Arc::new(Mutex::new(Shared {
        full: Vec::new(),
        filling: Vec::new(),
        spare: Vec::new(),
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

/// Locks `shared`; a push or a drain cannot leave it half-done, so a poisoned lock's
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
        shared.room_for_one();
        shared.filling.push(item);
        !std::mem::replace(&mut shared.wake_pending, true)
    }
}

/// What one drain took, oldest first, for the actor to book with [`Batch::take_each`].
/// Kept between drains: its emptied chunks go back to the pushers at the next one.
pub struct Batch<T> {
    /// Drained chunks, not yet booked.
    chunks: Vec<Vec<T>>,
    /// Booked chunks, empty, on their way back to the pushers.
    emptied: Vec<Vec<T>>,
}

impl<T> Default for Batch<T> {
    fn default() -> Self {
        Batch {
            chunks: Vec::new(),
            emptied: Vec::new(),
        }
    }
}

impl<T> Batch<T> {
    /// Whether the drain took nothing (or everything it took is booked).
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Vec::is_empty)
    }

    /// Hands every item to `book`, oldest first, and keeps the emptied chunks.
    pub fn take_each(&mut self, mut book: impl FnMut(T)) {
        for mut chunk in self.chunks.drain(..) {
            chunk.drain(..).for_each(&mut book);
            self.emptied.push(chunk);
        }
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
    /// Moves every item queued so far into `batch` (booked: its emptied chunks go back
    /// to the pushers), oldest first. The wake-up flag is left as it is: a wake-up
    /// message sent, or the hold, still takes what is pushed next.
    pub fn drain_into(&mut self, batch: &mut Batch<T>) {
        debug_assert!(batch.is_empty(), "a batch is booked before the next drain");
        batch.chunks.clear();
        let mut surplus = Vec::new();
        {
            let mut shared = lock(&self.shared);
            let room = SPARE_CHUNKS.saturating_sub(shared.spare.len());
            let kept = batch.emptied.len().min(room);
            shared.spare.extend(batch.emptied.drain(..kept));
            surplus.append(&mut batch.emptied);
            std::mem::swap(&mut shared.full, &mut batch.chunks);
            if !shared.filling.is_empty() {
                // The next push takes a spare chunk (or a new one) for itself.
                batch.chunks.push(std::mem::take(&mut shared.filling));
            }
        }
        // Chunks past the spare count are freed outside the lock.
        drop(surplus);
        self.taken_since_wake_up += batch.chunks.iter().map(Vec::len).sum::<usize>();
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
        let mut batch = Batch::default();
        receiver.drain_into(&mut batch);
        let mut items = Vec::new();
        batch.take_each(|item| items.push(item));
        items
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
    fn chunks_are_never_regrown_and_come_back_so_a_steady_queue_allocates_nothing() {
        let (sender, mut receiver) = wake_queue();
        let mut batch = Batch::default();
        // Three and a half chunks a round; returns the addresses of the chunks drained.
        let round = 3 * CHUNK_ITEMS + CHUNK_ITEMS / 2;
        let mut fill_and_drain = |batch: &mut Batch<usize>| {
            for n in 0..round {
                let _ = sender.push(n);
            }
            receiver.drain_into(batch);
            let chunks: Vec<(*const usize, usize)> = batch
                .chunks
                .iter()
                .map(|chunk| (chunk.as_ptr(), chunk.capacity()))
                .collect();
            let mut items = Vec::new();
            batch.take_each(|item| items.push(item));
            assert_eq!(items, (0..round).collect::<Vec<_>>());
            chunks
        };
        let first = fill_and_drain(&mut batch);
        assert_eq!(first.len(), 4);
        assert!(
            first.iter().all(|&(_, capacity)| capacity == CHUNK_ITEMS),
            "no chunk grew past its size: {first:?}"
        );
        // The first round's chunks go back at the second drain, so the second round
        // fills new ones; from the third on, every chunk is one given back.
        let second = fill_and_drain(&mut batch);
        let third = fill_and_drain(&mut batch);
        let seen: std::collections::HashSet<_> = first
            .iter()
            .chain(&second)
            .map(|&(address, _)| address)
            .collect();
        assert!(
            third.iter().all(|(address, _)| seen.contains(address)),
            "a chunk was allocated in a steady round: {third:?}"
        );
    }

    #[test]
    fn a_backlog_past_the_spare_count_is_given_back_to_the_allocator() {
        let (sender, mut receiver) = wake_queue();
        let mut batch = Batch::default();
        for n in 0..(SPARE_CHUNKS + 10) * CHUNK_ITEMS {
            let _ = sender.push(n);
        }
        receiver.drain_into(&mut batch);
        batch.take_each(drop);
        receiver.drain_into(&mut batch);
        assert_eq!(lock(&receiver.shared).spare.len(), SPARE_CHUNKS);
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

//! A queue its readers (actors) take at the start of every message they handle, each
//! woken by one message per batch: how a scope's start and end reach the merger and
//! the energy actor without a message (an allocation, a mailbox slot, a wake-up) per
//! boundary, and with one push for both.
//!
//! An item can be stamped as it is queued ([`WakeSender::push_stamped`]): the clock is
//! read under the queue's lock, so the items are queued in the order of their stamps
//! and a drain takes every item stamped before it began; one stamped later was stamped
//! after the drain let go. A reader that drains before it handles each message (a
//! reading taken before the message was sent) has then booked every boundary stamped
//! before that reading: a boundary is never booked after a reading taken later than
//! it. [`QueueStamp`] is that instant, and only a stamped push makes one.
//!
//! The API pushes and, for each reader whose queue was idle, sends that reader one
//! wake-up message; a reader drains the queue before it handles any message. So a
//! boundary pushed before some message was sent (a poll, a reading, a report) is taken
//! before that message is handled: the order a mailbox gave, at a fraction of the
//! cost. State still moves only to the readers, which book what they drain without any
//! lock held. Every reader reads every item, in the order pushed.
//!
//! A busy queue is held: after a wake-up that found items, a reader keeps its flag set
//! (pushes wake it no more) and sends itself the next wake-up [`HOLD`] later, until one
//! finds nothing new and releases it. A host opening scopes back to back then pays a
//! push per boundary, never a wake-up (a futex and a reschedule, several times the
//! push), and the readers take them in batches; an isolated boundary is still taken at
//! once.
//!
//! The queue is a list of fixed-size chunks: pushes append to the last under a lock
//! held only for the append. A drain seals the chunk being filled and takes every
//! sealed chunk the reader has not read yet, shared (a reference count), so one item
//! serves every reader. A full chunk is never moved or regrown: the next push starts
//! another, taken from the chunks the readers gave back once all had read them. So a
//! queue that grows faster than a reader books it (a host opening scopes back to back)
//! costs a push one chunk every [`CHUNK_ITEMS`] items, never a copy of everything
//! queued so far into fresh pages (a single growing buffer did that at each doubling,
//! and with the page faults behind it that was a third of a scope's cost to its
//! caller), and once the queue has seen its busiest batch, a push allocates nothing.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a busy queue is held between a reader's own wake-ups: the most a
/// boundary pushed while it is held waits (a poll, a reading or a report still takes
/// it first, since every message drains the queue).
pub const HOLD: Duration = Duration::from_millis(1);

/// Items per chunk: small enough that a chunk comes from the allocator's heap, not a
/// mapping of its own (a scope boundary is about 150 bytes), large enough that
/// starting one is rare.
pub const CHUNK_ITEMS: usize = 256;

/// Emptied chunks kept for the pushers beyond those in use: enough for a burst of
/// thousands of boundaries without allocating, while a backlog far past that (a loop
/// much faster than a reader, for a long time) is given back to the allocator once
/// booked.
const SPARE_CHUNKS: usize = 64;

/// The most readers a queue has.
pub const MAX_READERS: usize = 8;

/// What a reader's half keeps in the shared state.
struct ReaderState {
    /// The number of the next sealed chunk it has not taken.
    next_chunk: u64,
    /// Set by the first push after it released the queue; cleared by the release.
    wake_pending: bool,
    /// Its half is still there (a dropped reader holds no chunk back).
    open: bool,
}

/// What every half shares, under one lock.
struct Shared<T> {
    /// Sealed chunks some open reader has not taken yet, oldest first.
    sealed: VecDeque<Arc<Vec<T>>>,
    /// The number of `sealed`'s first chunk (chunks are numbered as sealed).
    first_chunk: u64,
    /// The chunk pushes append to (capacity [`CHUNK_ITEMS`], or none yet).
    filling: Vec<T>,
    /// Emptied chunks, ready to be filled again.
    spare: Vec<Vec<T>>,
    /// One per reader, by index.
    readers: Vec<ReaderState>,
}

impl<T> Shared<T> {
    /// Makes room for one more item in `filling`: a full chunk is sealed, and a spare
    /// (or new) chunk takes its place.
    fn room_for_one(&mut self) {
        if self.filling.len() < self.filling.capacity() {
            return;
        }
        self.seal();
        self.filling = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(CHUNK_ITEMS));
    }

    /// Seals the chunk being filled, if it holds anything: readers can take it now.
    fn seal(&mut self) {
        if !self.filling.is_empty() {
            let sealed = std::mem::take(&mut self.filling);
            self.sealed.push_back(Arc::new(sealed));
        }
    }

    /// The number one past the last sealed chunk.
    fn end_chunk(&self) -> u64 {
        self.first_chunk + self.sealed.len() as u64
    }

    /// Lets go of the sealed chunks every open reader has taken (they are freed, or
    /// given back, with the readers' last references).
    fn release_read_chunks(&mut self) {
        let end = self.end_chunk();
        let oldest_unread = self
            .readers
            .iter()
            .filter(|reader| reader.open)
            .map(|reader| reader.next_chunk)
            .min()
            .unwrap_or(end);
        while self.first_chunk < oldest_unread && self.sealed.pop_front().is_some() {
            self.first_chunk += 1;
        }
    }
}

/// A new queue with `N` readers (1 to [`MAX_READERS`]): the pushing half for the
/// API, and one draining half per reader, in order (a push's [`Wakes`] name them by
/// that index).
pub fn wake_queue<T, const N: usize>() -> (WakeSender<T>, [WakeReceiver<T>; N]) {
    const {
        assert!(
            N >= 1 && N <= MAX_READERS,
            "a wake queue has 1 to 8 readers"
        )
    };
    let shared = Arc::new(Mutex::new(Shared {
        sealed: VecDeque::new(),
        first_chunk: 0,
        filling: Vec::new(),
        spare: Vec::new(),
        readers: (0..N)
            .map(|_| ReaderState {
                next_chunk: 0,
                wake_pending: false,
                open: true,
            })
            .collect(),
    }));
    let receivers = std::array::from_fn(|index| WakeReceiver {
        shared: Arc::clone(&shared),
        index,
        taken_since_wake_up: 0,
    });
    (WakeSender(shared), receivers)
}

/// Locks `shared`; a push or a drain cannot leave it half-done, so a poisoned lock's
/// contents are still whole.
fn lock<T>(shared: &Mutex<Shared<T>>) -> std::sync::MutexGuard<'_, Shared<T>> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The readers a push must wake (the first push since each released the queue), by
/// their index in [`wake_queue`]'s list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use = "the first push after a release must wake the reader"]
pub struct Wakes(u8);

impl Wakes {
    /// Whether reader `index` must be sent a wake-up message.
    pub fn includes(self, index: usize) -> bool {
        index < MAX_READERS && self.0 & (1 << index) != 0
    }
}

/// The instant an item was stamped as it was queued ([`WakeSender::push_stamped`]),
/// under the queue's lock: no item of the queue stamped earlier is queued after it,
/// and a drain that began later takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueStamp(Instant);

impl QueueStamp {
    /// The monotonic instant.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// A stamp made up by a test (as if `at` had been read under the lock).
    #[cfg(test)]
    pub(crate) fn for_tests(at: Instant) -> Self {
        QueueStamp(at)
    }
}

/// The API's half of a [`wake_queue`].
pub struct WakeSender<T>(Arc<Mutex<Shared<T>>>);

impl<T> Clone for WakeSender<T> {
    fn clone(&self) -> Self {
        WakeSender(Arc::clone(&self.0))
    }
}

impl<T> WakeSender<T> {
    /// Queues `item` for every reader; the readers the caller must send a wake-up
    /// message. With every reader gone it is dropped, and wakes none.
    pub fn push(&self, item: T) -> Wakes {
        self.push_stamped(|_| (item, ())).0
    }

    /// Reads the clock under the queue's lock and queues the item `make` builds with
    /// that stamp (kept short: every push and drain waits on it), returning what else
    /// `make` returned; the readers the caller must send a wake-up message. With every
    /// reader gone nothing is queued: `make` still runs, its item is dropped and no
    /// reader is woken.
    pub fn push_stamped<R>(&self, make: impl FnOnce(QueueStamp) -> (T, R)) -> (Wakes, R) {
        let mut shared = lock(&self.0);
        let (item, made) = make(QueueStamp(Instant::now()));
        if !shared.readers.iter().any(|reader| reader.open) {
            return (Wakes::default(), made);
        }
        shared.room_for_one();
        shared.filling.push(item);
        let mut wakes = 0;
        for (index, reader) in shared.readers.iter_mut().enumerate() {
            if reader.open && !std::mem::replace(&mut reader.wake_pending, true) {
                wakes |= 1 << index;
            }
        }
        (Wakes(wakes), made)
    }
}

/// What one drain took, oldest first, for the reader to book with [`Batch::take_each`].
/// Kept between drains: its chunks go back at the next one.
pub struct Batch<T> {
    /// Chunks taken, not yet booked.
    unread: Vec<Arc<Vec<T>>>,
    /// Booked chunks, held until the next drain gives them back.
    read: Vec<Arc<Vec<T>>>,
}

impl<T> Default for Batch<T> {
    fn default() -> Self {
        Batch {
            unread: Vec::new(),
            read: Vec::new(),
        }
    }
}

impl<T> Batch<T> {
    /// Whether there is nothing left to book (a sealed chunk is never empty).
    pub fn is_empty(&self) -> bool {
        self.unread.is_empty()
    }

    /// Hands every item to `book`, oldest first (other readers read the same items:
    /// `book` takes what it keeps by cloning).
    pub fn take_each(&mut self, mut book: impl FnMut(&T)) {
        for chunk in self.unread.drain(..) {
            chunk.iter().for_each(&mut book);
            self.read.push(chunk);
        }
    }
}

/// One reader's half of a [`wake_queue`].
pub struct WakeReceiver<T> {
    shared: Arc<Mutex<Shared<T>>>,
    /// Its index among the queue's readers.
    index: usize,
    /// Items drained since the last wake-up message was handled.
    taken_since_wake_up: usize,
}

/// What the reader does after handling a wake-up message ([`WakeReceiver::woken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a held queue needs the next wake-up; a released one a last drain"]
pub enum AfterWakeUp {
    /// Items came since the last wake-up: the queue stays held (pushes wake this
    /// reader no more), and the reader sends itself the next wake-up [`HOLD`] from now.
    Hold,
    /// Nothing came: the queue is released (the next push wakes this reader), and the
    /// reader drains it once more, for pushes that raced the release.
    Released,
}

impl<T> WakeReceiver<T> {
    /// Moves every item queued since this reader's last drain into `batch`, oldest
    /// first, after giving back the chunks of the batch before. The wake-up flag is
    /// left as it is: a wake-up message sent, or the hold, still takes what is pushed
    /// next.
    pub fn drain_into(&mut self, batch: &mut Batch<T>) {
        debug_assert!(batch.is_empty(), "a batch is booked before the next drain");
        batch.unread.clear();
        // Chunks every reader is done with come back emptied; their items are dropped
        // here, outside the lock. A chunk another reader still holds is its to give.
        let mut emptied: Vec<Vec<T>> = batch
            .read
            .drain(..)
            .filter_map(|chunk| Arc::try_unwrap(chunk).ok())
            .collect();
        emptied.iter_mut().for_each(Vec::clear);
        let mut surplus = Vec::new();
        {
            let mut shared = lock(&self.shared);
            let room = SPARE_CHUNKS.saturating_sub(shared.spare.len());
            let kept = emptied.len().min(room);
            shared.spare.extend(emptied.drain(..kept));
            surplus.append(&mut emptied);
            shared.seal();
            let reader = &shared.readers[self.index];
            let skip = usize::try_from(reader.next_chunk.saturating_sub(shared.first_chunk))
                .unwrap_or(usize::MAX);
            batch
                .unread
                .extend(shared.sealed.iter().skip(skip).map(Arc::clone));
            let end = shared.end_chunk();
            shared.readers[self.index].next_chunk = end;
            shared.release_read_chunks();
        }
        // Chunks past the spare count are freed outside the lock.
        drop(surplus);
        self.taken_since_wake_up += batch.unread.iter().map(|chunk| chunk.len()).sum::<usize>();
    }

    /// Called for every wake-up message (the pushers' and the reader's own), after
    /// the drain that starts each message: holds the queue while items keep coming,
    /// releases it once a wake-up finds none.
    pub fn woken(&mut self) -> AfterWakeUp {
        if std::mem::take(&mut self.taken_since_wake_up) > 0 {
            return AfterWakeUp::Hold;
        }
        // Cleared before the caller's last drain: a push racing with it is either
        // taken by that drain or finds the flag clear and sends a new wake-up.
        lock(&self.shared).readers[self.index].wake_pending = false;
        AfterWakeUp::Released
    }
}

impl<T> Drop for WakeReceiver<T> {
    /// Nothing will take the queue for this reader any more: it holds no chunk back,
    /// and once every reader is gone pushes are dropped at once (what is queued is
    /// freed with the last sender).
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        shared.readers[self.index].open = false;
        shared.release_read_chunks();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A queue with one reader.
    fn single<T>() -> (WakeSender<T>, WakeReceiver<T>) {
        let (sender, [reader]) = wake_queue();
        (sender, reader)
    }

    /// A queue with two readers.
    fn pair<T>() -> (WakeSender<T>, WakeReceiver<T>, WakeReceiver<T>) {
        let (sender, [first, second]) = wake_queue();
        (sender, first, second)
    }

    /// What one drain takes (its chunks are dropped, not given back).
    fn drained<T: Clone>(receiver: &mut WakeReceiver<T>) -> Vec<T> {
        let mut batch = Batch::default();
        receiver.drain_into(&mut batch);
        let mut items = Vec::new();
        batch.take_each(|item| items.push(item.clone()));
        items
    }

    /// Whether a push woke reader 0.
    fn woke_first(wakes: Wakes) -> bool {
        wakes.includes(0)
    }

    #[test]
    fn a_busy_queue_is_held_until_a_wake_up_finds_nothing_new() {
        let (sender, mut receiver) = single();
        assert!(woke_first(sender.push(1)));
        assert!(!woke_first(sender.push(2)));
        // The pushers' wake-up: items came, so the queue is held.
        assert_eq!(drained(&mut receiver), [1, 2]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        assert!(!woke_first(sender.push(3)), "held: pushes wake nothing");
        // The actor's own wake-up: one more came, still held.
        assert_eq!(drained(&mut receiver), [3]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        // The next finds nothing: released, and the next push wakes the actor.
        assert_eq!(drained(&mut receiver).len(), 0);
        assert_eq!(receiver.woken(), AfterWakeUp::Released);
        assert!(woke_first(sender.push(4)));
        assert!(!woke_first(sender.push(5)));
        assert_eq!(drained(&mut receiver), [4, 5]);
        drop(receiver);
        assert_eq!(sender.push(6), Wakes::default(), "nobody to wake");
    }

    #[test]
    fn every_reader_reads_every_item_in_order_and_is_woken_on_its_own() {
        let (sender, mut first, mut second) = pair();
        let wakes = sender.push(1);
        assert!(wakes.includes(0) && wakes.includes(1), "both were idle");
        assert_eq!(drained(&mut first), [1]);
        assert_eq!(first.woken(), AfterWakeUp::Hold);
        let wakes = sender.push(2);
        assert!(!wakes.includes(0), "the first holds the queue");
        assert!(!wakes.includes(1), "the second has a wake-up pending");
        // The second reads both, though the first took one before the other came.
        assert_eq!(drained(&mut second), [1, 2]);
        assert_eq!(drained(&mut first), [2]);
        // The second releases (it found items: held once, then released).
        assert_eq!(second.woken(), AfterWakeUp::Hold);
        assert_eq!(drained(&mut second).len(), 0);
        assert_eq!(second.woken(), AfterWakeUp::Released);
        let wakes = sender.push(3);
        assert!(!wakes.includes(0) && wakes.includes(1));
        assert_eq!(drained(&mut second), [3]);
        assert_eq!(drained(&mut first), [3]);
        assert!(!wakes.includes(2) && !wakes.includes(MAX_READERS + 1));
    }

    #[test]
    fn chunks_are_never_regrown_and_come_back_once_every_reader_read_them() {
        let (sender, mut first, mut second) = pair();
        let (mut first_batch, mut second_batch) = (Batch::default(), Batch::default());
        // Three and a half chunks a round, read by both; the addresses of the chunks.
        let round = 3 * CHUNK_ITEMS + CHUNK_ITEMS / 2;
        let mut fill_and_drain =
            |first_batch: &mut Batch<usize>, second_batch: &mut Batch<usize>| {
                for n in 0..round {
                    let _ = sender.push(n);
                }
                let mut chunks = Vec::new();
                for (receiver, batch) in [(&mut first, first_batch), (&mut second, second_batch)] {
                    receiver.drain_into(batch);
                    chunks = batch
                        .unread
                        .iter()
                        .map(|chunk| (chunk.as_ptr(), chunk.capacity()))
                        .collect();
                    let mut items = Vec::new();
                    batch.take_each(|item| items.push(*item));
                    assert_eq!(items, (0..round).collect::<Vec<_>>());
                }
                chunks
            };
        let one = fill_and_drain(&mut first_batch, &mut second_batch);
        assert_eq!(one.len(), 4);
        assert!(
            one.iter().all(|&(_, capacity)| capacity == CHUNK_ITEMS),
            "no chunk grew past its size: {one:?}"
        );
        // The first round's chunks come back when the second reader gives them back,
        // at its second drain, so the second round fills new ones; from the third on,
        // every chunk is one given back.
        let two = fill_and_drain(&mut first_batch, &mut second_batch);
        let three = fill_and_drain(&mut first_batch, &mut second_batch);
        let seen: HashSet<_> = one
            .iter()
            .chain(&two)
            .map(|&(address, _)| address)
            .collect();
        assert!(
            three.iter().all(|(address, _)| seen.contains(address)),
            "a chunk was allocated in a steady round: {three:?}"
        );
    }

    #[test]
    fn a_chunk_is_kept_until_the_slowest_reader_took_it() {
        let (sender, mut first, mut second) = pair();
        for n in 0..3 * CHUNK_ITEMS {
            let _ = sender.push(n);
        }
        assert_eq!(drained(&mut first).len(), 3 * CHUNK_ITEMS);
        assert_eq!(
            lock(&first.shared).sealed.len(),
            3,
            "the second has not read them"
        );
        assert_eq!(drained(&mut second).len(), 3 * CHUNK_ITEMS);
        assert_eq!(lock(&first.shared).sealed.len(), 0);
    }

    #[test]
    fn a_dropped_reader_holds_nothing_back() {
        let (sender, mut first, second) = pair();
        drop(second);
        for n in 0..2 * CHUNK_ITEMS {
            let _ = sender.push(n);
        }
        assert_eq!(drained(&mut first).len(), 2 * CHUNK_ITEMS);
        assert_eq!(lock(&first.shared).sealed.len(), 0);
        assert!(!sender.push(1).includes(1), "a dropped reader is not woken");
    }

    #[test]
    fn a_backlog_past_the_spare_count_is_given_back_to_the_allocator() {
        let (sender, mut receiver) = single();
        let mut batch = Batch::default();
        for n in 0..(SPARE_CHUNKS + 10) * CHUNK_ITEMS {
            let _ = sender.push(n);
        }
        receiver.drain_into(&mut batch);
        batch.take_each(|_| {});
        receiver.drain_into(&mut batch);
        assert_eq!(lock(&receiver.shared).spare.len(), SPARE_CHUNKS);
    }

    #[test]
    fn a_push_racing_the_release_is_taken_by_the_last_drain() {
        let (sender, mut receiver) = single();
        assert!(woke_first(sender.push(1)));
        assert_eq!(drained(&mut receiver), [1]);
        assert_eq!(receiver.woken(), AfterWakeUp::Hold);
        // The next wake-up's drain finds nothing; a push lands before the release and
        // sends no wake-up, since the queue is still held.
        assert_eq!(drained(&mut receiver).len(), 0);
        assert!(!woke_first(sender.push(2)));
        assert_eq!(receiver.woken(), AfterWakeUp::Released);
        assert_eq!(drained(&mut receiver), [2]);
        assert!(woke_first(sender.push(3)), "released: the next push wakes");
    }

    #[test]
    fn stamps_are_in_queue_order_and_a_drain_takes_every_item_stamped_before_it_began() {
        const PRODUCERS: usize = 4;
        const EACH: usize = 5_000;
        let (sender, mut receiver) = single::<QueueStamp>();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|_| {
                let sender = sender.clone();
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        let _ = sender.push_stamped(|stamp| (stamp, ()));
                        if n % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        // Each drain: the instant before it began, and what it took.
        let mut drains: Vec<(Instant, Vec<QueueStamp>)> = Vec::new();
        let mut taken = 0;
        while taken < PRODUCERS * EACH {
            let began = Instant::now();
            let items = drained(&mut receiver);
            taken += items.len();
            drains.push((began, items));
            std::thread::yield_now();
        }
        for producer in producers {
            producer.join().expect("a producer panicked");
        }
        let all: Vec<QueueStamp> = drains.iter().flat_map(|(_, items)| items.clone()).collect();
        assert!(
            all.windows(2).all(|pair| pair[0] <= pair[1]),
            "out of stamp order"
        );
        for (index, (began, _)) in drains.iter().enumerate() {
            let late = drains[index + 1..]
                .iter()
                .flat_map(|(_, items)| items)
                .filter(|stamp| stamp.instant() < *began)
                .count();
            assert_eq!(
                late, 0,
                "items stamped before drain {index} began came after it"
            );
        }
    }

    #[test]
    fn concurrent_pushes_and_readers_lose_nothing_and_keep_each_producers_order() {
        const PRODUCERS: usize = 8;
        const EACH: usize = 5_000;
        let (sender, first, second) = pair();
        let wake_ups = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|producer| {
                let (sender, wake_ups) = (sender.clone(), Arc::clone(&wake_ups));
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        let wakes = sender.push((producer, n));
                        for (index, count) in wake_ups.iter().enumerate() {
                            if wakes.includes(index) {
                                count.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        // Each reader drains while they push, as an actor does for each wake-up: a
        // drain, then held or released (and a last drain), keeping its batch.
        let readers: Vec<_> = [first, second]
            .into_iter()
            .map(|mut receiver| {
                std::thread::spawn(move || {
                    let mut batch = Batch::default();
                    let (mut taken, mut releases) = (Vec::new(), 0);
                    let mut drain = |receiver: &mut WakeReceiver<(usize, usize)>,
                                     taken: &mut Vec<_>| {
                        receiver.drain_into(&mut batch);
                        batch.take_each(|item| taken.push(*item));
                    };
                    while taken.len() < PRODUCERS * EACH {
                        drain(&mut receiver, &mut taken);
                        if receiver.woken() == AfterWakeUp::Released {
                            releases += 1;
                            drain(&mut receiver, &mut taken);
                        }
                        std::thread::yield_now();
                    }
                    (taken, releases)
                })
            })
            .collect();
        for producer in producers {
            producer.join().expect("a producer panicked");
        }
        for (index, reader) in readers.into_iter().enumerate() {
            let (taken, releases) = reader.join().expect("a reader panicked");
            assert_eq!(taken.len(), PRODUCERS * EACH, "reader {index}");
            for producer in 0..PRODUCERS {
                let own: Vec<usize> = taken
                    .iter()
                    .filter(|(from, _)| *from == producer)
                    .map(|(_, n)| *n)
                    .collect();
                assert_eq!(
                    own,
                    (0..EACH).collect::<Vec<_>>(),
                    "reader {index}, producer {producer}"
                );
            }
            // A wake-up needs the flag clear: at most one per release, and one before any.
            assert!(
                wake_ups[index].load(Ordering::Relaxed) <= releases + 1,
                "reader {index}"
            );
        }
    }
}

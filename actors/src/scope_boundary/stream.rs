//! The one way a scope boundary reaches the merger: [`ScopeStream`] reads its instant
//! and sends it on the merger's scope stream as one step, under one lock, so the stream
//! holds boundaries in the order of their instants; the merger takes them in that order
//! and sends them on to the energy stage in it.
//!
//! That order is what lets the energy stage call a step's figures final: it settles a
//! step once every meter has read past its end, and its end is booked after every
//! boundary stamped before it (they were sent, and so taken, first). Readings reach the
//! energy stage straight from the samplers, ahead of boundaries stamped before them;
//! the account divides those intervals again as each boundary comes
//! (`wattline_energy`'s late boundaries).
//!
//! The stream is one `tokio::sync::mpsc` channel the merger owns, not a message per
//! boundary into its mailbox: a ractor cast boxes each message and wakes the actor
//! whenever it had caught up, which about doubled what a scope costs the process
//! (`benches/scope_cost.rs`; the figures are in `CHANGELOG.md`). The merger takes the
//! stream a batch at a time ([`pump`](crate::merger::actor::pump)), into its mailbox, behind what it holds.
//!
//! A [`Stamp`] is made here only. The instants in the past (the window's close and the
//! ends made at it) are no stamps: the close is announced first
//! ([`ScopeBoundary::WindowCloses`]), so the energy stage settles no step it reaches.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use chrono::{DateTime, Utc};
use ractor::RpcReplyPort;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::wall_clock::BoundaryClock;
use super::{ScopeBoundary, Stamp, WallNanos};
use wattline_model::report::EnergyReport;

/// What the scope stream carries to the merger, in the order sent: boundaries, and what
/// must come after the boundaries sent before it.
pub enum StreamItem {
    /// An Agent scope's start or end, or the window's close: its event goes out and it
    /// goes on to the energy actor.
    Boundary(ScopeBoundary),
    /// Ends every live Agent scope at the window's close, `at` (announced before by a
    /// [`ScopeBoundary::WindowCloses`]), and sends the ends on to the energy actor.
    EndLiveScopes {
        /// The window's close.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
    },
    /// The energy report as of `at`, asked of the energy actor once every boundary
    /// before it is sent on; the energy actor answers `reply`.
    Report {
        /// The report's instant.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
        /// The run's final report.
        final_report: bool,
        /// Where the energy actor sends the report.
        reply: RpcReplyPort<EnergyReport>,
    },
    /// Answered once every boundary before it has its event written.
    Written(RpcReplyPort<()>),
    /// Emits no more marks and ends every live Agent scope at `at` (shutdown), sending
    /// the ends on to the energy actor; answered once any poll in flight is done and
    /// the ends are sent.
    Close {
        /// When the scopes end.
        at: Stamp,
        /// The same instant on the wall clock.
        wall: WallNanos,
        /// Answered once the ends are sent on.
        reply: RpcReplyPort<()>,
    },
}

/// A new scope stream: the senders' half, and the half the merger takes from
/// ([`pump`](crate::merger::actor::pump)).
pub(crate) fn scope_stream() -> (ScopeStream, UnboundedReceiver<StreamItem>) {
    let (sender, receiver) = unbounded_channel();
    let stream = ScopeStream {
        sender: Mutex::new(sender),
        clock: BoundaryClock::default(),
        #[cfg(feature = "test-support")]
        stall: super::stall::BoundaryStall::default(),
    };
    (stream, receiver)
}

/// The senders' half of the scope stream (see the module): the stream is reached only
/// under the lock the stamps are read under.
pub(crate) struct ScopeStream {
    sender: Mutex<UnboundedSender<StreamItem>>,
    /// Each stamp's instant on the wall clock.
    clock: BoundaryClock,
    /// Holds the next stamp's caller right after its instant is read (tests).
    #[cfg(feature = "test-support")]
    stall: super::stall::BoundaryStall,
}

impl ScopeStream {
    /// Stamps now and sends the item `make` builds with the stamp (and the same
    /// instant on the wall clock) before another can be stamped; returns what else
    /// `make` returned. Kept short: every boundary waits on the lock. A merger that is
    /// gone takes nothing (the pipeline is shutting down).
    pub(crate) fn send_stamped<R>(
        &self,
        make: impl FnOnce(Stamp, WallNanos) -> (StreamItem, R),
    ) -> R {
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let (stamp, wall) = self.read_clock();
        let (item, made) = make(stamp, wall);
        let _ = sender.send(item);
        made
    }

    /// Sends `item`, which carries no stamp: a boundary in the past (announced before,
    /// see the module), or what needs only to come after what was sent before it.
    pub(crate) fn send(&self, item: StreamItem) {
        let sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = sender.send(item);
    }

    /// A stamp that sends nothing: whatever is sent after it comes behind every boundary
    /// stamped before it (a report taken as of this instant).
    pub(crate) fn stamp(&self) -> (Stamp, WallNanos) {
        let _sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        self.read_clock()
    }

    /// The clock, read under the lock.
    fn read_clock(&self) -> (Stamp, WallNanos) {
        let at = Instant::now();
        let wall = self.clock.wall_at(at);
        #[cfg(feature = "test-support")]
        self.stall.after_stamp();
        (Stamp(at), wall)
    }

    /// The next stamp's caller stops for `pause` right after its instant is read.
    #[cfg(feature = "test-support")]
    pub(crate) fn stall_next(&self, pause: std::time::Duration) {
        self.stall.arm(pause);
    }

    /// Whether the stall armed is still to come: no stamp was read since.
    #[cfg(feature = "test-support")]
    pub(crate) fn stall_armed(&self) -> bool {
        self.stall.is_armed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;

    /// Sends a start (`start`) or an end, stamped.
    fn send(stream: &ScopeStream, start: bool) {
        stream.send_stamped(|at, wall| {
            let uuid = Uuid::now_v7();
            let boundary = if start {
                ScopeBoundary::plain_start(uuid, at, wall)
            } else {
                ScopeBoundary::plain_end(uuid, Vec::new(), at, wall)
            };
            (StreamItem::Boundary(boundary), ())
        });
    }

    /// The instant of every boundary on the stream so far, in the order sent.
    fn instants(receiver: &mut UnboundedReceiver<StreamItem>) -> Vec<Instant> {
        std::iter::from_fn(|| receiver.try_recv().ok())
            .filter_map(|item| match item {
                StreamItem::Boundary(ScopeBoundary::Started { at, .. }) => Some(at.instant()),
                StreamItem::Boundary(ScopeBoundary::Ended { at, .. }) => Some(at.instant()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn boundaries_from_many_threads_are_sent_in_the_order_of_their_stamps() {
        const THREADS: usize = 8;
        const EACH: usize = 2_000;
        let (stream, mut receiver) = scope_stream();
        let stream = Arc::new(stream);
        let senders: Vec<_> = (0..THREADS)
            .map(|_| {
                let stream = Arc::clone(&stream);
                std::thread::spawn(move || {
                    for n in 0..EACH {
                        send(&stream, n % 2 == 0);
                        if n % 64 == 0 {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        for sender in senders {
            sender.join().expect("a sender panicked");
        }
        let sent = instants(&mut receiver);
        assert_eq!(sent.len(), THREADS * EACH, "every boundary was sent");
        let out_of_order = sent.windows(2).filter(|pair| pair[0] > pair[1]).count();
        assert_eq!(out_of_order, 0, "boundaries out of stamp order");
    }

    #[cfg(feature = "test-support")]
    #[test]
    fn a_sender_stalled_after_its_stamp_is_not_overtaken() {
        // The first sender stalls right after reading its instant (a thread preempted
        // there); one that comes meanwhile stamps and sends only after it.
        let (stream, mut receiver) = scope_stream();
        let stream = Arc::new(stream);
        stream.stall_next(std::time::Duration::from_millis(200));
        let stalled = {
            let stream = Arc::clone(&stream);
            std::thread::spawn(move || send(&stream, true))
        };
        while stream.stall_armed() {
            std::thread::yield_now();
        }
        send(&stream, false);
        stalled.join().expect("the stalled sender");
        let sent = instants(&mut receiver);
        assert_eq!(sent.len(), 2);
        assert!(sent[0] < sent[1], "the stalled boundary was overtaken");
    }
}

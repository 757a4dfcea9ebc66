//! The bounded queue between the recording calls and the one delivery task: its
//! capacity (the negotiated pending submissions plus one in flight), the operations
//! frozen to bytes at admission, how far delivery has got, why it stopped, and the
//! SDK-local delivery totals. Pure state; [`crate::delivery`] drives it.

use std::collections::VecDeque;

use nemo_relay_worker_proto::v1::DiagnosticReceipt;
use tokio::sync::oneshot;

use crate::error::DiagnosticDeliveryError;

/// SDK-local delivery totals, never reset, never replayed as host observations. They
/// are not host occurrence counts: use an authorised host reader for those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiagnosticDeliveryStats {
    /// Submissions lost at admission (queue full or invalid input) or left queued
    /// when delivery stopped.
    pub dropped: u64,
    /// Submissions the host refused, whether or not their sequence was consumed.
    pub rejected: u64,
    /// Submissions whose acceptance could not be confirmed.
    pub uncertain: u64,
    /// Submissions the host confirmed with a receipt (recorded, registered, closed
    /// or disabled).
    pub delivered: u64,
}

/// What a queued operation is, for checking its receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OperationKind {
    Register,
    Record,
    CloseComponent,
    CloseSession,
}

/// The answer a waiting caller gets.
pub(crate) type Answer = Result<DiagnosticReceipt, DiagnosticDeliveryError>;

/// One admitted operation: its encoded `DiagnosticSubmission.operation` field,
/// frozen at admission, and who waits for it (nobody, for a record).
#[derive(Debug)]
pub(crate) struct Frozen {
    pub(crate) kind: OperationKind,
    pub(crate) bytes: Vec<u8>,
    pub(crate) answer: Option<oneshot::Sender<Answer>>,
}

/// Why delivery stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Closed by the worker, or stopped by a terminal host refusal.
    Closed,
    /// An acceptance was uncertain: the session's sequence is unknown, so nothing
    /// more may be sent in it.
    Fenced,
}

/// How one delivered operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    Delivered,
    Rejected,
    Uncertain,
}

#[derive(Debug)]
pub(crate) struct Queue {
    capacity: usize,
    waiting: VecDeque<Frozen>,
    in_flight: bool,
    reserved: usize,
    /// False once the worker began closing: nothing new is admitted.
    accepting: bool,
    /// True once the worker asked to close (a second close is a no-op).
    closed_by_worker: bool,
    /// True once every handle is gone: the task drains what is left and ends.
    abandoned: bool,
    stop: Option<Stop>,
    admitted: u64,
    settled: u64,
    stats: DiagnosticDeliveryStats,
}

impl Queue {
    /// A queue for `pending` submissions plus one in flight.
    pub(crate) fn new(pending: usize) -> Queue {
        Queue {
            capacity: pending + 1,
            waiting: VecDeque::new(),
            in_flight: false,
            reserved: 0,
            accepting: true,
            closed_by_worker: false,
            abandoned: false,
            stop: None,
            admitted: 0,
            settled: 0,
            stats: DiagnosticDeliveryStats::default(),
        }
    }

    /// Holds a slot for an operation about to be frozen: `Closed` once delivery
    /// stopped or the worker is closing, `Full` (counted dropped) when queued,
    /// in-flight and held slots fill the capacity.
    pub(crate) fn reserve(&mut self) -> Result<(), DiagnosticDeliveryError> {
        if !self.accepting || self.stop.is_some() {
            return Err(DiagnosticDeliveryError::Closed);
        }
        if self.waiting.len() + usize::from(self.in_flight) + self.reserved >= self.capacity {
            self.stats.dropped += 1;
            return Err(DiagnosticDeliveryError::Full);
        }
        self.reserved += 1;
        Ok(())
    }

    /// Gives a held slot back; `lost` counts the submission as dropped (invalid).
    pub(crate) fn release(&mut self, lost: bool) {
        self.reserved = self.reserved.saturating_sub(1);
        if lost {
            self.lose();
        }
    }

    /// Counts a submission lost at admission (invalid input).
    pub(crate) fn lose(&mut self) {
        self.stats.dropped += 1;
    }

    /// Queues `frozen` in its held slot; `Closed` (the slot given back) when
    /// delivery stopped meanwhile.
    pub(crate) fn push(&mut self, frozen: Frozen) -> Result<(), Frozen> {
        self.reserved = self.reserved.saturating_sub(1);
        self.push_unreserved(frozen)
    }

    /// Queues `frozen` without a slot (the session's close, once nothing else is
    /// admitted).
    pub(crate) fn push_unreserved(&mut self, frozen: Frozen) -> Result<(), Frozen> {
        if self.stop.is_some() {
            self.stats.dropped += 1;
            return Err(frozen);
        }
        self.waiting.push_back(frozen);
        self.admitted += 1;
        Ok(())
    }

    /// The next operation to send, now in flight; `None` when there is none or
    /// delivery stopped.
    pub(crate) fn next(&mut self) -> Option<Frozen> {
        if self.stop.is_some() {
            return None;
        }
        let next = self.waiting.pop_front()?;
        self.in_flight = true;
        Some(next)
    }

    /// The in-flight operation ended as `how`.
    pub(crate) fn settle(&mut self, how: Settled) {
        self.in_flight = false;
        self.settled += 1;
        match how {
            Settled::Delivered => self.stats.delivered += 1,
            Settled::Rejected => self.stats.rejected += 1,
            Settled::Uncertain => self.stats.uncertain += 1,
        }
    }

    /// Stops delivery (the first reason stays) and hands back what was still
    /// queued, counted as dropped.
    pub(crate) fn stop(&mut self, why: Stop) -> Vec<Frozen> {
        self.stop.get_or_insert(why);
        self.accepting = false;
        let left: Vec<Frozen> = self.waiting.drain(..).collect();
        self.stats.dropped += left.len() as u64;
        self.settled += left.len() as u64;
        left
    }

    /// Begins the worker's close; false when it had already begun.
    pub(crate) fn begin_close(&mut self) -> bool {
        self.accepting = false;
        !std::mem::replace(&mut self.closed_by_worker, true)
    }

    /// Every handle is gone.
    pub(crate) fn abandon(&mut self) {
        self.accepting = false;
        self.abandoned = true;
    }

    /// True when the delivery task has nothing left to do.
    pub(crate) fn finished(&self) -> bool {
        self.stop.is_some() || (self.abandoned && self.waiting.is_empty())
    }

    pub(crate) fn stopped(&self) -> Option<Stop> {
        self.stop
    }

    /// Operations admitted so far (a flush waits until as many have settled).
    pub(crate) fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Operations settled or dropped at a stop so far.
    pub(crate) fn settled(&self) -> u64 {
        self.settled
    }

    pub(crate) fn stats(&self) -> DiagnosticDeliveryStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frozen(byte: u8) -> Frozen {
        Frozen {
            kind: OperationKind::Record,
            bytes: vec![byte],
            answer: None,
        }
    }

    fn admit(queue: &mut Queue, byte: u8) -> Result<(), DiagnosticDeliveryError> {
        queue.reserve()?;
        queue
            .push(frozen(byte))
            .map_err(|_| DiagnosticDeliveryError::Closed)
    }

    #[test]
    fn capacity_is_pending_plus_one_in_flight_and_overflow_is_full_and_dropped() {
        let mut queue = Queue::new(2);
        for byte in 0..3 {
            assert_eq!(admit(&mut queue, byte), Ok(()), "slot {byte}");
        }
        assert_eq!(admit(&mut queue, 9), Err(DiagnosticDeliveryError::Full));
        // One goes in flight: still three outstanding, still full.
        let first = queue.next().unwrap();
        assert_eq!(first.bytes, vec![0]);
        assert_eq!(admit(&mut queue, 9), Err(DiagnosticDeliveryError::Full));
        // It settles: one slot frees.
        queue.settle(Settled::Delivered);
        assert_eq!(admit(&mut queue, 3), Ok(()));
        assert_eq!(admit(&mut queue, 9), Err(DiagnosticDeliveryError::Full));
        // A held slot counts too.
        queue.next().unwrap();
        queue.settle(Settled::Delivered);
        queue.reserve().unwrap();
        assert_eq!(admit(&mut queue, 9), Err(DiagnosticDeliveryError::Full));
        queue.release(true);
        assert_eq!(
            queue.stats(),
            DiagnosticDeliveryStats {
                dropped: 5,
                rejected: 0,
                uncertain: 0,
                delivered: 2
            }
        );
        // First in, first out.
        let order: Vec<u8> = std::iter::from_fn(|| queue.next().map(|f| f.bytes[0])).collect();
        assert_eq!(order, vec![2, 3]);
    }

    #[test]
    fn a_stop_drops_what_is_queued_and_closes_admission() {
        let mut queue = Queue::new(4);
        for byte in 0..3 {
            admit(&mut queue, byte).unwrap();
        }
        queue.next().unwrap();
        queue.settle(Settled::Uncertain);
        let left = queue.stop(Stop::Fenced);
        assert_eq!(left.len(), 2);
        // A later, different reason does not replace the first.
        queue.stop(Stop::Closed);
        assert_eq!(queue.stopped(), Some(Stop::Fenced));
        assert_eq!(admit(&mut queue, 7), Err(DiagnosticDeliveryError::Closed));
        assert!(queue.next().is_none());
        assert!(queue.finished());
        assert_eq!(queue.admitted(), 3);
        assert_eq!(
            queue.settled(),
            3,
            "dropped ones count as settled for flush"
        );
        let stats = queue.stats();
        assert_eq!((stats.dropped, stats.uncertain), (2, 1));
    }

    #[test]
    fn closing_admits_nothing_new_but_the_session_close() {
        let mut queue = Queue::new(1);
        admit(&mut queue, 0).unwrap();
        admit(&mut queue, 1).unwrap();
        assert!(queue.begin_close());
        assert!(!queue.begin_close(), "only the first close begins");
        assert_eq!(admit(&mut queue, 2), Err(DiagnosticDeliveryError::Closed));
        // Over capacity, still queued: the session close needs no slot.
        assert!(queue.push_unreserved(frozen(3)).is_ok());
        let order: Vec<u8> = std::iter::from_fn(|| {
            let next = queue.next()?;
            queue.settle(Settled::Delivered);
            Some(next.bytes[0])
        })
        .collect();
        assert_eq!(order, vec![0, 1, 3]);
        assert!(!queue.finished(), "not stopped, not abandoned");
        queue.abandon();
        assert!(queue.finished());
    }
}

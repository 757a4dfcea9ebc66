//! One exporter's lane: its mailbox (events up to a byte budget, and the flush and
//! shutdown requests behind them), and the task that takes them in order and runs the
//! exporter's calls on the blocking pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio::sync::oneshot::{self, error::RecvError};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::{Instant, error::Elapsed};
use wattline_model::events::PipelineEvent;

use super::report::LaneOutcome;
use super::shared::{Held, LaneShared};
use crate::exporter::{ExportError, Exporter};

/// Where a lane's task answers a flush or shutdown.
pub(super) type Reply = oneshot::Sender<Result<(), ExportError>>;

/// What one send puts in a lane's mailbox: one event, or a batch sent as one.
#[derive(Clone)]
pub(super) enum Parcel {
    One(Arc<PipelineEvent>),
    Batch(Arc<[PipelineEvent]>),
}

impl Parcel {
    /// Its events, in order.
    pub(super) fn events(&self) -> &[PipelineEvent] {
        match self {
            Parcel::One(event) => std::slice::from_ref(event.as_ref()),
            Parcel::Batch(events) => events,
        }
    }
}

pub(super) enum LaneMessage {
    /// Events, with what they hold of the budget.
    Export(Parcel, Held),
    Flush(Reply),
    Shutdown(Reply),
}

/// Drops `value` on the blocking pool: dropping an exporter can block (a meter
/// provider's last export), which must not stall an async worker.
pub(super) fn drop_off_runtime<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || drop(value))),
        Err(_) => drop(value),
    }
}

/// The most queued messages one exporter call on the blocking pool takes: a backlog
/// goes out in a few hand-offs, not two thread wake-ups per event.
const MESSAGES_PER_CALL: usize = 256;

/// One exporter's task: takes its messages in order and runs the exporter's calls on
/// the blocking pool, one at a time. Events already waiting go out together in one
/// call (in order, each exported on its own), so a lane starved of CPU catches up in a
/// few hand-offs instead of falling behind by one hand-off per event. What it takes
/// leaves the mailbox's budget at once (and wakes the fan-out's room): besides its
/// mailbox, a lane holds at most what it last took from it.
pub(super) struct LaneTask {
    pub(super) receiver: mpsc::UnboundedReceiver<LaneMessage>,
    /// Away while a call runs; gone for good once the exporter panicked.
    pub(super) exporter: Option<Box<dyn Exporter>>,
    pub(super) shared: Arc<LaneShared>,
}

impl Drop for LaneTask {
    fn drop(&mut self) {
        // Also reached when shutdown aborts the task between two calls.
        if let Some(exporter) = self.exporter.take() {
            drop_off_runtime(exporter);
        }
        // A stopped lane no longer holds the room back.
        self.receiver.close();
        self.shared.room.notify_waiters();
    }
}

impl LaneTask {
    /// Ends after a shutdown, once the exporter panicked, or when every sender is gone.
    pub(super) async fn run(mut self) {
        let mut messages = Vec::with_capacity(MESSAGES_PER_CALL);
        let mut parcels = Vec::with_capacity(MESSAGES_PER_CALL);
        while self
            .receiver
            .recv_many(&mut messages, MESSAGES_PER_CALL)
            .await
            > 0
        {
            self.take_off_budget(&messages);
            let mut received = messages.drain(..);
            while let Some(message) = received.next() {
                let (reply, shutdown) = match message {
                    LaneMessage::Export(parcel, _) => {
                        parcels.push(parcel);
                        continue;
                    }
                    LaneMessage::Flush(reply) => (reply, false),
                    LaneMessage::Shutdown(reply) => (reply, true),
                };
                // A request answers after every event queued before it.
                if !self.export_all(&mut parcels).await {
                    self.count_unexported(received, Some(reply)).await;
                    return;
                }
                let result = if shutdown {
                    self.call(|exporter| exporter.shutdown()).await
                } else {
                    self.call(|exporter| exporter.flush()).await
                };
                let Some(result) = result else {
                    self.count_unexported(received, Some(reply)).await;
                    return;
                };
                if shutdown {
                    // Closed before answering: once the caller hears back, sends are
                    // drops.
                    self.count_unexported(received, None).await;
                    self.shared.report_remainders();
                    let _ = reply.send(result);
                    return;
                }
                // The caller may have given up waiting; nothing to do then.
                let _ = reply.send(result);
            }
            if !self.export_all(&mut parcels).await {
                self.count_unexported(std::iter::empty(), None).await;
                return;
            }
        }
    }

    /// Takes the events of `messages`, just received, off the mailbox's books, and
    /// wakes whoever waits for room.
    fn take_off_budget(&self, messages: &[LaneMessage]) {
        let mut taken = false;
        for message in messages {
            if let LaneMessage::Export(parcel, held) = message {
                self.shared.release(parcel.events().len(), *held);
                taken = true;
            }
        }
        if taken {
            self.shared.room.notify_waiters();
        }
    }

    /// Exports the events of `parcels` (left empty) in order in one blocking call,
    /// counting each one exported or failed. `false` when the exporter panicked: the
    /// event it panicked on and those after it are counted as dropped. Once shutdown
    /// has given up on the lane (`stopping`), the call stops after the event in hand
    /// and counts the rest.
    async fn export_all(&mut self, parcels: &mut Vec<Parcel>) -> bool {
        if parcels.is_empty() {
            return true;
        }
        let batch = Arc::new(std::mem::take(parcels));
        // Events the call has finished with, kept outside it: a panic takes the call's
        // own state.
        let finished = Arc::new(AtomicUsize::new(0));
        let (call_batch, progress, shared) = (
            Arc::clone(&batch),
            Arc::clone(&finished),
            Arc::clone(&self.shared),
        );
        let outcome = self
            .call(move |exporter| {
                let events = || call_batch.iter().flat_map(Parcel::events);
                for (index, event) in events().enumerate() {
                    if shared.stopping.load(Ordering::Relaxed) {
                        shared.note_drops(events().skip(index));
                        shared.report_remainders();
                        break;
                    }
                    match exporter.export(event) {
                        Ok(()) => {
                            shared.exported.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(error) => shared.note_failure(&error),
                    }
                    progress.store(index + 1, Ordering::Relaxed);
                }
                Ok(())
            })
            .await;
        if outcome.is_none() {
            let done = finished.load(Ordering::Relaxed);
            self.shared
                .note_drops(batch.iter().flat_map(Parcel::events).skip(done));
            return false;
        }
        // The list comes back (the call has dropped its handle) for the next batch.
        if let Ok(mut batch) = Arc::try_unwrap(batch) {
            batch.clear();
            *parcels = batch;
        }
        true
    }

    /// Counts as dropped the events of `received` and those left in the mailbox, which
    /// it closes: the exporter stopped before it reached them. The requests among them
    /// (and `request`, the one being answered) are dropped after the count, so a caller
    /// told the lane stopped finds every drop counted.
    async fn count_unexported(
        &mut self,
        received: impl Iterator<Item = LaneMessage>,
        request: Option<Reply>,
    ) {
        self.receiver.close();
        let mut requests: Vec<Reply> = request.into_iter().collect();
        let mut parcels = Vec::new();
        let mut count = |message, on_books: bool| match message {
            LaneMessage::Export(parcel, held) => {
                if on_books {
                    self.shared.release(parcel.events().len(), held);
                }
                parcels.push(parcel);
            }
            LaneMessage::Flush(reply) | LaneMessage::Shutdown(reply) => requests.push(reply),
        };
        // Those received were taken off the books already.
        received.for_each(|message| count(message, false));
        // Ends once the mailbox is empty and no send is under way (it is closed).
        while let Some(message) = self.receiver.recv().await {
            count(message, true);
        }
        self.shared
            .note_drops(parcels.iter().flat_map(Parcel::events));
        self.shared.room.notify_waiters();
        drop(requests);
    }

    /// Runs one exporter call on the blocking pool. `None` when the exporter panicked:
    /// it is gone, the lane closes, and later events count as dropped.
    async fn call<R: Send + 'static>(
        &mut self,
        call: impl FnOnce(&mut dyn Exporter) -> Result<R, ExportError> + Send + 'static,
    ) -> Option<Result<R, ExportError>> {
        let Some(mut exporter) = self.exporter.take() else {
            return Some(Err(ExportError::ShutDown(self.shared.kind.as_str())));
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let result = call(exporter.as_mut());
            (exporter, result)
        })
        .await;
        match outcome {
            Ok((exporter, result)) => {
                self.shared.lost.store(exporter.lost(), Ordering::Relaxed);
                let slowest = exporter.slowest_answer().map_or(0, |took| {
                    u64::try_from(took.as_micros()).unwrap_or(u64::MAX)
                });
                self.shared
                    .slowest_answer_micros
                    .store(slowest, Ordering::Relaxed);
                self.exporter = Some(exporter);
                if let Err(error) = &result {
                    self.shared.note_failure(error);
                }
                Some(result)
            }
            Err(error) => {
                tracing::error!(exporter = %self.shared.name, %error, "exporter panicked; it receives nothing more");
                // Closed before the pending replies are dropped, so a caller told
                // `Stopped` finds the lane closed.
                self.receiver.close();
                self.shared.room.notify_waiters();
                None
            }
        }
    }
}

/// A flush or shutdown request on its way to one lane.
pub(super) enum Asked {
    /// Queued; the answer comes on this.
    Queued(oneshot::Receiver<Result<(), ExportError>>),
    /// The lane's task had ended.
    Stopped,
}

impl Asked {
    pub(super) async fn outcome(self, deadline: Instant) -> LaneOutcome {
        match self {
            Asked::Queued(answer) => answered(tokio::time::timeout_at(deadline, answer).await),
            Asked::Stopped => LaneOutcome::Stopped,
        }
    }
}

fn answered(answer: Result<Result<Result<(), ExportError>, RecvError>, Elapsed>) -> LaneOutcome {
    match answer {
        Ok(Ok(Ok(()))) => LaneOutcome::Done,
        Ok(Ok(Err(error))) => LaneOutcome::Failed(error),
        Ok(Err(_closed)) => LaneOutcome::Stopped,
        Err(_elapsed) => LaneOutcome::TimedOut,
    }
}

/// The sending half of a lane, and its task.
pub(super) struct Lane {
    pub(super) sender: mpsc::UnboundedSender<LaneMessage>,
    pub(super) shared: Arc<LaneShared>,
    pub(super) abort: AbortHandle,
    pub(super) task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Lane {
    /// Queues `parcel` (holding `held`) when it fits the lane's allowance for it and
    /// the lane is live; otherwise counts its events dropped, each by kind.
    pub(super) fn offer(&self, parcel: &Parcel, held: Held) -> bool {
        let shared = &self.shared;
        let events = parcel.events().len();
        if self.sender.is_closed() || !shared.reserve(held) {
            shared.note_drops(parcel.events());
            return false;
        }
        // Counted before the send, so the task's count on receipt never goes below zero.
        shared.queued.fetch_add(events, Ordering::Relaxed);
        match self.sender.send(LaneMessage::Export(parcel.clone(), held)) {
            Ok(()) => true,
            Err(_closed) => {
                shared.release(events, held);
                shared.note_drops(parcel.events());
                false
            }
        }
    }

    /// Whether the lane takes a poll's copies now: stopped (its sends are drops, never
    /// waited for), or its bulk under its budget.
    pub(super) fn has_room(&self) -> bool {
        self.sender.is_closed() || self.shared.under_budget()
    }

    /// Queues a flush or shutdown behind the events already queued, without waiting
    /// (requests hold none of the budget: they are never dropped for a busy lane).
    pub(super) fn ask(&self, message: fn(Reply) -> LaneMessage) -> Asked {
        let (reply, answer) = oneshot::channel();
        match self.sender.send(message(reply)) {
            Ok(()) => Asked::Queued(answer),
            Err(_closed) => Asked::Stopped,
        }
    }
}

//! Delivery: one task drains the [`Queue`] in order. Each frozen operation gets the
//! session's credentials, session id and next sequence in front of its bytes, and
//! that exact request is sent, and re-sent on a retryable failure, up to the
//! negotiated attempts, each within the negotiated deadline. Receipts and statuses
//! are judged as spec/worker-protocol.md's client error mapping says.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nemo_relay_worker_proto::DIAGNOSTIC_NOT_CONSUMED_METADATA;
use nemo_relay_worker_proto::v1::{
    DiagnosticReceipt, DiagnosticReceiptStatus, DiagnosticSubmission, diagnostic_submission,
};
use prost::Message;
use prost::bytes::Bytes;
use tokio::sync::{Notify, oneshot, watch};

use crate::error::DiagnosticDeliveryError;
use crate::negotiate::{Limits, Session};
use crate::queue::{Answer, DiagnosticDeliveryStats, Frozen, OperationKind, Queue, Settled, Stop};

/// Sends one encoded `DiagnosticSubmission` and decodes the receipt.
pub(crate) trait Submitter: Send + Sync + 'static {
    /// One attempt carrying exactly `request`, which the host should answer within
    /// `deadline`.
    fn submit(
        &self,
        request: Bytes,
        deadline: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<DiagnosticReceipt, tonic::Status>> + Send + '_>>;
}

/// What the facade, its components and the task share.
struct Shared {
    session: Session,
    queue: Mutex<Queue>,
    /// Wakes the task: something was queued, or every handle is gone.
    wake: Notify,
    /// How many operations have settled, and whether delivery stopped.
    progress: watch::Sender<(u64, Option<Stop>)>,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Tells flush and close waiters how far delivery has got. Called without the
    /// queue lock, so that a reader of the progress never waits on the queue; the
    /// merge keeps it monotone whatever order two publishers reach it in.
    fn publish(&self, (settled, stop): (u64, Option<Stop>)) {
        self.progress.send_modify(|progress| {
            progress.0 = progress.0.max(settled);
            if progress.1.is_none() {
                progress.1 = stop;
            }
        });
    }

    /// Stops delivery for `why`; whoever waited on a queued operation is told
    /// `Closed`.
    fn stop(&self, why: Stop) {
        let (left, seen) = {
            let mut queue = self.queue();
            let left = queue.stop(why);
            (left, (queue.settled(), queue.stopped()))
        };
        self.publish(seen);
        answer_all(left, DiagnosticDeliveryError::Closed);
        self.wake.notify_one();
    }
}

fn answer_all(left: Vec<Frozen>, error: DiagnosticDeliveryError) {
    for frozen in left {
        if let Some(answer) = frozen.answer {
            let _ = answer.send(Err(error));
        }
    }
}

/// One session's delivery, shared by the facade and its components. The task ends
/// when delivery stops, or drains what is queued once every handle is gone.
pub(crate) struct Delivery {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Delivery {
    /// The limits and totals; never the credentials.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Delivery")
            .field("limits", self.limits())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        self.shared.queue().abandon();
        self.shared.wake.notify_one();
    }
}

impl Delivery {
    /// Starts the delivery task for `session` on the current Tokio runtime.
    pub(crate) fn start(session: Session, submitter: Arc<dyn Submitter>) -> Delivery {
        let (progress, _) = watch::channel((0, None));
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::new(session.limits.max_pending)),
            session,
            wake: Notify::new(),
            progress,
        });
        tokio::spawn(run(Arc::clone(&shared), submitter));
        Delivery { shared }
    }

    pub(crate) fn limits(&self) -> &Limits {
        &self.shared.session.limits
    }

    pub(crate) fn stats(&self) -> DiagnosticDeliveryStats {
        self.shared.queue().stats()
    }

    /// Counts a submission refused as invalid before it took a slot.
    pub(crate) fn count_lost(&self) {
        self.shared.queue().lose();
    }

    /// Holds a queue slot (see [`Queue::reserve`]).
    pub(crate) fn reserve(&self) -> Result<Slot<'_>, DiagnosticDeliveryError> {
        self.shared.queue().reserve()?;
        Ok(Slot {
            delivery: self,
            held: true,
        })
    }

    /// Queues `operation` and waits for its receipt.
    pub(crate) async fn call(
        &self,
        kind: OperationKind,
        operation: diagnostic_submission::Operation,
    ) -> Answer {
        self.reserve()?.call(kind, operation).await
    }

    /// Waits until everything admitted before the call has settled: `Uncertain` if
    /// an acceptance was uncertain or the wait timed out, `Closed` if delivery
    /// stopped.
    pub(crate) async fn flush(&self, deadline: Duration) -> Result<(), DiagnosticDeliveryError> {
        let target = self.shared.queue().admitted();
        let mut progress = self.shared.progress.subscribe();
        // The progress alone says whether to stop waiting; its read guard is
        // dropped at once.
        let reached = tokio::time::timeout(
            deadline,
            progress.wait_for(|(settled, stop)| *settled >= target || stop.is_some()),
        )
        .await
        .is_ok_and(|seen| seen.is_ok());
        let (_, stop) = *progress.borrow();
        match (stop, reached) {
            (Some(Stop::Fenced), _) => Err(DiagnosticDeliveryError::Uncertain),
            (Some(Stop::Closed), _) => Err(DiagnosticDeliveryError::Closed),
            (None, true) => Ok(()),
            (None, false) => Err(DiagnosticDeliveryError::Uncertain),
        }
    }

    /// Stops admitting, flushes, closes the session on the host, then stops; what
    /// is left when `deadline` passes is dropped. A second close does nothing.
    pub(crate) async fn close(&self, deadline: Duration) -> Result<(), DiagnosticDeliveryError> {
        let until = tokio::time::Instant::now() + deadline;
        if !self.shared.queue().begin_close() {
            return Ok(());
        }
        let closed = match self.flush(deadline).await {
            Ok(()) => self.close_session(until).await,
            Err(error) => Err(error),
        };
        self.shared.stop(Stop::Closed);
        closed
    }

    async fn close_session(
        &self,
        until: tokio::time::Instant,
    ) -> Result<(), DiagnosticDeliveryError> {
        let (answer, receipt) = oneshot::channel();
        let frozen = Frozen {
            kind: OperationKind::CloseSession,
            bytes: freeze(diagnostic_submission::Operation::CloseSession(
                Default::default(),
            )),
            answer: Some(answer),
        };
        if self.shared.queue().push_unreserved(frozen).is_err() {
            return Err(DiagnosticDeliveryError::Closed);
        }
        self.shared.wake.notify_one();
        match tokio::time::timeout_at(until, receipt).await {
            Ok(Ok(Ok(_))) => Ok(()),
            Ok(Ok(Err(error))) => Err(error),
            Ok(Err(_)) | Err(_) => Err(DiagnosticDeliveryError::Uncertain),
        }
    }
}

/// A held queue slot; given back when dropped unfilled.
#[derive(Debug)]
pub(crate) struct Slot<'a> {
    delivery: &'a Delivery,
    held: bool,
}

impl Slot<'_> {
    /// Freezes `operation` into the slot: `Invalid` (counted dropped) when its
    /// encoding exceeds the negotiated request size less the send-time header.
    pub(crate) fn fill(
        mut self,
        kind: OperationKind,
        operation: diagnostic_submission::Operation,
        answer: Option<oneshot::Sender<Answer>>,
    ) -> Result<(), DiagnosticDeliveryError> {
        let bytes = freeze(operation);
        self.held = false;
        let shared = &self.delivery.shared;
        if bytes.len() > shared.session.limits.max_operation_bytes() {
            shared.queue().release(true);
            return Err(DiagnosticDeliveryError::Invalid);
        }
        let frozen = Frozen {
            kind,
            bytes,
            answer,
        };
        shared
            .queue()
            .push(frozen)
            .map_err(|_| DiagnosticDeliveryError::Closed)?;
        shared.wake.notify_one();
        Ok(())
    }

    /// Freezes `operation` into the slot and waits for its receipt.
    pub(crate) async fn call(
        self,
        kind: OperationKind,
        operation: diagnostic_submission::Operation,
    ) -> Answer {
        let (answer, receipt) = oneshot::channel();
        self.fill(kind, operation, Some(answer))?;
        // The task answers every operation it takes or drops; a lost sender means
        // the runtime is going away with the attempt unresolved.
        receipt
            .await
            .unwrap_or(Err(DiagnosticDeliveryError::Uncertain))
    }

    /// Gives the slot back for input found invalid (counted dropped).
    pub(crate) fn invalid(mut self) -> DiagnosticDeliveryError {
        self.held = false;
        self.delivery.shared.queue().release(true);
        DiagnosticDeliveryError::Invalid
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.held {
            self.delivery.shared.queue().release(false);
        }
    }
}

/// The operation alone, as the `operation` field of a `DiagnosticSubmission`.
pub(crate) fn freeze(operation: diagnostic_submission::Operation) -> Vec<u8> {
    DiagnosticSubmission {
        operation: Some(operation),
        ..DiagnosticSubmission::default()
    }
    .encode_to_vec()
}

/// The request for `sequence`: credentials, session id and sequence (fields 1–3),
/// then the frozen operation (fields 4–7), which is the canonical encoding.
pub(crate) fn frame(session: &Session, sequence: u64, operation: &[u8]) -> Bytes {
    let mut request = DiagnosticSubmission {
        credentials: Some(session.credentials.clone()),
        session_id: session.session_id.clone(),
        sequence,
        operation: None,
    }
    .encode_to_vec();
    request.extend_from_slice(operation);
    Bytes::from(request)
}

/// How one operation's delivery ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Verdict {
    /// A receipt the operation expects; the sequence was consumed.
    Accepted(DiagnosticReceipt),
    /// A `REJECTED` receipt; the sequence was consumed.
    Rejected,
    /// Refused without consuming the sequence.
    NotConsumed,
    /// A terminal refusal of the session (credentials, sequence, precondition).
    Stop,
    /// Acceptance unknown: attempts ran out or the receipt was malformed.
    Uncertain,
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    NotConsumed,
    Stop,
    Retry,
}

fn failure(status: &tonic::Status) -> Failure {
    use tonic::Code;
    let not_consumed = status
        .metadata()
        .get(DIAGNOSTIC_NOT_CONSUMED_METADATA)
        .is_some_and(|value| value.as_bytes() == b"1");
    match status.code() {
        Code::InvalidArgument => Failure::NotConsumed,
        Code::ResourceExhausted if not_consumed => Failure::NotConsumed,
        Code::PermissionDenied
        | Code::Unauthenticated
        | Code::FailedPrecondition
        | Code::OutOfRange
        | Code::AlreadyExists => Failure::Stop,
        _ => Failure::Retry,
    }
}

/// Judges a receipt for `kind` sent as `sequence`: it must echo the sequence, carry
/// a known status the operation can have and fit the response limit; a
/// registration needs a component handle.
pub(crate) fn judge(
    receipt: DiagnosticReceipt,
    sequence: u64,
    kind: OperationKind,
    limits: &Limits,
) -> Verdict {
    use DiagnosticReceiptStatus as S;
    if receipt.submission_sequence != sequence || receipt.encoded_len() > limits.max_response_bytes
    {
        return Verdict::Uncertain;
    }
    let Ok(status) = S::try_from(receipt.status) else {
        return Verdict::Uncertain;
    };
    let expected = match (kind, status) {
        (_, S::Rejected) => return Verdict::Rejected,
        (_, S::Disabled) => true,
        (OperationKind::Register, S::Registered) => receipt.component != 0,
        (OperationKind::Record, S::Recorded) => true,
        (OperationKind::CloseComponent | OperationKind::CloseSession, S::Closed) => true,
        _ => false,
    };
    if expected {
        Verdict::Accepted(receipt)
    } else {
        Verdict::Uncertain
    }
}

/// A short pause before a retry: 25, 50, 100 … ms, at most 250 ms.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((25u64 << attempt.min(4)).min(250))
}

/// Sends `request` until it is answered or the attempts run out. An answer that
/// says "not consumed" after an attempt whose fate is unknown proves nothing about
/// that attempt, so the retries go on.
async fn deliver(
    submitter: &dyn Submitter,
    limits: &Limits,
    request: Bytes,
    sequence: u64,
    kind: OperationKind,
) -> Verdict {
    let mut ambiguous = false;
    for attempt in 0..limits.retry_attempts {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt - 1)).await;
        }
        let sent = submitter.submit(request.clone(), limits.retry_timeout);
        match tokio::time::timeout(limits.retry_timeout, sent).await {
            Ok(Ok(receipt)) => return judge(receipt, sequence, kind, limits),
            Ok(Err(status)) => match failure(&status) {
                Failure::NotConsumed if !ambiguous => return Verdict::NotConsumed,
                Failure::Stop => return Verdict::Stop,
                Failure::NotConsumed | Failure::Retry => ambiguous = true,
            },
            Err(_elapsed) => ambiguous = true,
        }
    }
    Verdict::Uncertain
}

/// The delivery task.
async fn run(shared: Arc<Shared>, submitter: Arc<dyn Submitter>) {
    let mut sequence: u64 = 1;
    loop {
        let next = {
            let mut queue = shared.queue();
            match queue.next() {
                Some(frozen) => Some(frozen),
                None if queue.finished() => break,
                None => None,
            }
        };
        let Some(frozen) = next else {
            shared.wake.notified().await;
            continue;
        };
        let request = frame(&shared.session, sequence, &frozen.bytes);
        let verdict = deliver(
            &*submitter,
            &shared.session.limits,
            request,
            sequence,
            frozen.kind,
        )
        .await;
        let (settled, answer, stop) = match verdict {
            Verdict::Accepted(receipt) => {
                sequence += 1;
                (Settled::Delivered, Ok(receipt), None)
            }
            Verdict::Rejected => {
                sequence += 1;
                (
                    Settled::Rejected,
                    Err(DiagnosticDeliveryError::Rejected),
                    None,
                )
            }
            Verdict::NotConsumed => (
                Settled::Rejected,
                Err(DiagnosticDeliveryError::NotConsumed),
                None,
            ),
            Verdict::Stop => (
                Settled::Rejected,
                Err(DiagnosticDeliveryError::Rejected),
                Some(Stop::Closed),
            ),
            Verdict::Uncertain => (
                Settled::Uncertain,
                Err(DiagnosticDeliveryError::Uncertain),
                Some(Stop::Fenced),
            ),
        };
        if stop.is_some() {
            tracing::warn!(
                ?answer,
                sequence,
                "diagnostic delivery stopped; later submissions are dropped"
            );
        }
        // Settling and stopping are one step, published together: a flush woken by
        // this settlement must already see the stop.
        let (left, seen) = {
            let mut queue = shared.queue();
            queue.settle(settled);
            let left = stop.map(|why| queue.stop(why)).unwrap_or_default();
            (left, (queue.settled(), queue.stopped()))
        };
        shared.publish(seen);
        if let Some(answer_to) = frozen.answer {
            let _ = answer_to.send(answer);
        }
        answer_all(left, DiagnosticDeliveryError::Closed);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;

    use nemo_relay_worker_proto::v1::{DiagnosticCredentials, DiagnosticObservation};

    use super::*;
    use crate::negotiate::tests::limits;

    /// A host stand-in: answers from a script (receipts echo the sequence), records
    /// every request, and can be held so that the queue fills.
    pub(crate) struct Scripted {
        pub(crate) requests: Mutex<Vec<Bytes>>,
        answers: Mutex<VecDeque<Result<DiagnosticReceiptStatus, tonic::Status>>>,
        pub(crate) hold: tokio::sync::Semaphore,
        held: bool,
    }

    impl Scripted {
        fn with(
            answers: Vec<Result<DiagnosticReceiptStatus, tonic::Status>>,
            held: bool,
        ) -> Arc<Scripted> {
            Arc::new(Scripted {
                requests: Mutex::new(Vec::new()),
                answers: Mutex::new(answers.into()),
                hold: tokio::sync::Semaphore::new(0),
                held,
            })
        }

        /// Answers at once.
        pub(crate) fn new(
            answers: Vec<Result<DiagnosticReceiptStatus, tonic::Status>>,
        ) -> Arc<Scripted> {
            Self::with(answers, false)
        }

        /// Answers only as `hold` permits are added.
        pub(crate) fn held(
            answers: Vec<Result<DiagnosticReceiptStatus, tonic::Status>>,
        ) -> Arc<Scripted> {
            Self::with(answers, true)
        }

        pub(crate) fn sent(&self) -> Vec<DiagnosticSubmission> {
            self.requests
                .lock()
                .unwrap()
                .iter()
                .map(|request| DiagnosticSubmission::decode(request.clone()).unwrap())
                .collect()
        }
    }

    impl Submitter for Scripted {
        fn submit(
            &self,
            request: Bytes,
            _deadline: Duration,
        ) -> Pin<Box<dyn Future<Output = Result<DiagnosticReceipt, tonic::Status>> + Send + '_>>
        {
            Box::pin(async move {
                if self.held {
                    self.hold.acquire().await.unwrap().forget();
                }
                let sequence = DiagnosticSubmission::decode(request.clone())
                    .unwrap()
                    .sequence;
                self.requests.lock().unwrap().push(request);
                let answer = self
                    .answers
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(Ok(DiagnosticReceiptStatus::Recorded));
                answer.map(|status| DiagnosticReceipt {
                    submission_sequence: sequence,
                    status: status as i32,
                    component: 1,
                    ..DiagnosticReceipt::default()
                })
            })
        }
    }

    pub(crate) fn session(pending: u32) -> Session {
        Session {
            credentials: DiagnosticCredentials {
                activation_id: "act".into(),
                auth_token: "tok".into(),
            },
            session_id: vec![7; 16],
            limits: limits(pending),
        }
    }

    fn record(count: u64) -> diagnostic_submission::Operation {
        diagnostic_submission::Operation::Record(DiagnosticObservation {
            component: 1,
            code: 1,
            count,
            ..DiagnosticObservation::default()
        })
    }

    fn counts(sent: &[DiagnosticSubmission]) -> Vec<(u64, u64)> {
        sent.iter()
            .map(|submission| match &submission.operation {
                Some(diagnostic_submission::Operation::Record(observation)) => {
                    (submission.sequence, observation.count)
                }
                other => panic!("not a record: {other:?}"),
            })
            .collect()
    }

    fn enqueue(delivery: &Delivery, count: u64) -> Result<(), DiagnosticDeliveryError> {
        delivery
            .reserve()?
            .fill(OperationKind::Record, record(count), None)
    }

    #[test]
    fn framing_is_the_canonical_encoding_of_the_whole_submission() {
        let session = session(4);
        let operation = record(3);
        let framed = frame(&session, 42, &freeze(operation.clone()));
        let whole = DiagnosticSubmission {
            credentials: Some(session.credentials.clone()),
            session_id: session.session_id.clone(),
            sequence: 42,
            operation: Some(operation),
        };
        assert_eq!(framed.as_ref(), whole.encode_to_vec().as_slice());
    }

    #[tokio::test(start_paused = true)]
    async fn sequences_start_at_one_and_follow_consumption() {
        let host = Scripted::new(vec![
            Ok(DiagnosticReceiptStatus::Recorded),
            Err(tonic::Status::invalid_argument("malformed")),
            Ok(DiagnosticReceiptStatus::Rejected),
            Ok(DiagnosticReceiptStatus::Recorded),
        ]);
        let delivery = Delivery::start(session(8), host.clone());
        for count in 1..=4 {
            enqueue(&delivery, count).unwrap();
        }
        delivery.flush(Duration::from_secs(5)).await.unwrap();
        // Not consumed: the next operation reuses its sequence. Rejected: consumed.
        assert_eq!(counts(&host.sent()), vec![(1, 1), (2, 2), (2, 3), (3, 4)]);
        let stats = delivery.stats();
        assert_eq!(
            (stats.delivered, stats.rejected, stats.uncertain),
            (2, 2, 0)
        );
        // Every request carries the session's credentials and id.
        for submission in host.sent() {
            assert_eq!(submission.credentials, Some(session(8).credentials));
            assert_eq!(submission.session_id, vec![7; 16]);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_send_the_same_bytes_with_the_same_sequence() {
        let host = Scripted::new(vec![
            Err(tonic::Status::unavailable("connection reset")),
            Err(tonic::Status::deadline_exceeded("slow")),
            Ok(DiagnosticReceiptStatus::Recorded),
            Ok(DiagnosticReceiptStatus::Recorded),
        ]);
        let delivery = Delivery::start(session(8), host.clone());
        enqueue(&delivery, 5).unwrap();
        enqueue(&delivery, 6).unwrap();
        delivery.flush(Duration::from_secs(30)).await.unwrap();
        let requests = host.requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 4);
        assert_eq!(requests[0], requests[1]);
        assert_eq!(requests[1], requests[2]);
        assert_ne!(requests[2], requests[3]);
        assert_eq!(counts(&host.sent()), vec![(1, 5), (1, 5), (1, 5), (2, 6)]);
        assert_eq!(delivery.stats().delivered, 2);
        assert_eq!(delivery.stats().uncertain, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn exhausted_attempts_are_uncertain_and_fence_the_session() {
        let unavailable = || Err(tonic::Status::unavailable("host gone"));
        let host = Scripted::new(vec![unavailable(), unavailable(), unavailable()]);
        let delivery = Delivery::start(session(8), host.clone());
        enqueue(&delivery, 1).unwrap();
        enqueue(&delivery, 2).unwrap();
        assert_eq!(
            delivery.flush(Duration::from_secs(30)).await,
            Err(DiagnosticDeliveryError::Uncertain)
        );
        // Three attempts of the first, none of the second: nothing is replayed.
        assert_eq!(counts(&host.sent()), vec![(1, 1), (1, 1), (1, 1)]);
        let stats = delivery.stats();
        assert_eq!((stats.uncertain, stats.dropped, stats.delivered), (1, 1, 0));
        assert_eq!(enqueue(&delivery, 3), Err(DiagnosticDeliveryError::Closed));
        assert_eq!(
            delivery.flush(Duration::from_secs(1)).await,
            Err(DiagnosticDeliveryError::Uncertain),
            "a fenced session stays uncertain"
        );
    }

    /// A flush woken by the uncertain settlement must see the fence with it, on a
    /// runtime where the flush and the task run on different threads.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flush_never_misses_the_fence_of_the_settlement_it_waited_for() {
        for round in 0..200 {
            let host = Scripted::new(vec![Err(tonic::Status::unavailable("gone"))]);
            let mut one_attempt = session(8);
            one_attempt.limits.retry_attempts = 1;
            let delivery = Delivery::start(one_attempt, host);
            enqueue(&delivery, 1).unwrap();
            assert_eq!(
                delivery.flush(Duration::from_secs(5)).await,
                Err(DiagnosticDeliveryError::Uncertain),
                "round {round}"
            );
        }
    }

    /// A reader of the progress (a flush) must never hold up the queue: the task
    /// publishes only after it lets the queue go. Were it to publish under the
    /// queue lock, the held read below would block the task inside that lock and
    /// `stats` would wait forever; the runtime runs on a thread of its own so that
    /// the test can notice.
    #[test]
    fn the_queue_is_free_while_the_progress_is_read() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let delivery = Delivery::start(session(8), Scripted::new(vec![]));
                let progress = delivery.shared.progress.subscribe();
                let reading = progress.borrow();
                enqueue(&delivery, 1).unwrap();
                // The task sends, settles, and waits for the read to end.
                std::thread::sleep(Duration::from_millis(300));
                let stats = delivery.stats();
                drop(reading);
                let _ = done.send(stats.delivered);
            });
        });
        assert_eq!(
            finished.recv_timeout(Duration::from_secs(20)),
            Ok(1),
            "the queue was held while the progress was read"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_terminal_refusal_stops_delivery_and_closes_the_waiters() {
        let host = Scripted::held(vec![Err(tonic::Status::permission_denied("token"))]);
        let delivery = Arc::new(Delivery::start(session(8), host.clone()));
        enqueue(&delivery, 1).unwrap();
        let waiting = tokio::spawn({
            let delivery = Arc::clone(&delivery);
            async move {
                delivery
                    .call(OperationKind::Record, record(2))
                    .await
                    .map(|_| ())
            }
        });
        tokio::task::yield_now().await;
        host.hold.add_permits(10);
        assert_eq!(
            waiting.await.unwrap(),
            Err(DiagnosticDeliveryError::Closed),
            "queued behind the refusal, never sent"
        );
        assert_eq!(
            delivery.flush(Duration::from_secs(1)).await,
            Err(DiagnosticDeliveryError::Closed)
        );
        let stats = delivery.stats();
        assert_eq!((stats.rejected, stats.dropped), (1, 1));
        assert_eq!(host.sent().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_refuses_and_nothing_admitted_is_lost() {
        let host = Scripted::held(vec![]);
        let delivery = Delivery::start(session(2), host.clone());
        let admitted: Vec<u64> = (1..=10)
            .filter(|count| enqueue(&delivery, *count).is_ok())
            .collect();
        assert_eq!(admitted, vec![1, 2, 3], "two pending plus one in flight");
        assert_eq!(delivery.stats().dropped, 7);
        host.hold.add_permits(100);
        delivery.flush(Duration::from_secs(5)).await.unwrap();
        assert_eq!(counts(&host.sent()), vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(delivery.stats().delivered, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flush_that_times_out_is_uncertain_and_close_drops_the_rest() {
        let host = Scripted::held(vec![]);
        let delivery = Delivery::start(session(4), host.clone());
        enqueue(&delivery, 1).unwrap();
        assert_eq!(
            delivery.flush(Duration::from_millis(100)).await,
            Err(DiagnosticDeliveryError::Uncertain)
        );
        assert_eq!(
            delivery.close(Duration::from_millis(100)).await,
            Err(DiagnosticDeliveryError::Uncertain)
        );
        assert_eq!(enqueue(&delivery, 2), Err(DiagnosticDeliveryError::Closed));
        assert_eq!(delivery.close(Duration::from_millis(100)).await, Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn close_flushes_then_closes_the_session_last() {
        let host = Scripted::new(vec![
            Ok(DiagnosticReceiptStatus::Recorded),
            Ok(DiagnosticReceiptStatus::Closed),
        ]);
        let delivery = Delivery::start(session(4), host.clone());
        enqueue(&delivery, 1).unwrap();
        assert_eq!(delivery.close(Duration::from_secs(2)).await, Ok(()));
        let sent = host.sent();
        assert_eq!(sent.len(), 2);
        assert!(matches!(
            sent[1].operation,
            Some(diagnostic_submission::Operation::CloseSession(_))
        ));
        assert_eq!(sent[1].sequence, 2);
        assert_eq!(enqueue(&delivery, 2), Err(DiagnosticDeliveryError::Closed));
    }

    #[test]
    fn receipts_are_judged_by_what_the_operation_expects() {
        use DiagnosticReceiptStatus as S;
        let limits = limits(4);
        let receipt = |sequence, status: S, component| DiagnosticReceipt {
            submission_sequence: sequence,
            status: status as i32,
            component,
            ..DiagnosticReceipt::default()
        };
        let cases = [
            (receipt(3, S::Recorded, 0), OperationKind::Record, true),
            (receipt(3, S::Disabled, 0), OperationKind::Record, true),
            (receipt(4, S::Recorded, 0), OperationKind::Record, false),
            (receipt(3, S::Registered, 0), OperationKind::Record, false),
            (receipt(3, S::Registered, 2), OperationKind::Register, true),
            (receipt(3, S::Registered, 0), OperationKind::Register, false),
            (
                receipt(3, S::Closed, 1),
                OperationKind::CloseComponent,
                true,
            ),
            (
                receipt(3, S::Unspecified, 1),
                OperationKind::CloseSession,
                false,
            ),
        ];
        for (receipt, kind, accepted) in cases {
            let verdict = judge(receipt.clone(), 3, kind, &limits);
            assert_eq!(
                matches!(verdict, Verdict::Accepted(_)),
                accepted,
                "{receipt:?} for {kind:?}: {verdict:?}"
            );
            if !accepted {
                assert_eq!(verdict, Verdict::Uncertain);
            }
        }
        assert_eq!(
            judge(
                receipt(3, S::Rejected, 0),
                3,
                OperationKind::Register,
                &limits
            ),
            Verdict::Rejected
        );
        let mut oversize = receipt(3, S::Recorded, 0);
        oversize.reason = "x".repeat(limits.max_response_bytes);
        assert_eq!(
            judge(oversize, 3, OperationKind::Record, &limits),
            Verdict::Uncertain
        );
    }

    #[test]
    fn statuses_map_as_the_client_error_mapping_says() {
        let mut exhausted_not_consumed = tonic::Status::resource_exhausted("busy");
        exhausted_not_consumed.metadata_mut().insert(
            DIAGNOSTIC_NOT_CONSUMED_METADATA,
            tonic::metadata::MetadataValue::from_static("1"),
        );
        let cases = [
            (tonic::Status::invalid_argument(""), Failure::NotConsumed),
            (exhausted_not_consumed, Failure::NotConsumed),
            (tonic::Status::resource_exhausted(""), Failure::Retry),
            (tonic::Status::permission_denied(""), Failure::Stop),
            (tonic::Status::unauthenticated(""), Failure::Stop),
            (tonic::Status::failed_precondition(""), Failure::Stop),
            (tonic::Status::out_of_range(""), Failure::Stop),
            (tonic::Status::already_exists(""), Failure::Stop),
            (tonic::Status::unavailable(""), Failure::Retry),
            (tonic::Status::deadline_exceeded(""), Failure::Retry),
            (tonic::Status::internal(""), Failure::Retry),
        ];
        for (status, expected) in cases {
            assert_eq!(failure(&status), expected, "{status:?}");
        }
    }
}

//! The merger actor: on each poll resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and emits
//! one mark per live Agent scope (or one under the root scope). It owns the
//! Agent-scope table: scopes start and end on its scope stream, in order with the
//! polls, and it forwards each start and end to the energy actor in that order
//! ([`super::boundaries`]).
//! On-demand collections are not its: they have an actor of their own
//! ([`crate::on_demand`]).

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::energy::input::EnergyInbox;
use crate::merger::boundaries::Boundaries;
use crate::merger::tick_plan::{ActorClaims, TickPlan};
use crate::scope_boundary::BoundaryAt;
use crate::scope_boundary::stream::StreamItem;
use wattline_model::events::{
    EventSink, MarkCopies, MarkCopy, PipelineEvent, RESOURCE_MARK_NAME, new_uuid,
};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;
use wattline_model::snapshot::resource_measurements;

/// The least a poll's copies wait for an exporter that is behind (see
/// [`copies_wait`]).
const LEAST_COPIES_WAIT: Duration = Duration::from_secs(10);

/// How long a poll's copies wait for the exporters' room: ten poll intervals, and at
/// least [`LEAST_COPIES_WAIT`]. Meanwhile the clock skips the polls it cannot start
/// (each counted as missed): a writer that is behind slows the copies instead of losing
/// them. Only one stuck for longer has them sent anyway, to be dropped and counted.
fn copies_wait(poll_interval: Duration) -> Duration {
    (poll_interval * 10).max(LEAST_COPIES_WAIT)
}

/// The most items the merger takes from the stream at once: a backlog goes in several
/// batches.
pub(crate) const MAX_BATCH: usize = 1024;

/// How long the merger leaves the stream after taking a batch: senders meanwhile wake
/// nothing (a wake-up is a futex and a reschedule, several times a send), and a burst
/// is taken in batches; an isolated boundary is taken at once.
pub(crate) const HOLD: Duration = Duration::from_millis(1);

/// Moves the scope stream into `merger`'s mailbox, a batch at a time, until either is
/// gone; after each batch the stream fills for [`HOLD`] (see [`crate::scope_boundary::stream`]). Owned by the
/// merger, which spawns it.
pub(crate) async fn pump(
    mut stream: UnboundedReceiver<StreamItem>,
    merger: ActorRef<MergerMessage>,
) {
    // A fresh buffer per batch, grown to what it takes: a batch goes with its message.
    let mut batch = Vec::new();
    while stream.recv_many(&mut batch, MAX_BATCH).await > 0 {
        if merger
            .cast(MergerMessage::Scopes(std::mem::take(&mut batch)))
            .is_err()
        {
            return;
        }
        tokio::time::sleep(HOLD).await;
    }
}

/// Messages the merger answers.
pub enum MergerMessage {
    /// A poll: a snapshot on the polling series, its mark copied under every live
    /// Agent scope; `done` is dropped when it is over (the poll clock's in-flight
    /// signal).
    Poll {
        /// Dropped once the poll's marks are out.
        done: tokio::sync::oneshot::Sender<()>,
    },
    /// What the scope stream held, in the order sent ([`crate::scope_boundary::stream`]):
    /// scope boundaries (their events go out and they go on to the energy actor, in
    /// that order), reports asked behind them, shutdown.
    Scopes(Vec<StreamItem>),
    /// The poll in flight is done (sent by its own task).
    PollFinished,
    /// Replies once every message sent before it has been handled, and the poll in
    /// flight is done.
    Sync(RpcReplyPort<()>),
}

/// What the merger starts with.
pub struct MergerArguments {
    /// The tick its polls run (shared with the on-demand actor).
    pub plan: Arc<TickPlan>,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// How long a poll waits for its samplers.
    pub deadline: Duration,
    /// The root scope: marks go under it while no Agent scope is live.
    pub root_scope: Uuid,
    /// The energy actor, which the merger sends every scope boundary on to; `None`
    /// when the energy component is off.
    pub energy: Option<EnergyInbox>,
    /// The scope stream's taking half, which the merger takes into its mailbox.
    pub scope_stream: Option<UnboundedReceiver<StreamItem>>,
}

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    poller: Arc<Poller>,
    sink: Arc<dyn EventSink>,
    closed: bool,
    /// The Agent-scope table, and the boundaries on their way to the energy actor.
    boundaries: Boundaries,
    /// Takes the scope stream into the mailbox.
    pump: Option<JoinHandle<()>>,
    /// The poll whose samplers are being asked, and the poll clock's in-flight signal
    /// (dropped when the poll's marks are out).
    poll_in_flight: Option<(JoinHandle<Snapshot>, oneshot::Sender<()>)>,
}

/// What a poll needs, shared with the task that runs it: the merger stays free for
/// scope messages while the samplers are asked.
struct Poller {
    plan: Arc<TickPlan>,
    /// The polls' claims on the sampler actors (one outstanding request each).
    claims: ActorClaims,
    deadline: Duration,
}

impl Poller {
    /// One poll through the sampler actors; one runs at a time (the poll clock sends
    /// the next only once this one is done).
    async fn poll(&self) -> Snapshot {
        let series = SamplingSeries::Polling;
        let request = self.plan.request(series).await;
        // A poll keeps to its grid.
        let tick_deadline = request.taken_at + self.deadline;
        let asked = self
            .plan
            .ask(&request, |_| true, tick_deadline, &self.claims);
        let outputs = self.plan.answers(asked, tick_deadline, self.deadline).await;
        self.plan.finish(&request, outputs)
    }
}

impl MergerState {
    fn sink(&self) -> &dyn EventSink {
        self.sink.as_ref()
    }

    /// Takes a batch of the scope stream, in order: the boundaries' start and end
    /// events go out as one batch and the boundaries go on to the energy actor as one
    /// input (sooner, ahead of a report, a poll's marks or shutdown's ends).
    async fn take_scopes(&mut self, items: Vec<StreamItem>) {
        let sink = Arc::clone(&self.sink);
        for item in items {
            match item {
                StreamItem::Boundary(boundary) => self.boundaries.take(boundary),
                StreamItem::EndLiveScopes { at, wall } => {
                    let at = BoundaryAt::WindowClose(at);
                    self.boundaries.end_all(at, wall);
                }
                StreamItem::Report {
                    at,
                    wall,
                    final_report,
                    reply,
                } => self
                    .boundaries
                    .report(at, wall, final_report, reply, sink.as_ref()),
                StreamItem::Written(reply) => {
                    // Written: the events taken before it are with the sink.
                    self.boundaries.send_events(sink.as_ref());
                    let _ = reply.send(());
                }
                // No mark after this, and no scope left live.
                StreamItem::Close { at, wall, reply } => {
                    // The poll's marks go after the scope events taken before them.
                    self.boundaries.send_events(sink.as_ref());
                    self.finish_poll().await;
                    self.closed = true;
                    let at = BoundaryAt::Stamped(at);
                    self.boundaries.end_all(at, wall.into());
                    self.boundaries.forward(sink.as_ref());
                    let _ = reply.send(());
                }
            }
        }
        self.boundaries.forward(sink.as_ref());
    }

    /// Waits for the poll in flight, if any, and sends its marks (none once closed).
    async fn finish_poll(&mut self) {
        let Some((poll, done)) = self.poll_in_flight.take() else {
            return;
        };
        match poll.await {
            Ok(snapshot) if !self.closed => self.emit_marks(&snapshot).await,
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "a poll failed"),
        }
        drop(done);
    }

    /// One event for the poll: its mark built once, copied under every live scope.
    /// Sent once the sink has room (an exporter's lane over its byte budget slows the
    /// copies, never the callers), waiting at most [`copies_wait`]; past that it is
    /// sent anyway, and a lane still over budget drops and counts it.
    async fn emit_marks(&self, snapshot: &Snapshot) {
        let copies: Vec<MarkCopy> = self
            .boundaries
            .scopes()
            .mark_parents()
            .into_iter()
            .map(|parent| MarkCopy {
                uuid: new_uuid(),
                parent_uuid: Some(parent),
            })
            .collect();
        if copies.is_empty() {
            return;
        }
        let interval = Duration::from_millis(self.poller.plan.config.polling.interval_millis);
        if tokio::time::timeout(copies_wait(interval), self.sink().room())
            .await
            .is_err()
        {
            tracing::debug!(
                copies = copies.len(),
                "an exporter's lane stayed over its byte budget: the poll's copies are sent anyway"
            );
        }
        self.sink().send(PipelineEvent::MarkCopies(MarkCopies {
            timestamp: snapshot.timestamp,
            name: RESOURCE_MARK_NAME.into(),
            data: Arc::new(resource_measurements(snapshot)),
            copies,
        }));
    }
}

impl Actor for MergerActor {
    type Msg = MergerMessage;
    type State = MergerState;
    type Arguments = MergerArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        mut arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let boundaries = Boundaries::new(arguments.root_scope, arguments.energy.take());
        let pump = arguments
            .scope_stream
            .take()
            .map(|stream| tokio::spawn(pump(stream, myself)));
        let poller = Arc::new(Poller {
            claims: ActorClaims::for_plan(&arguments.plan),
            plan: arguments.plan,
            deadline: arguments.deadline,
        });
        Ok(MergerState {
            poller,
            sink: arguments.sink,
            closed: false,
            boundaries,
            pump,
            poll_in_flight: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MergerMessage::Poll { done } => {
                state.finish_poll().await;
                let poller = Arc::clone(&state.poller);
                let poll = tokio::spawn(async move {
                    let snapshot = poller.poll().await;
                    let _ = myself.cast(MergerMessage::PollFinished);
                    snapshot
                });
                state.poll_in_flight = Some((poll, done));
            }
            MergerMessage::PollFinished => state.finish_poll().await,
            MergerMessage::Scopes(items) => state.take_scopes(items).await,
            MergerMessage::Sync(reply) => {
                state.finish_poll().await;
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(pump) = &state.pump {
            pump.abort();
        }
        Ok(())
    }
}

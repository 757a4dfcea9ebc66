//! The merger actor: on each poll resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and emits
//! one mark per live Agent scope (or one under the root scope). It owns the
//! Agent-scope table: scopes start and end by message, in order with the polls.
//! On-demand collections are not its: they have an actor of their own
//! ([`crate::on_demand`]).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::merger::scopes::ScopeTable;
use crate::merger::tick_plan::{ActorClaims, TickPlan};
use crate::scope_boundary::ScopeBoundary;
use crate::wake_queue::{AfterWakeUp, Batch, HOLD, WakeReceiver};
use wattline_model::events::{
    EventSink, MarkCopies, MarkCopy, PipelineEvent, RESOURCE_MARK_NAME, new_uuid,
};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;
use wattline_model::snapshot::resource_measurements;

/// Messages the merger answers.
pub enum MergerMessage {
    /// A poll: a snapshot on the polling series, its mark copied under every live
    /// Agent scope; `done` is dropped when it is over (the poll clock's in-flight
    /// signal).
    Poll {
        /// Dropped once the poll's marks are out.
        done: tokio::sync::oneshot::Sender<()>,
    },
    /// Scope boundaries were queued (the [`crate::wake_queue`] the actor was spawned
    /// with), or the merger's own wake-up while their queue is held: the merger takes
    /// them, as it does before every message.
    ScopeBoundaries,
    /// Ends every live Agent scope at `wall` (the final report's instant); replies with
    /// each scope ended and its end time.
    EndLiveScopes {
        /// When they end.
        wall: DateTime<Utc>,
        /// Where the ended scopes go.
        reply: RpcReplyPort<Vec<(Uuid, DateTime<Utc>)>>,
    },
    /// Emits no more marks and ends every live Agent scope now (shutdown); replies,
    /// once any poll in flight is done, with each scope ended and its end time.
    Close(RpcReplyPort<Vec<(Uuid, DateTime<Utc>)>>),
    /// The poll in flight is done (sent by its own task).
    PollFinished,
    /// Replies once every scope boundary queued before it has been taken (its event
    /// written), without waiting for a poll in flight.
    ScopesWritten(RpcReplyPort<()>),
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
}

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    poller: Arc<Poller>,
    sink: Arc<dyn EventSink>,
    closed: bool,
    scopes: ScopeTable,
    /// Scope starts and ends, taken before each message is handled: in order with
    /// the polls, as if each were a message of its own.
    boundaries: WakeReceiver<ScopeBoundary>,
    /// The buffer a drain of `boundaries` is applied from, kept between drains.
    boundary_batch: Batch<ScopeBoundary>,
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

    /// Writes the events of every scope boundary queued so far.
    fn take_boundaries(&mut self) {
        let sink = Arc::clone(&self.sink);
        self.boundaries.drain_into(&mut self.boundary_batch);
        let scopes = &mut self.scopes;
        self.boundary_batch
            .take_each(|boundary| scopes.apply(boundary, sink.as_ref()));
    }

    /// Waits for the poll in flight, if any, and sends its marks (none once closed).
    async fn finish_poll(&mut self) {
        let Some((poll, done)) = self.poll_in_flight.take() else {
            return;
        };
        match poll.await {
            Ok(snapshot) if !self.closed => self.emit_marks(&snapshot),
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "a poll failed"),
        }
        drop(done);
    }

    /// One event for the poll: its mark built once, copied under every live scope.
    fn emit_marks(&self, snapshot: &Snapshot) {
        let copies: Vec<MarkCopy> = self
            .scopes
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
    /// Its arguments, and the draining half of the queue the API's scope boundaries
    /// come through.
    type Arguments = (MergerArguments, WakeReceiver<ScopeBoundary>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (arguments, boundaries): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let poller = Arc::new(Poller {
            claims: ActorClaims::for_plan(&arguments.plan),
            plan: arguments.plan,
            deadline: arguments.deadline,
        });
        Ok(MergerState {
            poller,
            sink: arguments.sink,
            closed: false,
            scopes: ScopeTable::new(arguments.root_scope),
            boundaries,
            boundary_batch: Batch::default(),
            poll_in_flight: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boundaries queued before this message was sent come first, as a mailbox
        // would have them: no mark under a scope before its start event.
        state.take_boundaries();
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
            // Taken above; held while they keep coming.
            MergerMessage::ScopeBoundaries => match state.boundaries.woken() {
                AfterWakeUp::Hold => {
                    myself.send_after(HOLD, || MergerMessage::ScopeBoundaries);
                }
                AfterWakeUp::Released => state.take_boundaries(),
            },
            MergerMessage::ScopesWritten(reply) => {
                let _ = reply.send(());
            }
            MergerMessage::Sync(reply) => {
                state.finish_poll().await;
                let _ = reply.send(());
            }
            MergerMessage::EndLiveScopes { wall, reply } => {
                let sink = Arc::clone(&state.sink);
                let _ = reply.send(state.scopes.end_all(wall, sink.as_ref()));
            }
            // No mark after this, and no scope left live.
            MergerMessage::Close(reply) => {
                state.finish_poll().await;
                state.closed = true;
                let sink = Arc::clone(&state.sink);
                let _ = reply.send(state.scopes.end_all(Utc::now(), sink.as_ref()));
            }
        }
        Ok(())
    }
}

//! The merger actor: on each tick resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and for
//! polls emits one mark per live Agent scope (or one under the root scope). It owns the
//! Agent-scope table: scopes start and end by message, in order with the polls.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;

use crate::diagnostics::{PipelineDiagnostics, SamplerCategory};
use crate::merger::scopes::{ScopeBoundary, ScopeTable};
use crate::merger::tick::{finish_tick, prepare_tick};
use crate::readings::SamplingSeries;
use crate::samplers::SampleRequest;
use crate::samplers::actor::{Outstanding, SamplerMessage, TickRequest};
use crate::samplers::environment::EnvironmentReader;
use crate::samplers::registry::SamplerRegistry;
use crate::scope::ScopeTarget;
use crate::wake_queue::WakeReceiver;
use wattline_model::events::{
    EventSink, MarkCopies, MarkCopy, PipelineEvent, RESOURCE_MARK_NAME, new_uuid,
};
use wattline_model::snapshot::Snapshot;
use wattline_model::snapshot::resource_measurements;

/// Messages the merger answers.
pub enum MergerMessage {
    /// An on-demand snapshot: replied, no mark.
    Collect {
        /// Which series' baselines to use.
        series: SamplingSeries,
        /// Where the snapshot goes.
        reply: RpcReplyPort<Snapshot>,
    },
    /// A poll: a snapshot on the polling series, its mark copied under every live
    /// Agent scope; `done` is dropped when it is over (the poll clock's in-flight
    /// signal).
    Poll {
        /// Dropped once the poll's marks are out.
        done: tokio::sync::oneshot::Sender<()>,
    },
    /// Scope boundaries were queued (the [`crate::wake_queue`] the actor was spawned
    /// with): the merger takes them, as it does before every message.
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
    /// Root of the OS readers.
    pub root: std::path::PathBuf,
    /// What to measure.
    pub target: ScopeTarget,
    /// The measured command's own cgroup, whose members join a process tree.
    pub command_group: Option<std::path::PathBuf>,
    /// The resource configuration (units, enabled categories).
    pub config: ResourceMetricsConfig,
    /// Categories to ask on each tick, in snapshot order.
    pub categories: Vec<SamplerCategory>,
    /// Live sampler actors.
    pub registry: SamplerRegistry,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// Where missed deadlines are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
    /// How long a tick waits for its samplers.
    pub deadline: Duration,
    /// The root scope: marks go under it while no Agent scope is live.
    pub root_scope: Uuid,
}

/// The longest an on-demand collection waits for one sampler.
const ON_DEMAND_LIMIT: Duration = Duration::from_secs(60);

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    runner: Arc<TickRunner>,
    closed: bool,
    scopes: ScopeTable,
    /// Scope starts and ends, taken before each message is handled: in order with
    /// the polls, as if each were a message of its own.
    boundaries: WakeReceiver<ScopeBoundary>,
    /// The poll whose samplers are being asked, and the poll clock's in-flight signal
    /// (dropped when the poll's marks are out).
    poll_in_flight: Option<(JoinHandle<Snapshot>, oneshot::Sender<()>)>,
}

/// What a tick needs, shared with the task that runs it: the merger stays free for
/// scope messages while the samplers are asked.
struct TickRunner {
    arguments: MergerArguments,
    environment: Arc<EnvironmentReader>,
    /// One outstanding tick request per sampler: a sampler still reading an earlier
    /// tick gets no new one (its category is `null` for this tick).
    outstanding: HashMap<SamplerCategory, Arc<AtomicBool>>,
    /// One tick at a time: an on-demand collection waits for a poll in flight.
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl TickRunner {
    async fn tick(&self, series: SamplingSeries) -> Snapshot {
        let _one_at_a_time = self.one_at_a_time.lock().await;
        let root = self.arguments.root.clone();
        let target = self.arguments.target;
        let environment = Arc::clone(&self.environment);
        let diagnostics = self.arguments.diagnostics.clone();
        let command_group = self.arguments.command_group.clone();
        let request = match tokio::task::spawn_blocking(move || {
            prepare_tick(
                &root,
                target,
                command_group.as_deref(),
                &environment,
                series,
                diagnostics.as_ref(),
            )
        })
        .await
        {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "scope resolution failed");
                let scope = crate::scope::ResolvedScope::unavailable(
                    target,
                    crate::scope::ScopeStatus::ListingFailed(error.to_string()),
                );
                SampleRequest {
                    series,
                    scope: Arc::new(scope),
                    environment: Arc::default(),
                    taken_at: Instant::now(),
                }
            }
        };
        let taken_at = request.taken_at;
        // A poll keeps to its grid; an on-demand collection is awaited (the spec), bound
        // only so that a wedged driver cannot wedge the pipeline.
        let deadline = match series {
            SamplingSeries::Polling => self.arguments.deadline,
            SamplingSeries::OnDemand => ON_DEMAND_LIMIT,
        };
        // Every sampler is asked first, then the answers are awaited in turn, all in
        // this task: the samplers still read at once, and no task per sampler is
        // spawned and woken (each a cross-thread hand-off on a busy machine).
        let tick_deadline = taken_at + deadline;
        let mut asked = Vec::new();
        let categories = self.arguments.categories.clone();
        for (position, category) in categories.into_iter().enumerate() {
            let Some(actor) = self.arguments.registry.get(category) else {
                continue;
            };
            let Some(slot) = self.outstanding.get(&category) else {
                continue;
            };
            let Some(outstanding) = Outstanding::claim(slot) else {
                self.deadline_missed(category, "still reading an earlier tick".to_owned());
                continue;
            };
            let tick = TickRequest {
                request: request.clone(),
                deadline: tick_deadline,
                outstanding: Some(outstanding),
            };
            let (reply, answer) = oneshot::channel();
            let remaining = deadline.saturating_sub(taken_at.elapsed());
            // A stopped or restarting sampler takes no message: its category is null.
            if actor
                .cast(SamplerMessage::Sample(tick, (reply, remaining).into()))
                .is_ok()
            {
                asked.push((position, category, answer));
            }
        }
        let mut outputs = Vec::new();
        for (position, category, answer) in asked {
            match tokio::time::timeout_at(tick_deadline.into(), answer).await {
                Ok(Ok(output)) => outputs.push((position, category, output)),
                Err(_) => self.deadline_missed(
                    category,
                    format!("no answer within {} ms", deadline.as_millis()),
                ),
                // The sampler failed or is being restarted: its category is null.
                Ok(Err(_)) => {}
            }
        }
        outputs.sort_by_key(|(position, _, _)| *position);
        let outputs = outputs
            .into_iter()
            .map(|(_, category, output)| (category, output))
            .collect();
        finish_tick(
            &self.arguments.config,
            &request.scope,
            outputs,
            self.arguments.diagnostics.as_ref(),
        )
    }

    fn deadline_missed(&self, category: SamplerCategory, detail: String) {
        tracing::debug!(
            category = category.as_str(),
            %detail,
            "sampler missed the tick deadline"
        );
        if let Some(diagnostics) = &self.arguments.diagnostics {
            diagnostics.record_deadline_missed(category, &detail);
        }
    }
}

impl MergerState {
    fn sink(&self) -> &dyn EventSink {
        self.runner.arguments.sink.as_ref()
    }

    /// Writes the events of every scope boundary queued so far.
    fn take_boundaries(&mut self) {
        let sink = Arc::clone(&self.runner.arguments.sink);
        for boundary in self.boundaries.drain() {
            self.scopes.apply(boundary, sink.as_ref());
        }
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
        let root = arguments.root.clone();
        let environment =
            tokio::task::spawn_blocking(move || EnvironmentReader::new(&root)).await?;
        let outstanding = arguments
            .categories
            .iter()
            .map(|category| (*category, Arc::default()))
            .collect();
        let state = MergerState {
            closed: false,
            scopes: ScopeTable::new(arguments.root_scope),
            boundaries,
            runner: Arc::new(TickRunner {
                environment: Arc::new(environment),
                arguments,
                outstanding,
                one_at_a_time: tokio::sync::Mutex::new(()),
            }),
            poll_in_flight: None,
        };
        Ok(state)
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
            MergerMessage::Collect { series, reply } => {
                let runner = Arc::clone(&state.runner);
                tokio::spawn(async move {
                    let _ = reply.send(runner.tick(series).await);
                });
            }
            MergerMessage::Poll { done } => {
                state.finish_poll().await;
                let runner = Arc::clone(&state.runner);
                let poll = tokio::spawn(async move {
                    let snapshot = runner.tick(SamplingSeries::Polling).await;
                    let _ = myself.cast(MergerMessage::PollFinished);
                    snapshot
                });
                state.poll_in_flight = Some((poll, done));
            }
            MergerMessage::PollFinished => state.finish_poll().await,
            // Taken above.
            MergerMessage::ScopeBoundaries => {}
            MergerMessage::ScopesWritten(reply) => {
                let _ = reply.send(());
            }
            MergerMessage::Sync(reply) => {
                state.finish_poll().await;
                let _ = reply.send(());
            }
            MergerMessage::EndLiveScopes { wall, reply } => {
                let sink = Arc::clone(&state.runner.arguments.sink);
                let _ = reply.send(state.scopes.end_all(wall, sink.as_ref()));
            }
            // No mark after this, and no scope left live.
            MergerMessage::Close(reply) => {
                state.finish_poll().await;
                state.closed = true;
                let sink = Arc::clone(&state.runner.arguments.sink);
                let _ = reply.send(state.scopes.end_all(Utc::now(), sink.as_ref()));
            }
        }
        Ok(())
    }
}

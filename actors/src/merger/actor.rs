//! The merger actor: on each tick resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and for
//! polls emits one mark per live Agent scope (or one under the root scope). It owns the
//! Agent-scope table: scopes start and end by message, in order with the polls, and it
//! forwards each start and end to the energy actor in that order
//! ([`super::boundaries`]).

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;

use crate::diagnostics::{PipelineDiagnostics, SamplerCategory};
use crate::energy::input::EnergyInbox;
use crate::merger::boundaries::Boundaries;
use crate::merger::on_demand::{
    CategoryOutput, Delivery, OnDemandSamplers, OnDemandWorker, SnapshotCallback,
};
use crate::merger::tick::{finish_tick, prepare_tick};
use crate::pipeline::scope_stream::{StreamItem, pump};
use crate::samplers::actor::{Outstanding, SamplerMessage, TickRequest};
use crate::samplers::environment::EnvironmentReader;
use crate::samplers::registry::SamplerRegistry;
use crate::samplers::{SampleRequest, SamplerFactory};
use crate::scope::ScopeTarget;
use crate::scope_boundary::BoundaryAt;
use wattline_model::events::{
    EventSink, MarkCopies, MarkCopy, PipelineEvent, RESOURCE_MARK_NAME, new_uuid,
};
use wattline_model::series::SamplingSeries;
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
    /// An on-demand snapshot, no mark, handed to the callback where it is finished
    /// (on the thread that read it, when it can): for callers that would otherwise
    /// wake a thread only to pass it on.
    CollectThen(SnapshotCallback),
    /// A poll: a snapshot on the polling series, its mark copied under every live
    /// Agent scope; `done` is dropped when it is over (the poll clock's in-flight
    /// signal).
    Poll {
        /// Dropped once the poll's marks are out.
        done: tokio::sync::oneshot::Sender<()>,
    },
    /// What the scope stream held, in the order sent ([`crate::pipeline::scope_stream`]):
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
    /// The OS categories' sampler factories: the on-demand series' samplers are built
    /// from them and read in turn on one blocking thread, not through the actors.
    pub on_demand: Vec<(SamplerCategory, SamplerFactory)>,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// Where missed deadlines are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
    /// How long a tick waits for its samplers.
    pub deadline: Duration,
    /// The root scope: marks go under it while no Agent scope is live.
    pub root_scope: Uuid,
    /// Where the merger leaves its on-demand collection for callers to start
    /// themselves.
    pub direct: DirectCollector,
    /// The energy actor, which the merger sends every scope boundary on to; `None`
    /// when the energy component is off.
    pub energy: Option<EnergyInbox>,
    /// The scope stream's taking half, which the merger takes into its mailbox (taken
    /// out when it starts).
    pub scope_stream: Option<UnboundedReceiver<StreamItem>>,
}

/// The merger's on-demand collection, started from the caller's thread without a
/// message to the merger when nothing stands in the way: no poll or collection holds
/// the tick, the on-demand samplers are free, and they read every category (no
/// sampler actor is asked). The collection then goes straight to a blocking thread,
/// which reads, finishes the snapshot and calls back: one thread woken per collection
/// instead of two (the merger's, then the blocking one), each a wait for a CPU on a
/// busy machine. Otherwise the merger runs it, as before.
#[derive(Clone, Default)]
pub struct DirectCollector(Arc<OnceLock<(Weak<TickRunner>, tokio::runtime::Handle)>>);

impl DirectCollector {
    /// Starts `done`'s collection; gives `done` back when the merger must run it (or
    /// when the merger is not started yet, or gone).
    pub fn try_collect(&self, done: SnapshotCallback) -> Result<(), SnapshotCallback> {
        let Some((runner, runtime)) = self.0.get() else {
            return Err(done);
        };
        match runner.upgrade() {
            Some(runner) => runner.collect_directly(done, runtime),
            None => Err(done),
        }
    }
}

/// How often a direct collection is checked against its limit.
const DIRECT_WATCH_PERIOD: Duration = Duration::from_secs(1);

/// Ends direct collections that outlive their limit, until the merger is gone.
async fn watch_direct_collections(runner: Weak<TickRunner>) {
    let mut every = tokio::time::interval(DIRECT_WATCH_PERIOD);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(runner) = runner.upgrade() else {
            return;
        };
        runner.end_late_direct_collection(Instant::now());
    }
}

/// The longest an on-demand collection waits for one sampler.
const ON_DEMAND_LIMIT: Duration = Duration::from_secs(60);

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    runner: Arc<TickRunner>,
    closed: bool,
    /// The Agent-scope table, and the boundaries on their way to the energy actor.
    boundaries: Boundaries,
    /// Takes the scope stream into the mailbox.
    pump: Option<JoinHandle<()>>,
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
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
    /// The on-demand series' OS samplers.
    on_demand: OnDemandWorker,
    /// The direct collection last started and its limit, for the watch that ends it
    /// should its read hang.
    direct_in_flight: Mutex<Option<(Instant, Delivery)>>,
}

/// A sampler actor asked for a tick: the category's place in the snapshot, the
/// category, and where its answer comes.
type Asked = (
    usize,
    SamplerCategory,
    oneshot::Receiver<crate::samplers::SamplerOutput<crate::samplers::CategoryReading>>,
);

impl TickRunner {
    async fn tick(&self, series: SamplingSeries) -> Snapshot {
        let _one_at_a_time = self.one_at_a_time.lock().await;
        self.tick_locked(series).await
    }

    /// An on-demand collection, handed to `done` where it is finished.
    /// The tick lock is released as the snapshot is handed over, before the callback
    /// runs: a callback waiting for its language's lock holds up no poll.
    async fn collect(self: Arc<Self>, done: SnapshotCallback) {
        let one_at_a_time = Arc::clone(&self.one_at_a_time).lock_owned().await;
        if self.on_demand.categories().is_empty() {
            let snapshot = self.tick_locked(SamplingSeries::OnDemand).await;
            drop(one_at_a_time);
            done.call(Ok(snapshot));
            return;
        }
        self.on_demand_tick(Delivery::new(done, one_at_a_time))
            .await;
    }

    /// A [`DirectCollector`]'s collection (set up only where the on-demand samplers
    /// read every category): on a blocking thread of `runtime`, when the tick and the
    /// samplers are free; else `done` back.
    fn collect_directly(
        self: &Arc<Self>,
        done: SnapshotCallback,
        runtime: &tokio::runtime::Handle,
    ) -> Result<(), SnapshotCallback> {
        let Ok(one_at_a_time) = Arc::clone(&self.one_at_a_time).try_lock_owned() else {
            return Err(done);
        };
        let Some(samplers) = self.on_demand.take() else {
            return Err(done);
        };
        let delivery = Delivery::new(done, one_at_a_time);
        *self
            .direct_in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now() + ON_DEMAND_LIMIT, delivery.clone()));
        let runner = Arc::clone(self);
        runtime.spawn_blocking(move || {
            let request = runner.prepared_request(SamplingSeries::OnDemand);
            let outputs = runner.read_on_demand(samplers, &request);
            delivery.deliver(runner.finish(&request, outputs));
        });
        Ok(())
    }

    /// The direct collection in flight, handed over with its categories `null` (as
    /// a late sampler's) when it is still reading past its limit at `now`; its read
    /// keeps the samplers until it ends, as an on-demand tick's does.
    fn end_late_direct_collection(&self, now: Instant) {
        let late = {
            let mut in_flight = self
                .direct_in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match &*in_flight {
                Some((limit, _)) if *limit <= now => in_flight.take(),
                _ => None,
            }
        };
        let Some((_, delivery)) = late.filter(|(_, delivery)| delivery.is_pending()) else {
            return;
        };
        let detail = format!("no answer within {} ms", ON_DEMAND_LIMIT.as_millis());
        for category in self.on_demand.categories() {
            self.deadline_missed(*category, detail.clone());
        }
        let request = self.unavailable(SamplingSeries::OnDemand, detail);
        delivery.deliver(self.finish(&request, Vec::new()));
    }

    /// The tick's request, prepared on this (blocking) thread; a preparation that
    /// panics gives an unavailable scope.
    fn prepared_request(&self, series: SamplingSeries) -> SampleRequest {
        catch_unwind(AssertUnwindSafe(self.preparation(series))).unwrap_or_else(|payload| {
            let detail = crate::merger::on_demand::panic_message(payload.as_ref());
            tracing::error!(%detail, "scope resolution failed");
            self.unavailable(series, detail)
        })
    }

    /// Reads every on-demand category with `samplers` and puts them back; the
    /// outputs with their places in the snapshot.
    fn read_on_demand(
        &self,
        mut samplers: OnDemandSamplers,
        request: &SampleRequest,
    ) -> Vec<(usize, CategoryOutput)> {
        let outputs = samplers.sample(request, self.arguments.diagnostics.as_ref());
        self.on_demand.return_slot().put(samplers);
        self.positioned(outputs)
    }

    /// One tick through the sampler actors, the tick lock held.
    async fn tick_locked(&self, series: SamplingSeries) -> Snapshot {
        let request = match tokio::task::spawn_blocking(self.preparation(series)).await {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "scope resolution failed");
                self.unavailable(series, error.to_string())
            }
        };
        // A poll keeps to its grid; an on-demand collection is awaited (the spec), bound
        // only so that a wedged driver cannot wedge the pipeline.
        let deadline = match series {
            SamplingSeries::Polling => self.arguments.deadline,
            SamplingSeries::OnDemand => ON_DEMAND_LIMIT,
        };
        let tick_deadline = request.taken_at + deadline;
        let asked = self.ask(&request, |_| true, tick_deadline);
        let outputs = self.answers(asked, tick_deadline, deadline).await;
        self.finish(&request, outputs)
    }

    /// An on-demand collection: one blocking task resolves the scope and reads every OS
    /// category in turn with the on-demand worker's samplers; a category the worker
    /// does not read (the GPU) is asked through its actor once the scope is known.
    /// Without an actor to ask, the blocking thread that reads finishes the snapshot and
    /// hands it over itself.
    async fn on_demand_tick(self: &Arc<Self>, delivery: Delivery) {
        let series = SamplingSeries::OnDemand;
        let started = Instant::now();
        let tick_deadline = started + ON_DEMAND_LIMIT;
        let by_actor = |category: SamplerCategory| !self.on_demand.categories().contains(&category);
        let wants_actors = self.arguments.categories.iter().any(|c| by_actor(*c));
        let Some(samplers) = self.on_demand.take() else {
            // An earlier collection's read still holds them: their categories are null.
            for category in self.on_demand.categories() {
                self.deadline_missed(*category, "still reading an earlier tick".to_owned());
            }
            let request = match tokio::task::spawn_blocking(self.preparation(series)).await {
                Ok(request) => request,
                Err(error) => self.unavailable(series, error.to_string()),
            };
            let asked = self.ask(&request, by_actor, tick_deadline);
            let outputs = self.answers(asked, tick_deadline, ON_DEMAND_LIMIT).await;
            delivery.deliver(self.finish(&request, outputs));
            return;
        };
        // The scope goes to the async side only when an actor needs it, so that a
        // collection without one wakes this task once.
        let (scope_sender, scope) = if wants_actors {
            let (sender, receiver) = oneshot::channel();
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        let runner = Arc::clone(self);
        let finish_here = (!wants_actors).then(|| delivery.clone());
        let reads = tokio::task::spawn_blocking(move || {
            let request = runner.prepared_request(series);
            if let Some(sender) = scope_sender {
                let _ = sender.send(request.clone());
            }
            let outputs = runner.read_on_demand(samplers, &request);
            match finish_here {
                Some(delivery) => {
                    delivery.deliver(runner.finish(&request, outputs));
                    None
                }
                None => Some((request, outputs)),
            }
        });
        let mut asked = Vec::new();
        let mut actors_request = None;
        if let Some(scope) = scope
            && let Ok(Ok(request)) = tokio::time::timeout_at(tick_deadline.into(), scope).await
        {
            asked = self.ask(&request, by_actor, tick_deadline);
            actors_request = Some(request);
        }
        let (request, mut outputs) =
            match tokio::time::timeout_at(tick_deadline.into(), reads).await {
                // Finished and handed over on the blocking thread.
                Ok(Ok(None)) => return,
                Ok(Ok(Some((request, outputs)))) => (request, outputs),
                failed => {
                    let detail = match failed {
                        Err(_) => format!("no answer within {} ms", ON_DEMAND_LIMIT.as_millis()),
                        Ok(Err(error)) => error.to_string(),
                        Ok(Ok(_)) => return,
                    };
                    for category in self.on_demand.categories() {
                        self.deadline_missed(*category, detail.clone());
                    }
                    let request = actors_request
                        .take()
                        .unwrap_or_else(|| self.unavailable(series, detail));
                    (request, Vec::new())
                }
            };
        outputs.extend(self.answers(asked, tick_deadline, ON_DEMAND_LIMIT).await);
        delivery.deliver(self.finish(&request, outputs));
    }

    /// The blocking half that starts a tick: the scope resolved, the environment read.
    fn preparation(
        &self,
        series: SamplingSeries,
    ) -> impl FnOnce() -> SampleRequest + Send + 'static {
        let root = self.arguments.root.clone();
        let target = self.arguments.target;
        let environment = Arc::clone(&self.environment);
        let diagnostics = self.arguments.diagnostics.clone();
        let command_group = self.arguments.command_group.clone();
        move || {
            prepare_tick(
                &root,
                target,
                command_group.as_deref(),
                &environment,
                series,
                diagnostics.as_ref(),
            )
        }
    }

    /// A tick whose scope could not be resolved.
    fn unavailable(&self, series: SamplingSeries, detail: String) -> SampleRequest {
        unavailable_request(self.arguments.target, series, detail)
    }

    /// `outputs` with each category's place in the snapshot.
    fn positioned(&self, outputs: Vec<CategoryOutput>) -> Vec<(usize, CategoryOutput)> {
        outputs
            .into_iter()
            .filter_map(|output| {
                let position = self
                    .arguments
                    .categories
                    .iter()
                    .position(|c| *c == output.0)?;
                Some((position, output))
            })
            .collect()
    }

    /// Asks every sampler actor of a category `wanted` selects: all are asked first,
    /// then their answers awaited in turn ([`Self::answers`]), all in the tick's task:
    /// the samplers still read at once, and no task per sampler is spawned and woken
    /// (each a cross-thread hand-off on a busy machine).
    fn ask(
        &self,
        request: &SampleRequest,
        wanted: impl Fn(SamplerCategory) -> bool,
        tick_deadline: Instant,
    ) -> Vec<Asked> {
        let mut asked = Vec::new();
        for (position, category) in self.arguments.categories.iter().copied().enumerate() {
            if !wanted(category) {
                continue;
            }
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
            let remaining = tick_deadline.saturating_duration_since(Instant::now());
            // A stopped or restarting sampler takes no message: its category is null.
            if actor
                .cast(SamplerMessage::Sample(tick, (reply, remaining).into()))
                .is_ok()
            {
                asked.push((position, category, answer));
            }
        }
        asked
    }

    /// The answers of the samplers `asked`, each awaited until `tick_deadline` (a late
    /// one is recorded as missing `deadline`).
    async fn answers(
        &self,
        asked: Vec<Asked>,
        tick_deadline: Instant,
        deadline: Duration,
    ) -> Vec<(usize, CategoryOutput)> {
        let mut outputs = Vec::new();
        for (position, category, answer) in asked {
            match await_answer(answer, tick_deadline).await {
                Answer::Output(output) => outputs.push((position, (category, output))),
                Answer::Late => self.deadline_missed(
                    category,
                    format!("no answer within {} ms", deadline.as_millis()),
                ),
                // The sampler failed or is being restarted: its category is null.
                Answer::Failed => {}
            }
        }
        outputs
    }

    /// The snapshot from the outputs that arrived, in snapshot order.
    fn finish(
        &self,
        request: &SampleRequest,
        mut outputs: Vec<(usize, CategoryOutput)>,
    ) -> Snapshot {
        outputs.sort_by_key(|(position, _)| *position);
        let outputs = outputs.into_iter().map(|(_, output)| output).collect();
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

/// What came of asking a sampler for a tick.
#[derive(Debug, PartialEq)]
enum Answer<T> {
    /// It answered in time.
    Output(T),
    /// It did not answer by the tick's deadline.
    Late,
    /// Its reply was dropped before the deadline: it failed or is restarting.
    Failed,
}

/// Waits for a sampler's `answer` until `tick_deadline`. A reply dropped unanswered at
/// or after the deadline is a missed deadline too: a sampler skips a tick that expired
/// while it sat in its mailbox, and the drop can reach here before the timer fires.
async fn await_answer<T>(answer: oneshot::Receiver<T>, tick_deadline: Instant) -> Answer<T> {
    match tokio::time::timeout_at(tick_deadline.into(), answer).await {
        Ok(Ok(output)) => Answer::Output(output),
        Ok(Err(_)) if Instant::now() < tick_deadline => Answer::Failed,
        Ok(Err(_)) | Err(_) => Answer::Late,
    }
}

/// A tick whose scope could not be resolved: every category reads nothing.
fn unavailable_request(
    target: ScopeTarget,
    series: SamplingSeries,
    detail: String,
) -> SampleRequest {
    let scope = crate::scope::ResolvedScope::unavailable(
        target,
        crate::scope::ScopeStatus::ListingFailed(detail),
    );
    SampleRequest {
        series,
        scope: Arc::new(scope),
        environment: Arc::default(),
        taken_at: Instant::now(),
    }
}

impl MergerState {
    fn sink(&self) -> &dyn EventSink {
        self.runner.arguments.sink.as_ref()
    }

    /// Takes a batch of the scope stream, in order: boundaries' events go out and the
    /// boundaries go on to the energy actor as one input (sooner, ahead of a report or
    /// shutdown's ends).
    async fn take_scopes(&mut self, items: Vec<StreamItem>) {
        let sink = Arc::clone(&self.runner.arguments.sink);
        for item in items {
            match item {
                StreamItem::Boundary(boundary) => self.boundaries.take(boundary, sink.as_ref()),
                StreamItem::EndLiveScopes { at, wall } => {
                    let at = BoundaryAt::WindowClose(at);
                    self.boundaries.end_all(at, wall, sink.as_ref());
                }
                StreamItem::Report {
                    at,
                    wall,
                    final_report,
                    reply,
                } => self.boundaries.report(at, wall, final_report, reply),
                StreamItem::Written(reply) => {
                    let _ = reply.send(());
                }
                // No mark after this, and no scope left live.
                StreamItem::Close { at, wall, reply } => {
                    self.finish_poll().await;
                    self.closed = true;
                    let at = BoundaryAt::Stamped(at);
                    self.boundaries.end_all(at, wall.into(), sink.as_ref());
                    self.boundaries.forward();
                    let _ = reply.send(());
                }
            }
        }
        self.boundaries.forward();
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
        let root = arguments.root.clone();
        let environment =
            tokio::task::spawn_blocking(move || EnvironmentReader::new(&root)).await?;
        let on_demand = OnDemandWorker::new(std::mem::take(&mut arguments.on_demand));
        let outstanding = arguments
            .categories
            .iter()
            .map(|category| (*category, Arc::default()))
            .collect();
        let direct = arguments.direct.clone();
        let boundaries = Boundaries::new(arguments.root_scope, arguments.energy.take());
        let pump = arguments
            .scope_stream
            .take()
            .map(|stream| tokio::spawn(pump(stream, myself)));
        let runner = Arc::new(TickRunner {
            environment: Arc::new(environment),
            arguments,
            outstanding,
            one_at_a_time: Arc::default(),
            on_demand,
            direct_in_flight: Mutex::new(None),
        });
        // Only where no category is asked of an actor: a direct collection never
        // waits on one (and a pipeline without one needs no watch).
        let on_demand = runner.on_demand.categories();
        let every_category_on_demand = !on_demand.is_empty()
            && runner
                .arguments
                .categories
                .iter()
                .all(|category| on_demand.contains(category));
        if every_category_on_demand {
            let _ = direct
                .0
                .set((Arc::downgrade(&runner), tokio::runtime::Handle::current()));
            tokio::spawn(watch_direct_collections(Arc::downgrade(&runner)));
        }
        let state = MergerState {
            closed: false,
            boundaries,
            pump,
            runner,
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
        match message {
            MergerMessage::Collect { series, reply } => {
                let runner = Arc::clone(&state.runner);
                match series {
                    SamplingSeries::OnDemand => {
                        let done = SnapshotCallback::new(move |snapshot| {
                            if let Ok(snapshot) = snapshot {
                                let _ = reply.send(snapshot);
                            }
                        });
                        tokio::spawn(runner.collect(done));
                    }
                    SamplingSeries::Polling => {
                        tokio::spawn(async move {
                            let _ = reply.send(runner.tick(series).await);
                        });
                    }
                }
            }
            MergerMessage::CollectThen(done) => {
                tokio::spawn(Arc::clone(&state.runner).collect(done));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Condvar;
    use std::sync::mpsc;

    use crate::merger::on_demand::SnapshotResult;
    use crate::samplers::{CategoryReading, CategorySampler, SamplerOutput};
    use wattline_model::events::CollectingEventSink;

    /// Holds every read until the test opens it, counting the reads that started.
    #[derive(Default)]
    struct Gate {
        state: Mutex<(u32, bool)>,
        changed: Condvar,
    }

    impl Gate {
        fn lock(&self) -> std::sync::MutexGuard<'_, (u32, bool)> {
            self.state.lock().unwrap_or_else(PoisonError::into_inner)
        }

        fn open(&self) {
            self.lock().1 = true;
            self.changed.notify_all();
        }

        /// Waits (up to 10 s) until `reads` reads have started.
        fn wait_for_reads(&self, reads: u32) {
            let (state, _) = self
                .changed
                .wait_timeout_while(self.lock(), Duration::from_secs(10), |state| {
                    state.0 < reads
                })
                .unwrap_or_else(PoisonError::into_inner);
            assert!(state.0 >= reads, "{} reads started, not {reads}", state.0);
        }
    }

    struct OpenOnDrop(Arc<Gate>);

    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }

    /// A real sampler whose reads wait at `gate` first: a read that hangs.
    struct GatedSampler {
        inner: Box<dyn CategorySampler>,
        gate: Arc<Gate>,
    }

    impl CategorySampler for GatedSampler {
        fn category(&self) -> SamplerCategory {
            self.inner.category()
        }

        fn sample_category(&mut self, request: &SampleRequest) -> SamplerOutput<CategoryReading> {
            let mut state = self.gate.lock();
            state.0 += 1;
            self.gate.changed.notify_all();
            while !state.1 {
                state = self
                    .gate
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            drop(state);
            self.inner.sample_category(request)
        }
    }

    /// A merger of this process's memory only, read on demand through `gate`.
    async fn gated_merger(gate: &Arc<Gate>) -> (ActorRef<MergerMessage>, DirectCollector) {
        let root = std::path::PathBuf::from("/");
        let config = ResourceMetricsConfig::default();
        let (_, memory) = crate::categories::sampler_factories(&root, &config)
            .into_iter()
            .find(|(category, _)| *category == SamplerCategory::Memory)
            .expect("a memory sampler");
        let gate = Arc::clone(gate);
        let gated: SamplerFactory = Arc::new(move || {
            Box::new(GatedSampler {
                inner: memory(),
                gate: Arc::clone(&gate),
            }) as Box<dyn CategorySampler>
        });
        let identity = crate::scope::identify_process(&root, std::process::id()).unwrap();
        let direct = DirectCollector::default();
        let arguments = MergerArguments {
            root,
            target: ScopeTarget::ApplicationProcess(identity),
            command_group: None,
            config,
            categories: vec![SamplerCategory::Memory],
            registry: SamplerRegistry::default(),
            on_demand: vec![(SamplerCategory::Memory, gated)],
            sink: Arc::new(CollectingEventSink::default()),
            diagnostics: None,
            deadline: Duration::from_secs(1),
            root_scope: Uuid::now_v7(),
            direct: direct.clone(),
            energy: None,
            scope_stream: None,
        };
        let (merger, _) = Actor::spawn(None, MergerActor, arguments).await.unwrap();
        (merger, direct)
    }

    /// A callback that sends what it is called with down `sender`.
    fn sending(sender: &mpsc::Sender<SnapshotResult>) -> SnapshotCallback {
        let sender = sender.clone();
        SnapshotCallback::new(move |result| {
            let _ = sender.send(result);
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_direct_collection_reads_on_its_own_thread_and_one_that_hangs_is_ended_at_its_limit()
    {
        let gate = Arc::new(Gate::default());
        // Opened on the way out too: a failed assertion must not leave a read hung,
        // which the runtime would wait for forever.
        let _opened_at_the_end = OpenOnDrop(Arc::clone(&gate));
        let (merger, direct) = gated_merger(&gate).await;
        let (sender, results) = mpsc::channel();

        // Every category is read on demand: the collection starts from this thread,
        // without the merger, and its read runs (and hangs) on a blocking thread.
        assert!(direct.try_collect(sending(&sender)).is_ok());
        gate.wait_for_reads(1);
        // While it holds the tick and the samplers, the next one is handed back (to
        // go through the merger; dropped here, it is called with an error).
        let (other_sender, _other_results) = mpsc::channel();
        assert!(direct.try_collect(sending(&other_sender)).is_err());

        // The watch ends it only once its limit has passed.
        let (runner, _) = direct.0.get().expect("set when the merger started");
        let runner = runner.upgrade().expect("the merger runs");
        runner.end_late_direct_collection(Instant::now());
        assert!(results.try_recv().is_err(), "ended before its limit");
        runner.end_late_direct_collection(Instant::now() + ON_DEMAND_LIMIT);
        let late = results.try_recv().expect("ended at its limit").unwrap();
        assert!(late.memory.is_none(), "a hung category is null");

        // The hung read ends: its snapshot goes nowhere (the caller has its answer),
        // and the samplers come back for the next direct collection, which reads.
        gate.open();
        let mut next = sending(&sender);
        let started = Instant::now();
        while let Err(back) = direct.try_collect(next) {
            assert!(started.elapsed() < Duration::from_secs(10), "samplers back");
            next = back;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let fresh = tokio::task::spawn_blocking(move || {
            let fresh = results.recv_timeout(Duration::from_secs(10));
            (fresh, results.try_recv().is_err())
        })
        .await
        .unwrap();
        let (fresh, nothing_more) = fresh;
        assert!(
            fresh
                .expect("the next collection")
                .unwrap()
                .memory
                .is_some()
        );
        assert!(
            nothing_more,
            "the hung read's snapshot was handed to no one"
        );
        merger.stop(None);
    }

    #[tokio::test]
    async fn a_reply_dropped_after_the_deadline_is_a_missed_deadline_and_one_dropped_before_a_failure()
     {
        // A sampler that skipped an expired tick dropped its reply; the merger looks
        // after the deadline and finds the channel closed, not its timer fired.
        let (reply, answer) = oneshot::channel::<u32>();
        drop(reply);
        let passed = Instant::now() - Duration::from_millis(1);
        assert_eq!(await_answer(answer, passed).await, Answer::Late);

        // Dropped well before the deadline: the sampler failed or is restarting.
        let (reply, answer) = oneshot::channel::<u32>();
        drop(reply);
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(await_answer(answer, later).await, Answer::Failed);

        // Never answered: late once the deadline passes.
        let (_reply, answer) = oneshot::channel::<u32>();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(await_answer(answer, soon).await, Answer::Late);

        let (reply, answer) = oneshot::channel::<u32>();
        let _ = reply.send(7);
        assert_eq!(await_answer(answer, later).await, Answer::Output(7));
    }
}

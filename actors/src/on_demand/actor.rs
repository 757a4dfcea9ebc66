//! The on-demand actor: `collect()` on the on-demand series, one collection at a time,
//! with the actor's own OS samplers (read in turn on one blocking thread) and the
//! sampler actors for what it has no sampler of (the GPU, whose source is one per
//! pipeline). It shares nothing with the merger's polls but the sampler actors, which
//! it claims apart from them: a poll never waits for a collection, nor a collection for
//! a poll.
//!
//! A collection is bounded by its limit: a read still going then is handed over with
//! its categories `null` (as a late sampler's), and keeps the samplers until it ends;
//! until they come back, the next collections read those categories as `null` too
//! ("still reading an earlier tick"), so a hung driver call cannot wedge `collect()`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::callback::{Delivery, SnapshotCallback};
use super::samplers::OnDemandSamplers;
use crate::merger::tick_plan::{ActorClaims, CategoryOutput, TickPlan};
use crate::samplers::{SampleRequest, SamplerFactory};
use wattline_model::category::SamplerCategory;
use wattline_model::series::SamplingSeries;

/// The longest an on-demand collection waits for its reads (the spec has `collect()`
/// wait for its samplers; this only keeps a wedged driver from wedging it).
pub const ON_DEMAND_LIMIT: Duration = Duration::from_secs(60);

/// Messages the on-demand actor answers.
pub enum OnDemandMessage {
    /// One snapshot on the on-demand series, no mark, handed to the callback where it
    /// is finished (on the thread that read it, when it can).
    Collect(SnapshotCallback),
    /// The collection in flight handed its snapshot over: the next one may start.
    Finished,
    /// A read is over: its samplers come back (from its blocking thread, possibly
    /// long after its collection was handed over as late).
    SamplersBack(OnDemandSamplers),
}

/// What the actor starts with.
pub struct OnDemandArguments {
    /// The tick it shares with the merger's polls: the scope, the categories, the
    /// sampler actors.
    pub plan: Arc<TickPlan>,
    /// Its own OS samplers' factories (the sampler actors' own).
    pub factories: Vec<(SamplerCategory, SamplerFactory)>,
    /// How long a collection waits for its reads ([`ON_DEMAND_LIMIT`]).
    pub limit: Duration,
}

/// The actor.
pub struct OnDemandActor;

/// Its state.
pub struct OnDemandState {
    plan: Arc<TickPlan>,
    /// The categories its own samplers read.
    own: Arc<[SamplerCategory]>,
    /// Its samplers; `None` while a read holds them.
    samplers: Option<OnDemandSamplers>,
    /// Its claims on the sampler actors.
    claims: Arc<ActorClaims>,
    limit: Duration,
    /// A collection is in flight.
    busy: bool,
    /// Collections asked for while one was in flight, in order.
    waiting: VecDeque<SnapshotCallback>,
}

impl OnDemandState {
    /// Starts `done`'s collection in a task of its own: the actor stays free to queue
    /// the next ones and take its samplers back.
    fn start(&mut self, done: SnapshotCallback, myself: ActorRef<OnDemandMessage>) {
        self.busy = true;
        let collection = Collection {
            plan: Arc::clone(&self.plan),
            own: Arc::clone(&self.own),
            claims: Arc::clone(&self.claims),
            limit: self.limit,
            myself,
        };
        let samplers = self.samplers.take();
        tokio::spawn(collection.run(samplers, Delivery::new(done)));
    }
}

/// One collection, run in a task of its own.
struct Collection {
    plan: Arc<TickPlan>,
    own: Arc<[SamplerCategory]>,
    claims: Arc<ActorClaims>,
    limit: Duration,
    myself: ActorRef<OnDemandMessage>,
}

impl Collection {
    /// Collects and hands the snapshot over, then tells the actor it is done.
    async fn run(self, samplers: Option<OnDemandSamplers>, delivery: Delivery) {
        let deadline = Instant::now() + self.limit;
        match samplers {
            Some(samplers) => self.read(samplers, &delivery, deadline).await,
            None => self.without_samplers(&delivery, deadline).await,
        }
        let _ = self.myself.cast(OnDemandMessage::Finished);
    }

    /// Whether `category` is asked of its sampler actor (the actor has no sampler of
    /// its own for it).
    fn by_actor(&self, category: SamplerCategory) -> bool {
        !self.own.contains(&category)
    }

    /// An earlier read still holds the samplers (it ran past its limit): their
    /// categories are `null`; the sampler actors are still asked.
    async fn without_samplers(&self, delivery: &Delivery, deadline: Instant) {
        for category in self.own.iter() {
            self.plan
                .deadline_missed(*category, "still reading an earlier tick".to_owned());
        }
        let request = self.plan.request(SamplingSeries::OnDemand).await;
        let asked = self
            .plan
            .ask(&request, |c| self.by_actor(c), deadline, &self.claims);
        let outputs = self.plan.answers(asked, deadline, self.limit).await;
        delivery.deliver(self.plan.finish(&request, outputs));
    }

    /// One blocking task resolves the scope and reads every own category in turn; a
    /// category it has no sampler of is asked of its actor once the scope is known.
    /// Without an actor to ask, the blocking thread that reads finishes the snapshot
    /// and hands it over itself.
    async fn read(&self, samplers: OnDemandSamplers, delivery: &Delivery, deadline: Instant) {
        let series = SamplingSeries::OnDemand;
        let wants_actors = self.plan.categories.iter().any(|c| self.by_actor(*c));
        // The scope goes to the async side only when an actor needs it, so that a
        // collection without one wakes this task once.
        let (scope_sender, scope) = if wants_actors {
            let (sender, receiver) = oneshot::channel();
            (Some(sender), Some(receiver))
        } else {
            (None, None)
        };
        let finish_here = (!wants_actors).then(|| delivery.clone());
        let reads = tokio::task::spawn_blocking({
            let plan = Arc::clone(&self.plan);
            let myself = self.myself.clone();
            move || read_on_this_thread(&plan, samplers, scope_sender, finish_here, &myself)
        });
        let mut asked = Vec::new();
        let mut actors_request = None;
        if let Some(scope) = scope
            && let Ok(Ok(request)) = tokio::time::timeout_at(deadline.into(), scope).await
        {
            asked = self
                .plan
                .ask(&request, |c| self.by_actor(c), deadline, &self.claims);
            actors_request = Some(request);
        }
        let (request, mut outputs) = match tokio::time::timeout_at(deadline.into(), reads).await {
            // Finished and handed over on the blocking thread.
            Ok(Ok(None)) => return,
            Ok(Ok(Some(read))) => read,
            late => {
                let detail = match late {
                    Err(_) => format!("no answer within {} ms", self.limit.as_millis()),
                    Ok(Err(error)) => error.to_string(),
                    Ok(Ok(_)) => return,
                };
                for category in self.own.iter() {
                    self.plan.deadline_missed(*category, detail.clone());
                }
                let request = actors_request
                    .take()
                    .unwrap_or_else(|| self.plan.unavailable(series, detail));
                (request, Vec::new())
            }
        };
        outputs.extend(self.plan.answers(asked, deadline, self.limit).await);
        delivery.deliver(self.plan.finish(&request, outputs));
    }
}

/// The blocking half of a read: the scope resolved (sent on to the async side when it
/// asks actors), every own category read, the samplers given back to the actor; then
/// the snapshot handed over here when `finish_here`, else the request and outputs
/// returned.
fn read_on_this_thread(
    plan: &TickPlan,
    mut samplers: OnDemandSamplers,
    scope_sender: Option<oneshot::Sender<SampleRequest>>,
    finish_here: Option<Delivery>,
    myself: &ActorRef<OnDemandMessage>,
) -> Option<(SampleRequest, Vec<(usize, CategoryOutput)>)> {
    let request = plan.prepared_request(SamplingSeries::OnDemand);
    if let Some(sender) = scope_sender {
        let _ = sender.send(request.clone());
    }
    let outputs = plan.positioned(samplers.sample(&request, plan.diagnostics.as_ref()));
    match finish_here {
        Some(delivery) => {
            delivery.deliver(plan.finish(&request, outputs));
            // After the hand-over: the caller's wait ends first.
            let _ = myself.cast(OnDemandMessage::SamplersBack(samplers));
            None
        }
        None => {
            let _ = myself.cast(OnDemandMessage::SamplersBack(samplers));
            Some((request, outputs))
        }
    }
}

impl Actor for OnDemandActor {
    type Msg = OnDemandMessage;
    type State = OnDemandState;
    type Arguments = OnDemandArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let claims = ActorClaims::for_plan(&arguments.plan);
        // Built on a blocking thread: a sampler's first reads (its baselines) touch /proc.
        let samplers =
            tokio::task::spawn_blocking(move || OnDemandSamplers::new(arguments.factories)).await?;
        Ok(OnDemandState {
            own: samplers.categories().into(),
            samplers: Some(samplers),
            plan: arguments.plan,
            claims: Arc::new(claims),
            limit: arguments.limit,
            busy: false,
            waiting: VecDeque::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            OnDemandMessage::Collect(done) if state.busy => state.waiting.push_back(done),
            OnDemandMessage::Collect(done) => state.start(done, myself),
            OnDemandMessage::Finished => {
                state.busy = false;
                if let Some(next) = state.waiting.pop_front() {
                    state.start(next, myself);
                }
            }
            OnDemandMessage::SamplersBack(samplers) => state.samplers = Some(samplers),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::{Condvar, Mutex, PoisonError};

    use super::*;
    use crate::on_demand::callback::SnapshotResult;
    use crate::samplers::environment::EnvironmentReader;
    use crate::samplers::registry::SamplerRegistry;
    use crate::samplers::{CategoryReading, CategorySampler, SamplerOutput};
    use crate::scope::ScopeTarget;
    use wattline_config::ResourceMetricsConfig;

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

        fn reads(&self) -> u32 {
            self.lock().0
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

    /// A memory sampler factory whose reads wait at `gate`.
    fn gated_memory(gate: &Arc<Gate>) -> SamplerFactory {
        let root = std::path::PathBuf::from("/");
        let (_, memory) = crate::categories::sampler_factories(&root, &Default::default())
            .into_iter()
            .find(|(category, _)| *category == SamplerCategory::Memory)
            .expect("a memory sampler");
        let gate = Arc::clone(gate);
        Arc::new(move || {
            Box::new(GatedSampler {
                inner: memory(),
                gate: Arc::clone(&gate),
            }) as Box<dyn CategorySampler>
        })
    }

    /// A tick over this process's memory only, asking the actors of `registry`.
    fn memory_plan(registry: SamplerRegistry) -> Arc<TickPlan> {
        let root = std::path::PathBuf::from("/");
        let identity = crate::scope::identify_process(&root, std::process::id()).unwrap();
        Arc::new(TickPlan {
            environment: Arc::new(EnvironmentReader::new(&root)),
            root,
            target: ScopeTarget::ApplicationProcess(identity),
            command_group: None,
            config: ResourceMetricsConfig::default(),
            categories: vec![SamplerCategory::Memory],
            registry,
            diagnostics: None,
        })
    }

    /// An on-demand actor over `plan`, its own memory sampler read through `gate`, its
    /// collections bounded by `limit`.
    async fn on_demand_over(
        plan: Arc<TickPlan>,
        gate: &Arc<Gate>,
        limit: Duration,
    ) -> ActorRef<OnDemandMessage> {
        let arguments = OnDemandArguments {
            plan,
            factories: vec![(SamplerCategory::Memory, gated_memory(gate))],
            limit,
        };
        Actor::spawn(None, OnDemandActor, arguments)
            .await
            .unwrap()
            .0
    }

    /// An on-demand actor over this process's memory only, read through `gate`, its
    /// collections bounded by `limit`.
    async fn gated_actor(gate: &Arc<Gate>, limit: Duration) -> ActorRef<OnDemandMessage> {
        on_demand_over(memory_plan(SamplerRegistry::default()), gate, limit).await
    }

    /// Asks `actor` for a snapshot; its answer comes down the returned channel.
    fn collect(actor: &ActorRef<OnDemandMessage>) -> mpsc::Receiver<SnapshotResult> {
        let (sender, answer) = mpsc::channel();
        let done = SnapshotCallback::new(move |result| {
            let _ = sender.send(result);
        });
        actor.cast(OnDemandMessage::Collect(done)).unwrap();
        answer
    }

    /// The next answer on `answer`, waited for on a blocking thread (at most 10 s).
    async fn answer_of(answer: mpsc::Receiver<SnapshotResult>) -> (SnapshotResult, bool) {
        tokio::task::spawn_blocking(move || {
            let first = answer
                .recv_timeout(Duration::from_secs(10))
                .expect("an answer");
            (first, answer.try_recv().is_err())
        })
        .await
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn collections_queue_one_that_hangs_is_handed_over_at_its_limit_and_the_samplers_come_back()
     {
        let gate = Arc::new(Gate::default());
        // Opened on the way out too: a failed assertion must not leave a read hung,
        // which the runtime would wait for forever.
        let _opened_at_the_end = OpenOnDrop(Arc::clone(&gate));
        let actor = gated_actor(&gate, Duration::from_millis(300)).await;

        // The first collection's read hangs; a second, asked meanwhile, waits its turn
        // (one read at a time on the samplers).
        let first = collect(&actor);
        let second = collect(&actor);
        // Past its limit the first is handed over with its hung category null; the
        // second then runs without the samplers the hung read holds: null too, at once.
        let (late, once) = answer_of(first).await;
        assert!(late.unwrap().memory.is_none(), "a hung category is null");
        assert!(once, "handed over once");
        let (without, _) = answer_of(second).await;
        assert!(without.unwrap().memory.is_none());
        assert_eq!(
            gate.reads(),
            1,
            "the second did not read: the samplers were held"
        );

        // The hung read ends: its snapshot goes to no one (its caller has its answer),
        // and the samplers come back for the next collection, which reads.
        gate.open();
        let started = std::time::Instant::now();
        loop {
            let (fresh, _) = answer_of(collect(&actor)).await;
            if fresh.unwrap().memory.is_some() {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(10), "samplers back");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        actor.stop(None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_collection_asked_of_a_stopped_actor_is_answered_stopped() {
        let gate = Arc::new(Gate::default());
        gate.open();
        let actor = gated_actor(&gate, ON_DEMAND_LIMIT).await;
        let (fresh, _) = answer_of(collect(&actor)).await;
        assert!(fresh.unwrap().memory.is_some());
        actor.stop_and_wait(None, None).await.unwrap();
        let (sender, answer) = mpsc::channel();
        let done = SnapshotCallback::new(move |result| {
            let _ = sender.send(result);
        });
        // The cast fails, and the dropped callback says why.
        assert!(actor.cast(OnDemandMessage::Collect(done)).is_err());
        let (stopped, _) = answer_of(answer).await;
        assert!(matches!(stopped, Err(crate::error::PipelineError::Stopped)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_poll_holds_no_collection_and_a_hung_collection_holds_no_poll() {
        use crate::merger::actor::{MergerActor, MergerArguments, MergerMessage};
        use crate::samplers::actor::SamplerActor;
        use wattline_model::events::CollectingEventSink;

        // The polls read memory through a sampler actor behind `polls`; the on-demand
        // actor reads with a sampler of its own behind `collections`.
        let (polls, collections) = (Arc::new(Gate::default()), Arc::new(Gate::default()));
        let _opened = (
            OpenOnDrop(Arc::clone(&polls)),
            OpenOnDrop(Arc::clone(&collections)),
        );
        let registry = SamplerRegistry::default();
        let (sampler, _) = Actor::spawn(None, SamplerActor, gated_memory(&polls)())
            .await
            .unwrap();
        registry.set(SamplerCategory::Memory, Some(sampler));
        let plan = memory_plan(registry);
        let sink = Arc::new(CollectingEventSink::default());
        let arguments = MergerArguments {
            plan: Arc::clone(&plan),
            sink: sink.clone(),
            deadline: Duration::from_secs(60),
            root_scope: uuid::Uuid::now_v7(),
            energy: None,
            scope_stream: None,
        };
        let (merger, _) = Actor::spawn(None, MergerActor, arguments).await.unwrap();
        let on_demand = on_demand_over(plan, &collections, ON_DEMAND_LIMIT).await;

        // A poll whose read hangs: a collection meanwhile reads and answers.
        collections.open();
        let (done, poll_over) = oneshot::channel();
        merger.cast(MergerMessage::Poll { done }).unwrap();
        let started = Arc::clone(&polls);
        tokio::task::spawn_blocking(move || started.wait_for_reads(1))
            .await
            .unwrap();
        let (fresh, _) = answer_of(collect(&on_demand)).await;
        assert!(fresh.unwrap().memory.is_some());
        assert_eq!(polls.reads(), 1, "the poll is still reading");

        // The poll ends with its mark; then a collection that hangs holds no poll.
        polls.open();
        assert!(
            tokio::time::timeout(Duration::from_secs(10), poll_over)
                .await
                .is_ok(),
            "the first poll ended"
        );
        let hung = Arc::new(Gate::default());
        let _hung_opened = OpenOnDrop(Arc::clone(&hung));
        let hung_on_demand = on_demand_over(
            memory_plan(SamplerRegistry::default()),
            &hung,
            ON_DEMAND_LIMIT,
        )
        .await;
        let waiting = collect(&hung_on_demand);
        let started = Arc::clone(&hung);
        tokio::task::spawn_blocking(move || started.wait_for_reads(1))
            .await
            .unwrap();
        let (done, poll_over) = oneshot::channel();
        merger.cast(MergerMessage::Poll { done }).unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(10), poll_over)
                .await
                .is_ok(),
            "a poll while a collection hangs ended"
        );
        assert_eq!(hung.reads(), 1, "the collection is still reading");
        let marks = support_marks(&sink);
        assert_eq!(marks, 2, "one mark per poll");
        hung.open();
        let (late, _) = answer_of(waiting).await;
        assert!(late.unwrap().memory.is_some());
        merger.stop(None);
        on_demand.stop(None);
        hung_on_demand.stop(None);
    }

    /// How many resource marks `sink` received.
    fn support_marks(sink: &wattline_model::events::CollectingEventSink) -> usize {
        sink.events()
            .iter()
            .filter(|event| matches!(event, wattline_model::events::PipelineEvent::MarkCopies(_)))
            .count()
    }
}

//! The merger's side of the scope stream ([`crate::scope_boundary::stream`]): each
//! boundary it takes is applied to the scope table and kept for the energy actor. The
//! start and end events of a batch the merger took go to the sink as one batch, in
//! order with the polls' marks (sent before anything else the merger sends), then the
//! boundaries go to the energy actor in the order taken, one input per batch, or
//! sooner, before anything the energy actor must see after them (a report, shutdown's
//! ends).

use chrono::{DateTime, Utc};
use ractor::RpcReplyPort;
use uuid::Uuid;

use super::scopes::ScopeTable;
use crate::energy::input::{EnergyInbox, EnergyInput};
use crate::scope_boundary::{BoundaryAt, ScopeBoundary};
use wattline_model::events::{EventSink, PipelineEvent};
use wattline_model::report::EnergyReport;

/// The scope table and the boundaries on their way to the energy actor.
pub(super) struct Boundaries {
    scopes: ScopeTable,
    /// `None` when the energy component is off: boundaries stop here.
    energy: Option<EnergyInbox>,
    /// Applied, not yet sent on, in the order taken.
    batch: Vec<ScopeBoundary>,
    /// The start and end events of what was applied, not yet sent, in order.
    events: Vec<PipelineEvent>,
}

impl Boundaries {
    /// An empty table under the root scope `root`, forwarding to `energy`.
    pub(super) fn new(root: Uuid, energy: Option<EnergyInbox>) -> Self {
        Boundaries {
            scopes: ScopeTable::new(root),
            energy,
            batch: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The live scopes' table.
    pub(super) fn scopes(&self) -> &ScopeTable {
        &self.scopes
    }

    /// Applies `boundary` (its event waits for [`Self::send_events`]) and keeps it for
    /// the energy actor. An end of a scope that is not live changes nothing and goes
    /// no further.
    pub(super) fn take(&mut self, boundary: ScopeBoundary) {
        if self.scopes.apply(&boundary, &mut self.events) && self.energy.is_some() {
            self.batch.push(boundary);
        }
    }

    /// Sends the scope events applied so far to `sink`, as one batch: the merger calls
    /// it before it sends anything else, so the order of its events holds.
    pub(super) fn send_events(&mut self, sink: &dyn EventSink) {
        match self.events.len() {
            0 => {}
            1 => self.events.drain(..).for_each(|event| sink.send(event)),
            _ => sink.send_batch(std::mem::take(&mut self.events)),
        }
    }

    /// Sends the scope events on to `sink`, then what was kept on to the energy actor,
    /// as one input, if anything was (so the energy actor's events about a scope come
    /// after the scope's own).
    pub(super) fn forward(&mut self, sink: &dyn EventSink) {
        self.send_events(sink);
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        if let Some(energy) = &self.energy {
            energy.send(EnergyInput::Boundaries(batch));
        }
    }

    /// Ends every live scope at `at` (`wall` on the wall clock), their end events
    /// waiting for [`Self::send_events`], and keeps the ends for the energy actor.
    pub(super) fn end_all(&mut self, at: BoundaryAt, wall: DateTime<Utc>) {
        let ends = self.scopes.end_all(at, wall, &mut self.events);
        if self.energy.is_some() {
            self.batch.extend(ends);
        }
    }

    /// Sends what was kept on, then asks the energy actor for the report as of `at`,
    /// which it sends to `reply`: the report has every boundary taken before.
    pub(super) fn report(
        &mut self,
        at: std::time::Instant,
        wall: DateTime<Utc>,
        final_report: bool,
        reply: RpcReplyPort<EnergyReport>,
        sink: &dyn EventSink,
    ) {
        self.forward(sink);
        // Without an energy actor the reply is dropped: the caller hears it stopped.
        if let Some(energy) = &self.energy {
            energy.report_to(at, wall, final_report, reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::{Duration, Instant, SystemTime};

    use ractor::{Actor, ActorProcessingErr, ActorRef};
    use wattline_config::ResourceMetricsConfig;
    use wattline_model::events::{CollectingEventSink, PipelineEvent, ScopeCategory};

    use super::*;
    use crate::energy::input::EnergyMessage;
    use crate::merger::actor::{MergerActor, MergerArguments, MergerMessage};
    use crate::merger::tick_plan::TickPlan;
    use crate::samplers::environment::EnvironmentReader;
    use crate::samplers::registry::SamplerRegistry;
    use crate::scope::ScopeTarget;
    use crate::scope_boundary::Stamp;
    use crate::scope_boundary::stream::StreamItem;

    /// What the energy actor was sent, as the test compares it.
    #[derive(Debug, Clone, PartialEq)]
    enum Seen {
        /// One batch: each boundary's kind and scope.
        Batch(Vec<(&'static str, Option<Uuid>)>),
        Report,
    }

    fn kind(boundary: &ScopeBoundary) -> (&'static str, Option<Uuid>) {
        match boundary {
            ScopeBoundary::Started { uuid, .. } => ("start", Some(*uuid)),
            ScopeBoundary::Ended { uuid, .. } => ("end", Some(*uuid)),
            ScopeBoundary::WindowCloses { .. } => ("close", None),
        }
    }

    /// Stands in for the energy actor: keeps what it is sent, in order.
    struct Recorder;

    impl Actor for Recorder {
        type Msg = EnergyMessage;
        type State = Arc<Mutex<Vec<Seen>>>;
        type Arguments = Arc<Mutex<Vec<Seen>>>;

        async fn pre_start(
            &self,
            _myself: ActorRef<Self::Msg>,
            seen: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(seen)
        }

        async fn handle(
            &self,
            _myself: ActorRef<Self::Msg>,
            message: Self::Msg,
            seen: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let seen_now = match message {
                EnergyMessage::Input(EnergyInput::Boundaries(batch)) => {
                    Seen::Batch(batch.iter().map(kind).collect())
                }
                EnergyMessage::Report { .. } => Seen::Report,
                EnergyMessage::Input(_) => return Ok(()),
            };
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(seen_now);
            Ok(())
        }
    }

    struct Spawned {
        merger: ActorRef<MergerMessage>,
        /// The scope stream, sent on directly (no stamps read).
        stream: tokio::sync::mpsc::UnboundedSender<StreamItem>,
        energy: ActorRef<EnergyMessage>,
        seen: Arc<Mutex<Vec<Seen>>>,
        sink: Arc<CollectingEventSink>,
    }

    impl Spawned {
        /// Once the merger has handled everything sent to it, what the energy actor
        /// was sent.
        async fn seen(&self) -> Vec<Seen> {
            let (reply, written) = ractor::concurrency::oneshot();
            self.send(StreamItem::Written(reply.into()));
            written.await.expect("the merger answers");
            // The recorder handles what the merger sent it before this probe, which it
            // leaves unanswered.
            let _ = self
                .energy
                .call(
                    |reply| EnergyMessage::Report {
                        at: Instant::now(),
                        wall: Utc::now(),
                        final_report: false,
                        reply,
                    },
                    None,
                )
                .await;
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            // The probe above.
            seen.pop();
            seen
        }

        fn send(&self, item: StreamItem) {
            self.stream.send(item).expect("the merger takes its stream");
        }

        fn stop(&self) {
            self.merger.stop(None);
            self.energy.stop(None);
        }
    }

    /// A merger with no categories and no polls, sending on to a [`Recorder`].
    async fn spawn() -> Spawned {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (energy, _) = Actor::spawn(None, Recorder, Arc::clone(&seen))
            .await
            .expect("the recorder");
        let sink = Arc::new(CollectingEventSink::default());
        let (stream, scope_stream) = tokio::sync::mpsc::unbounded_channel();
        let mut config = ResourceMetricsConfig::default();
        config.polling.enabled = false;
        let root = std::path::PathBuf::from("/");
        let plan = Arc::new(TickPlan {
            environment: Arc::new(EnvironmentReader::new(&root)),
            root,
            target: ScopeTarget::Global,
            command_group: None,
            config,
            categories: Vec::new(),
            registry: SamplerRegistry::default(),
            diagnostics: None,
        });
        let arguments = MergerArguments {
            plan,
            sink: sink.clone(),
            deadline: Duration::from_secs(1),
            root_scope: Uuid::now_v7(),
            energy: Some(EnergyInbox::new(energy.clone())),
            scope_stream: Some(scope_stream),
        };
        let (merger, _) = Actor::spawn(None, MergerActor, arguments)
            .await
            .expect("the merger");
        Spawned {
            merger,
            stream,
            energy,
            seen,
            sink,
        }
    }

    fn started(uuid: Uuid) -> StreamItem {
        let (at, wall) = (Stamp::for_tests(Instant::now()), SystemTime::now().into());
        StreamItem::Boundary(ScopeBoundary::plain_start(uuid, at, wall))
    }

    fn ended(uuid: Uuid) -> StreamItem {
        let (at, wall) = (Stamp::for_tests(Instant::now()), SystemTime::now().into());
        StreamItem::Boundary(ScopeBoundary::plain_end(uuid, Vec::new(), at, wall))
    }

    // On one thread: the merger runs only once the test awaits, so every boundary
    // below is on its stream before it takes the first.
    #[tokio::test]
    async fn boundaries_go_on_to_the_energy_actor_in_the_order_sent_in_batches_of_at_most_1024() {
        let spawned = spawn().await;
        let uuids: Vec<Uuid> = (0..1_500).map(|_| Uuid::now_v7()).collect();
        let mut sent = Vec::new();
        for uuid in &uuids {
            spawned.send(started(*uuid));
            sent.push(("start", Some(*uuid)));
        }
        for uuid in uuids.iter().rev() {
            spawned.send(ended(*uuid));
            sent.push(("end", Some(*uuid)));
        }
        let seen = spawned.seen().await;
        let sizes: Vec<usize> = seen
            .iter()
            .map(|seen| match seen {
                Seen::Batch(batch) => batch.len(),
                Seen::Report => 0,
            })
            .collect();
        assert_eq!(sizes, [1_024, 1_024, 952], "a batch per 1024 taken");
        let forwarded: Vec<_> = seen
            .into_iter()
            .flat_map(|seen| match seen {
                Seen::Batch(batch) => batch,
                Seen::Report => Vec::new(),
            })
            .collect();
        assert_eq!(forwarded, sent);
        spawned.stop();
    }

    #[tokio::test]
    async fn an_end_of_a_scope_that_is_not_live_goes_no_further() {
        let spawned = spawn().await;
        let (live, unknown) = (Uuid::now_v7(), Uuid::now_v7());
        for message in [started(live), ended(unknown), ended(live), ended(live)] {
            spawned.send(message);
        }
        let seen = spawned.seen().await;
        let expected = Seen::Batch(vec![("start", Some(live)), ("end", Some(live))]);
        assert_eq!(seen, [expected]);
        spawned.stop();
    }

    #[tokio::test]
    async fn a_report_reaches_the_energy_actor_after_every_boundary_taken_before_it() {
        let spawned = spawn().await;
        let uuid = Uuid::now_v7();
        spawned.send(started(uuid));
        let (reply, _answer) = ractor::concurrency::oneshot();
        let report = StreamItem::Report {
            at: Instant::now(),
            wall: Utc::now(),
            final_report: false,
            reply: reply.into(),
        };
        spawned.send(report);
        spawned.send(ended(uuid));
        let seen = spawned.seen().await;
        let expected = [
            Seen::Batch(vec![("start", Some(uuid))]),
            Seen::Report,
            Seen::Batch(vec![("end", Some(uuid))]),
        ];
        assert_eq!(seen, expected);
        spawned.stop();
    }

    #[tokio::test]
    async fn closing_ends_every_live_scope_at_its_stamp_and_sends_the_ends_on() {
        let spawned = spawn().await;
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        for message in [started(a), started(b), ended(a), started(c)] {
            spawned.send(message);
        }
        let closes = SystemTime::now() + Duration::from_secs(1);
        let (reply, closed) = ractor::concurrency::oneshot();
        let close = StreamItem::Close {
            at: Stamp::for_tests(Instant::now() + Duration::from_secs(1)),
            wall: closes.into(),
            reply: reply.into(),
        };
        spawned.send(close);
        closed
            .await
            .expect("the merger answers once the ends are sent");
        let seen = spawned.seen().await;
        let expected = Seen::Batch(vec![
            ("start", Some(a)),
            ("start", Some(b)),
            ("end", Some(a)),
            ("start", Some(c)),
            ("end", Some(b)),
            ("end", Some(c)),
        ]);
        assert_eq!(seen, [expected]);
        // Their end events carry the close's instant.
        let ends: Vec<(Uuid, chrono::DateTime<Utc>)> = spawned
            .sink
            .events()
            .into_iter()
            .filter_map(|event| match event {
                PipelineEvent::Scope(scope) if scope.scope_category == ScopeCategory::End => {
                    Some((scope.uuid, scope.timestamp))
                }
                _ => None,
            })
            .collect();
        let closes = chrono::DateTime::<Utc>::from(closes);
        assert_eq!(ends[1..], [(b, closes), (c, closes)]);
        spawned.stop();
    }
}

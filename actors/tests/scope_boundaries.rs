//! Scope boundaries reach the merger through its mailbox, and the energy actor through
//! the merger: a scope's start event comes before its end and before any mark under it,
//! with polls running all the while; a burst from many tasks at once loses none; and at
//! shutdown the merger ends the scopes still live and the energy actor books those
//! ends.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;
use wattline_actors::pipeline::RunningPipeline;
use wattline_config::energy::EnergySettings;
use wattline_model::energy::EnergyRecord;
use wattline_model::events::{CollectingEventSink, PipelineEvent, ScopeCategory};

mod pipeline_support;

async fn spawn(poll_millis: u64, sink: Arc<CollectingEventSink>) -> RunningPipeline {
    let resource = pipeline_support::polling(poll_millis);
    let energy = EnergySettings::default();
    RunningPipeline::spawn(pipeline_support::spec(
        Some(resource),
        Some(energy),
        None,
        sink,
    ))
    .await
    .expect("the pipeline")
}

/// Each Agent scope's start and end positions in the event stream (the root's left
/// out), every start and end counted.
#[derive(Default)]
struct Positions {
    starts: HashMap<Uuid, Vec<usize>>,
    ends: HashMap<Uuid, Vec<usize>>,
    /// Each mark copy's position and parent.
    marks: Vec<(usize, Uuid)>,
}

fn positions(events: &[PipelineEvent], root: Uuid) -> Positions {
    let mut found = Positions::default();
    for (index, event) in events.iter().enumerate() {
        match event {
            PipelineEvent::Scope(scope) if scope.uuid != root => {
                let side = match scope.scope_category {
                    ScopeCategory::Start => &mut found.starts,
                    ScopeCategory::End => &mut found.ends,
                };
                side.entry(scope.uuid).or_default().push(index);
            }
            PipelineEvent::MarkCopies(copies) => found.marks.extend(
                copies
                    .copies
                    .iter()
                    .filter_map(|copy| copy.parent_uuid)
                    .map(|parent| (index, parent)),
            ),
            _ => {}
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_between_two_polls_starts_before_it_ends_and_before_any_mark_under_it() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = spawn(10, Arc::clone(&sink)).await;
    // An outer scope live throughout (so marks go under scopes), and 300 short ones
    // inside it: some ended at once, some after a poll or two.
    let outer = pipeline.start_agent_scope("outer");
    let mut started = vec![outer];
    for n in 0..300u64 {
        let scope = pipeline.start_agent_scope_in("step", Some(outer));
        started.push(scope);
        if n % 3 != 0 {
            tokio::time::sleep(Duration::from_millis(n % 3)).await;
        }
        pipeline.end_agent_scope(scope);
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    pipeline.end_agent_scope(outer);
    pipeline.scope_events_written().await;
    pipeline.shutdown().await;

    let events = sink.events();
    let found = positions(&events, pipeline.root_scope());
    for uuid in &started {
        let (starts, ends) = (&found.starts[uuid], &found.ends[uuid]);
        assert_eq!((starts.len(), ends.len()), (1, 1), "scope {uuid}");
        assert!(starts[0] < ends[0], "scope {uuid} ended before it started");
    }
    assert_eq!(found.starts.len(), started.len(), "a scope nobody started");
    let under_outer = found.marks.iter().filter(|(_, p)| *p == outer).count();
    assert!(under_outer > 0, "no poll's mark went under the outer scope");
    for (index, parent) in &found.marks {
        let Some(starts) = found.starts.get(parent) else {
            continue; // the root
        };
        assert!(starts[0] < *index, "a mark under {parent} before its start");
        assert!(
            *index < found.ends[parent][0],
            "a mark under {parent} after its end"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_ten_thousand_scopes_from_many_tasks_loses_none() {
    const TASKS: usize = 16;
    const EACH: usize = 625;
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = Arc::new(spawn(20, Arc::clone(&sink)).await);
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let pipeline = Arc::clone(&pipeline);
            tokio::spawn(async move {
                let name = format!("task-{task}");
                let mut uuids = Vec::with_capacity(EACH);
                for n in 0..EACH {
                    let uuid = pipeline.start_agent_scope(&name);
                    if n % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                    pipeline.end_agent_scope(uuid);
                    uuids.push(uuid);
                }
                uuids
            })
        })
        .collect();
    let mut started = HashSet::new();
    for task in tasks {
        started.extend(task.await.expect("a task panicked"));
    }
    assert_eq!(started.len(), TASKS * EACH, "UUIDs are unique");
    pipeline.scope_events_written().await;
    // The final report is taken after the energy actor has every boundary.
    pipeline.final_report().await.expect("a report");
    pipeline.shutdown().await;

    let events = sink.events();
    let found = positions(&events, pipeline.root_scope());
    assert_eq!(found.starts.len(), TASKS * EACH);
    assert_eq!(found.ends.len(), TASKS * EACH);
    for uuid in &started {
        let (starts, ends) = (&found.starts[uuid], &found.ends[uuid]);
        assert_eq!((starts.len(), ends.len()), (1, 1), "scope {uuid}");
        assert!(starts[0] < ends[0], "scope {uuid} ended before it started");
    }
    let mut booked_starts = HashSet::new();
    let mut booked_ends = HashSet::new();
    for event in &events {
        if let PipelineEvent::Energy { record, .. } = event {
            match record {
                EnergyRecord::ScopeStarted { uuid, .. } => assert!(booked_starts.insert(*uuid)),
                EnergyRecord::ScopeEnded { uuid, .. } => {
                    assert!(
                        booked_starts.contains(uuid),
                        "{uuid} ended before it started"
                    );
                    assert!(booked_ends.insert(*uuid));
                }
                _ => {}
            }
        }
    }
    assert_eq!(booked_starts, started);
    assert_eq!(booked_ends, started);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_shutdown_the_merger_ends_every_live_scope_and_the_energy_actor_books_those_ends() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = spawn(10, Arc::clone(&sink)).await;
    let live: Vec<Uuid> = (0..3)
        .map(|n| pipeline.start_agent_scope(&format!("live-{n}")))
        .collect();
    let done = pipeline.start_agent_scope("done");
    pipeline.end_agent_scope(done);
    tokio::time::sleep(Duration::from_millis(30)).await;
    // No final report: nothing but the shutdown ends the live scopes.
    pipeline.shutdown().await;

    let events = sink.events();
    let ends: HashMap<Uuid, Vec<chrono::DateTime<chrono::Utc>>> =
        events.iter().fold(HashMap::new(), |mut ends, event| {
            if let PipelineEvent::Scope(scope) = event
                && scope.scope_category == ScopeCategory::End
                && scope.uuid != pipeline.root_scope()
            {
                ends.entry(scope.uuid).or_default().push(scope.timestamp);
            }
            ends
        });
    let booked: HashMap<Uuid, Vec<chrono::DateTime<chrono::Utc>>> =
        events.iter().fold(HashMap::new(), |mut booked, event| {
            if let PipelineEvent::Energy {
                record: EnergyRecord::ScopeEnded { uuid, wall, .. },
                ..
            } = event
            {
                booked.entry(*uuid).or_default().push(*wall);
            }
            booked
        });
    // Each scope ended once, in the event file and in the energy account, at the same
    // instant.
    assert_eq!(ends.len(), live.len() + 1);
    assert_eq!(booked, ends);
    for uuid in live.iter().chain([&done]) {
        assert_eq!(ends[uuid].len(), 1, "scope {uuid}");
    }
}

/// A sink whose room stays shut until opened: an exporter that has fallen behind.
#[derive(Default)]
struct ShutRoom {
    open: std::sync::atomic::AtomicBool,
    opened: tokio::sync::Notify,
    events: CollectingEventSink,
}

impl wattline_model::events::EventSink for ShutRoom {
    fn send(&self, event: PipelineEvent) {
        self.events.send(event);
    }

    fn room(&self) -> wattline_model::events::Room<'_> {
        Box::pin(async move {
            loop {
                let opened = self.opened.notified();
                if self.open.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                opened.await;
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporter_without_room_slows_the_copies_and_loses_none_while_scope_calls_go_on() {
    use std::sync::atomic::Ordering;
    let sink = Arc::new(ShutRoom::default());
    let resource = pipeline_support::polling(20);
    let pipeline = RunningPipeline::spawn(pipeline_support::spec(
        Some(resource),
        Some(EnergySettings::default()),
        None,
        sink.clone(),
    ))
    .await
    .expect("the pipeline");
    // The first poll's copies wait for room; the clock meanwhile skips its polls.
    let outer = pipeline.start_agent_scope("outer");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let missed_before = pipeline.missed_ticks();
    // Scope calls are sends: they go on while the copies wait.
    let steps: Vec<Uuid> = (0..100)
        .map(|_| {
            let step = pipeline.start_agent_scope_in("step", Some(outer));
            pipeline.end_agent_scope(step);
            step
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let copies_while_shut = sink
        .events
        .events()
        .iter()
        .filter(|event| matches!(event, PipelineEvent::MarkCopies(_)))
        .count();
    assert!(
        copies_while_shut <= 1,
        "{copies_while_shut} polls' copies went out with no room"
    );
    assert!(
        pipeline.missed_ticks() > missed_before,
        "the clock skipped the polls it could not start"
    );
    sink.open.store(true, Ordering::SeqCst);
    sink.opened.notify_waiters();
    // Polls come again, with `outer` live.
    tokio::time::sleep(Duration::from_millis(100)).await;
    pipeline.end_agent_scope(outer);
    pipeline.scope_events_written().await;
    pipeline.shutdown().await;

    let events = sink.events.events();
    let found = positions(&events, pipeline.root_scope());
    for uuid in steps.iter().chain([&outer]) {
        assert_eq!(
            (found.starts[uuid].len(), found.ends[uuid].len()),
            (1, 1),
            "scope {uuid}"
        );
    }
    assert!(
        found.marks.iter().any(|(_, parent)| *parent == outer),
        "the waiting copies went out under the outer scope"
    );
}

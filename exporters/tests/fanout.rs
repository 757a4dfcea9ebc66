//! The fan-out on its own: a stuck, failing or panicking exporter never delays the
//! sender or another exporter; drops and failures are counted exactly and reported
//! rate-limited; flush and shutdown are ordered after queued events and bounded.

mod support;

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use support::{at, resource_mark, uuid};
use wattline_diagnostics::{Diagnostics, DiagnosticsLimits, PipelineDiagnostics};
use wattline_exporters::{
    ExportError, ExportFailureSink, Exporter, ExporterKind, FanOut, FanOutError,
};
use wattline_model::events::{EventKind, PipelineEvent};

const WAIT: Duration = Duration::from_secs(30);

fn event(n: u64) -> PipelineEvent {
    resource_mark(uuid(u128::from(n)), None, at(n as i64, 0), n)
}

/// A lane budget that holds `n` of the test's events (all the same estimated size).
fn events(n: u64) -> u64 {
    n * event(1).estimated_bytes()
}

/// Counts what it exports; remembers the count at each flush.
#[derive(Clone, Default)]
struct Counting {
    exported: Arc<AtomicU64>,
    at_flush: Arc<Mutex<Vec<u64>>>,
    last_sample: Arc<AtomicU64>,
}

impl Exporter for Counting {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Stdout
    }
    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        let previous = self.exported.fetch_add(1, Ordering::SeqCst);
        if let PipelineEvent::Mark(mark) = event
            && let wattline_model::metric_measurements::MetricValue::U64(n) =
                mark.data.measurements[0].value
        {
            // Events arrive in the order they were sent.
            assert_eq!(n, previous + 1, "out of order");
            self.last_sample.store(n, Ordering::SeqCst);
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        self.at_flush
            .lock()
            .unwrap()
            .push(self.exported.load(Ordering::SeqCst));
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

/// Blocks every call until the gate opens.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

/// Opens the gate when dropped, so a failing test cannot leave a thread blocked
/// (the runtime waits for its blocking threads at the end of the test).
struct OpenOnDrop(Gate);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }
    fn wait(&self) {
        let mut open = self.0.0.lock().unwrap();
        while !*open {
            open = self.0.1.wait(open).unwrap();
        }
    }
}

struct Stuck {
    gate: Gate,
    exported: Arc<AtomicU64>,
}

impl Exporter for Stuck {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Otlp
    }
    fn export(&mut self, _: &PipelineEvent) -> Result<(), ExportError> {
        self.gate.wait();
        self.exported.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        self.gate.wait();
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

struct Failing(ExporterKind);

impl Exporter for Failing {
    fn kind(&self) -> ExporterKind {
        self.0
    }
    fn export(&mut self, _: &PipelineEvent) -> Result<(), ExportError> {
        Err(ExportError::Otlp {
            operation: "export",
            endpoint: "http://127.0.0.1:1".into(),
            message: "connection refused".into(),
        })
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

struct Panicking;

impl Exporter for Panicking {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Otlp
    }
    fn export(&mut self, _: &PipelineEvent) -> Result<(), ExportError> {
        panic!("exporter bug");
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

#[derive(Default)]
struct RecordingSink {
    failures: Mutex<Vec<(String, u64)>>,
    drops: Mutex<Vec<(String, u64)>>,
}

impl ExportFailureSink for RecordingSink {
    fn export_failed(
        &self,
        exporter: &str,
        _: ExporterKind,
        occurrences: NonZeroU64,
        _: Option<&ExportError>,
    ) {
        self.failures
            .lock()
            .unwrap()
            .push((exporter.into(), occurrences.get()));
    }
    fn events_dropped(
        &self,
        exporter: &str,
        _: ExporterKind,
        occurrences: NonZeroU64,
        _: &[(EventKind, u64)],
    ) {
        self.drops
            .lock()
            .unwrap()
            .push((exporter.into(), occurrences.get()));
    }
}

/// Waits (bounded) for a condition that the exporters make true on their own threads.
async fn wait_until(condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_exporter_never_delays_the_sender_or_another_exporter() {
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let stuck_exported = Arc::new(AtomicU64::new(0));
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes(
            "stuck",
            Stuck {
                gate: gate.clone(),
                exported: Arc::clone(&stuck_exported),
            },
            events(64),
        )
        .exporter_with_lane_bytes("counting", counting.clone(), events(20_000))
        .start()
        .await
        .unwrap();

    // The sender finishes 10 000 sends while one exporter cannot take a single event.
    let mut accepted = 0;
    for n in 1..=10_000 {
        accepted += fanout.send(event(n));
    }
    // It holds at most its mailbox and the events its stuck call took (no more than
    // the mailbox held when the call started).
    let stuck = fanout.stats_of("stuck").unwrap();
    assert!(stuck.dropped >= 10_000 - 2 * 64, "{stuck:?}");
    assert!(stuck.queued <= 2 * 64, "{stuck:?}");
    assert_eq!(accepted as u64, 10_000 + (10_000 - stuck.dropped));

    // The other exporter gets everything, in order, while the first is still stuck.
    wait_until(|| fanout.stats_of("counting").unwrap().exported == 10_000).await;
    let report = fanout.flush(Duration::from_millis(300)).await;
    assert_eq!(
        report.summary(),
        [("stuck", "timed_out"), ("counting", "done")]
    );
    assert_eq!(counting.exported.load(Ordering::SeqCst), 10_000);
    assert_eq!(counting.last_sample.load(Ordering::SeqCst), 10_000);
    assert_eq!(fanout.stats_of("counting").unwrap().dropped, 0);

    // Released, the stuck one works through what it kept; nothing is unaccounted for.
    gate.open();
    let report = fanout.flush(WAIT).await;
    assert!(report.all_done(), "{report:?}");
    let stuck = fanout.stats_of("stuck").unwrap();
    assert_eq!(stuck.exported + stuck.dropped, 10_000, "{stuck:?}");
    assert_eq!(stuck_exported.load(Ordering::SeqCst), stuck.exported);
    assert_eq!(stuck.queued, 0);
    assert!(fanout.shutdown(WAIT).await.all_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_answers_after_every_event_queued_before_it() {
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .lane_bytes(events(5_000))
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    for n in 1..=1_000 {
        fanout.send(event(n));
    }
    assert!(fanout.flush(WAIT).await.all_done());
    for n in 1_001..=1_500 {
        fanout.send(event(n));
    }
    assert!(fanout.flush(WAIT).await.all_done());
    assert_eq!(*counting.at_flush.lock().unwrap(), [1_000, 1_500]);
    let stats = fanout.stats_of("counting").unwrap();
    assert_eq!((stats.exported, stats.failed, stats.dropped), (1_500, 0, 0));
    assert!(fanout.shutdown(WAIT).await.all_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_counted_and_reported_rate_limited_with_exact_totals() {
    let sink = Arc::new(RecordingSink::default());
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .lane_bytes(events(1_000))
        .log_every(10)
        .failure_sink(sink.clone())
        .exporter("failing", Failing(ExporterKind::Otlp))
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    for n in 1..=95 {
        fanout.send(event(n));
    }
    assert!(fanout.shutdown(WAIT).await.all_done());
    let failing = fanout.stats_of("failing").unwrap();
    assert_eq!(
        (failing.exported, failing.failed, failing.dropped),
        (0, 95, 0)
    );
    assert_eq!(
        counting.exported.load(Ordering::SeqCst),
        95,
        "the failing one did not hold it back"
    );
    let reports: Vec<u64> = sink
        .failures
        .lock()
        .unwrap()
        .iter()
        .map(|(_, n)| *n)
        .collect();
    // First failure, then every 10th, then the remainder at shutdown.
    assert_eq!(reports, [1, 9, 10, 10, 10, 10, 10, 10, 10, 10, 5]);
    assert!(sink.drops.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_exporter_stops_alone_and_its_event_and_later_ones_count_as_dropped() {
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .exporter("panicking", Panicking)
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    fanout.send(event(1));
    let report = fanout.flush(WAIT).await;
    // Its flush was queued behind the event that killed it.
    assert_eq!(
        report.summary(),
        [("panicking", "stopped"), ("counting", "done")]
    );
    assert_eq!(fanout.send(event(2)), 1, "only the live exporter accepts");
    // The event it panicked on was never exported: dropped, as the one after it.
    assert_eq!(fanout.stats_of("panicking").unwrap().dropped, 2);
    assert_eq!(
        fanout.flush(WAIT).await.summary(),
        [("panicking", "stopped"), ("counting", "done")]
    );
    assert_eq!(counting.exported.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_events_are_dropped_and_counted() {
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    fanout.send(event(1));
    let report = fanout.shutdown(WAIT).await;
    assert!(report.all_done(), "{report:?}");
    assert_eq!(fanout.send(event(2)), 0);
    assert_eq!(fanout.stats_of("counting").unwrap().dropped, 1);
    assert_eq!(counting.exported.load(Ordering::SeqCst), 1);
    assert_eq!(
        fanout.flush(WAIT).await.summary(),
        [("counting", "stopped")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_batch_of_mark_copies_counts_every_copy() {
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    assert!(fanout.shutdown(WAIT).await.all_done());
    let copies = wattline_model::events::MarkCopies {
        timestamp: chrono::Utc::now(),
        name: "resource".into(),
        data: Arc::default(),
        copies: (0..250u128)
            .map(|n| wattline_model::events::MarkCopy {
                uuid: uuid::Uuid::from_u128(n),
                parent_uuid: None,
            })
            .collect(),
    };
    assert_eq!(fanout.send(PipelineEvent::MarkCopies(copies)), 0);
    // One mailbox slot, 250 lines lost.
    assert_eq!(fanout.stats_of("counting").unwrap().dropped, 250);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_of_a_stuck_exporter_times_out_and_the_rest_still_shut_down() {
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let counting = Counting::default();
    let fanout = FanOut::builder()
        .exporter(
            "stuck",
            Stuck {
                gate: gate.clone(),
                exported: Arc::default(),
            },
        )
        .exporter("counting", counting.clone())
        .start()
        .await
        .unwrap();
    fanout.send(event(1));
    let report = fanout.shutdown(Duration::from_secs(2)).await;
    assert_eq!(
        report.summary(),
        [("stuck", "timed_out"), ("counting", "done")]
    );
    gate.open();
    // The stuck exporter's task was stopped: nothing more reaches it.
    assert_eq!(fanout.send(event(2)), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_diagnostics_receive_exact_failure_and_drop_counts() {
    let diagnostics = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let pipeline = PipelineDiagnostics::register(&diagnostics).unwrap();
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let fanout = FanOut::builder()
        .log_every(7)
        .failure_sink(Arc::new(pipeline))
        .exporter_with_lane_bytes("atof", Failing(ExporterKind::Atof), events(1_000))
        .exporter_with_lane_bytes(
            "otlp",
            Stuck {
                gate: gate.clone(),
                exported: Arc::default(),
            },
            events(4),
        )
        .start()
        .await
        .unwrap();
    for n in 1..=50 {
        fanout.send(event(n));
    }
    gate.open();
    assert!(fanout.shutdown(WAIT).await.all_done());
    let dropped = fanout.stats_of("otlp").unwrap().dropped;
    assert!(dropped >= 50 - 2 * 4, "{dropped}");

    let snapshot = diagnostics.snapshot().unwrap();
    let exporter = snapshot
        .components
        .iter()
        .find(|component| component.name == "exporter")
        .expect("exporter component");
    let occurrences = |code: &str| exporter.code(code).map(|code| code.occurrences);
    assert_eq!(occurrences("exporter.atof.write_failed"), Some(50));
    assert_eq!(occurrences("exporter.otlp.dropped"), Some(dropped));
    assert_eq!(occurrences("exporter.otlp.export_failed"), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_asked_while_the_mailbox_is_full_waits_for_room_and_still_answers_last() {
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let exported = Arc::new(AtomicU64::new(0));
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes(
            "slow",
            Stuck {
                gate: gate.clone(),
                exported: Arc::clone(&exported),
            },
            events(2),
        )
        .start()
        .await
        .unwrap();
    // One event in the exporter's hands and two waiting: the mailbox is full.
    assert_eq!(fanout.send(event(1)), 1);
    wait_until(|| fanout.stats_of("slow").unwrap().queued == 0).await;
    assert_eq!(fanout.send(event(2)) + fanout.send(event(3)), 2);
    assert_eq!(fanout.send(event(4)), 0);

    let opener = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        gate.open();
    });
    let report = fanout.flush(WAIT).await;
    assert!(report.all_done(), "{report:?}");
    assert_eq!(
        exported.load(Ordering::SeqCst),
        3,
        "flushed after the queued events"
    );
    opener.await.unwrap();
    let slow = fanout.stats_of("slow").unwrap();
    assert_eq!((slow.exported, slow.dropped, slow.queued), (3, 1, 0));
    assert!(fanout.shutdown(WAIT).await.all_done());
}

/// Holds event 1 at a gate, says when it reaches event `announce`, and panics at event
/// `panic_at`; counts the events it exported.
struct Scripted {
    gate: Gate,
    reached: Arc<(Mutex<bool>, Condvar)>,
    announce: u64,
    panic_at: Option<u64>,
    hold_announced: Gate,
    exported: Arc<Mutex<Vec<u64>>>,
}

fn sample(event: &PipelineEvent) -> u64 {
    match event {
        PipelineEvent::Mark(mark) => match mark.data.measurements[0].value {
            wattline_model::metric_measurements::MetricValue::U64(n) => n,
            _ => panic!("not a test event"),
        },
        _ => panic!("not a test event"),
    }
}

impl Exporter for Scripted {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Otlp
    }
    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        let n = sample(event);
        if n == 1 {
            self.gate.wait();
        }
        if n == self.announce {
            *self.reached.0.lock().unwrap() = true;
            self.reached.1.notify_all();
            self.hold_announced.wait();
        }
        if Some(n) == self.panic_at {
            panic!("exporter bug at event {n}");
        }
        self.exported.lock().unwrap().push(n);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

impl Scripted {
    fn new(announce: u64, panic_at: Option<u64>) -> Scripted {
        Scripted {
            gate: Gate::default(),
            reached: Arc::default(),
            announce,
            panic_at,
            hold_announced: Gate::default(),
            exported: Arc::default(),
        }
    }

    fn wait_until_announced(reached: &(Mutex<bool>, Condvar)) {
        let mut seen = reached.0.lock().unwrap();
        while !*seen {
            let (next, timeout) = reached.1.wait_timeout(seen, WAIT).unwrap();
            assert!(!timeout.timed_out(), "the exporter never reached its event");
            seen = next;
        }
    }
}

/// A fan-out to `exporter` alone, sent event 1, whose call for it is now held at the
/// exporter's gate.
async fn held_at_event_one(exporter: Scripted) -> FanOut {
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes("scripted", exporter, events(1_000))
        .start()
        .await
        .unwrap();
    fanout.send(event(1));
    wait_until(|| fanout.stats_of("scripted").unwrap().queued == 0).await;
    fanout
}

/// A lane whose exporter took event 1 alone and then events 2 to `last` in one call,
/// now held at event 2 until `hold` opens.
struct HeldAtEventTwo {
    fanout: FanOut,
    exported: Arc<Mutex<Vec<u64>>>,
    hold: Gate,
    _open_at_exit: (OpenOnDrop, OpenOnDrop),
}

async fn held_at_event_two(last: u64) -> HeldAtEventTwo {
    let exporter = Scripted::new(2, None);
    let (gate, reached, hold) = (
        exporter.gate.clone(),
        Arc::clone(&exporter.reached),
        exporter.hold_announced.clone(),
    );
    let open_at_exit = (OpenOnDrop(gate.clone()), OpenOnDrop(hold.clone()));
    let exported = Arc::clone(&exporter.exported);
    let fanout = held_at_event_one(exporter).await;
    for n in 2..=last {
        fanout.send(event(n));
    }
    // Behind event 1's held call, in the mailbox.
    assert_eq!(fanout.stats_of("scripted").unwrap().queued as u64, last - 1);
    gate.open();
    tokio::task::spawn_blocking(move || Scripted::wait_until_announced(&reached))
        .await
        .unwrap();
    HeldAtEventTwo {
        fanout,
        exported,
        hold,
        _open_at_exit: open_at_exit,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_goes_to_the_exporter_in_one_call_not_one_hand_off_per_event() {
    let held = held_at_event_two(100).await;
    let fanout = &held.fanout;
    // The exporter is at event 2 and the mailbox is already empty: the call it is in
    // took all 99 (one hand-off per event would leave 98 waiting).
    assert_eq!(fanout.stats_of("scripted").unwrap().queued, 0);
    held.hold.open();
    assert!(fanout.flush(WAIT).await.all_done());
    assert_eq!(
        *held.exported.lock().unwrap(),
        (1..=100).collect::<Vec<_>>()
    );
    let stats = fanout.stats_of("scripted").unwrap();
    assert_eq!((stats.exported, stats.dropped, stats.queued), (100, 0, 0));
    assert!(fanout.shutdown(WAIT).await.all_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_inside_a_backlog_counts_its_event_and_those_after_it_as_dropped() {
    let exporter = Scripted::new(0, Some(5));
    let gate = exporter.gate.clone();
    let _open_gate = OpenOnDrop(gate.clone());
    let exported = Arc::clone(&exporter.exported);
    let fanout = held_at_event_one(exporter).await;
    // Events 2 to 10 wait behind the held call, in one backlog, then a flush.
    for n in 2..=10 {
        fanout.send(event(n));
    }
    gate.open();
    let report = fanout.flush(WAIT).await;
    assert_eq!(report.summary(), [("scripted", "stopped")]);
    // 1 to 4 went out; it panicked at 5; 5 to 10 are dropped, none unaccounted for.
    // (A flush sent after the lane closed hears so at once: the count may still be
    // settling.)
    wait_until(|| fanout.stats_of("scripted").unwrap().dropped == 6).await;
    assert_eq!(*exported.lock().unwrap(), [1, 2, 3, 4]);
    let stats = fanout.stats_of("scripted").unwrap();
    assert_eq!((stats.exported, stats.dropped, stats.queued), (4, 6, 0));
    assert_eq!(fanout.send(event(11)), 0);
    assert_eq!(fanout.stats_of("scripted").unwrap().dropped, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_that_gives_up_stops_the_call_in_progress_after_its_event_in_hand() {
    let held = held_at_event_two(10).await;
    let fanout = &held.fanout;
    let report = fanout.shutdown(Duration::from_millis(300)).await;
    assert_eq!(report.summary(), [("scripted", "timed_out")]);
    held.hold.open();
    // Event 2, in hand, goes out; 3 to 10 are counted, not exported after shutdown.
    wait_until(|| fanout.stats_of("scripted").unwrap().dropped == 8).await;
    assert_eq!(*held.exported.lock().unwrap(), [1, 2]);
    assert_eq!(fanout.stats_of("scripted").unwrap().exported, 2);
}

#[tokio::test]
async fn two_exporters_under_one_name_are_refused() {
    let error = FanOut::builder()
        .exporter("a", Counting::default())
        .exporter("b", Counting::default())
        .exporter("a", Counting::default())
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&error, FanOutError::DuplicateName(name) if name == "a"),
        "{error}"
    );
}

#[test]
fn starting_outside_a_tokio_runtime_is_an_error_not_a_panic() {
    let start = std::pin::pin!(
        FanOut::builder()
            .exporter("counting", Counting::default())
            .start()
    );
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    let std::task::Poll::Ready(result) = start.poll(&mut context) else {
        panic!("start awaits nothing");
    };
    let error = result.unwrap_err();
    assert!(
        matches!(&error, FanOutError::Spawn { name, .. } if name == "counting"),
        "{error}"
    );
}

/// An exporter held at `gate`, counting into `exported`.
fn stuck(gate: &Gate, exported: &Arc<AtomicU64>) -> Stuck {
    Stuck {
        gate: gate.clone(),
        exported: Arc::clone(exported),
    }
}

fn scope_event(n: u128) -> PipelineEvent {
    PipelineEvent::Scope(wattline_model::events::ScopeEvent {
        uuid: uuid::Uuid::from_u128(n),
        parent_uuid: None,
        timestamp: at(n as i64, 0),
        name: "agent".into(),
        scope_category: wattline_model::events::ScopeCategory::Start,
        kind: wattline_model::events::ScopeKind::Agent,
        attributes: Vec::new(),
    })
}

/// A poll's mark copied under one scope, `n`: the bulk.
fn copy(n: u128) -> PipelineEvent {
    PipelineEvent::MarkCopies(wattline_model::events::MarkCopies {
        timestamp: at(1, 0),
        name: "resource".into(),
        data: Arc::default(),
        copies: vec![wattline_model::events::MarkCopy {
            uuid: uuid::Uuid::from_u128(n),
            parent_uuid: None,
        }],
    })
}

fn mark_copies(copies: u128) -> PipelineEvent {
    PipelineEvent::MarkCopies(wattline_model::events::MarkCopies {
        timestamp: at(1, 0),
        name: "resource".into(),
        data: Arc::default(),
        copies: (0..copies)
            .map(|n| wattline_model::events::MarkCopy {
                uuid: uuid::Uuid::from_u128(n),
                parent_uuid: None,
            })
            .collect(),
    })
}

/// Whether `room()` resolves within `within`.
async fn has_room(fanout: &FanOut, within: Duration) -> bool {
    tokio::time::timeout(within, fanout.room()).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn room_pends_while_a_lane_is_over_its_byte_budget_and_resolves_once_it_drains() {
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let exported = Arc::new(AtomicU64::new(0));
    let copy_bytes = copy(1).estimated_bytes();
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes("slow", stuck(&gate, &exported), 3 * copy_bytes)
        .exporter("counting", Counting::default())
        .start()
        .await
        .unwrap();
    assert!(
        has_room(&fanout, Duration::ZERO).await,
        "empty lanes have room"
    );
    // Copy 1 in the exporter's hands, 2 to 4 fill its lane's budget for the bulk.
    fanout.send(copy(1));
    wait_until(|| fanout.stats_of("slow").unwrap().queued == 0).await;
    for n in 2..=4 {
        assert_eq!(fanout.send(copy(n)), 2);
    }
    let slow = fanout.stats_of("slow").unwrap();
    assert_eq!((slow.queued, slow.queued_bytes), (3, 3 * copy_bytes));
    assert!(!has_room(&fanout, Duration::from_millis(200)).await);
    // The record has an allowance of its own: a step's start still goes in.
    assert_eq!(fanout.send(scope_event(1)), 2);

    // Waiting, it is woken by the lane taking its events once the exporter frees up.
    let waiter = {
        let fanout = fanout.clone();
        tokio::spawn(async move { fanout.room().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    gate.open();
    tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    assert!(fanout.flush(WAIT).await.all_done());
    assert_eq!(exported.load(Ordering::SeqCst), 5);
    assert_eq!(fanout.stats_of("slow").unwrap().dropped, 0);
    assert!(fanout.shutdown(WAIT).await.all_done());
    // A stopped lane holds nothing back.
    assert!(has_room(&fanout, Duration::ZERO).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_within_the_byte_budget_loses_nothing_and_a_batch_is_one_message() {
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let exported = Arc::new(AtomicU64::new(0));
    let burst: Vec<PipelineEvent> = (0..10_000).map(scope_event).collect();
    let budget: u64 = burst
        .iter()
        .map(PipelineEvent::estimated_bytes)
        .sum::<u64>()
        + mark_copies(10_000).estimated_bytes();
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes("held", stuck(&gate, &exported), budget)
        .start()
        .await
        .unwrap();
    // 10 000 starts in one message and a poll's copies under each, while the
    // exporter cannot take one: all wait in the lane (or in the exporter's hands).
    assert_eq!(fanout.send_batch(burst), 1);
    assert_eq!(fanout.send(mark_copies(10_000)), 1);
    let held = fanout.stats_of("held").unwrap();
    assert_eq!(held.dropped, 0);
    assert!(held.queued_bytes <= budget, "{held:?}");
    gate.open();
    assert!(fanout.flush(WAIT).await.all_done());
    let held = fanout.stats_of("held").unwrap();
    assert_eq!((held.exported, held.dropped, held.queued), (10_001, 0, 0));
    assert_eq!(exported.load(Ordering::SeqCst), 10_001);
    assert!(fanout.shutdown(WAIT).await.all_done());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drops_over_the_byte_budget_are_counted_and_named_by_kind() {
    let diagnostics = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let pipeline = PipelineDiagnostics::register(&diagnostics).unwrap();
    let gate = Gate::default();
    let _open_at_exit = OpenOnDrop(gate.clone());
    let fanout = FanOut::builder()
        .failure_sink(Arc::new(pipeline))
        .exporter_with_lane_bytes("otlp", stuck(&gate, &Arc::default()), events(2))
        .start()
        .await
        .unwrap();
    fanout.send(event(1));
    wait_until(|| fanout.stats_of("otlp").unwrap().queued == 0).await;
    assert_eq!(fanout.send(event(2)) + fanout.send(event(3)), 2);
    // The record's allowance is full now: a scope, and a batch of a scope and a mark,
    // are dropped. The bulk's is empty: a poll's 5 copies go in, and the next 5 find
    // it full.
    assert_eq!(fanout.send(scope_event(1)), 0);
    assert_eq!(fanout.send(mark_copies(5)), 1);
    assert_eq!(fanout.send(mark_copies(5)), 0);
    assert_eq!(fanout.send_batch(vec![scope_event(2), event(4)]), 0);
    let stats = fanout.stats_of("otlp").unwrap();
    assert_eq!(stats.dropped, 8);
    assert_eq!(
        stats.dropped_by_kind,
        [
            (EventKind::Scope, 2),
            (EventKind::Mark, 1),
            (EventKind::MarkCopy, 5)
        ]
    );
    gate.open();
    assert!(fanout.shutdown(WAIT).await.all_done());
    let snapshot = diagnostics.snapshot().unwrap();
    let details: Vec<&str> = snapshot
        .recent_events
        .iter()
        .filter(|event| event.code == "exporter.otlp.dropped")
        .filter_map(|event| event.detail.as_deref())
        .collect();
    let last = details.last().expect("a drop report");
    assert!(
        last.contains("scope 2, mark 1, mark_copy 5"),
        "the detail names each kind and its count: {details:?}"
    );
}

//! The `nvidia-smi` collector against fake tools: one test per row of the spec's
//! failure table, plus timeouts, a blocked runtime and the stop after 5 failures.
//! Each fake is a small sh script copied into its own temp folder as `nvidia-smi`;
//! that folder is the only search path the collector gets.

mod support;

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{LogRecorder, calls, fake_smi_dir};
use tracing::Level;
use wattline_gpu::nvidia_smi_collector::{
    CollectorState, NvidiaSmiCollector, NvidiaSmiConfig, NvidiaSmiSource, locate_nvidia_smi,
};
use wattline_gpu::timed_run::{RunOutcome, run_with_timeout};
use wattline_gpu::{CollectingEventSink, GpuEvent, GpuSampleRequest, GpuSource};
use wattline_model::series::SamplingSeries;

const FULL_QUERY: &str = "--query-gpu=index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,temperature.gpu,power.draw,power.limit,clocks.current.sm,clocks.current.memory,fan.speed,pstate,clocks_throttle_reasons.sw_thermal_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.hw_slowdown,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total";
const CORE_QUERY: &str = "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw --format=csv,noheader,nounits";

fn start(
    dir: &Path,
    interval: Duration,
    timeout: Duration,
    sink: &Arc<CollectingEventSink>,
) -> NvidiaSmiCollector {
    NvidiaSmiCollector::start_on_path(
        &OsString::from(dir),
        interval,
        timeout,
        sink.clone(),
        &tokio::runtime::Handle::current(),
    )
}

fn logs() -> (LogRecorder, tracing::subscriber::DefaultGuard) {
    let recorder = LogRecorder::default();
    let guard = tracing::subscriber::set_default(recorder.clone());
    (recorder, guard)
}

const WAIT: Duration = Duration::from_secs(10);

/// Poll `condition` every few milliseconds for up to [`WAIT`].
async fn eventually(condition: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + WAIT;
    while !condition() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

#[test]
fn locate_searches_the_given_path_in_order() {
    use std::os::unix::fs::PermissionsExt;
    let empty = tempfile::tempdir().unwrap();
    let not_executable = tempfile::tempdir().unwrap();
    std::fs::write(not_executable.path().join("nvidia-smi"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(
        not_executable.path().join("nvidia-smi"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let first = fake_smi_dir("answer.sh", None);
    let second = fake_smi_dir("answer.sh", None);
    let path = std::env::join_paths([
        empty.path(),
        not_executable.path(),
        first.path(),
        second.path(),
    ])
    .unwrap();
    assert_eq!(
        locate_nvidia_smi(&path),
        Some(first.path().join("nvidia-smi"))
    );
    assert_eq!(locate_nvidia_smi(&OsString::from(empty.path())), None);
    assert_eq!(locate_nvidia_smi(&OsString::new()), None);
}

#[tokio::test]
async fn no_binary_one_info_line_and_never_asked_again() {
    let (recorder, _guard) = logs();
    let empty = tempfile::tempdir().unwrap();
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(empty.path(), Duration::from_millis(20), WAIT, &sink);
    assert_eq!(collector.state(), CollectorState::NotFound);
    assert!(collector.latest().is_none());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(collector.state(), CollectorState::NotFound);
    assert_eq!(sink.events(), vec![GpuEvent::SmiNotFound]);
    assert_eq!(recorder.at(Level::INFO).len(), 1);
    assert!(recorder.at(Level::WARN).is_empty());
}

#[tokio::test]
async fn answering_tool_gives_the_latest_sample() {
    let dir = fake_smi_dir("answer.sh", Some("eight_h100.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_millis(50), WAIT, &sink);
    let state = collector.first_answer(WAIT).await;
    let CollectorState::Ready(reading) = state else {
        panic!("expected an answer, got {state:?}");
    };
    assert_eq!(reading.devices.len(), 8);
    assert!(sink.events().is_empty(), "{:?}", sink.events());
    // Exactly the documented query, without a shell in between.
    assert_eq!(
        calls(dir.path())[0],
        format!("{FULL_QUERY},power.draw.instant --format=csv,noheader,nounits")
    );
    // It keeps asking every interval.
    assert!(eventually(|| calls(dir.path()).len() >= 3).await);

    let mut source = NvidiaSmiSource::new(collector);
    assert_eq!(source.name(), "nvidia-smi");
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.device_selectors = vec![
        "3".into(),
        "GPU-6A7B8C9D-0E1F-2A3B-4C5D-6E7F8A9B0C1D".into(),
    ];
    let sample = source.sample(&request).expect("a sample");
    let indexes: Vec<_> = sample.devices.iter().map(|d| d.device_index).collect();
    assert_eq!(indexes, vec![Some(3), Some(7)]);
    assert!(sample.processes.is_empty());
    request.device_metrics = false;
    let sample = source.sample(&request).expect("a sample");
    assert!(sample.devices.is_empty());
}

#[tokio::test]
async fn sample_never_waits_for_the_tool() {
    let dir = fake_smi_dir("hang.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(
        dir.path(),
        Duration::from_secs(60),
        Duration::from_secs(20),
        &sink,
    );
    // Let the tool start.
    while calls(dir.path()).is_empty() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut source = NvidiaSmiSource::new(collector);
    let started = Instant::now();
    let sample = source.sample(&GpuSampleRequest::all(SamplingSeries::OnDemand));
    assert!(sample.is_none());
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(source.collector().state(), CollectorState::Starting);
    // Nothing observed and nothing failed yet: no part, so no gap stamped now can make
    // the first answer (measured earlier) look stale.
    assert!(
        source
            .sample_parts(&GpuSampleRequest::all(SamplingSeries::OnDemand))
            .is_empty()
    );
}

/// Power samples as the energy stage would receive them.
#[derive(Default)]
struct ForwardedSamples(std::sync::Mutex<Vec<wattline_gpu::PowerSample>>);

impl wattline_gpu::PowerSampleSink for ForwardedSamples {
    fn send(&self, sample: wattline_gpu::PowerSample) {
        self.0.lock().unwrap().push(sample);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_runs_the_tool_again_and_its_answer_is_stamped_within_the_run_and_pushed_once() {
    let dir = fake_smi_dir("slow_answer.sh", Some("one_device.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    // No periodic run within the test: only the first and the one asked for.
    let collector = start(dir.path(), Duration::from_secs(600), WAIT, &sink);
    let CollectorState::Ready(first) = collector.first_answer(WAIT).await else {
        panic!("no first answer");
    };
    let forwarded = Arc::new(ForwardedSamples::default());
    let mut source = NvidiaSmiSource::new(collector);
    source.forward_readings(forwarded.clone());
    let (source, before, after) = tokio::task::spawn_blocking(move || {
        let before = Instant::now();
        source.refresh(WAIT);
        (source, before, Instant::now())
    })
    .await
    .unwrap();
    let latest = source.collector().latest().expect("a fresh answer");
    assert!(latest.taken_at > first.taken_at);
    // Measured inside the run it came from: after the request, before its end.
    assert!(latest.taken_at > before && latest.taken_at < after);
    assert_eq!(calls(dir.path()).len(), 2, "one run asked for");
    // The forwarder delivers the answer by itself, once, with the same stamp.
    let mut waited = Duration::ZERO;
    while forwarded.0.lock().unwrap().is_empty() && waited < WAIT {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
    let pushed = forwarded.0.lock().unwrap().clone();
    assert_eq!(pushed.len(), 1);
    assert_eq!(pushed[0].taken_at, latest.taken_at);
    assert_eq!(pushed[0].source, "nvidia-smi");
    // The gauge's one-second mean and, for the integral, the instantaneous figure,
    // named on the device.
    let device = &pushed[0].sample.as_ref().expect("an answer").devices[0];
    assert_eq!(device.power_draw_watts, Some(16.85));
    assert_eq!(device.instant_power_watts, Some(17.32));
    assert_eq!(device.power_field, Some("power.draw.instant"));
}

#[tokio::test]
async fn no_devices_is_no_gpu_with_one_info_line_and_no_more_runs() {
    let (recorder, _guard) = logs();
    let dir = fake_smi_dir("no_devices.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_millis(20), WAIT, &sink);
    assert_eq!(
        collector.first_answer(WAIT).await,
        CollectorState::NoDevices
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(calls(dir.path()).len(), 1, "asked once only");
    assert!(collector.latest().is_none());
    assert_eq!(sink.events(), vec![GpuEvent::SmiNoDevices]);
    assert_eq!(recorder.at(Level::INFO).len(), 1);
    assert!(recorder.at(Level::WARN).is_empty());
}

#[tokio::test]
async fn failing_at_start_warns_once_then_stops_after_five_with_one_more_warning() {
    let (recorder, _guard) = logs();
    let dir = fake_smi_dir("driver_failure.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let interval = Duration::from_millis(30);
    let collector = start(dir.path(), interval, WAIT, &sink);

    let state = collector.first_answer(WAIT).await;
    assert!(
        matches!(&state, CollectorState::StartFailing { failures: 1, message } if message.contains("couldn't communicate with the NVIDIA driver")),
        "{state:?}"
    );
    let warnings = recorder.at(Level::WARN);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("couldn't communicate with the NVIDIA driver"));

    let state = collector
        .wait_for_state(WAIT, |s| matches!(s, CollectorState::Stopped { .. }))
        .await;
    assert_eq!(state, CollectorState::Stopped { failures: 5 });
    // Silence: no sixth run, however long we wait.
    tokio::time::sleep(interval * 10).await;
    assert_eq!(calls(dir.path()).len(), 5);
    assert_eq!(recorder.at(Level::WARN).len(), 2);
    let events = sink.events();
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(events[..5].iter().all(
        |e| matches!(e, GpuEvent::SmiStartFailed { message } if message.contains("exit status: 9"))
    ));
    assert_eq!(events[5], GpuEvent::SmiStoppedAfterFailures { count: 5 });
    assert!(collector.latest().is_none());
}

#[tokio::test]
async fn empty_answer_is_a_failure_never_no_gpu() {
    let dir = fake_smi_dir("empty.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_millis(20), WAIT, &sink);
    let state = collector.first_answer(WAIT).await;
    assert!(
        matches!(state, CollectorState::StartFailing { failures: 1, .. }),
        "{state:?}"
    );
    let state = collector.wait_for_state(WAIT, |s| s.is_final()).await;
    assert_eq!(state, CollectorState::Stopped { failures: 5 });
    let events = sink.events();
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == GpuEvent::SmiEmptyAnswer)
            .count(),
        5
    );
    assert!(!events.contains(&GpuEvent::SmiNoDevices));
}

#[tokio::test]
async fn unreadable_answer_is_a_parse_failure() {
    let dir = fake_smi_dir("garbage.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_secs(60), WAIT, &sink);
    let state = collector.first_answer(WAIT).await;
    assert!(
        matches!(state, CollectorState::StartFailing { failures: 1, .. }),
        "{state:?}"
    );
    assert!(
        matches!(&sink.events()[..], [GpuEvent::SmiParseFailure { detail }] if detail.contains("expected 21 values"))
    );
}

#[tokio::test]
async fn hanging_tool_is_killed_at_the_timeout_and_counted_as_a_failure() {
    let dir = fake_smi_dir("hang.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let collector = start(dir.path(), Duration::from_millis(50), timeout, &sink);
    let state = collector.first_answer(WAIT).await;
    assert!(
        matches!(state, CollectorState::StartFailing { failures: 1, .. }),
        "{state:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not left to run 30 s"
    );
    assert_eq!(sink.events(), vec![GpuEvent::SmiTimeout]);
    // The hung process is gone (killed and reaped), not left behind.
    let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "the timed-out child {pid} still exists");
    let state = collector.wait_for_state(WAIT, |s| s.is_final()).await;
    assert_eq!(state, CollectorState::Stopped { failures: 5 });
    assert_eq!(calls(dir.path()).len(), 5);
}

#[test]
fn answer_is_read_while_the_runtime_is_blocked_past_the_timeout() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = fake_smi_dir("answer.sh", Some("one_device.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let timeout = Duration::from_millis(300);
    runtime.block_on(async {
        let collector = start(dir.path(), Duration::from_secs(60), timeout, &sink);
        // Wait until the tool has been started by the collector task...
        let deadline = Instant::now() + WAIT;
        while calls(dir.path()).is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(!calls(dir.path()).is_empty(), "the tool never started");
        // ...then block the only runtime thread well past the timeout, as an
        // application evaluating its modules would.
        std::thread::sleep(timeout * 4);
        let state = collector.first_answer(WAIT).await;
        let CollectorState::Ready(reading) = state else {
            panic!("the answer was lost: {state:?}");
        };
        assert_eq!(reading.devices.len(), 1);
        assert_eq!(
            reading.devices[0].device_identifier,
            "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
        );
    });
    assert!(sink.events().is_empty(), "{:?}", sink.events());
}

#[tokio::test]
async fn old_driver_downgrades_to_the_core_fields_from_then_on() {
    let (recorder, _guard) = logs();
    let dir = fake_smi_dir("old_driver.sh", Some("core_fields.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_millis(40), WAIT, &sink);
    let state = collector.first_answer(WAIT).await;
    let CollectorState::Ready(reading) = state else {
        panic!("expected an answer, got {state:?}");
    };
    assert_eq!(reading.devices.len(), 2);
    assert_eq!(reading.devices[0].power_draw_watts, Some(161.2));
    assert_eq!(
        sink.events(),
        vec![GpuEvent::SmiDowngradedToCoreFields {
            unknown_field: "clocks_event_reasons.sw_thermal_slowdown".into()
        }]
    );
    assert!(eventually(|| calls(dir.path()).len() >= 5).await);
    let calls = calls(dir.path());
    assert!(calls[0].contains("clocks_throttle_reasons."));
    assert!(calls[1].contains("clocks_event_reasons."));
    assert!(calls[2].contains("temperature.gpu,power.draw,power.draw.instant "));
    assert!(calls[3..].iter().all(|c| c == CORE_QUERY), "{calls:?}");
    assert_eq!(recorder.at(Level::INFO).len(), 1);
    assert!(recorder.at(Level::WARN).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_without_the_instant_power_keeps_the_full_set_and_integrates_power_draw() {
    let (recorder, _guard) = logs();
    let dir = fake_smi_dir("no_instant_power.sh", Some("eight_h100.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_millis(40), WAIT, &sink);
    let CollectorState::Ready(first) = collector.first_answer(WAIT).await else {
        panic!("expected an answer");
    };
    let forwarded = Arc::new(ForwardedSamples::default());
    let mut source = NvidiaSmiSource::new(collector);
    source.forward_readings(forwarded.clone());
    // Nothing lost but the instant figure: the throttle reasons are still read.
    assert_eq!(first.devices[4].throttle_hw_slowdown, Some(true));
    assert_eq!(first.devices[0].power_draw_watts, Some(689.43));
    assert!(
        first
            .devices
            .iter()
            .all(|d| d.instant_power_watts.is_none())
    );
    assert!(
        first
            .devices
            .iter()
            .all(|d| d.power_field == Some("power.draw"))
    );
    assert!(eventually(|| forwarded.0.lock().unwrap().len() >= 2).await);
    assert!(forwarded.0.lock().unwrap().iter().all(|sample| {
        sample.sample.as_ref().is_some_and(|answer| {
            answer
                .devices
                .iter()
                .all(|d| d.power_field == Some("power.draw"))
        })
    }));
    // Asked once, then never again.
    let calls = calls(dir.path());
    assert_eq!(
        calls[0],
        format!("{FULL_QUERY},power.draw.instant --format=csv,noheader,nounits")
    );
    assert!(
        calls[1..]
            .iter()
            .all(|c| *c == format!("{FULL_QUERY} --format=csv,noheader,nounits")),
        "{calls:?}"
    );
    assert!(sink.events().is_empty(), "{:?}", sink.events());
    assert!(recorder.at(Level::INFO).is_empty());
    assert!(recorder.at(Level::WARN).is_empty());
}

#[tokio::test]
async fn driver_with_only_event_reason_names_keeps_the_full_set() {
    let dir = fake_smi_dir("event_names.sh", Some("eight_h100.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(dir.path(), Duration::from_secs(60), WAIT, &sink);
    let CollectorState::Ready(reading) = collector.first_answer(WAIT).await else {
        panic!("expected an answer");
    };
    assert_eq!(reading.devices[4].throttle_hw_slowdown, Some(true));
    assert!(sink.events().is_empty());
    assert_eq!(calls(dir.path()).len(), 2);
}

#[tokio::test]
async fn failing_later_leaves_gaps_then_stops_after_five_with_one_warning() {
    let (recorder, _guard) = logs();
    let dir = fake_smi_dir("fail_later.sh", Some("one_device.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let interval = Duration::from_millis(40);
    let collector = start(dir.path(), interval, WAIT, &sink);
    assert!(matches!(
        collector.first_answer(WAIT).await,
        CollectorState::Ready(_)
    ));
    let state = collector
        .wait_for_state(WAIT, |s| matches!(s, CollectorState::Gap { .. }))
        .await;
    assert_eq!(state, CollectorState::Gap { failures: 1 });
    // The gap observes nothing: no stale reading is handed out.
    assert!(collector.latest().is_none());
    let state = collector.wait_for_state(WAIT, |s| s.is_final()).await;
    assert_eq!(state, CollectorState::Stopped { failures: 5 });
    tokio::time::sleep(interval * 10).await;
    assert_eq!(calls(dir.path()).len(), 2 + 5, "no run after the stop");
    let events = sink.events();
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(events[..5].iter().all(
        |e| matches!(e, GpuEvent::SmiSampleFailed { message } if message.contains("Unknown Error"))
    ));
    assert_eq!(events[5], GpuEvent::SmiStoppedAfterFailures { count: 5 });
    assert_eq!(recorder.at(Level::WARN).len(), 1, "only the stop warns");
    let mut source = NvidiaSmiSource::new(collector);
    assert!(
        source
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
}

#[tokio::test]
async fn a_custom_failure_limit_is_honoured() {
    // A recorder of its own, though nothing here reads it: run beside the test that
    // counts this tool's warnings, a thread with no subscriber can register their
    // callsite as of no interest while that test installs its recorder (a race in
    // tracing's callsite cache), and that test then misses its warning (seen once).
    let (_recorder, _guard) = logs();
    let dir = fake_smi_dir("driver_failure.sh", None);
    let sink = Arc::new(CollectingEventSink::new());
    let mut config = NvidiaSmiConfig::new(dir.path().join("nvidia-smi"));
    config.interval = Duration::from_millis(20);
    config.max_consecutive_failures = 2;
    let collector =
        NvidiaSmiCollector::start(config, sink.clone(), &tokio::runtime::Handle::current());
    let state = collector.wait_for_state(WAIT, |s| s.is_final()).await;
    assert_eq!(state, CollectorState::Stopped { failures: 2 });
    assert_eq!(calls(dir.path()).len(), 2);
}

#[tokio::test]
async fn run_with_timeout_reads_output_larger_than_a_pipe_and_the_exit_code() {
    let outcome = run_with_timeout(
        Path::new("/bin/sh"),
        &[
            "-c".into(),
            "head -c 200000 /dev/zero; echo oops >&2; exit 3".into(),
        ],
        Duration::from_secs(10),
    )
    .await;
    let RunOutcome::Exited {
        status,
        stdout,
        stderr,
    } = outcome
    else {
        panic!("expected an exit, got {outcome:?}");
    };
    assert_eq!(status.code(), Some(3));
    assert_eq!(stdout.len(), 200_000);
    assert_eq!(stderr, b"oops\n");

    let missing = run_with_timeout(
        Path::new("/nonexistent/nvidia-smi"),
        &[],
        Duration::from_secs(1),
    )
    .await;
    assert!(matches!(missing, RunOutcome::Failed(_)));
}

#[tokio::test]
async fn a_tool_that_exited_is_not_killed_when_the_timer_fires_first() {
    // The tool exits with its answer written, but its pipe stays open past the
    // timeout (a leftover child holds it), so reading to end-of-file loses the race
    // with the timer. The exited child must not be treated as hung.
    let dir = fake_smi_dir("answer_then_linger.sh", Some("one_device.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let collector = start(
        dir.path(),
        Duration::from_secs(60),
        Duration::from_millis(300),
        &sink,
    );
    let state = collector.first_answer(WAIT).await;
    let CollectorState::Ready(reading) = state else {
        panic!("the finished tool's answer was lost: {state:?}");
    };
    assert_eq!(reading.devices.len(), 1);
    assert_eq!(reading.devices[0].power_draw_watts, Some(16.85));
    assert!(sink.events().is_empty(), "{:?}", sink.events());
}

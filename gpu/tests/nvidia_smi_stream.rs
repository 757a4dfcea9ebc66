//! The `nvidia-smi` power stream against a stand-in tool with a real loop mode (a
//! Python script printing the real CSV format): readings as lines arrive, and a child
//! that dies, hangs, prints garbage or does not know `power.draw.instant`.

#[path = "support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wattline_gpu::nvidia_smi_stream::{SmiPowerStream, SmiStreamConfig};
use wattline_gpu::{CollectingEventSink, GpuEvent, PowerSample, PowerSampleSink};

#[derive(Default)]
struct Received(Mutex<Vec<PowerSample>>);

impl PowerSampleSink for Received {
    fn send(&self, sample: PowerSample) {
        self.0.lock().unwrap().push(sample);
    }
}

impl Received {
    fn all(&self) -> Vec<PowerSample> {
        self.0.lock().unwrap().clone()
    }
}

struct Stand {
    dir: tempfile::TempDir,
    received: Arc<Received>,
    events: Arc<CollectingEventSink>,
    _stream: SmiPowerStream,
}

/// Every stand-in this stream started is killed when the test is done, whatever
/// happened: each appends its pid to `pids` beside it.
impl Drop for Stand {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(self.dir.path().join("pids")).unwrap_or_default();
        for pid in pids
            .lines()
            .filter_map(|line| line.trim().parse::<i32>().ok())
        {
            if pid > 1 {
                // SAFETY: kill(2) of a stand-in this test's stream started.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Starts a stream over the stand-in in `mode`, 100 ms loops, a 500 ms hang timeout
/// and a 100 ms first back-off.
fn start(mode: &str) -> Stand {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("nvidia-smi");
    std::fs::copy(support::fixture("fake-smi/loop_rhythm.py"), &program).unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("mode"), mode).unwrap();
    let received = Arc::new(Received::default());
    let events = Arc::new(CollectingEventSink::new());
    let stream = SmiPowerStream::start(
        SmiStreamConfig {
            program,
            period: Duration::from_millis(100),
            timeout: Duration::from_millis(500),
            selectors: Vec::new(),
            max_consecutive_failures: 5,
            first_backoff: Duration::from_millis(100),
        },
        received.clone(),
        events.clone(),
        &tokio::runtime::Handle::current(),
    );
    Stand {
        dir,
        received,
        events,
        _stream: stream,
    }
}

async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn loop_calls(stand: &Stand) -> Vec<String> {
    std::fs::read_to_string(stand.dir.path().join("calls"))
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("--loop-ms"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_loop_is_one_reading_of_every_device_stamped_as_it_arrives() {
    let stand = start("normal");
    wait_until(Duration::from_secs(10), || stand.received.all().len() >= 10).await;
    let readings = stand.received.all();
    assert!(readings.len() >= 10);
    for reading in &readings {
        assert!(reading.dense);
        assert_eq!(reading.source, "nvidia-smi");
        assert_eq!(reading.power_field, Some("power.draw.instant"));
        let sample = reading.sample.as_ref().expect("a reading");
        assert_eq!(sample.devices.len(), 2);
        assert!(
            sample
                .devices
                .iter()
                .all(|d| d.instant_power_watts.is_some() && d.power_draw_watts.is_none())
        );
    }
    // Stamped in order, about a loop apart (the tool's own loop, not a poll).
    let stamps: Vec<Instant> = readings.iter().map(|r| r.taken_at).collect();
    assert!(stamps.windows(2).all(|pair| pair[0] < pair[1]));
    assert_eq!(loop_calls(&stand).len(), 1, "one long-lived child");
    assert_eq!(
        loop_calls(&stand)[0],
        "--query-gpu=index,uuid,power.draw.instant --format=csv,noheader,nounits --loop-ms=100"
    );
    assert!(stand.events.events().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_dies_leaves_a_gap_is_recorded_and_restarted_with_nothing_lost() {
    let stand = start("die");
    // 20 loops, the death, a 100 ms back-off, a second child.
    wait_until(Duration::from_secs(20), || {
        let all = stand.received.all();
        gap_after_a_full_child(&all).is_some_and(|gap| gap + 3 < all.len())
    })
    .await;
    let all = stand.received.all();
    let gap = gap_after_a_full_child(&all).expect("every loop before the death was delivered");
    assert!(all[gap + 1..].iter().take(3).all(|r| r.sample.is_some()));
    assert!(all[gap].taken_at > all[gap - 1].taken_at);
    assert!(loop_calls(&stand).len() >= 2, "restarted");
    assert!(stand.events.count(|event| matches!(event,
        GpuEvent::SmiSampleFailed { message } if message.contains("power stream ended with exit status: 15")
            && message.contains("Unknown Error")
            && message.contains("restarting in 0.1 s"))) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_hangs_is_killed_after_the_timeout_and_restarted() {
    let stand = start("hang");
    wait_until(Duration::from_secs(20), || {
        gap_after_a_full_child(&stand.received.all()).is_some() && loop_calls(&stand).len() >= 2
    })
    .await;
    let all = stand.received.all();
    let gap = gap_after_a_full_child(&all).expect("every loop before the hang was delivered");
    // The gap comes once the timeout ran out after the last line.
    assert!(all[gap].taken_at.duration_since(all[gap - 1].taken_at) >= Duration::from_millis(500));
    assert!(
        stand.events.count(|event| matches!(event,
        GpuEvent::SmiSampleFailed { message } if message.contains("gave no line for 0.5 s")))
            >= 1
    );
}

/// The stand-in prints this many loops before it dies or hangs.
const LOOPS_PER_CHILD: usize = 20;

/// The first gap that follows a child's every loop: [`LOOPS_PER_CHILD`] readings since
/// the start or the gap before. A child can also be cut short before that (a stand-in
/// slow to start on a loaded machine gives no line within the timeout, which is a gap
/// and a restart too); the next child then prints its loops in full.
fn gap_after_a_full_child(all: &[PowerSample]) -> Option<usize> {
    let mut readings_since_gap = 0;
    for (index, received) in all.iter().enumerate() {
        if received.sample.is_some() {
            readings_since_gap += 1;
        } else if readings_since_gap == LOOPS_PER_CHILD {
            return Some(index);
        } else {
            readings_since_gap = 0;
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_lines_are_skipped_recorded_once_and_cost_no_reading() {
    let stand = start("garbage");
    wait_until(Duration::from_secs(10), || stand.received.all().len() >= 10).await;
    let all = stand.received.all();
    assert!(all.len() >= 10);
    assert!(
        all.iter()
            .all(|r| r.sample.as_ref().is_some_and(|s| s.devices.len() == 2))
    );
    assert_eq!(
        stand
            .events
            .count(|event| matches!(event, GpuEvent::SmiParseFailure { .. })),
        1
    );
    assert_eq!(
        loop_calls(&stand).len(),
        1,
        "garbage does not restart the child"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_without_the_instant_field_streams_power_draw() {
    let stand = start("old");
    wait_until(Duration::from_secs(10), || stand.received.all().len() >= 3).await;
    let all = stand.received.all();
    assert!(all.len() >= 3);
    assert!(all.iter().all(|r| r.power_field == Some("power.draw")));
    let calls = loop_calls(&stand);
    assert!(calls[0].contains("power.draw.instant"));
    assert!(calls[1].contains("--query-gpu=index,uuid,power.draw "));
    assert!(
        stand.events.events().is_empty(),
        "a downgrade is no failure"
    );
}

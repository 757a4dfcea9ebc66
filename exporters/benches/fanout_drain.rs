//! How fast one fan-out lane drains a backlog: `cargo bench -p wattline-exporters
//! --bench fanout_drain`. Sends 100,000 events to one lane (a mailbox large enough to
//! drop none) and waits for the flush queued behind them: into an exporter that does
//! nothing, into one writing an ATOF file, and into the first again with two threads
//! spinning beside it (the lane then competes for both cores, as in a host running
//! flat out). Prints the events drained per second and, where the lane is alone, the
//! process's CPU per event. `WATTLINE_DRAIN_EVENTS` changes the count.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use wattline_config::AtofConfig;
use wattline_exporters::{AtofExporter, ExportError, Exporter, ExporterKind, FanOut};
use wattline_model::events::{Mark, PipelineEvent};

/// Takes every event and does nothing with it: the lane's own cost is what is left.
struct Discard;

impl Exporter for Discard {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Stdout
    }
    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        std::hint::black_box(event);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
    fn shutdown(&mut self) -> Result<(), ExportError> {
        Ok(())
    }
}

/// This process's CPU time (user and system, every thread).
fn process_cpu() -> Duration {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a local the call only writes into.
    let status = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(status, 0, "getrusage");
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

fn mark() -> PipelineEvent {
    PipelineEvent::Mark(Mark {
        uuid: uuid::Uuid::now_v7(),
        parent_uuid: None,
        timestamp: chrono::Utc::now(),
        name: "resource".into(),
        data: Default::default(),
    })
}

/// Sends `events` copies of one mark to `exporter`, waits for the flush behind them;
/// (events per second, CPU µs per event) over that whole span.
async fn drain(exporter: impl Exporter, events: usize) -> (f64, f64) {
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes(
            "lane",
            exporter,
            (events as u64 + 1) * mark().estimated_bytes(),
        )
        .start()
        .await
        .expect("a fan-out");
    let event = mark();
    let (started, cpu) = (Instant::now(), process_cpu());
    for _ in 0..events {
        fanout.send(event.clone());
    }
    let report = fanout.flush(Duration::from_secs(600)).await;
    let (wall, cpu) = (started.elapsed(), process_cpu() - cpu);
    assert!(report.all_done(), "{report:?}");
    let stats = fanout.stats_of("lane").expect("the lane");
    assert_eq!((stats.exported, stats.dropped), (events as u64, 0));
    assert!(fanout.shutdown(Duration::from_secs(60)).await.all_done());
    (
        events as f64 / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / events as f64,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let events = std::env::var("WATTLINE_DRAIN_EVENTS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(100_000);
    drain(Discard, events / 10).await; // warm-up
    println!("{:<32} {:>14} {:>16}", "case", "events/s", "CPU µs/event");
    let (rate, cpu) = drain(Discard, events).await;
    println!("{:<32} {rate:>14.0} {cpu:>16.2}", "alone");
    let directory = tempfile::tempdir().expect("a temp dir");
    let atof = AtofExporter::build(&AtofConfig {
        output_directory: directory.path().display().to_string(),
        ..AtofConfig::default()
    })
    .expect("an ATOF exporter");
    let (rate, cpu) = drain(atof, events).await;
    println!("{:<32} {rate:>14.0} {cpu:>16.2}", "into an ATOF file");
    let spinning = Arc::new(AtomicBool::new(true));
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            let spinning = Arc::clone(&spinning);
            std::thread::spawn(move || {
                while spinning.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // The spinners' CPU counts as this process's too: only the rate is the lane's.
    let (rate, _) = drain(Discard, events).await;
    spinning.store(false, Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().expect("a spinner");
    }
    println!(
        "{:<32} {rate:>14.0} {:>16}",
        "two threads spinning beside it", "-"
    );
}

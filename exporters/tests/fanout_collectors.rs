//! The fan-out with the real OTLP exporter beside the ATOF exporter, against collectors
//! that are down at start, crash and come back, or never answer: sending never blocks,
//! every event is either exported or counted as dropped, the ATOF file gets every event.

mod support;

use std::path::Path;
use std::time::Duration;

use support::{
    SilentReceiver, at, free_address, gpu_batch, gpu_utilization, grpc_receiver, grpc_receiver_on,
    otel_config,
};
use wattline_config::{AtofConfig, AtofWriteMode, MetricTemporality, OtlpTransport};
use wattline_exporters::{AtofExporter, FanOut, OtlpExporter, parse_metric_measurements};
use wattline_model::events::PipelineEvent;

const WAIT: Duration = Duration::from_secs(60);

fn event(n: u64) -> PipelineEvent {
    gpu_batch(at(n as i64, 0), &[("GPU-0", n as f64)], 0.001, 100.0)
}

/// The estimated bytes of one of the test's events (all the same size): a lane of `n`
/// times this holds `n` of them.
fn event_bytes() -> u64 {
    event(1).estimated_bytes()
}

async fn fanout(
    otlp_url: &str,
    timeout_millis: u64,
    otlp_capacity: usize,
    directory: &Path,
) -> (FanOut, std::path::PathBuf) {
    let otlp = OtlpExporter::builder(otel_config(
        otlp_url,
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        timeout_millis,
    ))
    .build()
    .unwrap();
    let atof = AtofExporter::build(&AtofConfig {
        output_directory: directory.display().to_string(),
        filename: "run.jsonl".into(),
        mode: AtofWriteMode::Append,
        ..AtofConfig::default()
    })
    .unwrap();
    let path = atof.path().to_path_buf();
    let fanout = FanOut::builder()
        .exporter_with_lane_bytes("otlp", otlp, otlp_capacity as u64 * event_bytes())
        .exporter_with_lane_bytes("atof", atof, 20_000 * event_bytes())
        .start()
        .await
        .unwrap();
    (fanout, path)
}

/// The GPU utilisation of every line of the ATOF file, in order (each event's number).
fn atof_events(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let data = parse_metric_measurements(&value["data"]).unwrap();
            data.measurements[0].value.as_f64() as u64
        })
        .collect()
}

fn send_range(fanout: &FanOut, range: std::ops::RangeInclusive<u64>) {
    for n in range {
        fanout.send(event(n));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_down_at_start_then_up() {
    let directory = tempfile::tempdir().unwrap();
    let address = free_address();
    let (fanout, path) = fanout(&format!("http://{address}"), 1_000, 1_024, directory.path()).await;

    send_range(&fanout, 1..=1_000);
    let report = fanout.flush(WAIT).await;
    assert_eq!(report.summary(), [("otlp", "failed"), ("atof", "done")]);
    assert!(fanout.stats_of("otlp").unwrap().failed >= 1);

    let receiver = grpc_receiver_on(address).unwrap();
    send_range(&fanout, 1_001..=2_000);
    let report = fanout.flush(WAIT).await;
    assert!(report.all_done(), "{report:?}");
    // Delta: the gauge's last value of this interval.
    assert_eq!(
        gpu_utilization(&receiver.inbox.take()).get("GPU-0"),
        Some(&2_000.0)
    );

    let otlp = fanout.stats_of("otlp").unwrap();
    assert_eq!(otlp.exported + otlp.dropped, 2_000, "{otlp:?}");
    assert!(fanout.shutdown(WAIT).await.all_done());
    assert_eq!(atof_events(&path), (1..=2_000).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_killed_mid_run_and_restarted() {
    let directory = tempfile::tempdir().unwrap();
    let receiver = grpc_receiver();
    let address = receiver.addr;
    let (fanout, path) = fanout(&receiver.url(), 1_000, 1_024, directory.path()).await;

    send_range(&fanout, 1..=500);
    assert!(fanout.flush(WAIT).await.all_done());
    assert_eq!(
        gpu_utilization(&receiver.inbox.take()).get("GPU-0"),
        Some(&500.0)
    );
    receiver.kill();

    send_range(&fanout, 501..=1_000);
    let report = fanout.flush(WAIT).await;
    assert_eq!(report.summary(), [("otlp", "failed"), ("atof", "done")]);

    let restarted = grpc_receiver_on(address).unwrap();
    send_range(&fanout, 1_001..=1_500);
    assert!(fanout.flush(WAIT).await.all_done());
    assert_eq!(
        gpu_utilization(&restarted.inbox.take()).get("GPU-0"),
        Some(&1_500.0)
    );

    let otlp = fanout.stats_of("otlp").unwrap();
    assert_eq!(otlp.exported + otlp.dropped, 1_500, "{otlp:?}");
    assert!(otlp.failed >= 1);
    assert!(fanout.shutdown(WAIT).await.all_done());
    assert_eq!(atof_events(&path), (1..=1_500).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_that_never_answers_blocks_only_its_own_exporter() {
    let directory = tempfile::tempdir().unwrap();
    let silent = SilentReceiver::start();
    // A long timeout: the export hangs until the test kills the receiver.
    let (fanout, path) = fanout(&silent.url(), 120_000, 64, directory.path()).await;

    fanout.send(event(0));
    let flushing = {
        let fanout = fanout.clone();
        tokio::spawn(async move { fanout.flush(WAIT).await })
    };
    // The export is in flight once the receiver has bytes; from then on the OTLP
    // exporter is stuck inside that flush.
    let deadline = tokio::time::Instant::now() + WAIT;
    while silent.bytes_received() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the export never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let mut accepted = 0;
    for n in 1..=10_000 {
        accepted += fanout.send(event(n));
    }
    // The sender finished; the OTLP mailbox took 64 and dropped the rest.
    let otlp = fanout.stats_of("otlp").unwrap();
    assert_eq!(otlp.dropped, 10_000 - 64, "{otlp:?}");
    assert_eq!(accepted, 10_000 + 64);

    silent.kill();
    let report = flushing.await.unwrap();
    assert_eq!(report.summary(), [("otlp", "failed"), ("atof", "done")]);
    // The collector is gone for good now: OTLP fails, ATOF is unaffected.
    assert_eq!(
        fanout.flush(WAIT).await.summary(),
        [("otlp", "failed"), ("atof", "done")]
    );
    let otlp = fanout.stats_of("otlp").unwrap();
    assert_eq!(otlp.exported, 1 + 64, "{otlp:?}");
    assert!(otlp.failed >= 1);
    fanout.shutdown(Duration::from_secs(10)).await;
    assert_eq!(atof_events(&path), (0..=10_000).collect::<Vec<_>>());
}

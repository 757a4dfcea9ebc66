//! Against a real OpenTelemetry collector: `rotel-agent` (from the `rotel` Python
//! package) with its blackhole exporter and detailed metric debug logs. The exporter
//! sends over gRPC and HTTP/protobuf; the metric names and values must show up in the
//! collector's output.
//!
//! `WATTLINE_ROTEL_AGENT` names the binary (`.ci/run` installs it). Without it the test
//! fails — under `CI` always, elsewhere unless `WATTLINE_SKIP_ROTEL=1` says to skip, which
//! it then does loudly.

#[path = "support/rotel_agent.rs"]
mod rotel_agent;
mod support;

use std::time::{Duration, Instant};

use rotel_agent::{Agent, WAIT, agent_path, listening};
use support::free_address;
use wattline_config::{MetricTemporality, OtlpTransport};
use wattline_exporters::{Exporter, OtlpExporter};
use wattline_model::events::PipelineEvent;
use wattline_model::metric_measurements::{
    MetricKind, MetricMeasurement, MetricValue, MetricValueType,
};

fn gauge(name: &str, value: f64) -> PipelineEvent {
    PipelineEvent::Metrics {
        timestamp: support::at(0, 0),
        measurements: vec![MetricMeasurement {
            name: name.into(),
            kind: MetricKind::Gauge,
            value_type: MetricValueType::F64,
            value: MetricValue::F64(value),
            unit: Some("W".into()),
            description: Some("rotel round trip".into()),
            attributes: support::attrs(&[("gpu_id", "GPU-rotel")]),
            boundaries: None,
        }],
    }
}

#[test]
fn rotel_collector_receives_metrics_over_grpc_and_http() {
    let Some(path) = agent_path() else {
        return;
    };
    let (grpc, http) = (free_address(), free_address());
    let mut agent = Agent::start(&path, grpc, http);
    let deadline = Instant::now() + WAIT;
    while !(listening(grpc) && listening(http)) {
        if let Ok(Some(status)) = agent.child.try_wait() {
            panic!("rotel-agent exited ({status}):\n{}", agent.output());
        }
        assert!(
            Instant::now() < deadline,
            "rotel-agent never listened:\n{}",
            agent.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    for (address, transport, name, value) in [
        (grpc, OtlpTransport::Grpc, "wattline.rotel.grpc_power", 41.5),
        (
            http,
            OtlpTransport::HttpBinary,
            "wattline.rotel.http_power",
            42.75,
        ),
    ] {
        let config = support::otel_config(
            &format!("http://{address}"),
            transport,
            MetricTemporality::Delta,
            5_000,
        );
        let mut exporter = OtlpExporter::builder(config).build().unwrap();
        exporter.export(&gauge(name, value)).unwrap();
        exporter
            .flush()
            .unwrap_or_else(|error| panic!("{transport:?}: {error}\n{}", agent.output()));
        exporter.shutdown().unwrap();
        agent.wait_for(name, |output| output.contains(name));
        let output = agent.output();
        let after = &output[output.find(name).unwrap_or(0)..];
        for shown in [
            "-> Unit: W".to_string(),
            "-> DataType: Gauge".to_string(),
            "-> gpu_id: Str(GPU-rotel)".to_string(),
            format!("Value: {value}"),
        ] {
            assert!(
                after.contains(&shown),
                "{transport:?}: {shown:?} not shown:\n{output}"
            );
        }
        assert!(
            output.contains("-> service.name: Str(wattline-test)"),
            "{output}"
        );
    }
}

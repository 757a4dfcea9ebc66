//! The OTLP exporter against in-test receivers built on the official
//! `opentelemetry-proto` types: what arrives (names, units, attributes, values,
//! temporality) over gRPC and HTTP/protobuf, delta gauges that stop, the configured
//! limits and service attributes, and collectors that are down, crash and come back, or
//! never answer.

mod support;

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, Metric, metric};
use support::{
    Received, SilentReceiver, as_double, at, free_address, gauge_points, gpu_batch,
    gpu_utilization, grpc_receiver, grpc_receiver_on, http_receiver, named, otel_config,
    resource_mark, string_attribute, uuid,
};
use wattline_config::{MetricTemporality, OtlpTransport};
use wattline_exporters::{BuildError, ExportError, Exporter, OtlpExporter};
use wattline_model::events::PipelineEvent;
use wattline_model::metric_measurements::{
    MetricKind, MetricMeasurement, MetricValue, MetricValueType,
};

/// A gRPC exporter at the default temporality (cumulative sums and histograms).
fn default_temporality_exporter(url: &str) -> OtlpExporter {
    let mut config = otel_config(url, OtlpTransport::Grpc, MetricTemporality::Delta, 2_000);
    config.temporality = wattline_config::OpenTelemetryConfig::default().temporality;
    OtlpExporter::builder(config).build().expect("exporter")
}

fn exporter(url: &str, transport: OtlpTransport, temporality: MetricTemporality) -> OtlpExporter {
    OtlpExporter::builder(otel_config(url, transport, temporality, 2_000))
        .build()
        .expect("OTLP exporter")
}

/// Records one resource mark and one GPU batch, then flushes.
fn record_first_interval(exporter: &mut OtlpExporter) {
    exporter
        .export(&resource_mark(uuid(1), None, at(0, 0), 7))
        .unwrap();
    exporter
        .export(&gpu_batch(
            at(0, 0),
            &[("GPU-0", 75.0), ("GPU-1", 50.0)],
            0.25,
            150.0,
        ))
        .unwrap();
    exporter.flush().expect("flush");
}

fn assert_first_interval(received: &[Received]) {
    assert_eq!(received.len(), 1, "one export request per flush");
    let resource = received[0].request.resource_metrics[0]
        .resource
        .as_ref()
        .expect("resource");
    assert_eq!(
        string_attribute(&resource.attributes, "service.name").as_deref(),
        Some("wattline-test")
    );
    assert_eq!(
        string_attribute(&resource.attributes, "deployment.environment").as_deref(),
        Some("test")
    );
    let scope = received[0].request.resource_metrics[0].scope_metrics[0]
        .scope
        .as_ref()
        .expect("scope");
    assert_eq!(scope.name, "wattline");

    let samples = named(received, "nemo.relay.resource.sample_count");
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].unit, "events");
    assert_eq!(
        samples[0].description,
        "Resource metric samples collected in this poll"
    );
    let points = gauge_points(samples[0]);
    assert_eq!(points.len(), 1);
    assert_eq!(as_double(&points[0]), 7.0);
    assert_eq!(
        string_attribute(
            &points[0].attributes,
            "nemo_relay.resource.operating_system"
        )
        .as_deref(),
        Some("linux")
    );
    let resident = named(received, "nemo.relay.resource.memory.resident");
    assert_eq!(resident[0].unit, "kibibytes");
    assert_eq!(as_double(&gauge_points(resident[0])[0]), 2048.5);

    let utilization = gpu_utilization(received);
    assert_eq!(utilization.get("GPU-0"), Some(&75.0));
    assert_eq!(utilization.get("GPU-1"), Some(&50.0));
    assert_eq!(named(received, "gen_ai.gpu.utilization")[0].unit, "%");

    let energy = named(received, "gen_ai.energy.consumed");
    assert_eq!(energy[0].unit, "kWh");
    match &energy[0].data {
        Some(metric::Data::Sum(sum)) => {
            assert!(sum.is_monotonic);
            assert_eq!(
                sum.aggregation_temporality,
                AggregationTemporality::Delta as i32
            );
            assert_eq!(sum.data_points.len(), 1);
            assert_eq!(as_double(&sum.data_points[0]), 0.25);
            assert_eq!(
                string_attribute(&sum.data_points[0].attributes, "component").as_deref(),
                Some("gpu")
            );
        }
        other => panic!("energy is not a sum: {other:?}"),
    }

    let power = named(received, "gen_ai.power.consumption");
    assert_eq!(power[0].unit, "W");
    match &power[0].data {
        Some(metric::Data::Histogram(histogram)) => {
            assert_eq!(
                histogram.aggregation_temporality,
                AggregationTemporality::Delta as i32
            );
            let point = &histogram.data_points[0];
            assert_eq!(point.explicit_bounds, [100.0, 200.0, 300.0]);
            assert_eq!(point.count, 1);
            assert_eq!(point.sum, Some(150.0));
            assert_eq!(point.bucket_counts, [0, 1, 0, 0]);
        }
        other => panic!("power is not a histogram: {other:?}"),
    }
}

#[test]
fn grpc_export_carries_names_units_attributes_values_and_delta_temporality() {
    let receiver = grpc_receiver();
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
    );
    record_first_interval(&mut exporter);
    assert_first_interval(&receiver.inbox.take());

    // The next interval carries only what was recorded in it: the counter's increment,
    // not its running total.
    exporter
        .export(&gpu_batch(at(1, 0), &[("GPU-0", 80.0)], 0.5, 250.0))
        .unwrap();
    exporter.flush().unwrap();
    let second = receiver.inbox.take();
    match &named(&second, "gen_ai.energy.consumed")[0].data {
        Some(metric::Data::Sum(sum)) => assert_eq!(as_double(&sum.data_points[0]), 0.5),
        other => panic!("{other:?}"),
    }
    exporter.shutdown().unwrap();
    assert!(matches!(
        exporter.export(&resource_mark(uuid(2), None, at(2, 0), 1)),
        Err(ExportError::ShutDown("otlp"))
    ));
}

#[test]
fn http_binary_export_is_posted_to_v1_metrics_with_delta_temporality() {
    let receiver = http_receiver();
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::HttpBinary,
        MetricTemporality::Delta,
    );
    record_first_interval(&mut exporter);
    let received = receiver.inbox.take();
    assert_eq!(received[0].path, "/v1/metrics");
    assert_eq!(
        received[0].header("content-type"),
        Some("application/x-protobuf")
    );
    assert_first_interval(&received);
    exporter.shutdown().unwrap();
}

#[test]
fn a_gpu_that_stops_reporting_is_absent_from_later_delta_exports() {
    let receiver = grpc_receiver();
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
    );
    exporter
        .export(&gpu_batch(
            at(0, 0),
            &[("GPU-0", 10.0), ("GPU-1", 20.0)],
            0.1,
            100.0,
        ))
        .unwrap();
    exporter.flush().unwrap();
    assert_eq!(gpu_utilization(&receiver.inbox.take()).len(), 2);

    // GPU-0's collector stopped: only GPU-1 reports.
    exporter
        .export(&gpu_batch(at(1, 0), &[("GPU-1", 30.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().unwrap();
    let second = gpu_utilization(&receiver.inbox.take());
    assert_eq!(
        second.into_iter().collect::<Vec<_>>(),
        [("GPU-1".to_string(), 30.0)]
    );

    // Nobody reports: the gauge is gone altogether, not repeated.
    exporter.flush().unwrap();
    let third = receiver.inbox.take();
    assert!(
        named(&third, "gen_ai.gpu.utilization").is_empty(),
        "{third:?}"
    );
    exporter.shutdown().unwrap();
}

#[test]
fn with_cumulative_temporality_sums_grow_and_a_silent_gauge_still_disappears() {
    // Sums follow the configured temporality; gauges are delta whatever is set.
    let receiver = grpc_receiver();
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Cumulative,
    );
    exporter
        .export(&gpu_batch(
            at(0, 0),
            &[("GPU-0", 10.0), ("GPU-1", 20.0)],
            0.1,
            100.0,
        ))
        .unwrap();
    exporter.flush().unwrap();
    receiver.inbox.take();
    exporter
        .export(&gpu_batch(at(1, 0), &[("GPU-1", 30.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().unwrap();
    let received = receiver.inbox.take();
    let utilization = gpu_utilization(&received);
    assert_eq!(
        utilization.get("GPU-0"),
        None,
        "the silent gauge is not repeated"
    );
    assert_eq!(utilization.get("GPU-1"), Some(&30.0));
    match &named(&received, "gen_ai.energy.consumed")[0].data {
        Some(metric::Data::Sum(sum)) => {
            assert_eq!(
                sum.aggregation_temporality,
                AggregationTemporality::Cumulative as i32
            );
            assert!((as_double(&sum.data_points[0]) - 0.2).abs() < 1e-12);
        }
        other => panic!("{other:?}"),
    }
    exporter.shutdown().unwrap();
}

#[test]
fn by_default_sums_and_histograms_are_cumulative_and_gauges_delta_on_the_wire() {
    // What the exporter puts on the wire for each instrument kind, at the default
    // configuration: cumulative-only backends read energy, cost and CO2 correctly,
    // and a gauge nobody records is gone from the next export.
    let receiver = grpc_receiver();
    let mut exporter = default_temporality_exporter(&receiver.url());
    exporter.export(&every_kind(0, true)).unwrap();
    exporter.flush().unwrap();
    let first = receiver.inbox.take();
    let cumulative = AggregationTemporality::Cumulative as i32;
    for name in ["test.requests", "test.latency", "test.in_flight"] {
        assert_eq!(temporality_of(named(&first, name)[0]), cumulative, "{name}");
    }
    assert!(matches!(
        &named(&first, "test.queue_depth")[0].data,
        Some(metric::Data::Gauge(_))
    ));
    exporter.export(&every_kind(1, false)).unwrap();
    exporter.flush().unwrap();
    let second = receiver.inbox.take();
    assert_eq!(
        points_by_worker(named(&second, "test.requests")[0]),
        [("w0".to_string(), 4.0)],
        "a cumulative counter carries the total"
    );
    assert_eq!(
        points_by_worker(named(&second, "test.latency")[0]),
        [("w0".to_string(), 2.0)],
        "a cumulative histogram counts both intervals"
    );
    assert!(
        named(&second, "test.queue_depth").is_empty(),
        "the gauge nobody recorded is not exported"
    );
    exporter.shutdown().unwrap();
}

#[test]
fn a_collector_down_at_start_fails_the_flush_then_exports_once_it_is_up() {
    let address = free_address();
    let url = format!("http://{address}");
    let mut exporter = exporter(&url, OtlpTransport::Grpc, MetricTemporality::Delta);
    exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 10.0)], 0.1, 100.0))
        .unwrap();
    let error = exporter.flush().unwrap_err();
    assert!(
        matches!(&error, ExportError::Otlp { operation: "flush", endpoint, .. } if *endpoint == url),
        "{error:?}"
    );
    assert_eq!(exporter.endpoint_status()[0].exports.failed(), 1);

    let receiver = grpc_receiver_on(address).expect("receiver on the same port");
    exporter
        .export(&gpu_batch(at(1, 0), &[("GPU-0", 42.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().expect("exports resume");
    assert_eq!(
        gpu_utilization(&receiver.inbox.take()).get("GPU-0"),
        Some(&42.0)
    );
    assert_eq!(exporter.endpoint_status()[0].exports.succeeded(), 1);
    exporter.shutdown().unwrap();
}

#[test]
fn a_collector_killed_mid_run_and_restarted_gets_the_later_data() {
    let receiver = grpc_receiver();
    let address = receiver.addr;
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
    );
    exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 1.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().unwrap();
    assert_eq!(receiver.inbox.len(), 1);
    receiver.kill();

    exporter
        .export(&gpu_batch(at(1, 0), &[("GPU-0", 2.0)], 0.1, 100.0))
        .unwrap();
    assert!(exporter.flush().is_err(), "the collector is gone");

    let restarted = grpc_receiver_on(address).expect("same port again");
    exporter
        .export(&gpu_batch(at(2, 0), &[("GPU-0", 3.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().expect("exports resume after the restart");
    let received = restarted.inbox.take();
    assert_eq!(gpu_utilization(&received).get("GPU-0"), Some(&3.0));
    exporter.shutdown().unwrap();
}

#[test]
fn a_collector_that_never_answers_times_out_instead_of_hanging() {
    for transport in [OtlpTransport::Grpc, OtlpTransport::HttpBinary] {
        let silent = SilentReceiver::start();
        let mut exporter = OtlpExporter::builder(otel_config(
            &silent.url(),
            transport,
            MetricTemporality::Delta,
            300,
        ))
        .build()
        .unwrap();
        exporter
            .export(&gpu_batch(at(0, 0), &[("GPU-0", 1.0)], 0.1, 100.0))
            .unwrap();
        let error = exporter.flush().unwrap_err();
        assert!(
            matches!(
                error,
                ExportError::Otlp {
                    operation: "flush",
                    ..
                }
            ),
            "{transport:?}: {error:?}"
        );
        assert!(
            silent.bytes_received() > 0,
            "{transport:?}: the request did reach the receiver"
        );
        // A periodic failure not yet reported is reported by the next call.
        assert_eq!(exporter.endpoint_status()[0].exports.failed(), 1);
        drop(exporter);
        silent.kill();
    }
}

#[test]
fn two_endpoints_each_get_every_measurement() {
    let grpc = grpc_receiver();
    let http = http_receiver();
    let mut config = otel_config(
        &grpc.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        2_000,
    );
    let mut second = config.endpoints[0].clone();
    second.endpoint = http.url();
    second.transport = OtlpTransport::HttpBinary;
    second.service_name = Some("second".into());
    config.endpoints.push(second);
    let mut exporter = OtlpExporter::builder(config).build().unwrap();
    exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 5.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().unwrap();
    for (receiver, service) in [(&grpc, "wattline-test"), (&http, "second")] {
        let received = receiver.inbox.take();
        assert_eq!(gpu_utilization(&received).get("GPU-0"), Some(&5.0));
        let resource = received[0].request.resource_metrics[0]
            .resource
            .as_ref()
            .unwrap();
        assert_eq!(
            string_attribute(&resource.attributes, "service.name").as_deref(),
            Some(service)
        );
    }
    exporter.shutdown().unwrap();
}

#[test]
fn instruments_are_capped_and_conflicts_refused_and_counted() {
    let receiver = grpc_receiver();
    let mut exporter = OtlpExporter::builder(otel_config(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        2_000,
    ))
    .max_instruments(2)
    .build()
    .unwrap();
    // Four names: utilization, energy, power fit two; the third name is refused.
    let error = exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 5.0)], 0.1, 100.0))
        .unwrap_err();
    assert!(
        matches!(&error, ExportError::MeasurementsRefused { refused: 1, first } if first.contains("instrument limit of 2")),
        "{error:?}"
    );
    // Same name, other kind: refused, the instrument keeps its first kind.
    let mut conflicting = support::gauge_f64("gen_ai.energy.consumed", 1.0, "kWh", &[]);
    conflicting.kind = wattline_model::metric_measurements::MetricKind::Gauge;
    let event = wattline_model::events::PipelineEvent::Metrics {
        timestamp: at(1, 0),
        measurements: vec![conflicting],
    };
    assert!(matches!(
        exporter.export(&event),
        Err(ExportError::MeasurementsRefused { refused: 1, .. })
    ));
    assert_eq!(exporter.refused_measurements(), 2);
    exporter.flush().unwrap();
    let received = receiver.inbox.take();
    assert_eq!(support::metrics(&received).len(), 2);
    assert!(named(&received, "gen_ai.power.consumption").is_empty());
    exporter.shutdown().unwrap();
}

#[test]
fn max_instruments_from_the_configuration_caps_instruments() {
    let receiver = grpc_receiver();
    let mut config = otel_config(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        2_000,
    );
    config.max_instruments = 2;
    let mut exporter = OtlpExporter::builder(config).build().unwrap();
    // Three names (utilization, energy, power): the third is refused.
    let error = exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 5.0)], 0.1, 100.0))
        .unwrap_err();
    assert!(
        matches!(&error, ExportError::MeasurementsRefused { refused: 1, first } if first.contains("instrument limit of 2")),
        "{error:?}"
    );
    assert_eq!(exporter.refused_measurements(), 1);
    exporter.flush().unwrap();
    let received = receiver.inbox.take();
    let names: Vec<&str> = support::metrics(&received)
        .iter()
        .map(|metric| metric.name.as_str())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "exactly two instruments exported: {names:?}"
    );
    assert!(named(&received, "gen_ai.power.consumption").is_empty());
    exporter.shutdown().unwrap();
}

/// A measurement of `name` with one `worker` attribute.
fn measurement(
    name: &str,
    kind: MetricKind,
    value: MetricValue,
    worker: &str,
) -> MetricMeasurement {
    let value_type = match value {
        MetricValue::F64(_) => MetricValueType::F64,
        MetricValue::U64(_) => MetricValueType::U64,
        MetricValue::I64(_) => MetricValueType::I64,
    };
    MetricMeasurement {
        name: name.into(),
        kind,
        value_type,
        value,
        unit: Some("1".into()),
        description: None,
        attributes: support::attrs(&[("worker", worker)]),
        boundaries: match kind {
            MetricKind::Histogram => Some(vec![5.0]),
            _ => None,
        },
    }
}

fn batch(seconds: i64, measurements: Vec<MetricMeasurement>) -> PipelineEvent {
    PipelineEvent::Metrics {
        timestamp: at(seconds, 0),
        measurements,
    }
}

fn bool_attribute(attributes: &[KeyValue], key: &str) -> Option<bool> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match &kv.value {
            Some(AnyValue {
                value: Some(any_value::Value::BoolValue(value)),
            }) => Some(*value),
            _ => None,
        })
}

/// (worker attribute or `overflow`, value) of every number point of a sum or gauge, or
/// (.., count) of every histogram point, sorted.
fn points_by_worker(metric: &Metric) -> Vec<(String, f64)> {
    let label = |attributes: &[KeyValue]| {
        if bool_attribute(attributes, "otel.metric.overflow") == Some(true) {
            assert_eq!(attributes.len(), 1, "{attributes:?}");
            "overflow".to_string()
        } else {
            string_attribute(attributes, "worker").unwrap_or_default()
        }
    };
    let mut points: Vec<(String, f64)> = match &metric.data {
        Some(metric::Data::Sum(sum)) => sum
            .data_points
            .iter()
            .map(|point| (label(&point.attributes), as_double(point)))
            .collect(),
        Some(metric::Data::Gauge(gauge)) => gauge
            .data_points
            .iter()
            .map(|point| (label(&point.attributes), as_double(point)))
            .collect(),
        Some(metric::Data::Histogram(histogram)) => histogram
            .data_points
            .iter()
            .map(|point| (label(&point.attributes), point.count as f64))
            .collect(),
        other => panic!("{}: unexpected data {other:?}", metric.name),
    };
    points.sort_by(|a, b| a.0.cmp(&b.0));
    points
}

#[test]
fn cardinality_limit_keeps_that_many_attribute_sets_and_folds_the_rest_into_one_overflow_point() {
    let receiver = grpc_receiver();
    let mut config = otel_config(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        2_000,
    );
    config.cardinality_limit = 3;
    let mut exporter = OtlpExporter::builder(config).build().unwrap();
    let workers: Vec<String> = (0..10).map(|n| format!("w{n}")).collect();
    let mut measurements = Vec::new();
    for (n, worker) in workers.iter().enumerate() {
        measurements.push(measurement(
            "test.requests",
            MetricKind::Counter,
            MetricValue::U64(1),
            worker,
        ));
        measurements.push(measurement(
            "test.queue_depth",
            MetricKind::Gauge,
            MetricValue::F64(n as f64),
            worker,
        ));
        measurements.push(measurement(
            "test.latency",
            MetricKind::Histogram,
            MetricValue::F64(1.0),
            worker,
        ));
    }
    exporter.export(&batch(0, measurements)).unwrap();
    exporter.flush().unwrap();
    let received = receiver.inbox.take();

    // SDK 0.33: the first `cardinality_limit` attribute sets keep their own point; every
    // later set is aggregated into one extra point whose only attribute is
    // `otel.metric.overflow = true`. So 3 + 1 points from 10 sets, on every instrument.
    let expected = |overflow: f64| {
        vec![
            ("overflow".to_string(), overflow),
            ("w0".to_string(), 1.0),
            ("w1".to_string(), 1.0),
            ("w2".to_string(), 1.0),
        ]
    };
    // The counter sums the seven late increments, the histogram counts them.
    assert_eq!(
        points_by_worker(named(&received, "test.requests")[0]),
        expected(7.0)
    );
    assert_eq!(
        points_by_worker(named(&received, "test.latency")[0]),
        expected(7.0)
    );
    // The gauge's overflow point holds the last late value (w9's 9.0).
    assert_eq!(
        points_by_worker(named(&received, "test.queue_depth")[0]),
        vec![
            ("overflow".to_string(), 9.0),
            ("w0".to_string(), 0.0),
            ("w1".to_string(), 1.0),
            ("w2".to_string(), 2.0),
        ]
    );
    exporter.shutdown().unwrap();
}

#[test]
fn default_cardinality_limit_keeps_ten_attribute_sets_apart() {
    let receiver = grpc_receiver();
    let mut exporter = exporter(
        &receiver.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
    );
    let measurements = (0..10)
        .map(|n| {
            measurement(
                "test.requests",
                MetricKind::Counter,
                MetricValue::U64(1),
                &format!("w{n}"),
            )
        })
        .collect();
    exporter.export(&batch(0, measurements)).unwrap();
    exporter.flush().unwrap();
    let points = points_by_worker(named(&receiver.inbox.take(), "test.requests")[0]);
    assert_eq!(points.len(), 10, "{points:?}");
    assert!(points.iter().all(|(worker, _)| worker != "overflow"));
    exporter.shutdown().unwrap();
}

/// One batch of each instrument kind (counter +2, histogram 1.0, up-down counter +3),
/// with a gauge (4.0) when `with_gauge`.
fn every_kind(seconds: i64, with_gauge: bool) -> wattline_model::events::PipelineEvent {
    let mut measurements = vec![
        measurement(
            "test.requests",
            MetricKind::Counter,
            MetricValue::U64(2),
            "w0",
        ),
        measurement(
            "test.latency",
            MetricKind::Histogram,
            MetricValue::F64(1.0),
            "w0",
        ),
        measurement(
            "test.in_flight",
            MetricKind::UpDownCounter,
            MetricValue::I64(3),
            "w0",
        ),
    ];
    if with_gauge {
        measurements.push(measurement(
            "test.queue_depth",
            MetricKind::Gauge,
            MetricValue::F64(4.0),
            "w0",
        ));
    }
    batch(seconds, measurements)
}

fn temporality_of(metric: &Metric) -> i32 {
    match &metric.data {
        Some(metric::Data::Sum(sum)) => sum.aggregation_temporality,
        Some(metric::Data::Histogram(histogram)) => histogram.aggregation_temporality,
        other => panic!("{}: no temporality on {other:?}", metric.name),
    }
}

#[test]
fn low_memory_is_delta_for_counters_and_histograms_cumulative_for_up_down_counters() {
    for transport in [OtlpTransport::Grpc, OtlpTransport::HttpBinary] {
        let receiver = match transport {
            OtlpTransport::Grpc => grpc_receiver(),
            OtlpTransport::HttpBinary => http_receiver(),
        };
        let mut exporter = exporter(&receiver.url(), transport, MetricTemporality::LowMemory);
        for seconds in [0, 1] {
            exporter.export(&every_kind(seconds, seconds == 0)).unwrap();
            exporter.flush().unwrap();
        }
        let received = receiver.inbox.take();
        assert_eq!(received.len(), 2, "{transport:?}: one request per flush");
        let second = &received[1..];
        let delta = AggregationTemporality::Delta as i32;
        let cumulative = AggregationTemporality::Cumulative as i32;

        let requests = named(second, "test.requests")[0];
        assert_eq!(temporality_of(requests), delta, "{transport:?}");
        assert!(matches!(&requests.data, Some(metric::Data::Sum(sum)) if sum.is_monotonic));
        assert_eq!(points_by_worker(requests), [("w0".to_string(), 2.0)]);

        let latency = named(second, "test.latency")[0];
        assert_eq!(temporality_of(latency), delta, "{transport:?}");
        assert_eq!(points_by_worker(latency), [("w0".to_string(), 1.0)]);

        let in_flight = named(second, "test.in_flight")[0];
        assert_eq!(temporality_of(in_flight), cumulative, "{transport:?}");
        assert!(matches!(&in_flight.data, Some(metric::Data::Sum(sum)) if !sum.is_monotonic));
        assert_eq!(points_by_worker(in_flight), [("w0".to_string(), 6.0)]);

        // Gauges stay delta: one recorded only in the first interval is absent from
        // the second (the SDK's own low_memory would repeat it).
        assert!(
            named(second, "test.queue_depth").is_empty(),
            "{transport:?}"
        );
        exporter.shutdown().unwrap();
    }
}

#[test]
fn resource_carries_service_namespace_and_version_when_set() {
    let grpc = grpc_receiver();
    let http = http_receiver();
    let mut config = otel_config(
        &grpc.url(),
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        2_000,
    );
    let mut second = config.endpoints[0].clone();
    second.endpoint = http.url();
    second.transport = OtlpTransport::HttpBinary;
    config.endpoints[0].service_namespace = Some("perf-lab".into());
    config.endpoints[0].service_version = Some("1.4.2".into());
    config.endpoints.push(second);
    let mut exporter = OtlpExporter::builder(config).build().unwrap();
    exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 5.0)], 0.1, 100.0))
        .unwrap();
    exporter.flush().unwrap();
    for (receiver, namespace, version) in [
        (&grpc, Some("perf-lab"), Some("1.4.2")),
        (&http, None, None),
    ] {
        let received = receiver.inbox.take();
        let resource = received[0].request.resource_metrics[0]
            .resource
            .as_ref()
            .unwrap();
        let attribute = |key| string_attribute(&resource.attributes, key);
        assert_eq!(attribute("service.namespace").as_deref(), namespace);
        assert_eq!(attribute("service.version").as_deref(), version);
        assert_eq!(attribute("service.name").as_deref(), Some("wattline-test"));
        assert_eq!(attribute("deployment.environment").as_deref(), Some("test"));
    }
    exporter.shutdown().unwrap();
}

#[test]
fn build_errors_name_the_setting() {
    let mut config = otel_config(
        "https://collector.example:4317",
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        1_000,
    );
    let error = OtlpExporter::builder(config.clone()).build().unwrap_err();
    assert!(
        matches!(error, BuildError::TlsUnsupported { index: 0, .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("endpoints[0].endpoint: https://collector.example:4317 needs TLS")
    );

    config.endpoints.clear();
    assert!(matches!(
        OtlpExporter::builder(config.clone()).build(),
        Err(BuildError::NoEndpoints)
    ));

    let mut bad = otel_config(
        "http://127.0.0.1:4317",
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        0,
    );
    bad.endpoints[0].timeout_millis = 0;
    let error = OtlpExporter::builder(bad).build().unwrap_err();
    assert_eq!(
        error.to_string(),
        "endpoints[0].timeout_millis: must be greater than zero (got 0)"
    );
}

#[test]
fn http_metrics_url_appends_the_signal_path_only_without_a_path() {
    use wattline_exporters::otlp_http::metrics_url;
    assert_eq!(
        metrics_url("http://127.0.0.1:4318"),
        "http://127.0.0.1:4318/v1/metrics"
    );
    assert_eq!(
        metrics_url("http://127.0.0.1:4318/"),
        "http://127.0.0.1:4318/v1/metrics"
    );
    assert_eq!(
        metrics_url("http://gw:80/otlp/v1/metrics"),
        "http://gw:80/otlp/v1/metrics"
    );
}

/// A step's final figures: `attributed` and `window` J, `seconds` long.
fn settled_step(name: &str, attributed: f64, window: f64, seconds: i64) -> PipelineEvent {
    use wattline_model::report::ScopeEnergy;
    use wattline_model::scope_energy::SettledScope;
    let kwh = |joules: f64| Some(joules / 3.6e6);
    let settled = SettledScope {
        energy: ScopeEnergy {
            uuid: uuid(u128::from(seconds as u64) + 7),
            name: name.into(),
            parent_uuid: None,
            process_id: None,
            weight: None,
            gpu_energy_kwh: kwh(window),
            energy_kwh: kwh(window),
            cost: None,
            co2_grams: None,
            attributed_gpu_energy_kwh: kwh(attributed),
            attributed_energy_kwh: kwh(attributed),
            attributed_cost: None,
            attributed_co2_grams: None,
            started_at: at(0, 0),
            ended_at: Some(at(seconds, 0)),
            remote_call: None,
            receipt: None,
            attributed_receipt: None,
        },
        attribution: "process-share-then-weight".into(),
        methods: Default::default(),
        meters: vec!["GPU-0".into()],
        currency: "USD".into(),
        ended_at_program_exit: false,
        trace: None,
        coverage: None,
    };
    PipelineEvent::ScopeEnergy {
        settled: Box::new(settled),
        name_folded: false,
    }
}

/// Scope name → (count, sum) of every point of the histogram `metric`.
fn histogram_by_scope_name(metric: &Metric) -> std::collections::BTreeMap<String, (u64, f64)> {
    let Some(metric::Data::Histogram(histogram)) = &metric.data else {
        panic!("{} is not a histogram", metric.name)
    };
    histogram
        .data_points
        .iter()
        .map(|point| {
            let name = string_attribute(&point.attributes, "wattline.scope.name").unwrap();
            (name, (point.count, point.sum.unwrap()))
        })
        .collect()
}

#[test]
fn each_steps_energy_is_a_cumulative_histogram_point_under_its_name() {
    // Two `plan` steps (30 J and 12 J attributed) and one `act` (5 J), then one more
    // `act` (7 J) in the next interval: cumulative, the second export counts all four.
    let receiver = grpc_receiver();
    let mut exporter = default_temporality_exporter(&receiver.url());
    for event in [
        settled_step("plan", 30.0, 60.0, 2),
        settled_step("plan", 12.0, 24.0, 1),
        settled_step("act", 5.0, 5.0, 1),
    ] {
        exporter.export(&event).unwrap();
    }
    exporter.flush().unwrap();
    let first = receiver.inbox.take();
    let attributed = named(&first, "wattline.scope.energy.attributed")[0];
    assert_eq!(attributed.unit, "J");
    assert_eq!(
        temporality_of(attributed),
        AggregationTemporality::Cumulative as i32
    );
    let by_name = histogram_by_scope_name(attributed);
    assert_eq!(by_name["plan"], (2, 42.0));
    assert_eq!(by_name["act"], (1, 5.0));
    let window = histogram_by_scope_name(named(&first, "wattline.scope.energy.window")[0]);
    assert_eq!(window["plan"], (2, 84.0));
    let duration = histogram_by_scope_name(named(&first, "wattline.scope.duration")[0]);
    assert_eq!(duration["plan"], (2, 3.0));

    exporter.export(&settled_step("act", 7.0, 7.0, 1)).unwrap();
    exporter.flush().unwrap();
    let second = receiver.inbox.take();
    let by_name = histogram_by_scope_name(named(&second, "wattline.scope.energy.attributed")[0]);
    assert_eq!(by_name["act"], (2, 12.0));
    assert_eq!(by_name["plan"], (2, 42.0));
    exporter.shutdown().unwrap();
}

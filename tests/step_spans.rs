//! A span per Agent scope over OTLP traces, decoded with the official
//! `opentelemetry-proto` types from an in-test receiver: each step's span sits in the
//! trace its caller named (the OpenTelemetry context current at its start, an explicit
//! `traceparent`, or its parent scope's span) and carries the report's energy.

mod support;

#[path = "../exporters/tests/support/mod.rs"]
mod otlp;

use std::time::Duration;

use opentelemetry::trace::{Span as _, TraceContextExt, Tracer, TracerProvider};
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use support::ConstantPowerGpu;
use wattline::config::{EffectiveConfig, OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport};
use wattline::{Error, Pipeline, ScopeOptions};

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn double(span: &Span, key: &str) -> Option<f64> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::DoubleValue(value) => Some(*value),
            _ => None,
        })
}

fn unix_nanos(at: chrono::DateTime<chrono::Utc>) -> u64 {
    at.timestamp_nanos_opt().unwrap() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_step_is_a_span_in_the_callers_trace_carrying_its_energy() {
    let receiver = otlp::grpc_receiver();
    let opentelemetry = OpenTelemetryConfig {
        spans: true,
        endpoints: vec![OtlpEndpointConfig::new(receiver.url(), OtlpTransport::Grpc)],
        ..OpenTelemetryConfig::default()
    };
    let config = EffectiveConfig {
        resource_metrics: None,
        opentelemetry: Some(opentelemetry),
        ..EffectiveConfig::default()
    };
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| Some(Box::new(ConstantPowerGpu::new(250.0))))
        .spawn()
        .await
        .unwrap();

    // The agent's own span, from the OpenTelemetry SDK, current while its step starts.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let request = provider.tracer("agent").start("handle request");
    let caller = request.span_context().clone();
    let context = opentelemetry::Context::current_with_span(request);
    let plan = {
        let _attached = context.clone().attach();
        pipeline.agent_scope("plan").unwrap()
    };
    let tool = plan.child("tool").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    tool.end().unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    plan.end().unwrap();
    let act = pipeline
        .agent_scope_with("act", ScopeOptions::default().with_traceparent(CALLER))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    act.end().unwrap();
    // A malformed caller span is refused, naming the scope and what is wrong.
    let refused =
        pipeline.agent_scope_with("bad", ScopeOptions::default().with_traceparent("00-xyz"));
    match refused {
        Err(error @ Error::ScopeTraceparent { .. }) => {
            assert!(error.to_string().contains("\"bad\""), "{error}")
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a malformed traceparent was accepted"),
    }
    let report = pipeline.shutdown().await.unwrap().expect("a report");

    let spans = receiver.spans.spans();
    let named = |name: &str| -> &Span {
        spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("no span {name} in {spans:?}"))
    };
    assert_eq!(spans.len(), 3, "{spans:?}");
    let (plan, tool, act) = (named("plan"), named("tool"), named("act"));
    // plan: a child of the agent's current span, in its trace.
    assert_eq!(hex(&plan.trace_id), caller.trace_id().to_string());
    assert_eq!(hex(&plan.parent_span_id), caller.span_id().to_string());
    // tool: a child of plan's span.
    assert_eq!(tool.trace_id, plan.trace_id);
    assert_eq!(tool.parent_span_id, plan.span_id);
    // act: under the explicit traceparent.
    assert_eq!(hex(&act.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(hex(&act.parent_span_id), "00f067aa0ba902b7");
    // Each span's times and energy are the report's for that step.
    for span in [plan, tool, act] {
        let scope = report
            .agent_scopes
            .iter()
            .find(|scope| scope.name == span.name)
            .unwrap();
        assert_eq!(span.start_time_unix_nano, unix_nanos(scope.started_at));
        assert_eq!(span.end_time_unix_nano, unix_nanos(scope.ended_at.unwrap()));
        let joules = scope.attributed_energy_kwh.unwrap() * 3.6e6;
        let on_span = double(span, "wattline.energy.attributed_joules").unwrap();
        assert!(
            (on_span - joules).abs() <= 1e-9 * joules,
            "{on_span} vs {joules}"
        );
        let window = scope.energy_kwh.unwrap() * 3.6e6;
        let on_span = double(span, "wattline.energy.window_joules").unwrap();
        assert!(
            (on_span - window).abs() <= 1e-9 * window,
            "{on_span} vs {window}"
        );
        // Readings cover the whole step: one precedes it (the source is read from the
        // spawn on) and each boundary takes one, so no part of it lies in a gap; what
        // is left is rounding.
        let coverage = double(span, "wattline.energy.coverage").unwrap();
        assert!(
            (coverage - 1.0).abs() <= 1e-6,
            "{}: coverage {coverage}",
            span.name
        );
        // The closed form: a constant 250 W over the step's own duration, from the
        // span's own times, for its window and (alone, or a parent with its child)
        // its attributed part. The span's times are wall-clock stamps worked out from
        // the monotonic instants the energy is cut at, the clocks' offset read again
        // each second; 1 ms at 250 W is 0.25 J, 0.2% of the smallest step.
        let seconds = (span.end_time_unix_nano - span.start_time_unix_nano) as f64 / 1e9;
        let expected = 250.0 * seconds;
        assert!(
            (window - expected).abs() <= 250.0 * 1e-3 && (joules - expected).abs() <= 250.0 * 1e-3,
            "{}: window {window} J, attributed {joules} J; 250 W x {seconds} s is {expected} J",
            span.name
        );
    }
    // The spans carry the run's resource, as the metrics do.
    let resource = &receiver.spans.resources()[0];
    assert!(otlp::string_attribute(&resource.attributes, "wattline.run.id").is_some());
}

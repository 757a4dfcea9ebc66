//! OpenTelemetry GenAI spans become steps with no other code in Rust: the SDK's tracer
//! provider with `GenAiSpanProcessor`; each span carrying a `gen_ai.operation.name` is
//! an Agent scope named after it, nested as the spans nest (through spans that are not
//! steps), weighted by an attribute; operations and a predicate choose the steps.

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use uuid::Uuid;
use wattline::GenAiSpanProcessor;
use wattline::events::{CollectingEventSink, PipelineEvent, ScopeCategory};

/// A span `name` with `attributes`, current while `body` runs.
fn span(tracer: &SdkTracer, name: &'static str, attributes: Vec<KeyValue>, body: impl FnOnce()) {
    let started = tracer
        .span_builder(name)
        .with_attributes(attributes)
        .start(tracer);
    let context = Context::current_with_span(started);
    let guard = context.clone().attach();
    body();
    drop(guard);
    context.span().end();
}

/// An agent as a framework traces it (as python/tests/test_genai_spans.py does).
fn agent_run(tracer: &SdkTracer) {
    let operation = |name: &'static str| KeyValue::new("gen_ai.operation.name", name);
    span(
        tracer,
        "invoke_agent planner",
        vec![operation("invoke_agent")],
        || {
            let chat = vec![
                operation("chat"),
                KeyValue::new("gen_ai.request.max_tokens", 300),
            ];
            span(tracer, "chat gpt-4o", chat, || {});
            span(tracer, "GET /search", vec![], || {
                span(
                    tracer,
                    "execute_tool search",
                    vec![operation("execute_tool")],
                    || {},
                );
            });
        },
    );
    span(tracer, "render page", vec![], || {});
}

/// Each Agent scope's name with its parent's name (`None` under the root `root`), from
/// its start.
fn tree(sink: &CollectingEventSink, root: Uuid) -> HashMap<String, Option<String>> {
    let starts: Vec<(Uuid, String, Option<Uuid>)> = sink
        .events()
        .iter()
        .filter_map(|event| match event {
            PipelineEvent::Scope(scope)
                if scope.scope_category == ScopeCategory::Start && scope.uuid != root =>
            {
                Some((scope.uuid, scope.name.to_string(), scope.parent_uuid))
            }
            _ => None,
        })
        .collect();
    let names: HashMap<Uuid, String> = starts
        .iter()
        .map(|(uuid, name, _)| (*uuid, name.clone()))
        .collect();
    starts
        .into_iter()
        .map(|(_, name, parent)| (name, parent.and_then(|parent| names.get(&parent).cloned())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn genai_spans_become_nested_steps_weighted_by_an_attribute() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = support::pipeline_into(&sink).await;
    let processor =
        GenAiSpanProcessor::new(&pipeline).weight_attribute("gen_ai.request.max_tokens");
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .build();
    agent_run(&provider.tracer("agent framework"));
    let report = pipeline.flush().await.unwrap();

    let tree = tree(&sink, pipeline.run_id());
    let planner = "invoke_agent planner".to_owned();
    assert_eq!(tree.get("chat gpt-4o"), Some(&Some(planner.clone())));
    assert_eq!(
        tree.get("execute_tool search"),
        Some(&Some(planner.clone())),
        "through the HTTP span"
    );
    assert!(!tree.contains_key("GET /search") && !tree.contains_key("render page"));
    let weight = |name: &str| {
        report
            .agent_scopes
            .iter()
            .find(|scope| scope.name == name)
            .map(|scope| scope.weight)
    };
    assert_eq!(weight("chat gpt-4o"), Some(Some(300.0)));
    assert_eq!(weight("invoke_agent planner"), Some(None));
    assert!(
        report
            .agent_scopes
            .iter()
            .all(|scope| scope.ended_at.is_some())
    );
    provider.shutdown().unwrap();
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_or_a_predicate_choose_the_steps() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = support::pipeline_into(&sink).await;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(GenAiSpanProcessor::new(&pipeline).operations(["chat"]))
        .with_span_processor(
            GenAiSpanProcessor::new(&pipeline).predicate(|span| span.name.starts_with("render")),
        )
        .build();
    agent_run(&provider.tracer("agent framework"));
    pipeline.flush().await.unwrap();
    let mut names: Vec<String> = tree(&sink, pipeline.run_id()).into_keys().collect();
    names.sort();
    assert_eq!(names, ["chat gpt-4o", "render page"]);
    provider.shutdown().unwrap();
    pipeline.shutdown().await.unwrap();
}

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

/// A `plugins.toml` whose energy component adds one factor row: for `model`, `output`
/// and 0.02 to 0.1 Wh per 1,000 input tokens.
fn plugins_with_a_factor_row(model: &str, output: &str) -> String {
    format!(
        r#"
version = 1
[[components]]
kind = "energy"
[components.config]
[[components.config.remote_models]]
provider = "example"
models = ["{model}"]
output_wh_per_1k_tokens = {output}
input_wh_per_1k_tokens = [0.02, 0.1]
source = "a row in the test"
"#
    )
}

/// A pipeline whose `plugins.toml` adds one factor row, for model `test-model`: 0.4 to
/// 2.0 Wh per 1,000 output tokens, 0.02 to 0.1 per 1,000 input tokens.
async fn pipeline_with_a_factor_row(sink: &Arc<CollectingEventSink>) -> wattline::Pipeline {
    let toml = plugins_with_a_factor_row("test-model", "[0.4, 2.0]");
    let document = wattline::config::PluginsDocument::parse("plugins.toml", &toml).unwrap();
    let config = wattline::config::EffectiveConfig::merge(&[document]).unwrap();
    wattline::Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| None)
        .event_sink(sink.clone())
        .spawn()
        .await
        .unwrap()
}

/// A model call's span as the OpenAI instrumentation leaves it at its end.
fn model_call(model: &'static str, input: i64, output: i64) -> Vec<KeyValue> {
    vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.system", "openai"),
        KeyValue::new("gen_ai.request.model", model),
        KeyValue::new("gen_ai.usage.input_tokens", input),
        KeyValue::new("gen_ai.usage.output_tokens", output),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_model_call_gets_a_labelled_estimate_beside_its_measured_energy() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = pipeline_with_a_factor_row(&sink).await;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(GenAiSpanProcessor::new(&pipeline))
        .build();
    let tracer = provider.tracer("agent framework");
    let mut answered = model_call("test-model", 1500, 250);
    answered.push(KeyValue::new(
        "gen_ai.response.model",
        "test-model-2025-01-01",
    ));
    span(&tracer, "chat test-model", answered, || {});
    span(
        &tracer,
        "chat gpt-4o-mini",
        model_call("gpt-4o-mini", 1000, 1000),
        || {},
    );
    span(
        &tracer,
        "chat mystery",
        model_call("mystery-model", 10, 10),
        || {},
    );
    let mut local = model_call("test-model", 1000, 1000);
    local.push(KeyValue::new("server.address", "127.0.0.1"));
    span(&tracer, "chat local", local, || {});
    let tool = vec![KeyValue::new("gen_ai.operation.name", "execute_tool")];
    span(&tracer, "execute_tool search", tool, || {});
    let report = pipeline.flush().await.unwrap();

    let scope = |name: &str| {
        report
            .agent_scopes
            .iter()
            .find(|scope| scope.name == name)
            .unwrap_or_else(|| panic!("no scope {name}"))
    };
    let estimate = |name: &str| scope(name).remote_call.as_ref().unwrap().estimate.clone();
    let close = |got: f64, want_wh: f64| (got - want_wh / 1000.0).abs() < 1e-12;
    // The test's row: 1.5·0.02 + 0.25·0.4 = 0.13 Wh; 1.5·0.1 + 0.25·2.0 = 0.65 Wh.
    let ours = estimate("chat test-model").unwrap();
    assert!(
        close(ours.low_kwh, 0.13) && close(ours.high_kwh, 0.65),
        "{ours:?}"
    );
    assert_eq!(
        (
            ours.method.as_str(),
            ours.estimator.as_str(),
            ours.source.as_str()
        ),
        ("estimated", "factor-table", "a row in the test")
    );
    // The shipped row for gpt-4o-mini (config/data/remote_model_energy.toml): output
    // 0.12 to 2.1 Wh per 1,000, input 0.0012 to 0.78; 1,000 tokens of each.
    let shipped = estimate("chat gpt-4o-mini").unwrap();
    assert!(close(shipped.low_kwh, 0.0012 + 0.12), "{shipped:?}");
    assert!(close(shipped.high_kwh, 0.78 + 2.1), "{shipped:?}");
    assert!(shipped.source.contains("Jegham"), "{}", shipped.source);
    // No factor: no estimate, and the report names the model.
    assert_eq!(estimate("chat mystery"), None);
    // A model served on this machine, and a step that is no model call: no remote call.
    assert_eq!(scope("chat local").remote_call, None);
    assert_eq!(scope("execute_tool search").remote_call, None);

    let totals = report.remote_estimates.as_ref().unwrap();
    assert_eq!((totals.calls, totals.estimated_calls), (3, 2));
    assert!(close(totals.low_kwh, 0.13 + 0.1212) && close(totals.high_kwh, 0.65 + 2.88));
    assert_eq!(totals.models_without_estimate, ["mystery-model"]);
    // Never in the measured figures: a few milliseconds of this machine are far below
    // the 0.13 Wh estimated for one call.
    for measured in [report.total.energy_kwh, scope("chat test-model").energy_kwh] {
        assert!(
            measured.is_none_or(|kwh| kwh < 0.13e-3 / 10.0),
            "{measured:?}"
        );
    }
    // Every rendering shows it in its own place, with the models that had none.
    let table = wattline::report::render_table(&report);
    assert!(table.contains("remote chat test-model"), "{table}");
    assert!(
        table.contains("estimated (factor-table, test-model-2025-01-01)"),
        "{table}"
    );
    assert!(table.contains("no estimate for mystery-model"), "{table}");
    let html =
        wattline::report::html::render_html(&report, &Default::default(), Default::default());
    assert!(html.contains("<th>remote call (estimated)</th>"));
    assert!(
        html.contains("2 of 3 remote model calls estimated"),
        "{html}"
    );
    let row = wattline::report::csv::csv_row(&report, Default::default());
    let columns = wattline::report::csv::CSV_COLUMNS;
    let fields: Vec<&str> = row.split(',').collect();
    let field = |name: &str| fields[columns.iter().position(|c| *c == name).unwrap()];
    assert_eq!(field("remote_calls"), "3");
    assert_eq!(field("remote_models_without_estimate"), "mystery-model");
    let low: f64 = field("remote_estimated_energy_kwh_low").parse().unwrap();
    assert!(close(low, 0.13 + 0.1212));
    // The settled step carries it to the exporters: its own histogram series, low and
    // high, in joules.
    pipeline.shutdown().await.unwrap();
    let observations: Vec<(String, f64)> = sink
        .events()
        .iter()
        .filter_map(|event| match event {
            PipelineEvent::ScopeEnergy { settled, .. }
                if settled.energy.name == "chat test-model" =>
            {
                Some(settled.measurements("chat test-model"))
            }
            _ => None,
        })
        .flatten()
        .filter(|m| m.name == "wattline.scope.energy.remote_estimated")
        .map(|m| {
            let bound = &m.attributes.as_ref().unwrap()["wattline.estimate.bound"];
            (format!("{bound:?}"), m.value.as_f64())
        })
        .collect();
    assert_eq!(observations.len(), 2, "{observations:?}");
    assert!(
        (observations[0].1 - 0.13 * 3600.0).abs() < 1e-9,
        "{observations:?}"
    );
    assert!(
        (observations[1].1 - 0.65 * 3600.0).abs() < 1e-9,
        "{observations:?}"
    );
    provider.shutdown().unwrap();
}

#[test]
fn a_factor_row_that_is_wrong_is_refused_naming_its_field() {
    // Its output range runs backwards.
    let toml = plugins_with_a_factor_row("m", "[2.0, 0.4]");
    let error = wattline::config::PluginsDocument::parse("plugins.toml", &toml).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("remote_models[0].output_wh_per_1k_tokens"),
        "{message}"
    );
}

//! Steps with no code: OpenTelemetry GenAI spans become Agent scopes.
//!
//! [`GenAiSpanProcessor`] is an `opentelemetry_sdk` span processor: added to the
//! program's tracer provider, every span carrying a `gen_ai.operation.name` (an agent
//! invocation, a tool call, a model call, as the OpenTelemetry GenAI conventions name
//! them) becomes an Agent scope of the pipeline, named after the span and nested as the
//! spans nest (through spans that are not steps), its energy span a child of the
//! framework's span. It never fails the traced program: a scope it cannot start is
//! logged and skipped.
//!
//! ```no_run
//! # async fn run() -> Result<(), wattline::Error> {
//! let pipeline = wattline::Pipeline::builder().spawn().await?;
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
//!     .with_span_processor(wattline::GenAiSpanProcessor::new(&pipeline))
//!     .build();
//! # drop(provider);
//! # Ok(())
//! # }
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry::trace::{SpanId, TraceContextExt};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use uuid::Uuid;
use wattline_actors::pipeline::RunningPipeline;

use wattline_model::metric_measurements::AttributeValue;
use wattline_model::remote_call::RemoteCall;

use crate::agent_scope::{AgentScope, ScopeOptions};

/// The span attribute that names a GenAI operation.
pub const OPERATION_ATTRIBUTE: &str = "gen_ai.operation.name";

/// The `gen_ai.operation.name` values that become scopes by default: every operation
/// the OpenTelemetry GenAI conventions name.
pub const DEFAULT_OPERATIONS: [&str; 7] = [
    "invoke_agent",
    "create_agent",
    "execute_tool",
    "chat",
    "text_completion",
    "embeddings",
    "generate_content",
];

/// Whether a span becomes a step, from its name and attributes at its start.
pub type SpanPredicate = dyn Fn(&SpanData) -> bool + Send + Sync;

/// What the processor keeps of a live span it has seen.
struct Seen {
    /// The scope its descendants nest in: its own, or its nearest ancestor step's.
    nests_in: Uuid,
    /// Its own scope, when it is a step: ended when the span ends.
    own: Option<AgentScope>,
}

#[derive(Default)]
struct Spans {
    seen: HashMap<SpanId, Seen>,
    /// The scopes of steps whose spans are live: an ended one holds no children.
    live: HashSet<Uuid>,
}

/// Turns GenAI spans into Agent scopes of a pipeline (see the module's documentation).
pub struct GenAiSpanProcessor {
    pipeline: Arc<RunningPipeline>,
    operations: HashSet<String>,
    predicate: Option<Box<SpanPredicate>>,
    weight_attribute: Option<String>,
    spans: Mutex<Spans>,
}

impl std::fmt::Debug for GenAiSpanProcessor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GenAiSpanProcessor")
            .field("operations", &self.operations)
            .field("predicate", &self.predicate.is_some())
            .field("weight_attribute", &self.weight_attribute)
            .finish_non_exhaustive()
    }
}

impl GenAiSpanProcessor {
    /// A processor whose steps live in `pipeline`, for the
    /// [`DEFAULT_OPERATIONS`], unweighted.
    pub fn new(pipeline: &crate::Pipeline) -> Self {
        GenAiSpanProcessor {
            pipeline: pipeline.running(),
            operations: DEFAULT_OPERATIONS.iter().map(|&name| name.into()).collect(),
            predicate: None,
            weight_attribute: None,
            spans: Mutex::default(),
        }
    }

    /// Only spans whose `gen_ai.operation.name` is one of `operations` become steps.
    pub fn operations<I: IntoIterator<Item = S>, S: Into<String>>(mut self, operations: I) -> Self {
        self.operations = operations.into_iter().map(Into::into).collect();
        self
    }

    /// Instead of the operation names: spans for which `predicate` holds become steps.
    pub fn predicate(
        mut self,
        predicate: impl Fn(&SpanData) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.predicate = Some(Box::new(predicate));
        self
    }

    /// A step's weight is the positive number of `attribute` on its span at its start
    /// (e.g. `gen_ai.request.max_tokens`), 1 when absent.
    pub fn weight_attribute(mut self, attribute: impl Into<String>) -> Self {
        self.weight_attribute = Some(attribute.into());
        self
    }

    fn spans(&self) -> MutexGuard<'_, Spans> {
        self.spans
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn selected(&self, span: &SpanData) -> bool {
        match &self.predicate {
            Some(predicate) => predicate(span),
            None => span.attributes.iter().any(|attribute| {
                attribute.key.as_str() == OPERATION_ATTRIBUTE
                    && self.operations.contains(attribute.value.as_str().as_ref())
            }),
        }
    }

    fn weight(&self, span: &SpanData) -> Option<f64> {
        let key = self.weight_attribute.as_deref()?;
        let attribute = span.attributes.iter().find(|a| a.key.as_str() == key)?;
        let value = match &attribute.value {
            opentelemetry::Value::I64(value) => *value as f64,
            opentelemetry::Value::F64(value) => *value,
            _ => return None,
        };
        (value.is_finite() && value > 0.0).then_some(value)
    }
}

/// The W3C `traceparent` of the span `data` describes: the step's span becomes its child.
fn traceparent_of(data: &SpanData) -> String {
    let context = &data.span_context;
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// The model call to another machine the span describes at its end, if it does.
fn remote_call_of(span: &SpanData) -> Option<RemoteCall> {
    RemoteCall::from_span_attributes(|key| {
        let attribute = span.attributes.iter().find(|a| a.key.as_str() == key)?;
        Some(match &attribute.value {
            opentelemetry::Value::I64(value) => AttributeValue::Int(*value),
            opentelemetry::Value::F64(value) => AttributeValue::Float(*value),
            opentelemetry::Value::String(value) => AttributeValue::String(value.to_string()),
            opentelemetry::Value::Bool(value) => AttributeValue::Bool(*value),
            _ => return None,
        })
    })
}

impl SpanProcessor for GenAiSpanProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        let Some(data) = span.exported_data() else {
            return; // not recorded
        };
        let id = data.span_context.span_id();
        let parent_span = cx.span().span_context().span_id();
        let inherited = {
            let spans = self.spans();
            spans
                .seen
                .get(&parent_span)
                .map(|seen| seen.nests_in)
                .filter(|scope| spans.live.contains(scope))
        };
        if !self.selected(&data) {
            // Not a step: its descendants nest where it does.
            if let Some(nests_in) = inherited {
                let seen = Seen {
                    nests_in,
                    own: None,
                };
                self.spans().seen.insert(id, seen);
            }
            return;
        }
        let options = ScopeOptions {
            weight: self.weight(&data),
            traceparent: Some(traceparent_of(&data)),
        };
        let parent = inherited.or_else(|| crate::agent_scope::current_scope_in(&self.pipeline));
        match AgentScope::start(&self.pipeline, &data.name, &options, parent) {
            Ok(scope) => {
                let mut spans = self.spans();
                spans.live.insert(scope.uuid());
                let seen = Seen {
                    nests_in: scope.uuid(),
                    own: Some(scope),
                };
                spans.seen.insert(id, seen);
            }
            Err(error) => {
                tracing::warn!(span = %data.name, %error, "a span did not become a step");
            }
        }
    }

    fn on_end(&self, span: SpanData) {
        let own = {
            let mut spans = self.spans();
            let own = spans
                .seen
                .remove(&span.span_context.span_id())
                .and_then(|seen| seen.own);
            if let Some(scope) = &own {
                spans.live.remove(&scope.uuid());
            }
            own
        };
        let Some(scope) = own else {
            return;
        };
        let ended = match remote_call_of(&span) {
            Some(call) => scope.end_remote_call(call),
            None => scope.end(),
        };
        if let Err(error) = ended {
            tracing::warn!(span = %span.name, %error, "a span's step did not end");
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    /// Ends the steps of spans still open.
    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        let open: Vec<AgentScope> = {
            let mut spans = self.spans();
            spans.live.clear();
            spans
                .seen
                .drain()
                .filter_map(|(_, seen)| seen.own)
                .collect()
        };
        for scope in open {
            let _ = scope.end();
        }
        Ok(())
    }
}

//! A span per Agent scope over OTLP traces: each step's final energy
//! ([`wattline_model::events::PipelineEvent::ScopeEnergy`]) becomes one span with the step's name, start and
//! end, its energy, cost and CO2 as attributes, in the trace its start named (the
//! caller's span, its parent scope's, or its own), so a step's energy shows inside the
//! user's own trace. One batch processor per endpoint sends them on its own thread.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SpanData, SpanEvents, SpanExporter, SpanLinks, SpanProcessor,
};
use wattline_model::receipt::{EnergyReceipt, Resolution};
use wattline_model::remote_call::RemoteCall;
use wattline_model::scope_energy::{SettledScope, joules};

use crate::metrics_pipeline::ExportStatus;

/// The path OTLP/HTTP collectors take traces on.
pub const TRACES_PATH: &str = "/v1/traces";

/// The URL spans are posted to: the endpoint's, with a `/v1/metrics` it ends with
/// replaced, and `/v1/traces` appended.
pub fn traces_url(endpoint: &str) -> String {
    let base = endpoint.trim_end_matches('/');
    let base = base
        .strip_suffix(crate::otlp_http::METRICS_PATH)
        .unwrap_or(base);
    format!("{base}{TRACES_PATH}")
}

/// The span of one settled scope; `None` when its trace is not sampled (the caller's
/// decision) or it has none.
pub fn scope_span(settled: &SettledScope) -> Option<SpanData> {
    let trace = settled.trace.as_ref().filter(|trace| trace.sampled)?;
    let trace_id = TraceId::from_hex(&trace.trace_id).ok()?;
    let span_id = SpanId::from_hex(&trace.span_id).ok()?;
    let parent_span_id = match &trace.parent_span_id {
        Some(parent) => SpanId::from_hex(parent).ok()?,
        None => SpanId::INVALID,
    };
    let energy = &settled.energy;
    let start_time: SystemTime = energy.started_at.into();
    let end_time: SystemTime = energy.ended_at.unwrap_or(energy.started_at).into();
    let status = if settled.ended_at_program_exit {
        Status::error("its program exited with the scope open; wattline ended it then")
    } else {
        Status::Unset
    };
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id,
        parent_span_is_remote: trace.remote_parent,
        span_kind: SpanKind::Internal,
        name: Cow::Owned(energy.name.clone()),
        start_time,
        end_time: end_time.max(start_time),
        attributes: span_attributes(settled),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status,
        instrumentation_scope: InstrumentationScope::builder("wattline")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build(),
    })
}

/// The step's figures as span attributes: energy in joules, cost in the currency,
/// CO2 in grams; a figure that was not measured is absent, never zero.
fn span_attributes(settled: &SettledScope) -> Vec<KeyValue> {
    let energy = &settled.energy;
    let figures = [
        (
            "wattline.energy.attributed_joules",
            joules(energy.attributed_energy_kwh),
        ),
        ("wattline.energy.window_joules", joules(energy.energy_kwh)),
        (
            "wattline.energy.attributed_gpu_joules",
            joules(energy.attributed_gpu_energy_kwh),
        ),
        (
            "wattline.energy.window_gpu_joules",
            joules(energy.gpu_energy_kwh),
        ),
        ("wattline.cost.attributed", energy.attributed_cost),
        ("wattline.cost.window", energy.cost),
        ("wattline.co2.attributed_grams", energy.attributed_co2_grams),
        ("wattline.co2.window_grams", energy.co2_grams),
        ("wattline.scope.weight", energy.weight),
        ("wattline.energy.coverage", settled.coverage),
    ];
    let mut attributes: Vec<KeyValue> = figures
        .into_iter()
        .filter_map(|(key, value)| Some(KeyValue::new(key, value.filter(|v| v.is_finite())?)))
        .collect();
    attributes.push(KeyValue::new(
        "wattline.scope.uuid",
        energy.uuid.to_string(),
    ));
    attributes.push(KeyValue::new(
        "wattline.cost.currency",
        settled.currency.clone(),
    ));
    attributes.push(KeyValue::new(
        "wattline.energy.attribution",
        settled.attribution.clone(),
    ));
    let methods: Vec<opentelemetry::StringValue> = settled
        .methods
        .iter()
        .map(|(domain, method)| format!("{}: {}", domain.as_str(), method.as_str()).into())
        .collect();
    attributes.push(KeyValue::new(
        "wattline.energy.methods",
        Value::Array(methods.into()),
    ));
    let meters: Vec<opentelemetry::StringValue> =
        settled.meters.iter().cloned().map(Into::into).collect();
    attributes.push(KeyValue::new(
        "wattline.energy.meters",
        Value::Array(meters.into()),
    ));
    if let Some(pid) = energy.process_id {
        attributes.push(KeyValue::new("process.pid", i64::from(pid)));
    }
    if settled.ended_at_program_exit {
        attributes.push(KeyValue::new("wattline.ended_at_program_exit", true));
    }
    if let Some(receipt) = &energy.receipt {
        attributes.extend(receipt_attributes("window", receipt));
        attributes.push(KeyValue::new(
            "wattline.energy.method",
            receipt.method.as_str(),
        ));
        attributes.push(KeyValue::new(
            "wattline.energy.resolution",
            match receipt.resolution {
                Resolution::Resolved => "resolved",
                Resolution::Unresolved => "unresolved",
            },
        ));
    }
    if let Some(receipt) = &energy.attributed_receipt {
        attributes.extend(receipt_attributes("attributed", receipt));
    }
    if let Some(call) = &energy.remote_call {
        attributes.extend(remote_call_attributes(call));
    }
    attributes
}

/// A figure's 95% interval in joules: `wattline.energy.<figure>_joules.low` / `.high`.
fn receipt_attributes(figure: &str, receipt: &EnergyReceipt) -> Vec<KeyValue> {
    [("low", receipt.low_kwh), ("high", receipt.high_kwh)]
        .into_iter()
        .filter_map(|(end, kwh)| {
            let joules = joules(Some(kwh)).filter(|joules| joules.is_finite())?;
            Some(KeyValue::new(
                format!("wattline.energy.{figure}_joules.{end}"),
                joules,
            ))
        })
        .collect()
}

/// A remote model call's estimate, apart from the measured figures: its range in
/// joules, method, estimator and source; the model alone when it has no estimate.
fn remote_call_attributes(call: &RemoteCall) -> Vec<KeyValue> {
    let mut attributes = Vec::new();
    if let Some(model) = &call.model {
        attributes.push(KeyValue::new("wattline.remote_call.model", model.clone()));
    }
    let Some(estimate) = &call.estimate else {
        return attributes;
    };
    for (key, kwh) in [
        (
            "wattline.energy.remote_estimated.low_joules",
            estimate.low_kwh,
        ),
        (
            "wattline.energy.remote_estimated.high_joules",
            estimate.high_kwh,
        ),
    ] {
        if let Some(joules) = joules(Some(kwh)).filter(|joules| joules.is_finite()) {
            attributes.push(KeyValue::new(key, joules));
        }
    }
    for (key, value) in [
        ("wattline.energy.remote_estimated.method", &estimate.method),
        (
            "wattline.energy.remote_estimated.estimator",
            &estimate.estimator,
        ),
        ("wattline.energy.remote_estimated.source", &estimate.source),
    ] {
        attributes.push(KeyValue::new(key, value.clone()));
    }
    attributes
}

/// One endpoint's span exports.
pub(crate) struct SpanPipeline {
    processor: BatchSpanProcessor,
    status: Arc<ExportStatus>,
    failures_reported: u64,
}

impl std::fmt::Debug for SpanPipeline {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SpanPipeline").finish()
    }
}

/// A span exporter whose every export's outcome is counted in `status`.
#[derive(Debug)]
struct Observed<E> {
    inner: E,
    status: Arc<ExportStatus>,
}

impl<E: SpanExporter> SpanExporter for Observed<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.status.note(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl SpanPipeline {
    /// Starts the span exports through `exporter` (a transport's), with `resource`
    /// (the metrics' own), counting their outcomes in `status`.
    pub(crate) fn start(
        exporter: impl SpanExporter + 'static,
        status: Arc<ExportStatus>,
        resource: &Resource,
    ) -> Self {
        let observed = Observed {
            inner: exporter,
            status: Arc::clone(&status),
        };
        let mut processor = BatchSpanProcessor::builder(observed).build();
        processor.set_resource(resource);
        SpanPipeline {
            processor,
            status,
            failures_reported: 0,
        }
    }

    /// Queues the span of `settled`, if it has one; the span exports that failed
    /// since the last call, if any.
    pub(crate) fn export(&mut self, settled: &SettledScope) -> Result<(), String> {
        if let Some(span) = scope_span(settled) {
            self.processor.on_end(span);
        }
        self.unreported_failures()
    }

    fn unreported_failures(&mut self) -> Result<(), String> {
        let failures = self
            .status
            .unreported_failures(&mut self.failures_reported, "span export");
        failures.map_or(Ok(()), Err)
    }

    /// The outcome counters of its exports.
    pub(crate) fn status(&self) -> &ExportStatus {
        &self.status
    }

    /// Sends every queued span now.
    pub(crate) fn flush(&mut self) -> Result<(), String> {
        self.processor
            .force_flush()
            .map_err(|error| error.to_string())?;
        self.unreported_failures()
    }

    /// Sends what is queued and stops.
    pub(crate) fn shutdown(&mut self) -> Result<(), String> {
        self.processor
            .shutdown()
            .map_err(|error| error.to_string())?;
        self.unreported_failures()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use wattline_model::report::ScopeEnergy;
    use wattline_model::trace_context::{ScopeTrace, parse_traceparent};

    /// A step of 2 s, 7200 J attributed (2 Wh), under the W3C example's caller span.
    fn settled(attributed_kwh: Option<f64>, sampled: bool) -> SettledScope {
        let started_at = Utc.timestamp_opt(1_700_000_000, 0).single().unwrap();
        let mut caller =
            parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        caller.sampled = sampled;
        let uuid = uuid::Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_00aa);
        SettledScope {
            energy: ScopeEnergy {
                uuid,
                name: "plan".into(),
                parent_uuid: None,
                process_id: Some(42),
                weight: None,
                gpu_energy_kwh: attributed_kwh,
                energy_kwh: attributed_kwh,
                cost: None,
                co2_grams: None,
                attributed_gpu_energy_kwh: attributed_kwh,
                attributed_energy_kwh: attributed_kwh,
                attributed_cost: None,
                attributed_co2_grams: None,
                started_at,
                ended_at: Some(started_at + chrono::Duration::seconds(2)),
                remote_call: None,
                receipt: None,
                attributed_receipt: None,
            },
            attribution: "process-share-then-weight".into(),
            methods: Default::default(),
            meters: vec!["GPU-a".into()],
            currency: "USD".into(),
            ended_at_program_exit: false,
            trace: Some(ScopeTrace::resolve(uuid, Some(&caller), None)),
            coverage: attributed_kwh.map(|_| 1.0),
        }
    }

    fn attribute(span: &SpanData, key: &str) -> Option<Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    }

    #[test]
    fn a_span_has_the_steps_times_parent_and_energy_in_joules() {
        let span = scope_span(&settled(Some(0.002), true)).unwrap();
        assert_eq!(
            span.span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(span.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert!(span.parent_span_is_remote);
        assert_eq!(span.span_context.span_id().to_string(), "80000000000000aa");
        let seconds = span.end_time.duration_since(span.start_time).unwrap();
        assert_eq!(seconds, Duration::from_secs(2));
        assert_eq!(
            attribute(&span, "wattline.energy.attributed_joules"),
            Some(Value::F64(7200.0))
        );
        assert_eq!(attribute(&span, "process.pid"), Some(Value::I64(42)));
        assert_eq!(span.status, Status::Unset);
    }

    #[test]
    fn a_remote_calls_estimate_is_its_own_attributes_in_joules_with_method_and_source() {
        let mut scope = settled(Some(0.002), true);
        scope.energy.remote_call = Some(Box::new(RemoteCall {
            operation: "chat".into(),
            provider: Some("openai".into()),
            model: Some("gpt-4o".into()),
            input_tokens: Some(100),
            output_tokens: Some(300),
            estimate: Some(wattline_model::remote_call::RemoteEstimate {
                low_kwh: 0.0001,
                high_kwh: 0.0005,
                method: "estimated".into(),
                estimator: "factor-table".into(),
                source: "a source".into(),
            }),
        }));
        let span = scope_span(&scope).unwrap();
        // 0.1 Wh and 0.5 Wh; the measured 2 Wh (7200 J) stays as it was.
        let low = attribute(&span, "wattline.energy.remote_estimated.low_joules");
        let high = attribute(&span, "wattline.energy.remote_estimated.high_joules");
        assert!(
            matches!(low, Some(Value::F64(j)) if (j - 360.0).abs() < 1e-9),
            "{low:?}"
        );
        assert!(
            matches!(high, Some(Value::F64(j)) if (j - 1800.0).abs() < 1e-9),
            "{high:?}"
        );
        assert_eq!(
            attribute(&span, "wattline.energy.remote_estimated.method"),
            Some(Value::from("estimated"))
        );
        assert_eq!(
            attribute(&span, "wattline.energy.remote_estimated.source"),
            Some(Value::from("a source"))
        );
        assert_eq!(
            attribute(&span, "wattline.energy.attributed_joules"),
            Some(Value::F64(7200.0))
        );
        scope.energy.remote_call.as_mut().unwrap().estimate = None;
        let span = scope_span(&scope).unwrap();
        assert_eq!(
            attribute(&span, "wattline.energy.remote_estimated.low_joules"),
            None
        );
        assert_eq!(
            attribute(&span, "wattline.remote_call.model"),
            Some(Value::from("gpt-4o"))
        );
    }

    #[test]
    fn a_figures_receipt_is_its_interval_in_joules_its_method_and_resolution() {
        let mut scope = settled(Some(0.002), true);
        scope.energy.receipt = Some(EnergyReceipt {
            method: wattline_model::receipt::ReceiptMethod::Counter,
            low_kwh: 0.0019,
            high_kwh: 0.0021,
            resolution: Resolution::Unresolved,
        });
        let span = scope_span(&scope).unwrap();
        // 1.9 Wh and 2.1 Wh in joules.
        let low = attribute(&span, "wattline.energy.window_joules.low");
        let high = attribute(&span, "wattline.energy.window_joules.high");
        assert!(
            matches!(low, Some(Value::F64(j)) if (j - 6840.0).abs() < 1e-6),
            "{low:?}"
        );
        assert!(
            matches!(high, Some(Value::F64(j)) if (j - 7560.0).abs() < 1e-6),
            "{high:?}"
        );
        assert_eq!(
            attribute(&span, "wattline.energy.method"),
            Some(Value::from("counter"))
        );
        assert_eq!(
            attribute(&span, "wattline.energy.resolution"),
            Some(Value::from("unresolved"))
        );
        assert_eq!(
            attribute(&span, "wattline.energy.attributed_joules.low"),
            None
        );
    }

    #[test]
    fn a_figure_not_measured_is_no_attribute_not_zero() {
        let span = scope_span(&settled(None, true)).unwrap();
        for key in [
            "wattline.energy.attributed_joules",
            "wattline.energy.window_joules",
            "wattline.cost.attributed",
            "wattline.energy.coverage",
        ] {
            assert_eq!(attribute(&span, key), None, "{key}");
        }
    }

    #[test]
    fn an_unsampled_caller_gets_no_span_and_a_step_left_open_is_an_error() {
        assert!(scope_span(&settled(Some(0.002), false)).is_none());
        let mut left_open = settled(Some(0.002), true);
        left_open.ended_at_program_exit = true;
        let span = scope_span(&left_open).unwrap();
        assert!(
            matches!(span.status, Status::Error { .. }),
            "{:?}",
            span.status
        );
        assert_eq!(
            attribute(&span, "wattline.ended_at_program_exit"),
            Some(Value::Bool(true))
        );
    }

    #[test]
    fn traces_go_beside_metrics() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/metrics"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://c:4318/otlp"),
            "http://c:4318/otlp/v1/traces"
        );
    }
}

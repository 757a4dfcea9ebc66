//! The OTLP metrics exporter: one SDK pipeline per configured endpoint (its own meter
//! provider, periodic reader thread, resource, headers and timeout), delta temporality
//! unless `cumulative` or `low_memory` is configured, and every measurement of marks and
//! metric batches recorded into instruments by name, within the configured
//! `max_instruments` and per-instrument `cardinality_limit`.
//!
//! Recording never blocks the caller: instruments aggregate in memory and each reader
//! thread exports on its own schedule, so a slow or dead collector delays nobody but
//! that thread. With delta temporality a gauge that nobody recorded during an interval
//! is absent from that interval's export: a collector that stopped shows as a gap.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use wattline_config::{OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport};
use wattline_model::events::PipelineEvent;

use crate::exporter::{BuildError, ExportError, Exporter, ExporterKind};
use crate::metrics_pipeline::{ExportStatus, MetricsPipeline, PipelineSet, sdk_temporality};
use crate::otlp_grpc::{GrpcTarget, grpc_runtime, lazy_channel};
use crate::otlp_http::{HttpTarget, metrics_url};
use crate::otlp_resource::{
    RESOURCE_ATTRIBUTES_VARIABLE, RunIdentity, SERVICE_NAME_VARIABLE, endpoint_resource,
};
use crate::otlp_spans::{SpanPipeline, traces_url};
use crate::otlp_transport::{OtlpMetrics, OtlpSpans, Transport};

/// Reads an environment variable for `header_env`; the process environment by default.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<OsString> + Send + Sync>;

/// Builds an [`OtlpExporter`]; everything is checked at [`OtlpExporterBuilder::build`].
pub struct OtlpExporterBuilder {
    config: OpenTelemetryConfig,
    env: EnvLookup,
    max_instruments: usize,
    identity: RunIdentity,
}

impl std::fmt::Debug for OtlpExporterBuilder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("OtlpExporterBuilder")
            .field("endpoints", &self.config.endpoints.len())
            .field("max_instruments", &self.max_instruments)
            .finish()
    }
}

impl OtlpExporterBuilder {
    /// A builder for `config`, reading `header_env` variables from the process
    /// environment and creating at most `config.max_instruments` instruments per
    /// endpoint.
    pub fn new(config: OpenTelemetryConfig) -> Self {
        let max_instruments = config.max_instruments;
        OtlpExporterBuilder {
            config,
            env: Arc::new(|name| std::env::var_os(name)),
            max_instruments,
            identity: RunIdentity::default(),
        }
    }

    /// Where `header_env` and the `OTEL_*` resource variables are read (the process
    /// environment by default).
    pub fn env_lookup(mut self, lookup: EnvLookup) -> Self {
        self.env = lookup;
        self
    }

    /// What tells this run apart on the collector (`host.name`, `process.pid`,
    /// `wattline.run.id`, the default `service.name`); none by default.
    pub fn run_identity(mut self, identity: RunIdentity) -> Self {
        self.identity = identity;
        self
    }

    /// The most instruments each endpoint creates, overriding the configuration's
    /// `max_instruments`; measurements of further names are refused and counted.
    pub fn max_instruments(mut self, max_instruments: usize) -> Self {
        self.max_instruments = max_instruments;
        self
    }

    /// Validates the configuration, resolves headers (reading `header_env` now) and
    /// starts one pipeline per endpoint. Each error names the setting at fault; header
    /// values never appear in one.
    pub fn build(self) -> Result<OtlpExporter, BuildError> {
        self.config.validate()?;
        if self.config.endpoints.is_empty() {
            return Err(BuildError::NoEndpoints);
        }
        let interval = Duration::from_millis(self.config.export_interval_millis);
        let temporality = sdk_temporality(self.config.temporality);
        let mut runtime = None;
        let mut pipelines = Vec::with_capacity(self.config.endpoints.len());
        let mut span_pipelines = Vec::new();
        let variable =
            |name: &str| (self.env)(name).map(|value| value.to_string_lossy().into_owned());
        let service_name_variable = variable(SERVICE_NAME_VARIABLE);
        let resource_attributes_variable = variable(RESOURCE_ATTRIBUTES_VARIABLE);
        for (index, endpoint) in self.config.endpoints.iter().enumerate() {
            if endpoint.endpoint.starts_with("https://") {
                return Err(BuildError::TlsUnsupported {
                    index,
                    endpoint: endpoint.endpoint.clone(),
                });
            }
            let headers = resolve_headers(index, endpoint, &self.env)?;
            let timeout = Duration::from_millis(endpoint.timeout_millis);
            let otlp_error = |message| BuildError::Otlp {
                index,
                endpoint: endpoint.endpoint.clone(),
                message,
            };
            let resource = endpoint_resource(
                endpoint,
                &self.identity,
                service_name_variable.as_deref(),
                resource_attributes_variable.as_deref(),
            );
            let (status, span_status) = (Arc::<ExportStatus>::default(), Arc::default());
            let url = &endpoint.endpoint;
            // gRPC: one connection for both signals (HTTP/2 streams side by side).
            let channel = match endpoint.transport {
                OtlpTransport::Grpc => {
                    let runtime = match &mut runtime {
                        Some(runtime) => runtime,
                        None => runtime.insert(grpc_runtime().map_err(|source| {
                            BuildError::Runtime {
                                what: "gRPC runtime",
                                source,
                            }
                        })?),
                    };
                    Some(lazy_channel(url, timeout, runtime).map_err(otlp_error)?)
                }
                OtlpTransport::HttpBinary => None,
            };
            // Where one signal goes: the channel, else its own URL.
            let transport = |signal_url: String, status| -> Result<Transport, BuildError> {
                Ok(match &channel {
                    Some(channel) => Transport::Grpc(GrpcTarget::new(
                        url,
                        channel.clone(),
                        headers.clone(),
                        status,
                    )),
                    None => Transport::Http(
                        HttpTarget::new(signal_url, &headers, timeout, status)
                            .map_err(otlp_error)?,
                    ),
                })
            };
            if self.config.spans {
                let spans = OtlpSpans::new(transport(traces_url(url), Arc::clone(&span_status))?);
                span_pipelines.push(SpanPipeline::start(spans, span_status, &resource));
            }
            let metrics = transport(metrics_url(url), Arc::clone(&status))?;
            pipelines.push(MetricsPipeline::start(
                url.clone(),
                (OtlpMetrics::new(metrics, temporality), status),
                interval,
                resource,
                self.max_instruments,
                self.config.cardinality_limit,
            ));
        }
        tracing::info!(
            endpoints = pipelines.len(),
            interval_millis = self.config.export_interval_millis,
            temporality = ?self.config.temporality,
            max_instruments = self.max_instruments,
            cardinality_limit = self.config.cardinality_limit,
            "OTLP metrics exporter started"
        );
        Ok(OtlpExporter {
            pipelines: PipelineSet::new("otlp", pipelines)
                .with_metric_names(self.config.metric_names),
            spans: span_pipelines,
            runtime,
        })
    }
}

/// `headers` and `header_env` (read now) as one header map, every name and value
/// checked; errors name the header, never its value.
fn resolve_headers(
    index: usize,
    endpoint: &OtlpEndpointConfig,
    env: &EnvLookup,
) -> Result<HeaderMap, BuildError> {
    let mut headers = HeaderMap::new();
    let invalid = |field: &'static str, header: &str, rule: &str| BuildError::InvalidHeader {
        index,
        field,
        header: header.to_string(),
        rule: rule.to_string(),
    };
    let mut insert = |field: &'static str, name: &str, value: &str| -> Result<(), BuildError> {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid(field, name, "not a valid header name"))?;
        let mut header_value = HeaderValue::from_str(value)
            .ok()
            .filter(|value| value.to_str().is_ok())
            .ok_or_else(|| invalid(field, name, "value must be visible ASCII"))?;
        // Kept out of HPACK tables and shown as `Sensitive` by Debug.
        header_value.set_sensitive(true);
        headers.insert(header_name, header_value);
        Ok(())
    };
    for (name, value) in &endpoint.headers {
        insert("headers", name, value)?;
    }
    for (name, variable) in &endpoint.header_env {
        let env_error = |problem| BuildError::HeaderEnv {
            index,
            header: name.clone(),
            variable: variable.clone(),
            problem,
        };
        let value = env(variable).ok_or_else(|| env_error("is not set"))?;
        let value = value
            .into_string()
            .map_err(|_| env_error("is not valid UTF-8"))?;
        if value.is_empty() {
            return Err(env_error("is empty"));
        }
        insert("header_env", name, &value)?;
    }
    Ok(headers)
}

/// What one endpoint's exports have done so far.
#[derive(Debug, Clone)]
pub struct EndpointStatus {
    /// The endpoint URL as configured.
    pub endpoint: String,
    /// Export outcomes, updated by the endpoint's reader thread.
    pub exports: Arc<ExportStatus>,
}

/// Sends metrics to every configured OTLP endpoint.
#[derive(Debug)]
pub struct OtlpExporter {
    pipelines: PipelineSet,
    /// One per endpoint when `spans` is on.
    spans: Vec<SpanPipeline>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl OtlpExporter {
    /// A builder for `config`.
    pub fn builder(config: OpenTelemetryConfig) -> OtlpExporterBuilder {
        OtlpExporterBuilder::new(config)
    }

    /// Live export counters of each endpoint, in configuration order.
    pub fn endpoint_status(&self) -> Vec<EndpointStatus> {
        self.pipelines
            .pipelines()
            .iter()
            .map(|pipeline| EndpointStatus {
                endpoint: pipeline.target().to_string(),
                exports: pipeline.status(),
            })
            .collect()
    }

    /// Measurements refused so far, summed over endpoints.
    pub fn refused_measurements(&self) -> u64 {
        self.pipelines
            .pipelines()
            .iter()
            .map(MetricsPipeline::refused)
            .sum()
    }
}

impl Exporter for OtlpExporter {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Otlp
    }

    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        let mut spans = Ok(());
        if let PipelineEvent::ScopeEnergy { settled, .. } = event {
            spans = first_error(self.spans.iter_mut().map(|spans| spans.export(settled)));
        }
        self.pipelines.export(event)?;
        spans.map_err(ExportError::Spans)
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        let spans = first_error(self.spans.iter_mut().map(SpanPipeline::flush));
        self.pipelines.flush()?;
        spans.map_err(ExportError::Spans)
    }

    fn shutdown(&mut self) -> Result<(), ExportError> {
        let spans = first_error(self.spans.iter_mut().map(SpanPipeline::shutdown));
        self.spans.clear();
        let result = self.pipelines.shutdown();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        result?;
        spans.map_err(ExportError::Spans)
    }

    fn slowest_answer(&self) -> Option<Duration> {
        let metrics = self
            .pipelines
            .pipelines()
            .iter()
            .filter_map(|pipeline| pipeline.status().slowest_answer());
        let spans = self
            .spans
            .iter()
            .filter_map(|spans| spans.status().slowest_answer());
        metrics.chain(spans).max()
    }
}

/// Every call made, the first error kept.
fn first_error(results: impl Iterator<Item = Result<(), String>>) -> Result<(), String> {
    let mut first = Ok(());
    for result in results {
        if first.is_ok() {
            first = result;
        }
    }
    first
}

impl Drop for OtlpExporter {
    fn drop(&mut self) {
        // Providers first (their last export still needs the gRPC runtime), then the
        // runtime without blocking, which is allowed even inside an async context.
        self.spans.clear();
        self.pipelines.clear();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

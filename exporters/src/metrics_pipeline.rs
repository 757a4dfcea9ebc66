//! One OpenTelemetry SDK pipeline (meter provider, periodic reader on its own thread,
//! instrument table) around any push exporter, with the outcome of every periodic export
//! observed and counted. The OTLP exporter runs one per endpoint, the stdout exporter one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{
    Instrument, InstrumentKind, PeriodicReader, Pipeline, SdkMeterProvider, Stream, Temporality,
};
use wattline_config::MetricTemporality;

use wattline_model::events::PipelineEvent;

use wattline_model::metric_measurements::MetricMeasurement;

use crate::exporter::ExportError;
use crate::instruments::InstrumentTable;
use crate::semconv_names::MetricNameSelection;
use wattline_config::opentelemetry::MetricNames;

/// The instrumentation scope name of every wattline instrument.
pub const METER_NAME: &str = "wattline";

/// The SDK temporality for a configured one, which governs sums and histograms (with
/// `low_memory` the SDK makes counters and histograms delta and up-down counters
/// cumulative). Gauges are delta whatever is configured: see [`DeltaGaugeReader`].
pub fn sdk_temporality(temporality: MetricTemporality) -> Temporality {
    match temporality {
        MetricTemporality::Delta => Temporality::Delta,
        MetricTemporality::Cumulative => Temporality::Cumulative,
        MetricTemporality::LowMemory => Temporality::LowMemory,
    }
}

/// Outcomes of the exports one pipeline made, shared with its reader thread, and how
/// long the collector took to answer.
#[derive(Debug, Default)]
pub struct ExportStatus {
    succeeded: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// The slowest answer (acceptance or refusal) to one attempt, µs.
    slowest_answer_micros: AtomicU64,
}

impl ExportStatus {
    /// Exports the collector accepted.
    pub fn succeeded(&self) -> u64 {
        self.succeeded.load(Ordering::Relaxed)
    }

    /// Exports that failed (after the exporter's own retries).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// What the last failed export reported.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .map(|error| error.clone())
            .unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// The slowest the collector has been to answer one attempt (to accept or refuse
    /// it; an attempt that ran out of time counts as failed, not here).
    pub fn slowest_answer(&self) -> Option<Duration> {
        match self.slowest_answer_micros.load(Ordering::Relaxed) {
            0 => None,
            micros => Some(Duration::from_micros(micros)),
        }
    }

    /// The collector answered one attempt after `took`.
    pub(crate) fn note_answer(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        self.slowest_answer_micros
            .fetch_max(micros, Ordering::Relaxed);
    }

    /// The exports that failed since `reported` of them were (which it is brought up
    /// to), in words, `what` naming them; `None` when none did.
    pub(crate) fn unreported_failures(&self, reported: &mut u64, what: &str) -> Option<String> {
        let failed = self.failed();
        if failed == *reported {
            return None;
        }
        let new = failed - *reported;
        *reported = failed;
        Some(format!(
            "{new} {what}(s) failed; last: {}",
            self.last_error().unwrap_or_default()
        ))
    }

    pub(crate) fn note(&self, result: &OTelSdkResult) {
        match result {
            Ok(()) => {
                self.succeeded.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                let mut last = self
                    .last_error
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                *last = Some(error.to_string());
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A push exporter that records each export's outcome in an [`ExportStatus`].
#[derive(Debug)]
struct ObservedExporter<E> {
    inner: E,
    status: Arc<ExportStatus>,
}

impl<E: PushMetricExporter> PushMetricExporter for ObservedExporter<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let result = self.inner.export(metrics).await;
        self.status.note(&result);
        result
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// The periodic reader with the spec's rule for gauges on top: a gauge is always
/// delta, so one nobody recorded during an interval is not exported and a source that
/// stopped shows as a gap, not a flat line. Every other kind keeps the configured
/// temporality (a gauge has none on the wire, so nothing else changes).
struct DeltaGaugeReader<E: PushMetricExporter> {
    periodic: PeriodicReader<E>,
}

impl<E: PushMetricExporter> std::fmt::Debug for DeltaGaugeReader<E> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DeltaGaugeReader")
            .finish_non_exhaustive()
    }
}

impl<E: PushMetricExporter> MetricReader for DeltaGaugeReader<E> {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.periodic.register_pipeline(pipeline);
    }

    fn collect(&self, metrics: &mut ResourceMetrics) -> OTelSdkResult {
        self.periodic.collect(metrics)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.periodic.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.periodic.shutdown_with_timeout(timeout)
    }

    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        match kind {
            InstrumentKind::Gauge | InstrumentKind::ObservableGauge => Temporality::Delta,
            _ => self.periodic.temporality(kind),
        }
    }
}

/// A meter provider with one periodic reader and its instruments.
#[derive(Debug)]
pub(crate) struct MetricsPipeline {
    target: String,
    provider: SdkMeterProvider,
    instruments: InstrumentTable,
    status: Arc<ExportStatus>,
    failures_reported: u64,
}

impl MetricsPipeline {
    /// Starts the reader thread exporting to `exporter` every `interval`, creating at
    /// most `max_instruments` instruments, each keeping at most `cardinality_limit`
    /// attribute sets per export (the SDK folds further sets into one point carrying
    /// `otel.metric.overflow = true`).
    pub(crate) fn start<E: PushMetricExporter>(
        target: String,
        (exporter, status): (E, Arc<ExportStatus>),
        interval: Duration,
        resource: Resource,
        max_instruments: usize,
        cardinality_limit: usize,
    ) -> Self {
        let periodic = PeriodicReader::builder(ObservedExporter {
            inner: exporter,
            status: Arc::clone(&status),
        })
        .with_interval(interval)
        .build();
        let reader = DeltaGaugeReader { periodic };
        // The SDK refuses 0 and usize::MAX (and would then silently use its default).
        let cardinality_limit = cardinality_limit.clamp(1, usize::MAX - 1);
        let provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .with_view(move |_: &Instrument| {
                Stream::builder()
                    .with_cardinality_limit(cardinality_limit)
                    .build()
                    .ok()
            })
            .build();
        let scope = InstrumentationScope::builder(METER_NAME)
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let meter = provider.meter_with_scope(scope);
        MetricsPipeline {
            target,
            provider,
            instruments: InstrumentTable::new(meter, max_instruments),
            status,
            failures_reported: 0,
        }
    }

    /// Where this pipeline exports to (an endpoint URL or `stdout`).
    pub(crate) fn target(&self) -> &str {
        &self.target
    }

    /// The shared outcome counters.
    pub(crate) fn status(&self) -> Arc<ExportStatus> {
        Arc::clone(&self.status)
    }

    /// Measurements the instrument table refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.instruments.refused()
    }

    /// Records the event's measurements (never blocks), then reports periodic exports
    /// that failed since the last call, if any; that report comes before refused
    /// measurements, which the instrument table counts anyway.
    pub(crate) fn record(&mut self, measurements: &[MetricMeasurement]) -> Result<(), ExportError> {
        let recorded = self.instruments.record_all(measurements);
        self.unreported_failures().and(recorded)
    }

    fn unreported_failures(&mut self) -> Result<(), ExportError> {
        let failures = self
            .status
            .unreported_failures(&mut self.failures_reported, "periodic export");
        match failures {
            None => Ok(()),
            Some(message) => Err(ExportError::Otlp {
                operation: "export",
                endpoint: self.target.clone(),
                message,
            }),
        }
    }

    /// Exports now and waits for the outcome (bounded by the exporter's own timeout).
    /// Blocks: call it off the async workers.
    pub(crate) fn flush(&mut self) -> Result<(), ExportError> {
        match self.provider.force_flush() {
            Ok(()) => self.unreported_failures(),
            Err(error) => {
                self.failures_reported = self.status.failed();
                Err(self.error("flush", error.to_string()))
            }
        }
    }

    /// Exports what is left and stops the reader thread. Blocks for up to 5 s.
    pub(crate) fn shutdown(&mut self) -> Result<(), ExportError> {
        self.provider
            .shutdown()
            .map_err(|error| self.error("shutdown", error.to_string()))
    }

    fn error(&self, operation: &'static str, sdk_message: String) -> ExportError {
        // The SDK's own message is generic ("Failed to flush"); the exporter's is not.
        let message = match self.status.last_error() {
            Some(last) => format!("{sdk_message}; last export error: {last}"),
            None => sdk_message,
        };
        ExportError::Otlp {
            operation,
            endpoint: self.target.clone(),
            message,
        }
    }
}

/// The pipelines of one exporter, with the exporter contract over all of them: every
/// pipeline is tried and the first error returned; after shutdown every call but
/// shutdown fails.
#[derive(Debug)]
pub(crate) struct PipelineSet {
    exporter: &'static str,
    pipelines: Vec<MetricsPipeline>,
    shut_down: bool,
    names: MetricNameSelection,
}

impl PipelineSet {
    /// The set for the exporter called `exporter` (used in errors).
    pub(crate) fn new(exporter: &'static str, pipelines: Vec<MetricsPipeline>) -> Self {
        PipelineSet {
            exporter,
            pipelines,
            shut_down: false,
            names: MetricNameSelection::default(),
        }
    }

    /// Sends the metrics under `names` (default: the specification's).
    pub(crate) fn with_metric_names(mut self, names: MetricNames) -> Self {
        self.names = MetricNameSelection::new(names);
        self
    }

    /// The pipelines, in order.
    pub(crate) fn pipelines(&self) -> &[MetricsPipeline] {
        &self.pipelines
    }

    fn each(
        &mut self,
        mut operation: impl FnMut(&mut MetricsPipeline) -> Result<(), ExportError>,
    ) -> Result<(), ExportError> {
        let mut first_error = None;
        for pipeline in &mut self.pipelines {
            if let Err(error) = operation(pipeline) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Records the event's measurements into every pipeline.
    pub(crate) fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        if self.shut_down {
            return Err(ExportError::ShutDown(self.exporter));
        }
        let measurements = self.names.event_measurements(event);
        self.each(|pipeline| pipeline.record(&measurements))
    }

    /// Forces an export on every pipeline. Blocks.
    pub(crate) fn flush(&mut self) -> Result<(), ExportError> {
        if self.shut_down {
            return Err(ExportError::ShutDown(self.exporter));
        }
        self.each(MetricsPipeline::flush)
    }

    /// Shuts every pipeline down; a second call does nothing. Blocks.
    pub(crate) fn shutdown(&mut self) -> Result<(), ExportError> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        self.each(MetricsPipeline::shutdown)
    }

    /// Drops every pipeline (each provider shuts down if it has not).
    pub(crate) fn clear(&mut self) {
        self.pipelines.clear();
    }
}

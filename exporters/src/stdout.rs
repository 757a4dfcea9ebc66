//! The stdout exporter: the same instruments as OTLP, printed by `opentelemetry-stdout`
//! at each export interval, for looking at what would be sent.

use std::time::Duration;

use opentelemetry_sdk::Resource;
use wattline_config::MetricTemporality;
use wattline_config::opentelemetry::{DEFAULT_CARDINALITY_LIMIT, DEFAULT_SERVICE_NAME};
use wattline_model::events::PipelineEvent;

use crate::exporter::{ExportError, Exporter, ExporterKind};
use crate::instruments::DEFAULT_MAX_INSTRUMENTS;
use crate::metrics_pipeline::{MetricsPipeline, PipelineSet, sdk_temporality};

/// Prints metrics on standard output every interval (and at flush and shutdown).
#[derive(Debug)]
pub struct StdoutExporter {
    pipelines: PipelineSet,
}

impl StdoutExporter {
    /// Starts printing every `interval` with `temporality`.
    pub fn new(interval: Duration, temporality: MetricTemporality) -> Self {
        let exporter = opentelemetry_stdout::MetricExporter::builder()
            .with_temporality(sdk_temporality(temporality))
            .build();
        let resource = Resource::builder_empty()
            .with_service_name(DEFAULT_SERVICE_NAME)
            .build();
        let pipeline = MetricsPipeline::start(
            "stdout".into(),
            (exporter, Default::default()),
            interval,
            resource,
            DEFAULT_MAX_INSTRUMENTS,
            DEFAULT_CARDINALITY_LIMIT,
        );
        StdoutExporter {
            pipelines: PipelineSet::new("stdout", vec![pipeline]),
        }
    }
}

impl Exporter for StdoutExporter {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Stdout
    }

    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        self.pipelines.export(event)
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        self.pipelines.flush()
    }

    fn shutdown(&mut self) -> Result<(), ExportError> {
        self.pipelines.shutdown()
    }
}

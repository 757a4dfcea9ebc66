//! One OTLP endpoint's metric and span exporters over either transport: the SDK's
//! periodic reader and batch processor call them, the transports send (and send again
//! only what the collector did not take: [`crate::otlp_retry`]).

use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

use crate::otlp_grpc::GrpcTarget;
use crate::otlp_http::HttpTarget;

/// Where one signal of one endpoint goes.
#[derive(Debug)]
pub(crate) enum Transport {
    /// OTLP/gRPC (the metrics and trace services of one channel).
    Grpc(GrpcTarget),
    /// OTLP/HTTP, protobuf, to this signal's URL.
    Http(HttpTarget),
}

/// The metrics of one endpoint.
#[derive(Debug)]
pub(crate) struct OtlpMetrics {
    transport: Transport,
    temporality: Temporality,
}

impl OtlpMetrics {
    /// Metrics through `transport`, aggregated with `temporality`.
    pub(crate) fn new(transport: Transport, temporality: Temporality) -> Self {
        OtlpMetrics {
            transport,
            temporality,
        }
    }
}

impl PushMetricExporter for OtlpMetrics {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let message = ExportMetricsServiceRequest::from(metrics);
        match &self.transport {
            Transport::Grpc(grpc) => grpc.metrics(message).await,
            Transport::Http(http) => http.post(&message),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        self.temporality
    }
}

/// The spans of one endpoint.
#[derive(Debug)]
pub(crate) struct OtlpSpans {
    transport: Transport,
    resource: ResourceAttributesWithSchema,
}

impl OtlpSpans {
    /// Spans through `transport` (the resource is set by the batch processor).
    pub(crate) fn new(transport: Transport) -> Self {
        OtlpSpans {
            transport,
            resource: ResourceAttributesWithSchema::default(),
        }
    }
}

impl SpanExporter for OtlpSpans {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let message = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &self.resource),
        };
        match &self.transport {
            Transport::Grpc(grpc) => grpc.spans(message).await,
            Transport::Http(http) => http.post(&message),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}

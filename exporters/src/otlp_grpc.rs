//! The gRPC (tonic) transport of the OTLP exporter: metrics and spans, each request
//! sent again only when the collector did not take it ([`crate::otlp_retry`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use tokio::runtime::Runtime;
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, Endpoint};

use crate::metrics_pipeline::ExportStatus;
use crate::otlp_retry::{grpc_verdict, next_wait};

/// A channel to `endpoint` that connects at its first use, its task on `runtime`;
/// `timeout` bounds connecting as well as each request, so an address that swallows
/// packets cannot stall an exporter's thread.
pub(crate) fn lazy_channel(
    endpoint: &str,
    timeout: Duration,
    runtime: &Runtime,
) -> Result<Channel, String> {
    let _inside_runtime = runtime.enter();
    Ok(Endpoint::from_shared(endpoint.to_string())
        .map_err(|error| format!("invalid gRPC endpoint: {error}"))?
        .timeout(timeout)
        .connect_timeout(timeout)
        .connect_lazy())
}

/// The small runtime that carries every gRPC channel of one OTLP exporter.
pub(crate) fn grpc_runtime() -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("wattline-otlp-grpc")
        .enable_all()
        .build()
}

/// One endpoint's gRPC requests: what each carries, and where their outcomes are
/// counted.
#[derive(Debug, Clone)]
pub(crate) struct GrpcTarget {
    channel: Channel,
    endpoint: String,
    metadata: MetadataMap,
    status: Arc<ExportStatus>,
}

impl GrpcTarget {
    /// Requests to `endpoint` over `channel`, each carrying `headers`, counted in
    /// `status`.
    pub(crate) fn new(
        endpoint: &str,
        channel: Channel,
        headers: HeaderMap,
        status: Arc<ExportStatus>,
    ) -> Self {
        GrpcTarget {
            channel,
            endpoint: endpoint.to_owned(),
            metadata: MetadataMap::from_headers(headers),
            status,
        }
    }

    /// Sends `message` to the metrics service.
    pub(crate) async fn metrics(&self, message: ExportMetricsServiceRequest) -> OTelSdkResult {
        let client = MetricsServiceClient::new(self.channel.clone());
        self.send(message, |request| {
            let mut client = client.clone();
            async move { client.export(request).await.map(drop) }
        })
        .await
    }

    /// Sends `message` to the trace service.
    pub(crate) async fn spans(&self, message: ExportTraceServiceRequest) -> OTelSdkResult {
        let client = TraceServiceClient::new(self.channel.clone());
        self.send(message, |request| {
            let mut client = client.clone();
            async move { client.export(request).await.map(drop) }
        })
        .await
    }

    /// Sends `message` with `call` until the collector takes it, refuses it for good,
    /// or the retries run out; each answer's time is noted. Waits on the exporter's
    /// own thread (the SDK's batch and periodic threads drive exports there).
    async fn send<M: Clone, F, Fut>(&self, message: M, call: F) -> OTelSdkResult
    where
        F: Fn(tonic::Request<M>) -> Fut,
        Fut: Future<Output = Result<(), tonic::Status>>,
    {
        let mut made = 0;
        loop {
            made += 1;
            let mut request = tonic::Request::new(message.clone());
            *request.metadata_mut() = self.metadata.clone();
            let started = Instant::now();
            let status = match call(request).await {
                Ok(()) => {
                    self.status.note_answer(started.elapsed());
                    return Ok(());
                }
                Err(status) => status,
            };
            if answered(&status) {
                self.status.note_answer(started.elapsed());
            }
            match next_wait(made, grpc_verdict(&status)) {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(OTelSdkError::InternalFailure(self.describe(&status))),
            }
        }
    }

    /// The failure in words: the code, and what failed here when it did (a
    /// collector's own message may echo credentials and is left out).
    fn describe(&self, status: &tonic::Status) -> String {
        let code = status.code();
        if answered(status) {
            format!("OTLP/gRPC export to {} refused: {code:?}", self.endpoint)
        } else {
            format!(
                "OTLP/gRPC export to {} failed: {code:?} ({})",
                self.endpoint,
                status.message()
            )
        }
    }
}

/// Whether `status` is the collector's answer (not made here from a timeout or a
/// broken connection, which carry their cause).
fn answered(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_none()
}

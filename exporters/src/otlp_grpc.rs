//! The gRPC (tonic) transport of the OTLP metrics exporter.

use std::time::Duration;

use http::HeaderMap;
use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::{MetricExporter, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::metrics::Temporality;
use tokio::runtime::Runtime;
use tonic::transport::Endpoint;

/// An OTLP/gRPC metric exporter for `endpoint`. Its channel's background task runs on
/// `runtime`, which must outlive the exporter; each export is then driven from the
/// periodic reader's thread and never from the caller's.
///
/// The channel is built here so that connecting is bounded too: `timeout` limits the
/// connection attempt as well as each request, so an address that swallows packets
/// cannot stall the reader thread.
pub(crate) fn grpc_exporter(
    endpoint: &str,
    headers: HeaderMap,
    timeout: Duration,
    temporality: Temporality,
    runtime: &Runtime,
) -> Result<MetricExporter, String> {
    let channel = lazy_channel(endpoint, timeout, runtime)?;
    MetricExporter::builder()
        .with_tonic()
        .with_channel(channel)
        .with_timeout(timeout)
        .with_metadata(MetadataMap::from_headers(headers))
        .with_temporality(temporality)
        .build()
        .map_err(|error| error.to_string())
}

/// A channel to `endpoint` that connects at its first use, its task on `runtime`;
/// `timeout` bounds connecting as well as each request.
pub(crate) fn lazy_channel(
    endpoint: &str,
    timeout: Duration,
    runtime: &Runtime,
) -> Result<tonic::transport::Channel, String> {
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

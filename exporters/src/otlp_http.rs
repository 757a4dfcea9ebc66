//! The HTTP/protobuf transport of the OTLP metrics exporter (blocking reqwest client,
//! which is what the SDK's periodic reader thread can drive).

use std::collections::HashMap;
use std::time::Duration;

use http::HeaderMap;
use opentelemetry_otlp::{MetricExporter, Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::Temporality;

/// The path OTLP/HTTP collectors take metrics on.
pub const METRICS_PATH: &str = "/v1/metrics";

/// The URL metrics are posted to: `endpoint` itself when it has a path, otherwise
/// `endpoint` + `/v1/metrics`.
pub fn metrics_url(endpoint: &str) -> String {
    let after_scheme = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let has_path = after_scheme
        .find('/')
        .is_some_and(|slash| !after_scheme[slash..].trim_end_matches('/').is_empty());
    if has_path {
        endpoint.to_string()
    } else {
        format!("{}{METRICS_PATH}", endpoint.trim_end_matches('/'))
    }
}

/// `headers` as the name → value pairs the HTTP exporters take (a value that is not
/// visible ASCII was refused when the headers were resolved).
pub(crate) fn header_pairs(headers: &HeaderMap) -> HashMap<String, String> {
    headers
        .iter()
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect()
}

/// An OTLP/HTTP (protobuf) metric exporter for `endpoint`.
pub(crate) fn http_exporter(
    endpoint: &str,
    headers: &HeaderMap,
    timeout: Duration,
    temporality: Temporality,
) -> Result<MetricExporter, String> {
    MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(metrics_url(endpoint))
        .with_headers(header_pairs(headers))
        .with_timeout(timeout)
        .with_temporality(temporality)
        .build()
        .map_err(|error| error.to_string())
}

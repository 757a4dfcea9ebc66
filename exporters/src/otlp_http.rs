//! The HTTP/protobuf transport of the OTLP exporter: metrics and spans posted with a
//! blocking client (what the SDK's periodic reader and batch threads can drive).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use prost::Message;

use crate::metrics_pipeline::ExportStatus;
use crate::otlp_retry::{HttpOutcome, http_verdict, next_wait};

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

/// OTLP/HTTP (protobuf) requests to one URL: each sent again only when the collector
/// did not take it ([`crate::otlp_retry`]).
#[derive(Debug)]
pub(crate) struct HttpTarget {
    client: reqwest::blocking::Client,
    url: String,
    headers: HeaderMap,
    status: Arc<ExportStatus>,
}

impl HttpTarget {
    /// Requests to `url` with `headers`, each bounded by `timeout`.
    pub(crate) fn new(
        url: String,
        headers: &HeaderMap,
        timeout: Duration,
        status: Arc<ExportStatus>,
    ) -> Result<Self, String> {
        // The blocking client runs a runtime of its own: made on a thread of its own,
        // since the builder may be called from inside an async runtime.
        let client = std::thread::spawn(move || {
            reqwest::blocking::Client::builder()
                .timeout(timeout)
                .connect_timeout(timeout)
                .build()
        })
        .join()
        .map_err(|_| "the HTTP client could not be made".to_string())?
        .map_err(|error| format!("the HTTP client could not be made: {error}"))?;
        Ok(HttpTarget {
            client,
            url,
            headers: headers.clone(),
            status,
        })
    }

    /// Posts `message` (an OTLP request) until the collector takes it, refuses it for
    /// good, or the retries run out.
    pub(crate) fn post(&self, message: &impl Message) -> OTelSdkResult {
        let body = message.encode_to_vec();
        let mut made = 0;
        loop {
            made += 1;
            let (outcome, failure) = match self.post_once(body.clone()) {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            match next_wait(made, http_verdict(&outcome)) {
                Some(wait) => std::thread::sleep(wait),
                None => return Err(OTelSdkError::InternalFailure(failure)),
            }
        }
    }

    fn post_once(&self, body: Vec<u8>) -> Result<(), (HttpOutcome, String)> {
        let started = Instant::now();
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send();
        let response = match response {
            Ok(response) => response,
            Err(error) => {
                let outcome = if error.is_connect() {
                    HttpOutcome::NotConnected
                } else {
                    HttpOutcome::Unknown
                };
                let message = format!("OTLP/HTTP export to {} failed: {error}", self.url);
                return Err((outcome, message));
            }
        };
        self.status.note_answer(started.elapsed());
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let message = format!(
            "OTLP/HTTP export to {} refused: HTTP {}",
            self.url,
            status.as_u16()
        );
        Err((
            HttpOutcome::Answered {
                status: status.as_u16(),
                retry_after,
            },
            message,
        ))
    }
}

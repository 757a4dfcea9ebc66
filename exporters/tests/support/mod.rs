//! Shared test support: pipeline events with fixed inputs, and in-test OTLP receivers
//! (gRPC through the official `opentelemetry-proto` service, HTTP/protobuf through a
//! small hand-rolled HTTP/1.1 server, and one that accepts connections and never
//! answers). Each receiver owns its tokio runtime, so `kill` really closes every socket.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, TimeZone, Utc};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, NumberDataPoint, metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;
use uuid::Uuid;
use wattline_config::{MetricTemporality, OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport};
use wattline_model::events::{
    Mark, PipelineEvent, RESOURCE_MARK_NAME, ScopeCategory, ScopeEvent, ScopeKind,
};
use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
};

// ---------------------------------------------------------------------------- events

/// A fixed instant plus `seconds` and `nanos`.
pub fn at(seconds: i64, nanos: u32) -> DateTime<Utc> {
    Utc.timestamp_opt(1_787_313_600 + seconds, nanos)
        .single()
        .expect("valid fixed timestamp")
}

pub fn uuid(n: u128) -> Uuid {
    // Version 7, variant RFC 4122, counter in the low bits: fixed and valid.
    Uuid::from_u128(0x0198_c9a4_2000_7000_8000_0000_0000_0000 | n)
}

pub fn scope(
    uuid: Uuid,
    parent: Option<Uuid>,
    timestamp: DateTime<Utc>,
    name: &str,
    category: ScopeCategory,
    kind: ScopeKind,
) -> PipelineEvent {
    PipelineEvent::Scope(ScopeEvent {
        uuid,
        parent_uuid: parent,
        timestamp,
        name: name.into(),
        scope_category: category,
        kind,
        attributes: Vec::new(),
    })
}

pub fn attrs(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, AttributeValue>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), AttributeValue::String(v.to_string())))
            .collect(),
    )
}

pub fn gauge_f64(
    name: &str,
    value: f64,
    unit: &str,
    attributes: &[(&str, &str)],
) -> MetricMeasurement {
    MetricMeasurement {
        name: name.into(),
        kind: MetricKind::Gauge,
        value_type: MetricValueType::F64,
        value: MetricValue::F64(value),
        unit: Some(unit.into()),
        description: Some(format!("{name} for tests")),
        attributes: attrs(attributes),
        boundaries: None,
    }
}

pub fn resource_measurements(sample_count: u64, resident_kib: f64) -> MetricMeasurements {
    let common = [
        ("nemo_relay.resource.operating_system", "linux"),
        ("nemo_relay.resource.measurement_scope", "process_tree"),
    ];
    MetricMeasurements {
        measurements: vec![
            MetricMeasurement {
                name: "nemo.relay.resource.sample_count".into(),
                kind: MetricKind::Gauge,
                value_type: MetricValueType::U64,
                value: MetricValue::U64(sample_count),
                unit: Some("events".into()),
                description: Some("Resource metric samples collected in this poll".into()),
                attributes: attrs(&common),
                boundaries: None,
            },
            gauge_f64(
                "nemo.relay.resource.memory.resident",
                resident_kib,
                "kibibytes",
                &common,
            ),
        ],
    }
}

pub fn resource_mark(
    uuid: Uuid,
    parent: Option<Uuid>,
    timestamp: DateTime<Utc>,
    sample_count: u64,
) -> PipelineEvent {
    PipelineEvent::Mark(Mark {
        uuid,
        parent_uuid: parent,
        timestamp,
        name: RESOURCE_MARK_NAME.into(),
        data: resource_measurements(sample_count, 2048.5),
    })
}

/// GPU utilisation gauges for the given devices, one energy counter increment and one
/// power histogram observation.
pub fn gpu_batch(
    timestamp: DateTime<Utc>,
    gpus: &[(&str, f64)],
    energy_kwh: f64,
    power_w: f64,
) -> PipelineEvent {
    let mut measurements: Vec<MetricMeasurement> = gpus
        .iter()
        .map(|(id, utilization)| {
            gauge_f64(
                "gen_ai.gpu.utilization",
                *utilization,
                "%",
                &[("gpu_id", id), ("gpu_name", "Test GPU")],
            )
        })
        .collect();
    measurements.push(MetricMeasurement {
        name: "gen_ai.energy.consumed".into(),
        kind: MetricKind::Counter,
        value_type: MetricValueType::F64,
        value: MetricValue::F64(energy_kwh),
        unit: Some("kWh".into()),
        description: Some("Energy consumed".into()),
        attributes: attrs(&[("component", "gpu")]),
        boundaries: None,
    });
    measurements.push(MetricMeasurement {
        name: "gen_ai.power.consumption".into(),
        kind: MetricKind::Histogram,
        value_type: MetricValueType::F64,
        value: MetricValue::F64(power_w),
        unit: Some("W".into()),
        description: Some("Power readings".into()),
        attributes: None,
        boundaries: Some(vec![100.0, 200.0, 300.0]),
    });
    PipelineEvent::Metrics {
        timestamp,
        measurements,
    }
}

// ---------------------------------------------------------------------------- config

pub fn otel_config(
    url: &str,
    transport: OtlpTransport,
    temporality: MetricTemporality,
    timeout_millis: u64,
) -> OpenTelemetryConfig {
    let mut endpoint = OtlpEndpointConfig::new(url, transport);
    endpoint.timeout_millis = timeout_millis;
    endpoint.service_name = Some("wattline-test".into());
    endpoint
        .resource_attributes
        .insert("deployment.environment".into(), "test".into());
    OpenTelemetryConfig {
        // Exports happen when a test flushes, never on their own.
        export_interval_millis: 3_600_000,
        temporality,
        endpoints: vec![endpoint],
        ..OpenTelemetryConfig::default()
    }
}

/// An address nothing listens on (a port just released).
pub fn free_address() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address")
}

// ---------------------------------------------------------------------------- receivers

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// Lower-case header names and their values.
    pub headers: Vec<(String, String)>,
    /// The HTTP request target (HTTP receiver only).
    pub path: String,
    pub request: ExportMetricsServiceRequest,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What a receiver recorded, shared with its server.
#[derive(Debug, Clone, Default)]
pub struct Inbox(Arc<Mutex<Vec<Received>>>);

impl Inbox {
    fn push(&self, received: Received) {
        self.0.lock().expect("inbox").push(received);
    }

    pub fn take(&self) -> Vec<Received> {
        std::mem::take(&mut *self.0.lock().expect("inbox"))
    }

    pub fn len(&self) -> usize {
        self.0.lock().expect("inbox").len()
    }
}

/// A listening socket, made without a runtime so receivers can start inside async tests.
fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("receiver runtime")
}

/// A server on its own runtime; dropping or killing it closes every socket.
pub struct Receiver {
    pub addr: SocketAddr,
    pub inbox: Inbox,
    /// Trace export requests (the gRPC receiver takes traces too).
    pub spans: SpanInbox,
    runtime: Option<Runtime>,
}

/// The trace export requests a receiver got.
#[derive(Debug, Clone, Default)]
pub struct SpanInbox(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

impl SpanInbox {
    /// Every span received so far, in order.
    pub fn spans(&self) -> Vec<Span> {
        self.0
            .lock()
            .expect("span inbox")
            .iter()
            .flat_map(|request| &request.resource_spans)
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| scope.spans.clone())
            .collect()
    }

    /// The requests received since the last call.
    pub fn take(&self) -> Vec<ExportTraceServiceRequest> {
        std::mem::take(&mut *self.0.lock().expect("span inbox"))
    }

    /// The resources of every request so far.
    pub fn resources(&self) -> Vec<opentelemetry_proto::tonic::resource::v1::Resource> {
        self.0
            .lock()
            .expect("span inbox")
            .iter()
            .flat_map(|request| &request.resource_spans)
            .filter_map(|resource| resource.resource.clone())
            .collect()
    }
}

#[tonic::async_trait]
impl TraceService for SpanInbox {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0
            .lock()
            .expect("span inbox")
            .push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

impl Receiver {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops the server at once, like a crashed collector.
    pub fn kill(mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[derive(Clone)]
struct GrpcRecorder(Inbox);

#[tonic::async_trait]
impl MetricsService for GrpcRecorder {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let headers = request
            .metadata()
            .clone()
            .into_headers()
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    value.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        self.0.push(Received {
            headers,
            path: String::new(),
            request: request.into_inner(),
        });
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

/// A gRPC OTLP receiver on `addr` (`127.0.0.1:0` for any port).
pub fn grpc_receiver_on(addr: SocketAddr) -> std::io::Result<Receiver> {
    let runtime = runtime();
    let inbox = Inbox::default();
    let listener = bind(addr)?;
    let addr = listener.local_addr()?;
    // Gzip as collectors forward by default (rotel's OTLP exporter, for one).
    let service = MetricsServiceServer::new(GrpcRecorder(inbox.clone()))
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    let spans = SpanInbox::default();
    let trace_service = TraceServiceServer::new(spans.clone())
        .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    runtime.spawn(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        if let Err(error) = tonic::transport::Server::builder()
            .add_service(service)
            .add_service(trace_service)
            .serve_with_incoming(incoming)
            .await
        {
            eprintln!("test gRPC receiver stopped: {error}");
        }
    });
    Ok(Receiver {
        addr,
        inbox,
        spans,
        runtime: Some(runtime),
    })
}

pub fn grpc_receiver() -> Receiver {
    grpc_receiver_on("127.0.0.1:0".parse().expect("address")).expect("gRPC receiver")
}

/// An HTTP/1.1 OTLP receiver on `addr`: reads each POST body (Content-Length), decodes
/// it with prost and answers 200 with an empty `ExportMetricsServiceResponse`.
pub fn http_receiver_on(addr: SocketAddr) -> std::io::Result<Receiver> {
    let runtime = runtime();
    let inbox = Inbox::default();
    let listener = bind(addr)?;
    let addr = listener.local_addr()?;
    let accepted = inbox.clone();
    runtime.spawn(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_http_connection(stream, accepted.clone()));
        }
    });
    Ok(Receiver {
        addr,
        inbox,
        spans: SpanInbox::default(),
        runtime: Some(runtime),
    })
}

pub fn http_receiver() -> Receiver {
    http_receiver_on("127.0.0.1:0".parse().expect("address")).expect("HTTP receiver")
}

async fn serve_http_connection(mut stream: tokio::net::TcpStream, inbox: Inbox) {
    let mut buffer = Vec::new();
    loop {
        // Read the head.
        let head_end = loop {
            if let Some(end) = find(&buffer, b"\r\n\r\n") {
                break end;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
        buffer.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let path = request_line
            .split(' ')
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|line| line.split_once(':'))
            .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .and_then(|(_, value)| value.parse().ok())
            .unwrap_or(0);
        while buffer.len() < length {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buffer.drain(..length).collect();
        let (status, response) = match ExportMetricsServiceRequest::decode(body.as_slice()) {
            Ok(request) => {
                inbox.push(Received {
                    headers,
                    path,
                    request,
                });
                (
                    "200 OK",
                    ExportMetricsServiceResponse {
                        partial_success: None,
                    }
                    .encode_to_vec(),
                )
            }
            Err(_) => ("400 Bad Request", Vec::new()),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            response.len()
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(&response).await.is_err()
        {
            return;
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// A server that accepts connections, reads and counts what arrives, and never answers.
pub struct SilentReceiver {
    pub receiver: Receiver,
    bytes: Arc<Mutex<usize>>,
}

impl SilentReceiver {
    pub fn start() -> Self {
        let runtime = runtime();
        let listener = bind("127.0.0.1:0".parse().expect("address")).expect("bind");
        let addr = listener.local_addr().expect("address");
        let bytes = Arc::new(Mutex::new(0));
        let counter = Arc::clone(&bytes);
        runtime.spawn(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((mut stream, _)) = listener.accept().await {
                let counter = Arc::clone(&counter);
                tokio::spawn(async move {
                    let mut chunk = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        *counter.lock().expect("bytes") += n;
                    }
                    // Keep the connection open, silent, until the runtime goes.
                    std::future::pending::<()>().await;
                });
            }
        });
        SilentReceiver {
            receiver: Receiver {
                addr,
                inbox: Inbox::default(),
                spans: SpanInbox::default(),
                runtime: Some(runtime),
            },
            bytes,
        }
    }

    pub fn url(&self) -> String {
        self.receiver.url()
    }

    /// Bytes received so far (an export in flight shows up here).
    pub fn bytes_received(&self) -> usize {
        *self.bytes.lock().expect("bytes")
    }

    pub fn kill(self) {
        self.receiver.kill();
    }
}

// ---------------------------------------------------------------------------- reading

/// Every metric of every request, in order.
pub fn metrics(received: &[Received]) -> Vec<&Metric> {
    received
        .iter()
        .flat_map(|r| &r.request.resource_metrics)
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|sm| &sm.metrics)
        .collect()
}

/// The metrics called `name`.
pub fn named<'a>(received: &'a [Received], name: &str) -> Vec<&'a Metric> {
    metrics(received)
        .into_iter()
        .filter(|metric| metric.name == name)
        .collect()
}

pub fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match &kv.value {
            Some(AnyValue {
                value: Some(any_value::Value::StringValue(value)),
            }) => Some(value.clone()),
            _ => None,
        })
}

/// The gauge points of `metric`; panics if it is not a gauge.
pub fn gauge_points(metric: &Metric) -> &[NumberDataPoint] {
    match &metric.data {
        Some(metric::Data::Gauge(gauge)) => &gauge.data_points,
        other => panic!("{} is not a gauge: {other:?}", metric.name),
    }
}

pub fn as_double(point: &NumberDataPoint) -> f64 {
    match point.value {
        Some(number_data_point::Value::AsDouble(value)) => value,
        Some(number_data_point::Value::AsInt(value)) => value as f64,
        None => f64::NAN,
    }
}

/// GPU id → utilisation of every `gen_ai.gpu.utilization` point received.
pub fn gpu_utilization(received: &[Received]) -> BTreeMap<String, f64> {
    named(received, "gen_ai.gpu.utilization")
        .into_iter()
        .flat_map(gauge_points)
        .map(|point| {
            (
                string_attribute(&point.attributes, "gpu_id").unwrap_or_default(),
                as_double(point),
            )
        })
        .collect()
}

/// Sets this process's soft file-size limit (RLIMIT_FSIZE: writes past it fail with
/// EFBIG, root included); the hard limit stays, so it can be raised again.
pub fn set_file_size_limit(bytes: libc::rlim_t) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        limit.rlim_cur = bytes.min(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

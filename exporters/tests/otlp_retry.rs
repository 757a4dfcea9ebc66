//! An OTLP export is sent again only when the collector did not take it: stand-in
//! collectors refuse, answer after the exporter's timeout, are not listening yet, or
//! drop the connection once the request is in; each counts the attempts it saw and
//! keeps what it took. A span taken once is never delivered twice, and one refused is
//! delivered once the collector takes it.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
use prost::Message;
use support::{at, otel_config, uuid};
use wattline_config::{MetricTemporality, OtlpTransport};
use wattline_exporters::{Exporter, OtlpExporter};
use wattline_model::events::PipelineEvent;
use wattline_model::report::ScopeEnergy;
use wattline_model::scope_energy::SettledScope;
use wattline_model::trace_context::ScopeTrace;

/// What a stand-in collector does with one trace request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// Keeps it and says so.
    Take,
    /// Keeps nothing and says UNAVAILABLE (HTTP 503).
    Refuse,
    /// Keeps it, and says so after this long.
    TakeAfter(Duration),
    /// Reads it whole, keeps it, and closes the connection without a word (HTTP only).
    Hang,
}

/// The trace requests a stand-in saw and the span IDs it kept.
#[derive(Debug, Default)]
struct Seen {
    attempts: AtomicUsize,
    kept: Mutex<Vec<Vec<u8>>>,
    script: Mutex<Vec<Answer>>,
}

impl Seen {
    fn scripted(script: &[Answer]) -> Arc<Self> {
        let seen = Seen::default();
        *seen.script.lock().unwrap() = script.iter().rev().copied().collect();
        Arc::new(seen)
    }

    /// The answer to the next request (past the script: take it).
    fn next(&self) -> Answer {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.script.lock().unwrap().pop().unwrap_or(Answer::Take)
    }

    fn keep(&self, request: &ExportTraceServiceRequest) {
        let spans = request
            .resource_spans
            .iter()
            .flat_map(|resource| &resource.scope_spans)
            .flat_map(|scope| &scope.spans)
            .map(|span| span.span_id.clone());
        self.kept.lock().unwrap().extend(spans);
    }

    fn attempts(&self) -> usize {
        self.attempts.load(Ordering::SeqCst)
    }

    fn kept(&self) -> Vec<Vec<u8>> {
        self.kept.lock().unwrap().clone()
    }
}

struct GrpcCollector(Arc<Seen>);

#[tonic::async_trait]
impl TraceService for GrpcCollector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let answer = self.0.next();
        if let Answer::Refuse = answer {
            return Err(tonic::Status::unavailable("busy"));
        }
        self.0.keep(request.get_ref());
        if let Answer::TakeAfter(delay) = answer {
            tokio::time::sleep(delay).await;
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

struct TakeMetrics;

#[tonic::async_trait]
impl MetricsService for TakeMetrics {
    async fn export(
        &self,
        _request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        Ok(tonic::Response::new(ExportMetricsServiceResponse {
            partial_success: None,
        }))
    }
}

/// Serves `seen`'s script over gRPC on `listener` from a runtime of its own.
fn serve_grpc(listener: TcpListener, seen: Arc<Seen>) -> tokio::runtime::Runtime {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    listener.set_nonblocking(true).unwrap();
    runtime.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(GrpcCollector(seen)))
            .add_service(MetricsServiceServer::new(TakeMetrics))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    runtime
}

/// Serves `seen`'s script over HTTP/1.1 on `listener` (metrics always taken).
fn serve_http(listener: TcpListener, seen: Arc<Seen>) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || serve_http_connection(stream, &seen));
        }
    });
}

fn serve_http_connection(mut stream: TcpStream, seen: &Seen) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(head_end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        while buffer.len() < head_end + 4 + length {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buffer
            .drain(..head_end + 4 + length)
            .skip(head_end + 4)
            .collect();
        let status = if head.starts_with("post /v1/traces") {
            let answer = seen.next();
            if !matches!(answer, Answer::Refuse) {
                seen.keep(&ExportTraceServiceRequest::decode(body.as_slice()).unwrap());
            }
            match answer {
                Answer::Refuse => "503 Service Unavailable",
                Answer::Hang => return,
                Answer::Take => "200 OK",
                Answer::TakeAfter(delay) => {
                    std::thread::sleep(delay);
                    "200 OK"
                }
            }
        } else {
            "200 OK"
        };
        let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        if stream.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A step's final figures with a span of its own.
fn settled_step(n: u128) -> PipelineEvent {
    let uuid = uuid(n);
    let settled = SettledScope {
        energy: ScopeEnergy {
            uuid,
            name: "step".into(),
            parent_uuid: None,
            process_id: None,
            weight: None,
            gpu_energy_kwh: Some(1e-5),
            energy_kwh: Some(1e-5),
            cost: None,
            co2_grams: None,
            attributed_gpu_energy_kwh: Some(1e-5),
            attributed_energy_kwh: Some(1e-5),
            attributed_cost: None,
            attributed_co2_grams: None,
            started_at: at(0, 0),
            ended_at: Some(at(1, 0)),
            remote_call: None,
            receipt: None,
            attributed_receipt: None,
        },
        attribution: "process-share-then-weight".into(),
        methods: Default::default(),
        meters: vec!["GPU-0".into()],
        currency: "USD".into(),
        ended_at_program_exit: false,
        trace: Some(ScopeTrace::resolve(uuid, None, None)),
        coverage: Some(1.0),
    };
    PipelineEvent::ScopeEnergy {
        settled: Box::new(settled),
        name_folded: false,
    }
}

fn exporter(address: SocketAddr, transport: OtlpTransport, timeout_millis: u64) -> OtlpExporter {
    let mut config = otel_config(
        &format!("http://{address}"),
        transport,
        MetricTemporality::Cumulative,
        timeout_millis,
    );
    config.spans = true;
    OtlpExporter::builder(config).build().unwrap()
}

/// A loopback listener, and its address.
fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// Waits past the longest the exporter could wait before a retry it should not make.
fn past_any_retry() {
    std::thread::sleep(Duration::from_millis(1_600));
}

#[test]
fn a_refusing_grpc_collector_gets_the_span_again_and_keeps_it_once() {
    let seen = Seen::scripted(&[Answer::Refuse, Answer::Refuse]);
    let (listener, address) = listener();
    let _collector = serve_grpc(listener, Arc::clone(&seen));
    let mut exporter = exporter(address, OtlpTransport::Grpc, 3_000);
    exporter.export(&settled_step(1)).unwrap();
    exporter.flush().unwrap();
    assert_eq!(seen.attempts(), 3, "refused twice, taken the third time");
    assert_eq!(seen.kept().len(), 1);
    assert!(
        exporter.slowest_answer().is_some(),
        "the answers were timed"
    );
    exporter.shutdown().unwrap();
}

#[test]
fn a_grpc_collector_answering_after_the_timeout_keeps_the_span_once() {
    // It keeps the span at once and answers after 1.2 s; the exporter gives up at
    // 300 ms and must not send it again: the collector has it.
    let seen = Seen::scripted(&[Answer::TakeAfter(Duration::from_millis(1_200))]);
    let (listener, address) = listener();
    let _collector = serve_grpc(listener, Arc::clone(&seen));
    let mut exporter = exporter(address, OtlpTransport::Grpc, 300);
    exporter.export(&settled_step(2)).unwrap();
    let flushed = exporter.flush();
    past_any_retry();
    assert_eq!(seen.attempts(), 1, "no second attempt after a timeout");
    assert_eq!(seen.kept().len(), 1);
    let failed = flushed
        .err()
        .or_else(|| exporter.export(&settled_step(3)).err())
        .expect("the timed-out export is reported as failed");
    assert!(failed.to_string().contains("OTLP/gRPC export"), "{failed}");
    let _ = exporter.shutdown();
}

#[test]
fn a_grpc_collector_not_listening_yet_gets_the_span_once_it_is() {
    let (listener, address) = listener();
    drop(listener);
    let seen = Seen::scripted(&[]);
    let mut exporter = exporter(address, OtlpTransport::Grpc, 3_000);
    exporter.export(&settled_step(4)).unwrap();
    let starts = {
        let seen = Arc::clone(&seen);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            serve_grpc(TcpListener::bind(address).unwrap(), seen)
        })
    };
    // The first attempt finds nothing listening (never sent); the retry, a second
    // later, finds the collector.
    exporter.flush().unwrap();
    let _collector = starts.join().unwrap();
    assert_eq!(seen.attempts(), 1);
    assert_eq!(seen.kept().len(), 1);
    exporter.shutdown().unwrap();
}

#[test]
fn a_refusing_http_collector_gets_the_span_again_and_keeps_it_once() {
    let seen = Seen::scripted(&[Answer::Refuse]);
    let (listener, address) = listener();
    serve_http(listener, Arc::clone(&seen));
    let mut exporter = exporter(address, OtlpTransport::HttpBinary, 3_000);
    exporter.export(&settled_step(5)).unwrap();
    exporter.flush().unwrap();
    assert_eq!(seen.attempts(), 2, "refused once, taken the second time");
    assert_eq!(seen.kept().len(), 1);
    exporter.shutdown().unwrap();
}

#[test]
fn an_http_collector_that_answers_late_or_drops_the_connection_keeps_the_span_once() {
    for (answer, n) in [
        (Answer::TakeAfter(Duration::from_millis(1_200)), 6),
        (Answer::Hang, 7),
    ] {
        let seen = Seen::scripted(&[answer]);
        let (listener, address) = listener();
        serve_http(listener, Arc::clone(&seen));
        let mut exporter = exporter(address, OtlpTransport::HttpBinary, 300);
        exporter.export(&settled_step(n)).unwrap();
        let flushed = exporter.flush();
        past_any_retry();
        assert_eq!(seen.attempts(), 1, "{answer:?}: sent once, taken once");
        assert_eq!(seen.kept().len(), 1, "{answer:?}");
        let failed = flushed
            .err()
            .or_else(|| exporter.export(&settled_step(n + 10)).err());
        assert!(failed.is_some(), "{answer:?}: reported as failed");
        let _ = exporter.shutdown();
    }
}

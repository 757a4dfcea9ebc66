//! The Rust worker SDK (`wattline-worker`) against wattline's real host endpoint over
//! its Unix socket: what a worker records lands in the pipeline's diagnostics
//! context; wrong credentials give an inert facade; a flooded queue refuses with
//! `Full` and loses nothing it admitted; a host that goes away mid-session makes
//! delivery uncertain, never a panic; a plugin served by `serve_plugin_with` answers
//! the host's lifecycle and reports from its `register`, over the Unix socket and
//! over loopback TCP.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nemo_relay_worker_proto::v1::plugin_worker_client::PluginWorkerClient;
use nemo_relay_worker_proto::v1::relay_diagnostics_server::RelayDiagnosticsServer;
use nemo_relay_worker_proto::v1::{
    HandshakeRequest, JsonEnvelope, RegisterRequest, ShutdownRequest, ValidateRequest,
};
use wattline::diagnostics::{
    CodeOrigin, ComponentSnapshot, ComponentState, Diagnostics, DiagnosticsLimits, FailureClass,
};
use wattline::host::{DiagnosticsService, HostEndpoint, WorkerCredentials};
use wattline_worker::diagnostics::{
    BuiltinDiagnosticCode, DiagnosticAvailability, DiagnosticCodeDefinition,
    DiagnosticDeliveryError, DiagnosticExtensionDefinition, DiagnosticObservation,
    DiagnosticObservationOutcome as Outcome, DiagnosticObservationSeverity as Severity,
    builtin_code, extension_code,
};
use wattline_worker::{
    Endpoint, HostConnection, PluginContext, PluginError, WorkerEnvironment, WorkerPlugin,
    serve_plugin_with,
};

const ACTIVATION: &str = "0190f4a2-7c1e-7d3a-9b2f-3c4d5e6f7a8b";
const TOKEN: &str = "0190f4a2-7c1e-7d3a-9b2f-aaaaaaaaaaaa";
const WAIT: Duration = Duration::from_secs(5);

struct Host {
    context: Diagnostics,
    endpoint: HostEndpoint,
}

fn host() -> Host {
    let context = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let endpoint = HostEndpoint::start(
        context.clone(),
        vec![WorkerCredentials {
            activation_id: ACTIVATION.into(),
            token: TOKEN.into(),
            namespace: "lookup".into(),
        }],
        None,
    )
    .expect("the endpoint starts");
    Host { context, endpoint }
}

fn connect(host: &Host, token: &str) -> HostConnection {
    HostConnection::new(host.endpoint.socket_path(), ACTIVATION, token)
}

/// The spec's lookup vocabulary plus one built-in.
fn lookup_codes() -> Vec<DiagnosticCodeDefinition> {
    vec![
        extension_code(DiagnosticExtensionDefinition {
            name: "lookup_failed".into(),
            description: "The lookup backend was unavailable".into(),
            outcome: Outcome::Failure as i32,
            allowed_failure_classes: vec!["unavailable".into()],
        }),
        extension_code(DiagnosticExtensionDefinition {
            name: "lookup_completed".into(),
            description: "A lookup completed".into(),
            outcome: Outcome::Success as i32,
            allowed_failure_classes: vec![],
        }),
        builtin_code(BuiltinDiagnosticCode::PluginTimeout),
    ]
}

fn lookup_failed(count: u64, request_id: &str) -> DiagnosticObservation {
    DiagnosticObservation {
        code: 1,
        count,
        outcome: Outcome::Failure as i32,
        severity: Severity::Error as i32,
        failure_class: Some("unavailable".into()),
        detail: Some("The lookup backend was unavailable".into()),
        request_id: Some(request_id.into()),
        observed_unix_micros: Some(1_700_000_000_000_000),
        ..Default::default()
    }
}

fn lookup_completed() -> DiagnosticObservation {
    DiagnosticObservation {
        code: 2,
        count: 1,
        outcome: Outcome::Success as i32,
        severity: Severity::Info as i32,
        detail: Some("A lookup completed".into()),
        ..Default::default()
    }
}

/// The worker's component as the host holds it, if registered.
fn component(context: &Diagnostics, name: &str) -> Option<ComponentSnapshot> {
    context
        .snapshot()
        .unwrap()
        .components
        .into_iter()
        .find(|component| component.name == name)
}

fn occurrences(context: &Diagnostics, name: &str) -> Vec<(String, CodeOrigin, u64)> {
    component(context, name)
        .unwrap_or_else(|| panic!("no component {name}"))
        .codes
        .into_iter()
        .map(|code| (code.code, code.origin, code.occurrences))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_observations_land_in_the_context_after_flush() {
    let host = host();
    let connection = connect(&host, TOKEN);
    let diagnostics = connection.diagnostics().await.clone();
    assert_eq!(
        diagnostics.availability(),
        DiagnosticAvailability::Available
    );
    let lookup = diagnostics
        .component("example.lookup", lookup_codes())
        .await
        .expect("registered");
    lookup
        .try_record_lazy(|| lookup_failed(2, "req-7"))
        .unwrap();
    lookup.try_record_lazy(lookup_completed).unwrap();
    lookup
        .try_record_lazy(|| DiagnosticObservation {
            code: 3,
            count: 1,
            outcome: Outcome::Failure as i32,
            severity: Severity::Warning as i32,
            failure_class: Some("timeout".into()),
            ..Default::default()
        })
        .unwrap();
    diagnostics.flush(WAIT).await.expect("flushed");

    let name = "worker.lookup.example.lookup";
    assert_eq!(
        occurrences(&host.context, name),
        vec![
            ("lookup_failed".into(), CodeOrigin::Extension, 2),
            ("lookup_completed".into(), CodeOrigin::Extension, 1),
            ("plugin.timeout".into(), CodeOrigin::Builtin, 1),
        ]
    );
    let snapshot = host.context.snapshot().unwrap();
    let failed = snapshot
        .recent_events
        .iter()
        .find(|event| event.component == name && event.code == "lookup_failed")
        .expect("the failure's event");
    assert_eq!(failed.count, 2);
    assert_eq!(failed.failure_class, Some(FailureClass::Unavailable));
    assert_eq!(failed.correlation.request_id.as_deref(), Some("req-7"));
    assert_eq!(
        failed.detail.as_deref(),
        Some("The lookup backend was unavailable")
    );
    let stats = diagnostics.delivery_stats();
    assert_eq!(
        (
            stats.delivered,
            stats.dropped,
            stats.rejected,
            stats.uncertain
        ),
        (4, 0, 0, 0),
        "one registration and three records"
    );

    // Closing the component closes it on the host; the counts stay.
    lookup.close().await.unwrap();
    assert_eq!(
        lookup.try_record_lazy(lookup_completed),
        Err(DiagnosticDeliveryError::Closed)
    );
    let closed = component(&host.context, name).unwrap();
    assert_eq!(closed.state, ComponentState::Closed);
    assert_eq!(closed.codes[0].occurrences, 2);
    diagnostics.close(WAIT).await.unwrap();
    assert_eq!(
        diagnostics
            .component("example.other", lookup_codes())
            .await
            .map(|_| ()),
        Err(DiagnosticDeliveryError::Closed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_or_no_host_give_an_unavailable_inert_facade() {
    let host = host();
    let wrong = connect(&host, "not-the-token");
    let diagnostics = wrong.diagnostics().await;
    assert_eq!(
        diagnostics.availability(),
        DiagnosticAvailability::Unavailable
    );
    let inert = diagnostics
        .component("example.lookup", lookup_codes())
        .await
        .expect("an inert component, not an error");
    let factories = AtomicUsize::new(0);
    let record = || {
        factories.fetch_add(1, Ordering::SeqCst);
        lookup_completed()
    };
    assert_eq!(inert.try_record_lazy(record), Ok(()));
    assert_eq!(diagnostics.flush(WAIT).await, Ok(()));
    assert_eq!(
        factories.load(Ordering::SeqCst),
        0,
        "the factory is skipped"
    );
    assert!(
        host.context
            .snapshot()
            .unwrap()
            .components
            .iter()
            .all(|component| !component.name.starts_with("worker.")),
        "nothing was registered"
    );

    let nowhere = HostConnection::new(
        host.endpoint.directory().join("absent.sock"),
        ACTIVATION,
        TOKEN,
    );
    assert_eq!(
        nowhere.diagnostics().await.availability(),
        DiagnosticAvailability::Unavailable
    );

    // The right credentials still open the activation's one session.
    let right = connect(&host, TOKEN);
    assert_eq!(
        right.diagnostics().await.availability(),
        DiagnosticAvailability::Available
    );
}

/// One thread: the delivery task cannot run while the loop records, so exactly the
/// negotiated capacity (32 pending + 1 in flight) is admitted.
#[tokio::test]
async fn a_flooded_queue_refuses_with_full_and_loses_nothing_it_admitted() {
    let host = host();
    let connection = connect(&host, TOKEN);
    let diagnostics = connection.diagnostics().await.clone();
    let lookup = diagnostics
        .component("example.lookup", lookup_codes())
        .await
        .unwrap();
    let factories = AtomicUsize::new(0);
    let (mut admitted, mut full) = (0u64, 0u64);
    for index in 0..200 {
        let answer = lookup.try_record_lazy(|| {
            factories.fetch_add(1, Ordering::SeqCst);
            lookup_failed(1, &format!("req-{index}"))
        });
        match answer {
            Ok(()) => admitted += 1,
            Err(DiagnosticDeliveryError::Full) => full += 1,
            Err(other) => panic!("record {index}: {other:?}"),
        }
    }
    assert_eq!(admitted, 33, "32 pending plus one in flight");
    assert_eq!(full, 167);
    assert_eq!(
        factories.load(Ordering::SeqCst),
        33,
        "a full queue skips the factory"
    );
    assert_eq!(diagnostics.delivery_stats().dropped, 167);

    diagnostics
        .flush(WAIT)
        .await
        .expect("the admitted ones drain");
    let name = "worker.lookup.example.lookup";
    assert_eq!(occurrences(&host.context, name)[0].2, 33);
    let stats = diagnostics.delivery_stats();
    assert_eq!(
        (stats.delivered, stats.rejected, stats.uncertain),
        (34, 0, 0)
    );
    // Drained, the queue admits again.
    lookup
        .try_record_lazy(|| lookup_failed(1, "after"))
        .unwrap();
    diagnostics.flush(WAIT).await.unwrap();
    assert_eq!(occurrences(&host.context, name)[0].2, 34);
}

/// The host process dies: its runtime, with the server and every connection task, is
/// dropped while the worker's session is open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_gone_mid_session_makes_delivery_uncertain_without_a_panic() {
    let host_process = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let host = {
        let _inside = host_process.enter();
        host()
    };
    let connection = connect(&host, TOKEN);
    let diagnostics = connection.diagnostics().await.clone();
    let lookup = diagnostics
        .component("example.lookup", lookup_codes())
        .await
        .unwrap();
    lookup
        .try_record_lazy(|| lookup_failed(1, "before"))
        .unwrap();
    diagnostics.flush(WAIT).await.unwrap();
    let name = "worker.lookup.example.lookup";
    assert_eq!(occurrences(&host.context, name)[0].2, 1);

    // Waits until every task of the host is dropped and its sockets closed.
    tokio::task::spawn_blocking(move || host_process.shutdown_timeout(WAIT))
        .await
        .unwrap();
    // Admitted locally; the host is gone, so its acceptance cannot be confirmed.
    lookup
        .try_record_lazy(|| lookup_failed(5, "after"))
        .unwrap();
    assert_eq!(
        diagnostics.flush(Duration::from_secs(20)).await,
        Err(DiagnosticDeliveryError::Uncertain)
    );
    let stats = diagnostics.delivery_stats();
    assert_eq!((stats.uncertain, stats.delivered), (1, 2));
    // The session is fenced: nothing more is admitted, nothing is replayed.
    assert_eq!(
        lookup.try_record_lazy(|| lookup_failed(1, "later")),
        Err(DiagnosticDeliveryError::Closed)
    );
    assert_eq!(
        diagnostics.close(WAIT).await,
        Err(DiagnosticDeliveryError::Uncertain)
    );
    assert_eq!(
        occurrences(&host.context, name)[0].2,
        1,
        "what was accepted before stays; the uncertain one never arrived"
    );
}

/// Records one observation from `register`, as the spec says a Rust worker does:
/// the runtime taken synchronously, diagnostics set up in a spawned task.
struct ProbePlugin {
    reported: tokio::sync::mpsc::UnboundedSender<Result<(), DiagnosticDeliveryError>>,
}

impl WorkerPlugin for ProbePlugin {
    fn plugin_id(&self) -> &str {
        "acme.probe"
    }

    fn validate(&self, config: &serde_json::Value) -> Result<(), PluginError> {
        match config["backend"].as_str() {
            Some(_) => Ok(()),
            None => Err(PluginError::new("invalid_config", "`backend` is missing")),
        }
    }

    fn register(
        &self,
        context: &mut PluginContext,
        config: serde_json::Value,
    ) -> Result<(), PluginError> {
        self.validate(&config)?;
        let backend = config["backend"].as_str().unwrap_or_default().to_owned();
        let runtime = context
            .runtime()
            .ok_or_else(|| PluginError::new("no_runtime", "the host gave no endpoint"))?;
        let reported = self.reported.clone();
        tokio::spawn(async move {
            let outcome = async {
                let diagnostics = runtime.diagnostics().await.clone();
                let probe = diagnostics
                    .component(
                        "probe",
                        vec![builtin_code(BuiltinDiagnosticCode::PluginUnavailable)],
                    )
                    .await?;
                probe.try_record_lazy(|| DiagnosticObservation {
                    code: 1,
                    count: 1,
                    outcome: Outcome::Failure as i32,
                    severity: Severity::Warning as i32,
                    failure_class: Some("unavailable".into()),
                    detail: Some(format!("backend {backend} unreachable")),
                    ..Default::default()
                })?;
                diagnostics.flush(WAIT).await
            }
            .await;
            let _ = reported.send(outcome);
        });
        Ok(())
    }
}

async fn wait_for(path: &Path) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !path.exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn config(json: &str) -> Option<JsonEnvelope> {
    Some(JsonEnvelope {
        schema: "nemo.relay.Json@1".into(),
        json: json.as_bytes().to_vec(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_plugin_answers_the_lifecycle_and_reports_from_register() {
    let host = host();
    let directory = tempfile::tempdir().unwrap();
    let worker_socket: PathBuf = directory.path().join("worker.sock");
    let (reported, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let serving = tokio::spawn(serve_plugin_with(
        ProbePlugin { reported },
        WorkerEnvironment {
            worker_endpoint: worker_socket.clone().into(),
            host_endpoint: Some(host.endpoint.socket_path().into()),
            endpoint_file: None,
            activation_id: ACTIVATION.into(),
            token: TOKEN.into(),
            max_message_bytes: 4 * 1024 * 1024,
        },
    ));
    wait_for(&worker_socket).await;
    let channel = wattline::host::connect_unix(worker_socket.clone())
        .await
        .unwrap();
    let mut worker = PluginWorkerClient::new(channel);
    let register = |token: &str, json: &str| RegisterRequest {
        activation_id: ACTIVATION.into(),
        plugin_id: "acme.probe".into(),
        auth_token: token.into(),
        config: config(json),
    };

    let denied = worker
        .register(register("wrong", "{}"))
        .await
        .expect_err("wrong token");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied);
    let handshake = worker
        .handshake(HandshakeRequest {
            activation_id: ACTIVATION.into(),
            plugin_id: "acme.probe".into(),
            relay_version: String::new(),
            worker_protocol: "grpc-v1".into(),
            auth_token: TOKEN.into(),
            host_endpoint: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            handshake.plugin_id.as_str(),
            handshake.worker_protocol.as_str()
        ),
        ("acme.probe", "grpc-v1")
    );
    let invalid = worker
        .validate(ValidateRequest {
            activation_id: ACTIVATION.into(),
            plugin_id: "acme.probe".into(),
            auth_token: TOKEN.into(),
            config: config("{}"),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        invalid.error.map(|error| error.code).as_deref(),
        Some("invalid_config")
    );

    let registered = worker
        .register(register(TOKEN, r#"{"backend": "primary"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(registered.error, None);
    let outcome = tokio::time::timeout(WAIT, reports.recv())
        .await
        .expect("the plugin reports")
        .expect("one report");
    assert_eq!(outcome, Ok(()));
    let name = "worker.lookup.probe";
    assert_eq!(
        occurrences(&host.context, name),
        vec![("plugin.unavailable".into(), CodeOrigin::Builtin, 1)]
    );
    let snapshot = host.context.snapshot().unwrap();
    assert!(
        snapshot
            .recent_events
            .iter()
            .any(|event| event.detail.as_deref() == Some("backend primary unreachable")),
        "the plugin got its config"
    );
    let again = worker
        .register(register(TOKEN, r#"{"backend": "primary"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        again.error.map(|error| error.code).as_deref(),
        Some("already_registered")
    );

    let ack = worker
        .shutdown(ShutdownRequest {
            activation_id: ACTIVATION.into(),
            auth_token: TOKEN.into(),
            reason: "pipeline shutdown".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ack.accepted, "{ack:?}");
    let served = tokio::time::timeout(WAIT, serving)
        .await
        .expect("serve_plugin returns after Shutdown")
        .unwrap();
    assert!(served.is_ok(), "{served:?}");
    assert!(!worker_socket.exists(), "the worker socket is removed");
    // Shutdown closed the session, and its component with it.
    assert_eq!(
        component(&host.context, name).unwrap().state,
        ComponentState::Closed
    );
}

/// The other transport `worker-protocol.md` allows: a plugin told to listen on
/// `tcp://127.0.0.1:0` binds a free port and writes it to its endpoint file as the
/// reference announces it, answers `Register` over TCP, and records into wattline's
/// `RelayDiagnostics` reached at `http://localhost:PORT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_on_loopback_tcp_announces_its_port_registers_and_records_over_tcp() {
    // wattline's RelayDiagnostics, served on a loopback port.
    let context = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let service = DiagnosticsService::new(
        context.clone(),
        vec![WorkerCredentials {
            activation_id: ACTIVATION.into(),
            token: TOKEN.into(),
            namespace: "lookup".into(),
        }],
    );
    let host_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_port = host_listener.local_addr().unwrap().port();
    let host = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RelayDiagnosticsServer::new(service))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                host_listener,
            )),
    );

    let directory = tempfile::tempdir().unwrap();
    let endpoint_file = directory.path().join("worker.endpoint");
    let (reported, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let serving = tokio::spawn(serve_plugin_with(
        ProbePlugin { reported },
        WorkerEnvironment {
            worker_endpoint: Endpoint::parse("tcp://127.0.0.1:0").unwrap(),
            host_endpoint: Some(Endpoint::parse(&format!("http://localhost:{host_port}")).unwrap()),
            endpoint_file: Some(endpoint_file.clone()),
            activation_id: ACTIVATION.into(),
            token: TOKEN.into(),
            max_message_bytes: 4 * 1024 * 1024,
        },
    ));
    let deadline = tokio::time::Instant::now() + WAIT;
    let announced = loop {
        if let Ok(text) = std::fs::read_to_string(&endpoint_file) {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "no endpoint file");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // The port the OS gave, announced as the reference does.
    let port: u16 = announced
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("announced {announced:?}"))
        .parse()
        .unwrap();
    assert_ne!(port, 0);

    let mut worker = PluginWorkerClient::connect(announced.clone())
        .await
        .unwrap();
    let registered = worker
        .register(RegisterRequest {
            activation_id: ACTIVATION.into(),
            plugin_id: "acme.probe".into(),
            auth_token: TOKEN.into(),
            config: config(r#"{"backend": "over-tcp"}"#),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(registered.error, None);
    let outcome = tokio::time::timeout(WAIT, reports.recv()).await.unwrap();
    assert_eq!(outcome, Some(Ok(())));
    assert_eq!(
        occurrences(&context, "worker.lookup.probe"),
        vec![("plugin.unavailable".into(), CodeOrigin::Builtin, 1)]
    );

    let ack = worker
        .shutdown(ShutdownRequest {
            activation_id: ACTIVATION.into(),
            auth_token: TOKEN.into(),
            reason: "done".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ack.accepted, "{ack:?}");
    let served = tokio::time::timeout(WAIT, serving).await.unwrap().unwrap();
    assert!(served.is_ok(), "{served:?}");
    host.abort();
}

//! The host endpoint's grpc-v1 diagnostics rules, one by one, through a real client
//! (the reference system's generated tonic code) over the endpoint's Unix socket. The
//! rules are spec/worker-protocol.md's "Host rules" and "What the SDKs check".

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use nemo_relay_worker_proto::v1::relay_diagnostics_client::RelayDiagnosticsClient;
use nemo_relay_worker_proto::v1::{
    DiagnosticCodeDefinition, DiagnosticComponentClose, DiagnosticComponentRegistration,
    DiagnosticCredentials, DiagnosticExtensionDefinition, DiagnosticObservation,
    DiagnosticObservationOutcome, DiagnosticObservationSeverity, DiagnosticOpenRequest,
    DiagnosticReadRequest, DiagnosticReceipt, DiagnosticReceiptStatus, DiagnosticSubmission,
    diagnostic_code_definition, diagnostic_submission,
};
use tonic::Code;
use tonic::transport::Channel;
use wattline::diagnostics::{Diagnostics, DiagnosticsLimits};
use wattline::host::{Admission, HostEndpoint, NOT_CONSUMED_METADATA, WorkerCredentials};

const ACTIVATION: &str = "0190f4a2-7c1e-7d3a-9b2f-3c4d5e6f7a8b";
const TOKEN: &str = "0190f4a2-7c1e-7d3a-9b2f-aaaaaaaaaaaa";

fn credentials() -> Option<DiagnosticCredentials> {
    Some(DiagnosticCredentials {
        activation_id: ACTIVATION.into(),
        auth_token: TOKEN.into(),
    })
}

struct Host {
    context: Diagnostics,
    endpoint: HostEndpoint,
    client: RelayDiagnosticsClient<Channel>,
}

async fn host() -> Host {
    host_with(Admission::default()).await
}

async fn host_with(admission: Admission) -> Host {
    let context = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let endpoint = HostEndpoint::start_with_admission(
        context.clone(),
        vec![WorkerCredentials {
            activation_id: ACTIVATION.into(),
            token: TOKEN.into(),
            namespace: "lookup".into(),
        }],
        None,
        admission,
    )
    .expect("the endpoint starts");
    let socket: PathBuf = endpoint.socket_path().to_path_buf();
    let channel = wattline::host::connect_unix(socket)
        .await
        .expect("connects over the socket");
    Host {
        context,
        endpoint,
        client: RelayDiagnosticsClient::new(channel),
    }
}

async fn open(host: &mut Host) -> Vec<u8> {
    host.client
        .open_diagnostic_session(DiagnosticOpenRequest {
            credentials: credentials(),
            protocol_version: 1,
            snapshot_version: 1,
            provenance_version: 1,
        })
        .await
        .expect("opens")
        .into_inner()
        .session_id
}

fn submission(
    session: &[u8],
    sequence: u64,
    operation: diagnostic_submission::Operation,
) -> DiagnosticSubmission {
    DiagnosticSubmission {
        credentials: credentials(),
        session_id: session.to_vec(),
        sequence,
        operation: Some(operation),
    }
}

fn registration(local_name: &str) -> diagnostic_submission::Operation {
    diagnostic_submission::Operation::RegisterComponent(DiagnosticComponentRegistration {
        local_name: local_name.into(),
        codes: vec![
            DiagnosticCodeDefinition {
                definition: Some(diagnostic_code_definition::Definition::BuiltinName(
                    "plugin.timeout".into(),
                )),
            },
            DiagnosticCodeDefinition {
                definition: Some(diagnostic_code_definition::Definition::Extension(
                    DiagnosticExtensionDefinition {
                        name: "lookup_failed".into(),
                        description: "The backend lookup failed".into(),
                        outcome: DiagnosticObservationOutcome::Failure as i32,
                        allowed_failure_classes: vec!["unavailable".into()],
                    },
                )),
            },
        ],
    })
}

fn observation(component: u32, count: u64, detail: &str) -> diagnostic_submission::Operation {
    diagnostic_submission::Operation::Record(DiagnosticObservation {
        component,
        code: 2,
        failure_class: Some("unavailable".into()),
        outcome: DiagnosticObservationOutcome::Failure as i32,
        severity: DiagnosticObservationSeverity::Warning as i32,
        count,
        observed_unix_micros: Some(1_700_000_000_000_000),
        detail: Some(detail.into()),
        session_id: None,
        request_id: Some("req-1".into()),
    })
}

async fn submit(
    host: &mut Host,
    submission: DiagnosticSubmission,
) -> Result<DiagnosticReceipt, tonic::Status> {
    host.client
        .submit_diagnostic(submission)
        .await
        .map(tonic::Response::into_inner)
}

fn status(receipt: &DiagnosticReceipt) -> DiagnosticReceiptStatus {
    DiagnosticReceiptStatus::try_from(receipt.status).unwrap()
}

/// Occurrences of the worker component's extension code, from the host's own read.
fn occurrences(host: &Host) -> u64 {
    let snapshot = host.context.snapshot().unwrap();
    let component = snapshot
        .components
        .iter()
        .find(|component| component.name == "worker.lookup.backend")
        .expect("the worker's component, under its namespace");
    component.codes[1].occurrences
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_what_the_sdks_accept_and_credentials_are_checked() {
    let mut host = host().await;
    let capabilities = host
        .client
        .get_diagnostic_capabilities(credentials().unwrap())
        .await
        .expect("capabilities")
        .into_inner();
    assert!(capabilities.enabled);
    assert_eq!(
        (
            capabilities.protocol_version,
            capabilities.snapshot_version,
            capabilities.provenance_version
        ),
        (1, 1, 1)
    );
    assert!((258..=16384).contains(&capabilities.max_request_bytes));
    assert!((256..=131072).contains(&capabilities.max_response_bytes));
    assert!((1..=32).contains(&capabilities.max_pending_submissions));
    assert!((1..=8).contains(&capabilities.retry_attempts));
    assert!(capabilities.retry_timeout_millis > 0 && capabilities.retry_timeout_millis <= 10000);
    assert!(!capabilities.can_read_context);
    for wrong in [
        DiagnosticCredentials {
            activation_id: ACTIVATION.into(),
            auth_token: "wrong".into(),
        },
        DiagnosticCredentials {
            activation_id: "someone-else".into(),
            auth_token: TOKEN.into(),
        },
    ] {
        let refused = host
            .client
            .get_diagnostic_capabilities(wrong)
            .await
            .expect_err("wrong credentials");
        assert_eq!(refused.code(), Code::PermissionDenied);
    }
    // The open session carries the same capabilities; a re-open the same id.
    let session = host
        .client
        .open_diagnostic_session(DiagnosticOpenRequest {
            credentials: credentials(),
            protocol_version: 1,
            snapshot_version: 1,
            provenance_version: 1,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.session_id.len(), 16);
    assert_eq!(session.capabilities, Some(capabilities));
    assert_eq!(open(&mut host).await, session.session_id);
    let other_version = host
        .client
        .open_diagnostic_session(DiagnosticOpenRequest {
            credentials: credentials(),
            protocol_version: 2,
            snapshot_version: 1,
            provenance_version: 1,
        })
        .await
        .expect_err("only version 1");
    assert_eq!(other_version.code(), Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_follow_the_sequence_rules() {
    let mut host = host().await;
    let session = open(&mut host).await;
    let registered = submit(&mut host, submission(&session, 1, registration("backend")))
        .await
        .unwrap();
    assert_eq!(status(&registered), DiagnosticReceiptStatus::Registered);
    assert_eq!((registered.component, registered.code_count), (1, 2));
    assert_eq!(registered.submission_sequence, 1);

    let first = submission(&session, 2, observation(1, 3, "backend down"));
    let recorded = submit(&mut host, first.clone()).await.unwrap();
    assert_eq!(status(&recorded), DiagnosticReceiptStatus::Recorded);
    assert!(recorded.host_sequence > 0);
    assert_eq!(occurrences(&host), 3);

    // Table: (what is sent, what comes back). Not-consumed errors leave the next
    // sequence free; the cached receipt counts nothing twice.
    let mut oversize = submission(&session, 3, observation(1, 1, &"x".repeat(17 * 1024)));
    oversize.sequence = 3;
    let mut no_operation = submission(&session, 3, observation(1, 1, "x"));
    no_operation.operation = None;
    let with_observation = |change: fn(&mut DiagnosticObservation)| {
        let mut operation = observation(1, 1, "x");
        if let diagnostic_submission::Operation::Record(observation) = &mut operation {
            change(observation);
        }
        submission(&session, 3, operation)
    };
    let before_1970 = with_observation(|o| o.observed_unix_micros = Some(-1));
    let long_correlation = with_observation(|o| o.request_id = Some("r".repeat(1025)));
    let cases: Vec<(
        &str,
        DiagnosticSubmission,
        Result<DiagnosticReceiptStatus, Code>,
    )> = vec![
        (
            "an identical retry gets the cached receipt",
            first.clone(),
            Ok(DiagnosticReceiptStatus::Recorded),
        ),
        (
            "the same sequence with other bytes",
            submission(&session, 2, observation(1, 4, "other")),
            Err(Code::AlreadyExists),
        ),
        (
            "a gap",
            submission(&session, 5, observation(1, 1, "gap")),
            Err(Code::OutOfRange),
        ),
        (
            "a replay below",
            submission(&session, 1, observation(1, 1, "old")),
            Err(Code::OutOfRange),
        ),
        (
            "sequence 0",
            submission(&session, 0, observation(1, 1, "zero")),
            Err(Code::InvalidArgument),
        ),
        ("no operation", no_operation, Err(Code::InvalidArgument)),
        (
            "a session id that is not 16 bytes",
            submission(&session[..15], 3, observation(1, 1, "short")),
            Err(Code::InvalidArgument),
        ),
        (
            "count 0",
            submission(&session, 3, observation(1, 0, "none")),
            Err(Code::InvalidArgument),
        ),
        (
            "a producer time before 1970",
            before_1970,
            Err(Code::InvalidArgument),
        ),
        (
            "correlation over max_correlation_bytes",
            long_correlation,
            Err(Code::InvalidArgument),
        ),
        (
            "a submission over 16 KiB",
            oversize,
            Err(Code::InvalidArgument),
        ),
        (
            "another session",
            submission(&[7; 16], 3, observation(1, 1, "elsewhere")),
            Err(Code::FailedPrecondition),
        ),
    ];
    for (what, sent, expected) in cases {
        let answer = submit(&mut host, sent).await;
        match (answer, expected) {
            (Ok(receipt), Ok(status_expected)) => {
                assert_eq!(status(&receipt), status_expected, "{what}");
                assert_eq!(receipt, recorded, "{what}: the cached receipt");
            }
            (Err(error), Err(code)) => assert_eq!(error.code(), code, "{what}: {error:?}"),
            (answer, expected) => panic!("{what}: {answer:?}, expected {expected:?}"),
        }
    }
    assert_eq!(occurrences(&host), 3, "nothing refused was counted");

    // An apply failure is a REJECTED receipt that consumes its sequence.
    let unknown = submit(&mut host, submission(&session, 3, observation(9, 1, "who")))
        .await
        .unwrap();
    assert_eq!(status(&unknown), DiagnosticReceiptStatus::Rejected);
    assert_eq!(unknown.reason, "unknown_component");
    let next = submit(
        &mut host,
        submission(&session, 4, observation(1, 1, "after")),
    )
    .await
    .unwrap();
    assert_eq!(status(&next), DiagnosticReceiptStatus::Recorded);
    assert_eq!(occurrences(&host), 4);

    // Closing the component: later records are rejected, the counts stay.
    let closed = submit(
        &mut host,
        submission(
            &session,
            5,
            diagnostic_submission::Operation::CloseComponent(DiagnosticComponentClose {
                component: 1,
            }),
        ),
    )
    .await
    .unwrap();
    assert_eq!(status(&closed), DiagnosticReceiptStatus::Closed);
    let late = submit(
        &mut host,
        submission(&session, 6, observation(1, 1, "late")),
    )
    .await
    .unwrap();
    assert_eq!(status(&late), DiagnosticReceiptStatus::Rejected);
    assert_eq!(late.reason, "closed");
    assert_eq!(occurrences(&host), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_registrations_per_session_count_closed_ones_and_plugin_codes_only() {
    let mut host = host().await;
    let session = open(&mut host).await;
    let host_code =
        diagnostic_submission::Operation::RegisterComponent(DiagnosticComponentRegistration {
            local_name: "impostor".into(),
            codes: vec![DiagnosticCodeDefinition {
                definition: Some(diagnostic_code_definition::Definition::BuiltinName(
                    "sampler.cpu.read_failed".into(),
                )),
            }],
        });
    let refused = submit(&mut host, submission(&session, 1, host_code))
        .await
        .unwrap();
    assert_eq!(status(&refused), DiagnosticReceiptStatus::Rejected);
    assert_eq!(refused.reason, "unknown_builtin");
    let mut sequence = 2;
    for index in 0..8 {
        let receipt = submit(
            &mut host,
            submission(&session, sequence, registration(&format!("c{index}"))),
        )
        .await
        .unwrap();
        assert_eq!(
            status(&receipt),
            DiagnosticReceiptStatus::Registered,
            "{index}"
        );
        sequence += 1;
        // Closing frees no slot.
        submit(
            &mut host,
            submission(
                &session,
                sequence,
                diagnostic_submission::Operation::CloseComponent(DiagnosticComponentClose {
                    component: receipt.component,
                }),
            ),
        )
        .await
        .unwrap();
        sequence += 1;
    }
    let ninth = submit(
        &mut host,
        submission(&session, sequence, registration("c8")),
    )
    .await
    .unwrap();
    assert_eq!(status(&ninth), DiagnosticReceiptStatus::Rejected);
    assert_eq!(ninth.reason, "component_limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cannot_read_the_context_and_the_directory_is_private_and_removed() {
    // The spec: workers' recording credentials grant no read; the reference host
    // offers `can_read_context = false`.
    let mut host = host().await;
    let capabilities = host
        .client
        .get_diagnostic_capabilities(credentials().unwrap())
        .await
        .unwrap()
        .into_inner();
    assert!(!capabilities.can_read_context);
    let session = open(&mut host).await;
    let refused = host
        .client
        .read_diagnostic_page(DiagnosticReadRequest {
            credentials: credentials(),
            session_id: session,
            ..DiagnosticReadRequest::default()
        })
        .await
        .expect_err("workers cannot read");
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert!(refused.message().contains("cannot read"), "{refused:?}");
    assert!(refused.metadata().get(NOT_CONSUMED_METADATA).is_none());

    let directory = host.endpoint.directory().to_path_buf();
    let mode = std::fs::metadata(&directory).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    host.endpoint.shutdown().await;
    assert!(!directory.exists(), "the directory is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_the_admission_limit_is_refused_not_consumed_before_decoding() {
    // No submission slot left: every diagnostic call is refused before its body is
    // read, with the metadata that lets the client send it again; reads have their
    // own limit.
    let mut host = host_with(Admission {
        calls: 0,
        ..Admission::default()
    })
    .await;
    let refused = host
        .client
        .get_diagnostic_capabilities(credentials().unwrap())
        .await
        .expect_err("over the limit");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(
        refused
            .metadata()
            .get(NOT_CONSUMED_METADATA)
            .map(|value| value.to_str().unwrap()),
        Some("1")
    );
    // Not even garbage credentials are looked at: nothing was decoded.
    let refused = host
        .client
        .submit_diagnostic(DiagnosticSubmission::default())
        .await
        .expect_err("over the limit");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // Reads have their own limit: this one is decoded and answered (a worker may not
    // read), not refused before decoding.
    let read = host
        .client
        .read_diagnostic_page(DiagnosticReadRequest {
            credentials: credentials(),
            ..DiagnosticReadRequest::default()
        })
        .await
        .expect_err("workers cannot read");
    assert_eq!(read.code(), Code::PermissionDenied);
    assert!(read.metadata().get(NOT_CONSUMED_METADATA).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_observation_keeps_its_provenance_and_summaries_use_receipt_time() {
    let mut host = host().await;
    let session = open(&mut host).await;
    submit(&mut host, submission(&session, 1, registration("backend")))
        .await
        .unwrap();
    let before = chrono::Utc::now();
    // The producer's clock says 2023-11-14T22:13:20Z, years before the receipt.
    let recorded = submit(
        &mut host,
        submission(&session, 2, observation(1, 1, "down")),
    )
    .await
    .unwrap();
    assert_eq!(status(&recorded), DiagnosticReceiptStatus::Recorded);

    let snapshot = host.context.snapshot().unwrap();
    let event = snapshot
        .recent_events
        .iter()
        .find(|event| event.component == "worker.lookup.backend")
        .expect("the worker's event is retained");
    let provenance = event
        .provenance
        .as_ref()
        .expect("a worker event has provenance");
    assert_eq!(provenance.worker_id, ACTIVATION);
    assert_eq!(
        provenance.observed_at,
        chrono::DateTime::from_timestamp_micros(1_700_000_000_000_000),
        "the producer's time is kept as sent"
    );
    assert!(
        event.recorded_at >= before,
        "the event's time is the receipt time"
    );
    let code = &snapshot
        .components
        .iter()
        .find(|component| component.name == "worker.lookup.backend")
        .unwrap()
        .codes[1];
    assert!(
        code.last_observed_at.is_some_and(|at| at >= before),
        "summaries use receipt time, not the producer's"
    );
    // The JSON of the context (what `wattline diagnostics` prints) carries it too.
    let json = snapshot.to_json().unwrap();
    assert!(
        json.contains(&format!("\"worker_id\":\"{ACTIVATION}\"")),
        "{json}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_sessions_per_process_and_a_re_open_is_not_a_new_one() {
    let workers: Vec<WorkerCredentials> = (0..33)
        .map(|index| WorkerCredentials {
            activation_id: format!("0190f4a2-7c1e-7d3a-9b2f-{index:012}"),
            token: TOKEN.into(),
            namespace: format!("worker{index}"),
        })
        .collect();
    let context = Diagnostics::new(DiagnosticsLimits::default()).unwrap();
    let endpoint = HostEndpoint::start(context, workers.clone(), None).unwrap();
    let channel = wattline::host::connect_unix(endpoint.socket_path().to_path_buf())
        .await
        .unwrap();
    let mut client = RelayDiagnosticsClient::new(channel);
    let open = |worker: &WorkerCredentials| DiagnosticOpenRequest {
        credentials: Some(DiagnosticCredentials {
            activation_id: worker.activation_id.clone(),
            auth_token: worker.token.clone(),
        }),
        protocol_version: 1,
        snapshot_version: 1,
        provenance_version: 1,
    };
    let mut first = Vec::new();
    for worker in &workers[..32] {
        let session = client.open_diagnostic_session(open(worker)).await.unwrap();
        first.push(session.into_inner().session_id);
    }
    // A re-open of an activation that has its session returns it, taking no new slot.
    let again = client
        .open_diagnostic_session(open(&workers[0]))
        .await
        .unwrap();
    assert_eq!(again.into_inner().session_id, first[0]);
    let refused = client
        .open_diagnostic_session(open(&workers[32]))
        .await
        .expect_err("the 33rd session is refused");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    endpoint.shutdown().await;
}

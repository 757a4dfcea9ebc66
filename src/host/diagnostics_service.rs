//! `nemo.relay.worker.v1.RelayDiagnostics`, the grpc-v1 wire the reference system's
//! worker SDKs speak (spec/worker-protocol.md): capabilities, one session per
//! activation, sequenced submissions with cached receipts, and the host's limits.
//! Observations land in the pipeline's diagnostics context, under a namespace the
//! host assigns to each worker.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, MutexGuard};

use nemo_relay_worker_proto::v1::relay_diagnostics_server::RelayDiagnostics;
use nemo_relay_worker_proto::v1::{
    DiagnosticCapabilities, DiagnosticCodeDefinition, DiagnosticComponentRegistration,
    DiagnosticCredentials, DiagnosticEvidenceRetention, DiagnosticObservation,
    DiagnosticObservationOutcome, DiagnosticObservationSeverity, DiagnosticOpenRequest,
    DiagnosticReadRequest, DiagnosticReadResponse, DiagnosticReceipt, DiagnosticReceiptStatus,
    DiagnosticSession, DiagnosticSubmission, diagnostic_code_definition, diagnostic_submission,
};
use prost::Message;
use tonic::{Request, Response, Status};
use wattline_diagnostics::{
    BuiltinDiagnosticCode, ComponentDeclaration, Correlation, DiagnosticCode, DiagnosticComponent,
    DiagnosticOutcome, Diagnostics, EvidenceDisposition, FailureClass, Observation, Provenance,
    RecordOutcome, Severity, retry_soon_while_busy,
};

/// The host's limits, the reference host's values (spec/worker-protocol.md).
pub mod limits {
    /// Component registrations per session, closed ones included.
    pub const MAX_COMPONENTS: usize = 8;
    /// Extension code declarations per session.
    pub const MAX_EXTENSIONS: usize = 16;
    // Codes per component, the bound of every diagnostics context; the worker SDK
    // checks it too.
    pub use wattline_diagnostics::MAX_CODES_PER_COMPONENT as MAX_CODES;
    /// Registration metadata (names and descriptions) per session, bytes.
    pub const MAX_METADATA_BYTES: usize = 16 * 1024;
    /// One encoded submission, bytes.
    pub const MAX_REQUEST_BYTES: usize = 16 * 1024;
    /// One encoded response, bytes.
    pub const MAX_RESPONSE_BYTES: usize = 128 * 1024;
    /// Correlation (session and request ids) per observation, bytes.
    pub const MAX_CORRELATION_BYTES: usize = 1024;
    /// Queued submissions a client may hold.
    pub const MAX_PENDING_SUBMISSIONS: u32 = 32;
    /// Attempts per submission.
    pub const RETRY_ATTEMPTS: u32 = 3;
    /// Milliseconds per attempt.
    pub const RETRY_TIMEOUT_MILLIS: u32 = 2000;
    /// Sessions per process.
    pub const MAX_SESSIONS: usize = 32;
    /// Diagnostic calls decoded at once; further ones are refused before decoding.
    pub const CONCURRENT_CALLS: usize = 16;
    /// Reads decoded at once.
    pub const CONCURRENT_READS: usize = 4;
    /// How long the host takes at most to answer an admitted call.
    pub const CALL_DEADLINE: std::time::Duration =
        std::time::Duration::from_millis(RETRY_TIMEOUT_MILLIS as u64);
    // An extension's name and description (bytes) and failure classes: the protocol's
    // bounds, which the worker SDK checks before sending.
    pub use wattline_diagnostics::{
        MAX_WORKER_EXTENSION_CLASSES as MAX_EXTENSION_CLASSES,
        MAX_WORKER_EXTENSION_DESCRIPTION_BYTES as MAX_EXTENSION_DESCRIPTION_BYTES,
        MAX_WORKER_EXTENSION_NAME_BYTES as MAX_EXTENSION_NAME_BYTES,
    };
}

/// The metadata that tells a client its request was not consumed.
pub const NOT_CONSUMED_METADATA: &str = "nemo-relay-diagnostic-not-consumed";

/// One worker the endpoint accepts: its credentials and the namespace its components
/// are registered under (`worker.<namespace>.<local name>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCredentials {
    /// The activation id (a UUID).
    pub activation_id: String,
    /// Its token (a UUIDv7 string).
    pub token: String,
    /// Dotted lowercase segments, e.g. `lookup_plugin`.
    pub namespace: String,
}

#[derive(Debug)]
struct Session {
    id: [u8; 16],
    /// The next sequence a new submission must carry.
    next_sequence: u64,
    /// The last consumed submission's bytes and its receipt, for identical retries.
    last: Option<(Vec<u8>, DiagnosticReceipt)>,
    /// Handle `n` is `components[n - 1]`; closed ones keep their slot.
    components: Vec<DiagnosticComponent>,
    extensions: usize,
    metadata_bytes: usize,
    closed: bool,
}

#[derive(Debug)]
struct Activation {
    credentials: WorkerCredentials,
    session: Option<Session>,
}

#[derive(Debug, Default)]
struct State {
    activations: HashMap<String, Activation>,
    sessions: usize,
}

/// The service, shared by every connection of one endpoint.
#[derive(Debug, Clone)]
pub struct DiagnosticsService {
    context: Diagnostics,
    state: Arc<Mutex<State>>,
}

impl DiagnosticsService {
    /// A service recording into `context` for `workers`. Workers record only: as the
    /// spec and the reference host say (`can_read_context = false`), their recording
    /// credentials grant no read of the context; the host reads it itself.
    pub fn new(context: Diagnostics, workers: Vec<WorkerCredentials>) -> Self {
        let activations = workers
            .into_iter()
            .map(|credentials| {
                (
                    credentials.activation_id.clone(),
                    Activation {
                        credentials,
                        session: None,
                    },
                )
            })
            .collect();
        DiagnosticsService {
            context,
            state: Arc::new(Mutex::new(State {
                activations,
                sessions: 0,
            })),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What this host offers.
    pub fn capabilities(&self) -> DiagnosticCapabilities {
        let limits = self.context.capabilities();
        DiagnosticCapabilities {
            protocol_version: 1,
            snapshot_version: 1,
            catalogue_version: 1,
            enabled: limits.is_some(),
            can_read_context: false,
            max_components: limits::MAX_COMPONENTS as u32,
            max_extensions: limits::MAX_EXTENSIONS as u32,
            max_metadata_bytes: limits::MAX_METADATA_BYTES as u32,
            max_request_bytes: limits::MAX_REQUEST_BYTES as u32,
            max_detail_bytes: limits.map_or(1024, |limits| limits.max_detail_bytes as u32),
            max_correlation_bytes: limits::MAX_CORRELATION_BYTES as u32,
            max_response_bytes: limits::MAX_RESPONSE_BYTES as u32,
            max_pending_submissions: limits::MAX_PENDING_SUBMISSIONS,
            retry_attempts: limits::RETRY_ATTEMPTS,
            retry_timeout_millis: limits::RETRY_TIMEOUT_MILLIS,
            provenance_version: 1,
        }
    }
}

/// `RESOURCE_EXHAUSTED`, marked not consumed: the client may send it again.
pub(super) fn exhausted(message: &str) -> Status {
    let mut status = Status::resource_exhausted(message.to_owned());
    status.metadata_mut().insert(
        NOT_CONSUMED_METADATA,
        tonic::metadata::MetadataValue::from_static("1"),
    );
    status
}

/// Checks credentials against the known activations; a mismatch reveals nothing.
fn authorize<'s>(
    state: &'s mut State,
    credentials: Option<&DiagnosticCredentials>,
) -> Result<&'s mut Activation, Status> {
    let denied = || Status::permission_denied("unknown activation or token");
    let credentials = credentials.ok_or_else(denied)?;
    let activation = state
        .activations
        .get_mut(&credentials.activation_id)
        .ok_or_else(denied)?;
    if activation.credentials.token != credentials.auth_token {
        return Err(denied());
    }
    Ok(activation)
}

fn receipt(sequence: u64, status: DiagnosticReceiptStatus) -> DiagnosticReceipt {
    DiagnosticReceipt {
        submission_sequence: sequence,
        status: status as i32,
        ..DiagnosticReceipt::default()
    }
}

fn rejected(sequence: u64, reason: &str) -> DiagnosticReceipt {
    DiagnosticReceipt {
        reason: reason.to_owned(),
        ..receipt(sequence, DiagnosticReceiptStatus::Rejected)
    }
}

/// Checks what needs no state: shape, size, sequence 0, counts, times, and gives the
/// operation. Malformed input is `INVALID_ARGUMENT` and consumes nothing.
fn check_shape(
    submission: &DiagnosticSubmission,
    encoded: usize,
) -> Result<&diagnostic_submission::Operation, Status> {
    let invalid = |why: &str| Err(Status::invalid_argument(why.to_owned()));
    if encoded > limits::MAX_REQUEST_BYTES {
        return invalid("submission larger than max_request_bytes");
    }
    if submission.session_id.len() != 16 {
        return invalid("session_id must be 16 bytes");
    }
    if submission.sequence == 0 {
        return invalid("sequence starts at 1");
    }
    let operation = match &submission.operation {
        None => return invalid("no operation"),
        Some(operation) => operation,
    };
    if let diagnostic_submission::Operation::Record(observation) = operation {
        if observation.count == 0 {
            return invalid("count must be at least 1");
        }
        if observation
            .observed_unix_micros
            .is_some_and(|micros| micros < 0)
        {
            return invalid("observed_unix_micros before 1970");
        }
        let correlation = observation.session_id.as_deref().map_or(0, str::len)
            + observation.request_id.as_deref().map_or(0, str::len);
        if correlation > limits::MAX_CORRELATION_BYTES {
            return invalid("correlation larger than max_correlation_bytes");
        }
    }
    Ok(operation)
}

/// One checked code of a registration, borrowing its names from the request.
enum CheckedCode<'a> {
    Builtin(BuiltinDiagnosticCode),
    Extension {
        name: &'a str,
        description: &'a str,
        outcome: DiagnosticOutcome,
        classes: Vec<FailureClass>,
    },
}

impl CheckedCode<'_> {
    fn declared(&self) -> DiagnosticCode<'_> {
        match self {
            CheckedCode::Builtin(builtin) => DiagnosticCode::Builtin(*builtin),
            CheckedCode::Extension {
                name,
                description,
                outcome,
                classes,
            } => DiagnosticCode::Extension {
                name,
                description,
                outcome: *outcome,
                allowed_classes: classes,
            },
        }
    }
}

/// A registration's codes in the context's terms, in declaration order, with the
/// metadata bytes they charge; `Err(reason)` for what the host refuses.
struct Codes<'a> {
    codes: Vec<CheckedCode<'a>>,
    metadata_bytes: usize,
}

impl Codes<'_> {
    fn extensions(&self) -> usize {
        self.codes
            .iter()
            .filter(|code| matches!(code, CheckedCode::Extension { .. }))
            .count()
    }
}

fn failure_class(name: &str) -> Option<FailureClass> {
    FailureClass::ALL
        .iter()
        .copied()
        .find(|class| class.as_str() == name)
}

fn outcome(value: i32) -> Option<DiagnosticOutcome> {
    match DiagnosticObservationOutcome::try_from(value).ok()? {
        DiagnosticObservationOutcome::Success => Some(DiagnosticOutcome::Success),
        DiagnosticObservationOutcome::Failure => Some(DiagnosticOutcome::Failure),
        DiagnosticObservationOutcome::Unknown => None,
    }
}

fn severity(value: i32) -> Option<Severity> {
    match DiagnosticObservationSeverity::try_from(value).ok()? {
        DiagnosticObservationSeverity::Trace => Some(Severity::Trace),
        DiagnosticObservationSeverity::Debug => Some(Severity::Debug),
        DiagnosticObservationSeverity::Info => Some(Severity::Info),
        DiagnosticObservationSeverity::Warning => Some(Severity::Warning),
        DiagnosticObservationSeverity::Error => Some(Severity::Error),
        DiagnosticObservationSeverity::Unspecified => None,
    }
}

fn codes_of(registration: &DiagnosticComponentRegistration) -> Result<Codes<'_>, &'static str> {
    if registration.codes.is_empty() || registration.codes.len() > limits::MAX_CODES {
        return Err("code_limit");
    }
    let mut codes = Codes {
        codes: Vec::with_capacity(registration.codes.len()),
        metadata_bytes: registration.local_name.len(),
    };
    for DiagnosticCodeDefinition { definition } in &registration.codes {
        let code = match definition {
            Some(diagnostic_code_definition::Definition::BuiltinName(name)) => {
                codes.metadata_bytes += name.len();
                CheckedCode::Builtin(
                    BuiltinDiagnosticCode::from_name(name)
                        .filter(|builtin| !builtin.is_host_owned())
                        .ok_or("unknown_builtin")?,
                )
            }
            Some(diagnostic_code_definition::Definition::Extension(extension)) => {
                let outcome = outcome(extension.outcome).ok_or("invalid_declaration")?;
                if extension.name.is_empty()
                    || extension.name.len() > limits::MAX_EXTENSION_NAME_BYTES
                    || extension.description.len() > limits::MAX_EXTENSION_DESCRIPTION_BYTES
                    || extension.allowed_failure_classes.len() > limits::MAX_EXTENSION_CLASSES
                {
                    return Err("invalid_declaration");
                }
                let classes = extension
                    .allowed_failure_classes
                    .iter()
                    .map(|class| failure_class(class).ok_or("invalid_declaration"))
                    .collect::<Result<Vec<_>, _>>()?;
                codes.metadata_bytes += extension.name.len() + extension.description.len();
                CheckedCode::Extension {
                    name: &extension.name,
                    description: &extension.description,
                    outcome,
                    classes,
                }
            }
            None => return Err("invalid_declaration"),
        };
        codes.codes.push(code);
    }
    Ok(codes)
}

impl DiagnosticsService {
    fn register(
        &self,
        session: &mut Session,
        namespace: &str,
        registration: &DiagnosticComponentRegistration,
        sequence: u64,
    ) -> DiagnosticReceipt {
        if session.components.len() >= limits::MAX_COMPONENTS {
            return rejected(sequence, "component_limit");
        }
        let codes = match codes_of(registration) {
            Ok(codes) => codes,
            Err(reason) => return rejected(sequence, reason),
        };
        let extensions = codes.extensions();
        if session.extensions + extensions > limits::MAX_EXTENSIONS {
            return rejected(sequence, "extension_limit");
        }
        if session.metadata_bytes + codes.metadata_bytes > limits::MAX_METADATA_BYTES {
            return rejected(sequence, "registration_text_limit");
        }
        let name = format!("worker.{namespace}.{}", registration.local_name);
        let declared: Vec<DiagnosticCode<'_>> =
            codes.codes.iter().map(CheckedCode::declared).collect();
        // The pipeline's own recordings hold the context for the length of one record: a
        // worker's call that meets one waits its turn instead of being rejected.
        let component = retry_soon_while_busy(|| {
            self.context
                .component_lazy_for_worker(|| ComponentDeclaration {
                    name: &name,
                    codes: &declared,
                })
        });
        match component {
            Ok(component) => {
                session.extensions += extensions;
                session.metadata_bytes += codes.metadata_bytes;
                session.components.push(component);
                DiagnosticReceipt {
                    component: session.components.len() as u32,
                    code_count: declared.len() as u32,
                    ..receipt(sequence, DiagnosticReceiptStatus::Registered)
                }
            }
            Err(error) => rejected(sequence, error.reason()),
        }
    }

    fn record(
        session: &Session,
        worker_id: &str,
        observation: &DiagnosticObservation,
        sequence: u64,
    ) -> DiagnosticReceipt {
        let Some(component) = (observation.component as usize)
            .checked_sub(1)
            .and_then(|index| session.components.get(index))
        else {
            return rejected(sequence, "unknown_component");
        };
        let (Some(outcome), Some(severity), Some(count)) = (
            outcome(observation.outcome),
            severity(observation.severity),
            NonZeroU64::new(observation.count),
        ) else {
            return rejected(sequence, "invalid_observation");
        };
        let failure_class = match observation.failure_class.as_deref() {
            Some(name) => match failure_class(name) {
                Some(class) => Some(class),
                None => return rejected(sequence, "invalid_observation"),
            },
            None => None,
        };
        let result = retry_soon_while_busy(|| {
            component.try_record_lazy(|| Observation {
                code: observation.code,
                count,
                outcome,
                severity,
                failure_class,
                detail: observation.detail.as_deref().map(Into::into),
                correlation: Correlation {
                    request_id: observation.request_id.as_deref().map(Into::into),
                    session_id: observation.session_id.as_deref().map(Into::into),
                },
                provenance: Some(Provenance {
                    worker_id: worker_id.into(),
                    observed_at: observation
                        .observed_unix_micros
                        .and_then(chrono::DateTime::from_timestamp_micros),
                }),
            })
        });
        match result {
            Ok(RecordOutcome::Recorded(recorded)) => DiagnosticReceipt {
                host_sequence: recorded.sequence,
                evidence: match recorded.evidence {
                    EvidenceDisposition::Retained => DiagnosticEvidenceRetention::Retained,
                    EvidenceDisposition::Truncated => DiagnosticEvidenceRetention::Truncated,
                    EvidenceDisposition::Dropped => DiagnosticEvidenceRetention::Dropped,
                } as i32,
                ..receipt(sequence, DiagnosticReceiptStatus::Recorded)
            },
            Ok(RecordOutcome::Disabled) => receipt(sequence, DiagnosticReceiptStatus::Disabled),
            Err(error) => rejected(sequence, error.reason()),
        }
    }

    fn apply(
        &self,
        session: &mut Session,
        namespace: &str,
        worker_id: &str,
        operation: &diagnostic_submission::Operation,
        sequence: u64,
    ) -> DiagnosticReceipt {
        match operation {
            diagnostic_submission::Operation::RegisterComponent(registration) => {
                self.register(session, namespace, registration, sequence)
            }
            diagnostic_submission::Operation::Record(observation) => {
                Self::record(session, worker_id, observation, sequence)
            }
            diagnostic_submission::Operation::CloseComponent(close) => {
                match (close.component as usize)
                    .checked_sub(1)
                    .and_then(|index| session.components.get(index))
                {
                    Some(component) => {
                        component.close();
                        DiagnosticReceipt {
                            component: close.component,
                            ..receipt(sequence, DiagnosticReceiptStatus::Closed)
                        }
                    }
                    None => rejected(sequence, "unknown_component"),
                }
            }
            diagnostic_submission::Operation::CloseSession(_) => {
                for component in &session.components {
                    component.close();
                }
                session.closed = true;
                receipt(sequence, DiagnosticReceiptStatus::Closed)
            }
        }
    }
}

#[tonic::async_trait]
impl RelayDiagnostics for DiagnosticsService {
    async fn get_diagnostic_capabilities(
        &self,
        request: Request<DiagnosticCredentials>,
    ) -> Result<Response<DiagnosticCapabilities>, Status> {
        let mut state = self.state();
        authorize(&mut state, Some(request.get_ref()))?;
        Ok(Response::new(self.capabilities()))
    }

    async fn open_diagnostic_session(
        &self,
        request: Request<DiagnosticOpenRequest>,
    ) -> Result<Response<DiagnosticSession>, Status> {
        let request = request.into_inner();
        let mut state = self.state();
        let sessions = state.sessions;
        let activation = authorize(&mut state, request.credentials.as_ref())?;
        if (
            request.protocol_version,
            request.snapshot_version,
            request.provenance_version,
        ) != (1, 1, 1)
        {
            return Err(Status::failed_precondition("unsupported protocol version"));
        }
        let id = match &activation.session {
            // One session per activation: a re-open returns the same id.
            Some(session) => session.id,
            None if sessions >= limits::MAX_SESSIONS => {
                return Err(exhausted("too many diagnostic sessions"));
            }
            None => {
                let id = *uuid::Uuid::now_v7().as_bytes();
                activation.session = Some(Session {
                    id,
                    next_sequence: 1,
                    last: None,
                    components: Vec::new(),
                    extensions: 0,
                    metadata_bytes: 0,
                    closed: false,
                });
                state.sessions += 1;
                id
            }
        };
        Ok(Response::new(DiagnosticSession {
            session_id: id.to_vec(),
            capabilities: Some(self.capabilities()),
        }))
    }

    async fn submit_diagnostic(
        &self,
        request: Request<DiagnosticSubmission>,
    ) -> Result<Response<DiagnosticReceipt>, Status> {
        let submission = request.into_inner();
        let bytes = submission.encode_to_vec();
        let mut state = self.state();
        let activation = authorize(&mut state, submission.credentials.as_ref())?;
        let operation = check_shape(&submission, bytes.len())?;
        let namespace = activation.credentials.namespace.clone();
        let worker_id = activation.credentials.activation_id.clone();
        let session = match &mut activation.session {
            Some(session) if session.id[..] == submission.session_id[..] => session,
            _ => return Err(Status::failed_precondition("no such session")),
        };
        let sequence = submission.sequence;
        if let Some((last_bytes, last_receipt)) = &session.last
            && last_receipt.submission_sequence == sequence
        {
            // A retry: the same bytes get the same receipt; other bytes are a conflict.
            return if *last_bytes == bytes {
                Ok(Response::new(last_receipt.clone()))
            } else {
                Err(Status::already_exists("sequence already used"))
            };
        }
        if sequence != session.next_sequence {
            return Err(Status::out_of_range(format!(
                "expected sequence {}",
                session.next_sequence
            )));
        }
        if session.closed {
            return Err(Status::failed_precondition("session closed"));
        }
        let receipt = self.apply(session, &namespace, &worker_id, operation, sequence);
        session.next_sequence += 1;
        session.last = Some((bytes, receipt.clone()));
        Ok(Response::new(receipt))
    }

    async fn read_diagnostic_page(
        &self,
        request: Request<DiagnosticReadRequest>,
    ) -> Result<Response<DiagnosticReadResponse>, Status> {
        let request = request.into_inner();
        {
            let mut state = self.state();
            authorize(&mut state, request.credentials.as_ref())?;
        }
        Err(Status::permission_denied(
            "workers cannot read the diagnostics context: recording credentials grant no read",
        ))
    }
}

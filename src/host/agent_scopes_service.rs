//! wattline's `AgentScopes` service beside `RelayDiagnostics` on the host endpoint: a
//! program started by `wattline run` (or any holder of the endpoint's credentials)
//! starts and ends Agent scopes by name, and the pipeline attributes marks and energy
//! to them exactly as to in-process scopes. Scopes a caller leaves open are ended,
//! flagged, when its program exits ([`AgentScopesService::end_open_scopes`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tonic::{Request, Response, Status};
use uuid::Uuid;
use wattline_model::remote_call::{MODEL_CALL_OPERATIONS, RemoteCall, RemoteEstimate};
use wattline_worker::wire::agent_scopes::agent_scopes_server::AgentScopes;
use wattline_worker::wire::agent_scopes::{
    EndAgentScopeRequest, EndAgentScopeResponse, HostCredentials, RemoteEnergyEstimate,
    RemoteModelCall, StartAgentScopeRequest, StartAgentScopeResponse,
};

use super::WorkerCredentials;

/// The longest scope name, bytes (the wire's rule).
pub const MAX_SCOPE_NAME_BYTES: usize = 256;
/// Open scopes one caller may hold; more is `RESOURCE_EXHAUSTED`, so a runaway loop
/// cannot grow the host without bound.
pub const MAX_OPEN_SCOPES_PER_CALLER: usize = 1024;
/// How long a call waits for the pipeline to be attached (a command can call before
/// `wattline run` has finished starting the pipeline it measures).
const ATTACH_WAIT: Duration = Duration::from_millis(1500);

/// A scope another process starts, as its request describes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RemoteScopeStart<'a> {
    /// Its name (checked: non-blank, bounded, no control characters).
    pub name: &'a str,
    /// The process that asked, as it says.
    pub process_id: Option<u32>,
    /// Its weight (checked: positive and finite), if given.
    pub weight: Option<f64>,
    /// The caller's W3C `traceparent` (checked), if given.
    pub traceparent: Option<&'a str>,
    /// The scope it is nested in: one the same caller started and has not ended
    /// (checked).
    pub parent: Option<Uuid>,
}

/// What the service needs of a running pipeline.
pub trait ScopeControl: Send + Sync + 'static {
    /// Starts an Agent scope another process asked for; its UUID.
    fn start_remote_scope(&self, start: RemoteScopeStart<'_>) -> Uuid;
    /// Ends scope `uuid`, adding `flags` to its end event; `false` when it was not
    /// live any more (the pipeline has shut down, which ended it).
    fn end_scope(&self, uuid: Uuid, flags: &[&'static str]) -> bool;
    /// Ends scope `uuid` as a step that stood for `call`, a model call served by
    /// another machine; `false` as for [`Self::end_scope`].
    fn end_remote_call_scope(&self, uuid: Uuid, call: RemoteCall) -> bool;
}

/// The model call an `EndAgentScope` request names, checked: INVALID_ARGUMENT naming
/// the field when it is malformed.
fn remote_call_of(call: RemoteModelCall) -> Result<RemoteCall, Status> {
    if !MODEL_CALL_OPERATIONS.contains(&call.operation.as_str()) {
        return Err(Status::invalid_argument(format!(
            "remote_call.operation {:?}: one of {}",
            call.operation,
            MODEL_CALL_OPERATIONS.join(", ")
        )));
    }
    let estimate = call
        .estimate
        .map(|estimate| {
            let RemoteEnergyEstimate {
                low_kwh,
                high_kwh,
                estimator,
                source,
            } = estimate;
            RemoteEstimate::checked(low_kwh, high_kwh, estimator, source).map_err(|problem| {
                Status::invalid_argument(format!("remote_call.estimate: {problem}"))
            })
        })
        .transpose()?;
    Ok(RemoteCall {
        operation: call.operation,
        provider: call.provider,
        model: call.model,
        input_tokens: call.input_tokens,
        output_tokens: call.output_tokens,
        estimate,
    })
}

type Attached = Option<Arc<dyn ScopeControl>>;

/// The service, shared by every connection of one endpoint.
#[derive(Clone)]
pub struct AgentScopesService {
    control: watch::Receiver<Attached>,
    callers: Arc<Vec<WorkerCredentials>>,
    /// Open scopes by scope id: the caller's activation id and the scope's UUID.
    open: Arc<Mutex<HashMap<String, (String, Uuid)>>>,
}

impl std::fmt::Debug for AgentScopesService {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("AgentScopesService")
            .field("callers", &self.callers.len())
            .finish_non_exhaustive()
    }
}

/// Attaches the pipeline to an [`AgentScopesService`] once it runs.
pub struct ScopeControlSlot(watch::Sender<Attached>);

impl std::fmt::Debug for ScopeControlSlot {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attached = self.0.borrow().is_some();
        formatter
            .debug_struct("ScopeControlSlot")
            .field("attached", &attached)
            .finish()
    }
}

impl ScopeControlSlot {
    /// From now on, scopes start and end in `control`.
    pub fn attach(&self, control: Arc<dyn ScopeControl>) {
        self.0.send_replace(Some(control));
    }
}

impl AgentScopesService {
    /// A service for `callers`, and the slot its pipeline is attached through.
    pub fn new(callers: Vec<WorkerCredentials>) -> (Self, ScopeControlSlot) {
        let (sender, control) = watch::channel(None);
        let service = AgentScopesService {
            control,
            callers: Arc::new(callers),
            open: Arc::new(Mutex::new(HashMap::new())),
        };
        (service, ScopeControlSlot(sender))
    }

    fn open(&self) -> MutexGuard<'_, HashMap<String, (String, Uuid)>> {
        self.open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The UUID of the parent `scope_id` names: an open scope of `caller`; a scope
    /// of another caller, ended or unknown is refused, naming it.
    fn open_parent(&self, caller: &str, scope_id: Option<&str>) -> Result<Option<Uuid>, Status> {
        let Some(scope_id) = scope_id else {
            return Ok(None);
        };
        match self.open().get(scope_id) {
            Some((owner, uuid)) if owner == caller => Ok(Some(*uuid)),
            _ => Err(Status::invalid_argument(format!(
                "the parent scope {scope_id:?} is not an open scope of this caller"
            ))),
        }
    }

    fn authorize(&self, credentials: Option<&HostCredentials>) -> Result<String, Status> {
        let credentials = credentials.ok_or_else(|| Status::permission_denied("no credentials"))?;
        self.callers
            .iter()
            .find(|caller| {
                caller.activation_id == credentials.activation_id
                    && caller.token == credentials.auth_token
            })
            .map(|caller| caller.activation_id.clone())
            .ok_or_else(|| Status::permission_denied("unknown activation or wrong token"))
    }

    async fn control(&self) -> Result<Arc<dyn ScopeControl>, Status> {
        let mut control = self.control.clone();
        let attached = tokio::time::timeout(ATTACH_WAIT, control.wait_for(Option::is_some)).await;
        match attached {
            Ok(Ok(attached)) => attached
                .clone()
                .ok_or_else(|| Status::unavailable("no pipeline is attached")),
            _ => Err(Status::unavailable("no pipeline is attached")),
        }
    }

    /// Ends every scope `activation_id` left open, flagging each end event
    /// [`wattline_model::events::ENDED_AT_PROGRAM_EXIT`]; how many it ended.
    pub fn end_open_scopes(&self, activation_id: &str) -> usize {
        let mut left: Vec<Uuid> = Vec::new();
        self.open().retain(|_, (owner, uuid)| {
            let theirs = owner == activation_id;
            if theirs {
                left.push(*uuid);
            }
            !theirs
        });
        let control = self.control.borrow().clone();
        let Some(control) = control else {
            return 0;
        };
        left.into_iter()
            .filter(|uuid| {
                control.end_scope(*uuid, &[wattline_model::events::ENDED_AT_PROGRAM_EXIT])
            })
            .count()
    }
}

/// The name's problem, if any: blank, too long or holding control characters.
fn check_name(name: &str) -> Result<(), Status> {
    if name.trim().is_empty() {
        return Err(Status::invalid_argument("the scope name is blank"));
    }
    if name.len() > MAX_SCOPE_NAME_BYTES {
        return Err(Status::invalid_argument(format!(
            "the scope name is {} bytes; at most {MAX_SCOPE_NAME_BYTES}",
            name.len()
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(Status::invalid_argument(
            "the scope name holds a control character",
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl AgentScopes for AgentScopesService {
    async fn start_agent_scope(
        &self,
        request: Request<StartAgentScopeRequest>,
    ) -> Result<Response<StartAgentScopeResponse>, Status> {
        let request = request.into_inner();
        let caller = self.authorize(request.credentials.as_ref())?;
        check_name(&request.name)?;
        if let Some(weight) = request.weight
            && !(weight.is_finite() && weight > 0.0)
        {
            return Err(Status::invalid_argument(format!(
                "the scope weight is {weight}; a positive, finite number or unset"
            )));
        }
        if let Some(traceparent) = &request.traceparent {
            wattline_model::trace_context::parse_traceparent(traceparent)
                .map_err(|error| Status::invalid_argument(error.to_string()))?;
        }
        let parent = self.open_parent(&caller, request.parent_scope_id.as_deref())?;
        let held = self
            .open()
            .values()
            .filter(|(owner, _)| *owner == caller)
            .count();
        if held >= MAX_OPEN_SCOPES_PER_CALLER {
            return Err(Status::resource_exhausted(format!(
                "{held} scopes are open; end some first (at most {MAX_OPEN_SCOPES_PER_CALLER})"
            )));
        }
        let control = self.control().await?;
        let uuid = control.start_remote_scope(RemoteScopeStart {
            name: &request.name,
            process_id: request.process_id,
            weight: request.weight,
            traceparent: request.traceparent.as_deref(),
            parent,
        });
        let scope_id = uuid.to_string();
        self.open().insert(scope_id.clone(), (caller, uuid));
        Ok(Response::new(StartAgentScopeResponse { scope_id }))
    }

    async fn end_agent_scope(
        &self,
        request: Request<EndAgentScopeRequest>,
    ) -> Result<Response<EndAgentScopeResponse>, Status> {
        let request = request.into_inner();
        let caller = self.authorize(request.credentials.as_ref())?;
        let remote_call = request.remote_call.map(remote_call_of).transpose()?;
        let uuid = {
            let mut open = self.open();
            match open.get(&request.scope_id) {
                Some((owner, uuid)) if *owner == caller => {
                    let uuid = *uuid;
                    open.remove(&request.scope_id);
                    uuid
                }
                _ => {
                    return Err(Status::not_found(format!(
                        "no open scope {:?} of this caller",
                        request.scope_id
                    )));
                }
            }
        };
        let control = self.control().await?;
        let ended = match remote_call {
            Some(call) => control.end_remote_call_scope(uuid, call),
            None => control.end_scope(uuid, &[]),
        };
        if ended {
            Ok(Response::new(EndAgentScopeResponse {}))
        } else {
            Err(Status::not_found(
                "the pipeline had already ended this scope",
            ))
        }
    }
}

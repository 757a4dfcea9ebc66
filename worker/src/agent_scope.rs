//! [`AgentScope`]: an Agent scope the program started on the host by name, over
//! wattline's `AgentScopes` service; energy and marks attribute to it until it ends.

use std::fmt;
use std::time::Duration;

use tonic::transport::Channel;

use crate::error::AgentScopeError;
use crate::wire::agent_scopes::agent_scopes_client::AgentScopesClient;
use crate::wire::agent_scopes::{
    EndAgentScopeRequest, HostCredentials, RemoteModelCall, StartAgentScopeRequest,
};

/// The longest scope name, bytes.
pub const MAX_SCOPE_NAME_BYTES: usize = 256;
/// How long the host may take to answer a start or an end.
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// How an Agent scope is started on the host, beyond its name.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScopeRequest<'a> {
    /// Its weight among the innermost scopes live beside it (tokens, batch size; 1
    /// when `None`): a positive, finite number, checked before anything is sent.
    pub weight: Option<f64>,
    /// The caller's span as a W3C `traceparent`: the scope's span (with its energy,
    /// when the host exports spans) is its child. The host refuses a malformed one.
    pub traceparent: Option<&'a str>,
    /// The scope it is nested in: the [`AgentScope::scope_id`] of a scope this
    /// connection's caller started and has not ended (the host refuses another,
    /// naming it).
    pub parent_scope_id: Option<&'a str>,
}

/// A live Agent scope. End it with [`end`](Self::end); dropping it without ending
/// sends a best-effort end in the background when a Tokio runtime is running (the
/// host also ends scopes left open when the program exits).
pub struct AgentScope {
    client: AgentScopesClient<Channel>,
    credentials: HostCredentials,
    name: String,
    scope_id: String,
    ended: bool,
}

impl fmt::Debug for AgentScope {
    /// The name and id; never the token.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("AgentScope")
            .field("name", &self.name)
            .field("scope_id", &self.scope_id)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// The service's rule for names: non-blank, at most [`MAX_SCOPE_NAME_BYTES`].
pub(crate) fn check_name(name: &str) -> Result<(), AgentScopeError> {
    let reason = if name.trim().is_empty() {
        "must not be blank"
    } else if name.len() > MAX_SCOPE_NAME_BYTES {
        "must be at most 256 bytes"
    } else {
        return Ok(());
    };
    Err(AgentScopeError::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

/// A status as the error of `operation`.
fn host_error(operation: &'static str, status: &tonic::Status) -> AgentScopeError {
    AgentScopeError::Host {
        operation,
        code: status.code(),
        message: status.message().to_owned(),
    }
}

/// The host's answer to one call, bounded by [`CALL_LIMIT`].
async fn within_limit<T>(
    operation: &'static str,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<tonic::Response<T>, AgentScopeError> {
    tokio::time::timeout(CALL_LIMIT, call)
        .await
        .map_err(|_| AgentScopeError::Timeout {
            operation,
            seconds: CALL_LIMIT.as_secs(),
        })?
        .map_err(|status| host_error(operation, &status))
}

impl AgentScope {
    /// Checks `name` and `options`, then calls `StartAgentScope`.
    pub(crate) async fn start(
        mut client: AgentScopesClient<Channel>,
        credentials: HostCredentials,
        name: &str,
        options: ScopeRequest<'_>,
    ) -> Result<AgentScope, AgentScopeError> {
        const OPERATION: &str = "StartAgentScope";
        check_name(name)?;
        if let Some(weight) = options.weight
            && !(weight.is_finite() && weight > 0.0)
        {
            return Err(AgentScopeError::InvalidWeight(weight));
        }
        let mut request = tonic::Request::new(StartAgentScopeRequest {
            credentials: Some(credentials.clone()),
            name: name.to_owned(),
            // The host attributes the scope from this process's share of a device.
            process_id: Some(std::process::id()),
            weight: options.weight,
            traceparent: options.traceparent.map(str::to_owned),
            parent_scope_id: options.parent_scope_id.map(str::to_owned),
        });
        request.set_timeout(CALL_LIMIT);
        let answer = within_limit(OPERATION, client.start_agent_scope(request)).await?;
        let scope_id = answer.into_inner().scope_id;
        if scope_id.is_empty() {
            return Err(AgentScopeError::NoScopeId);
        }
        Ok(AgentScope {
            client,
            credentials,
            name: name.to_owned(),
            scope_id,
            ended: false,
        })
    }

    /// Starts the Agent scope `name` nested in this one: the host books this scope's
    /// attributed energy to include the child's, and the child's span is a child of
    /// this one's.
    pub async fn child(&self, name: &str) -> Result<AgentScope, AgentScopeError> {
        self.child_with(name, ScopeRequest::default()).await
    }

    /// Starts a nested scope like [`Self::child`], with `options` (their
    /// `parent_scope_id` is this scope's).
    pub async fn child_with(
        &self,
        name: &str,
        options: ScopeRequest<'_>,
    ) -> Result<AgentScope, AgentScopeError> {
        let options = ScopeRequest {
            parent_scope_id: Some(&self.scope_id),
            ..options
        };
        AgentScope::start(self.client.clone(), self.credentials.clone(), name, options).await
    }

    /// The name it was started with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's id for it.
    pub fn scope_id(&self) -> &str {
        &self.scope_id
    }

    /// Ends the scope (`EndAgentScope`). An error leaves it to the host to end the
    /// scope when the program exits.
    pub async fn end(mut self) -> Result<(), AgentScopeError> {
        const OPERATION: &str = "EndAgentScope";
        self.ended = true;
        let mut client = self.client.clone();
        within_limit(OPERATION, client.end_agent_scope(self.end_request())).await?;
        Ok(())
    }

    /// Ends the scope as [`Self::end`] does, as a step that stood for `call`, a model
    /// call served by another machine: the host keeps the call's estimated energy
    /// (its own, from its factor table, unless `call` brings one) beside the measured
    /// figures.
    pub async fn end_remote_call(mut self, call: RemoteModelCall) -> Result<(), AgentScopeError> {
        const OPERATION: &str = "EndAgentScope";
        self.ended = true;
        let mut client = self.client.clone();
        let mut request = self.end_request();
        request.get_mut().remote_call = Some(call);
        within_limit(OPERATION, client.end_agent_scope(request)).await?;
        Ok(())
    }

    fn end_request(&self) -> tonic::Request<EndAgentScopeRequest> {
        let mut request = tonic::Request::new(EndAgentScopeRequest {
            credentials: Some(self.credentials.clone()),
            scope_id: self.scope_id.clone(),
            remote_call: None,
        });
        request.set_timeout(CALL_LIMIT);
        request
    }
}

impl Drop for AgentScope {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut client = self.client.clone();
        let request = self.end_request();
        let scope_id = self.scope_id.clone();
        runtime.spawn(async move {
            if let Ok(Err(status)) =
                tokio::time::timeout(CALL_LIMIT, client.end_agent_scope(request)).await
            {
                tracing::debug!(scope_id, %status, "ending a dropped agent scope failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_the_proto_says() {
        assert!(check_name("planner").is_ok());
        assert!(check_name(&"é".repeat(128)).is_ok(), "256 bytes");
        for (name, reason) in [
            ("", "must not be blank"),
            (" \t\n", "must not be blank"),
            (&"x".repeat(257), "must be at most 256 bytes"),
            (&"é".repeat(129), "must be at most 256 bytes"),
        ] {
            match check_name(name) {
                Err(AgentScopeError::InvalidName {
                    name: given,
                    reason: why,
                }) => {
                    assert_eq!((given.as_str(), why), (name, reason));
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }
}

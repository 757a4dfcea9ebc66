//! [`HostConnection`]: one program's link to the host endpoint, by endpoint and
//! credentials, from which it gets its diagnostics facade and its Agent scopes.

use std::fmt;
use std::sync::{Arc, OnceLock};

use nemo_relay_worker_proto::v1::DiagnosticCredentials;
use tokio::sync::OnceCell;
use tonic::transport::Channel;

use crate::agent_scope::{AgentScope, ScopeRequest};
use crate::diagnostics::WorkerDiagnostics;
use crate::endpoint::Endpoint;
use crate::env::HostEnvironment;
use crate::error::{AgentScopeError, EnvironmentError};
use crate::negotiate::negotiate;
use crate::transport::{GrpcSubmitter, channel};
use crate::wire::agent_scopes::HostCredentials;
use crate::wire::agent_scopes::agent_scopes_client::AgentScopesClient;

/// A link to the host endpoint; clones share the channel and the diagnostics
/// facade. Nothing is sent until [`diagnostics`](Self::diagnostics) or
/// [`agent_scope`](Self::agent_scope) is first awaited.
#[derive(Clone)]
pub struct HostConnection {
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: Endpoint,
    credentials: DiagnosticCredentials,
    channel: OnceLock<Channel>,
    diagnostics: OnceCell<WorkerDiagnostics>,
}

impl fmt::Debug for HostConnection {
    /// The endpoint and activation; never the token.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("HostConnection")
            .field("endpoint", &self.inner.endpoint)
            .field("activation_id", &self.inner.credentials.activation_id)
            .finish_non_exhaustive()
    }
}

impl HostConnection {
    /// The endpoint `wattline run` passes to the command it measures:
    /// `WATTLINE_HOST_SOCKET` (a path, optionally `unix://`, or loopback TCP),
    /// `WATTLINE_HOST_ACTIVATION_ID` and `WATTLINE_HOST_TOKEN`.
    pub fn from_env() -> Result<HostConnection, EnvironmentError> {
        let environment = HostEnvironment::from_lookup(|name| std::env::var_os(name))?;
        Ok(HostConnection::new(
            environment.endpoint,
            environment.activation_id,
            environment.token,
        ))
    }

    /// A link to `endpoint` (a socket path converts) with these credentials.
    pub fn new(
        endpoint: impl Into<Endpoint>,
        activation_id: impl Into<String>,
        token: impl Into<String>,
    ) -> HostConnection {
        HostConnection {
            inner: Arc::new(Inner {
                endpoint: endpoint.into(),
                credentials: DiagnosticCredentials {
                    activation_id: activation_id.into(),
                    auth_token: token.into(),
                },
                channel: OnceLock::new(),
                diagnostics: OnceCell::new(),
            }),
        }
    }

    /// The host's endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// The activation id the requests carry.
    pub fn activation_id(&self) -> &str {
        &self.inner.credentials.activation_id
    }

    /// The diagnostics facade, negotiated with the host on the first call (within
    /// 2 s for capabilities and 2 s for the session) and the same afterwards. A
    /// host that cannot be reached, refuses the credentials or has collection off
    /// gives an inert facade whose [`availability`](WorkerDiagnostics::availability)
    /// says why.
    pub async fn diagnostics(&self) -> &WorkerDiagnostics {
        self.inner
            .diagnostics
            .get_or_init(|| async {
                let channel = self.channel();
                match negotiate(channel.clone(), self.inner.credentials.clone()).await {
                    Ok(session) => {
                        WorkerDiagnostics::deliver(session, Arc::new(GrpcSubmitter::new(channel)))
                    }
                    Err(availability) => {
                        tracing::debug!(
                            availability = availability.as_str(),
                            endpoint = %self.inner.endpoint,
                            "worker diagnostics are inert"
                        );
                        WorkerDiagnostics::inert(availability)
                    }
                }
            })
            .await
    }

    /// The diagnostics facade if it was ever negotiated.
    pub(crate) fn negotiated_diagnostics(&self) -> Option<&WorkerDiagnostics> {
        self.inner.diagnostics.get()
    }

    /// Starts the Agent scope `name` on the host (`StartAgentScope`); marks are
    /// copied under it until [`AgentScope::end`]. The name must be non-blank and at
    /// most 256 bytes; it is checked before anything is sent.
    pub async fn agent_scope(&self, name: &str) -> Result<AgentScope, AgentScopeError> {
        self.weighted_agent_scope(name, None).await
    }

    /// Starts the Agent scope `name` like [`Self::agent_scope`], with its `weight`
    /// among the innermost scopes live beside it (tokens, batch size; 1 when `None`):
    /// the host divides the energy they share in proportion. A positive, finite
    /// number; checked before anything is sent.
    pub async fn weighted_agent_scope(
        &self,
        name: &str,
        weight: Option<f64>,
    ) -> Result<AgentScope, AgentScopeError> {
        self.traced_agent_scope(name, weight, None).await
    }

    /// Starts the Agent scope `name` like [`Self::weighted_agent_scope`], its span (with
    /// its energy, when the host exports spans) a child of the caller's span
    /// `traceparent` (W3C trace context; the host refuses a malformed one).
    pub async fn traced_agent_scope(
        &self,
        name: &str,
        weight: Option<f64>,
        traceparent: Option<&str>,
    ) -> Result<AgentScope, AgentScopeError> {
        let options = ScopeRequest {
            weight,
            traceparent,
            parent_scope_id: None,
        };
        self.agent_scope_with(name, options).await
    }

    /// Starts the Agent scope `name` with `options`: its weight, the caller's span,
    /// and the open scope it is nested in.
    pub async fn agent_scope_with(
        &self,
        name: &str,
        options: ScopeRequest<'_>,
    ) -> Result<AgentScope, AgentScopeError> {
        let credentials = HostCredentials {
            activation_id: self.inner.credentials.activation_id.clone(),
            auth_token: self.inner.credentials.auth_token.clone(),
        };
        let client = AgentScopesClient::new(self.channel());
        AgentScope::start(client, credentials, name, options).await
    }

    /// The channel, made on first use (inside the runtime).
    fn channel(&self) -> Channel {
        self.inner
            .channel
            .get_or_init(|| channel(&self.inner.endpoint))
            .clone()
    }
}

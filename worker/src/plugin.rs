//! What a worker plugin implements ([`WorkerPlugin`]) and what it is given at
//! `Register` ([`PluginContext`], and through it the activation's
//! [`PluginRuntime`]).

use std::time::Duration;

use crate::agent_scope::AgentScope;
use crate::connection::HostConnection;
use crate::diagnostics::WorkerDiagnostics;
use crate::error::{AgentScopeError, DiagnosticDeliveryError, PluginError};

/// A Rust out-of-process worker plugin, served by [`serve_plugin`](crate::serve_plugin).
///
/// `register` is synchronous and runs inside the worker's Tokio runtime: take the
/// runtime from [`PluginContext::runtime`] and set diagnostics up from a task you
/// spawn (for example into a `tokio::sync::OnceCell`, caching a failure too), never
/// with a nested `block_on`.
pub trait WorkerPlugin: Send + Sync + 'static {
    /// The stable plugin id reported to the host.
    fn plugin_id(&self) -> &str;

    /// Registers the plugin for this activation with its `config` (the JSON of the
    /// `config` table in `plugins.toml`; `null` when there is none). An error is
    /// returned to the host, which records the worker as failed.
    fn register(
        &self,
        context: &mut PluginContext,
        config: serde_json::Value,
    ) -> Result<(), PluginError>;

    /// Checks `config` without registering (the host's `Validate`). Accepts all by
    /// default.
    fn validate(&self, config: &serde_json::Value) -> Result<(), PluginError> {
        let _ = config;
        Ok(())
    }

    /// Whether several configured components of this plugin may run at once.
    fn allows_multiple_components(&self) -> bool {
        false
    }
}

/// What `Register` gives the plugin.
#[derive(Debug)]
pub struct PluginContext {
    plugin_id: String,
    activation_id: String,
    runtime: Option<PluginRuntime>,
}

impl PluginContext {
    pub(crate) fn new(
        plugin_id: String,
        activation_id: String,
        runtime: Option<PluginRuntime>,
    ) -> PluginContext {
        PluginContext {
            plugin_id,
            activation_id,
            runtime,
        }
    }

    /// The activation's runtime handle; `None` when the host gave no endpoint
    /// (`NEMO_RELAY_HOST_SOCKET` unset).
    pub fn runtime(&self) -> Option<PluginRuntime> {
        self.runtime.clone()
    }

    /// The plugin id the host registered.
    pub fn plugin_id(&self) -> &str {
        &self.plugin_id
    }

    /// The activation id.
    pub fn activation_id(&self) -> &str {
        &self.activation_id
    }
}

/// The activation's handle on the host; clones share its diagnostics facade.
#[derive(Debug, Clone)]
pub struct PluginRuntime {
    connection: HostConnection,
}

impl PluginRuntime {
    pub(crate) fn new(connection: HostConnection) -> PluginRuntime {
        PluginRuntime { connection }
    }

    /// The runtime of a program under `wattline run` ([`HostConnection::from_env`]):
    /// its diagnostics and Agent scopes, as a worker plugin's.
    pub fn from_connection(connection: HostConnection) -> PluginRuntime {
        PluginRuntime::new(connection)
    }

    /// The activation's diagnostics facade, negotiated on the first call (see
    /// [`HostConnection::diagnostics`]).
    pub async fn diagnostics(&self) -> &WorkerDiagnostics {
        self.connection.diagnostics().await
    }

    /// Starts an Agent scope on the host (see [`HostConnection::agent_scope`]).
    pub async fn agent_scope(&self, name: &str) -> Result<AgentScope, AgentScopeError> {
        self.connection.agent_scope(name).await
    }

    /// Closes the diagnostics facade if it was ever negotiated.
    pub(crate) async fn close(&self, timeout: Duration) -> Result<(), DiagnosticDeliveryError> {
        match self.connection.negotiated_diagnostics() {
            Some(diagnostics) => diagnostics.close(timeout).await,
            None => Ok(()),
        }
    }
}

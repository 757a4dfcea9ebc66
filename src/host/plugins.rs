//! The worker plugins of a pipeline's configuration: one host endpoint serving them
//! all, each worker started and registered, each stopped at shutdown. A worker that
//! fails is recorded as `pipeline.worker_failed` and logged; the pipeline goes on.

use wattline_config::{WorkerConfig, WorkerTransport};
use wattline_diagnostics::{Diagnostics, PipelineDiagnostics};

use std::sync::Arc;

use super::worker::{HostAddress, RunningWorker, WorkerSpec, new_credentials};
use super::{AgentScopesService, HostEndpoint, ScopeControl, ScopeControlSlot, WorkerCredentials};

/// The endpoint and the workers that started.
#[derive(Debug)]
pub struct WorkerPlugins {
    endpoint: HostEndpoint,
    running: Vec<RunningWorker>,
    diagnostics: Option<PipelineDiagnostics>,
    /// The plugins' Agent scopes: those a plugin left open end when it stops.
    agent_scopes: AgentScopesService,
    /// Keeps the pipeline attached to `agent_scopes` while the plugins run.
    _scopes_attached: ScopeControlSlot,
}

fn spec_of(config: &WorkerConfig) -> WorkerSpec {
    WorkerSpec {
        plugin_id: config.plugin_id.clone(),
        command: config.command.clone(),
        env: config.env.clone(),
        config: serde_json::to_value(&config.config).unwrap_or(serde_json::Value::Null),
        log_file: config.log_file.clone(),
        transport: config.transport,
    }
}

fn report(diagnostics: Option<&PipelineDiagnostics>, message: &str) {
    tracing::warn!("{message}");
    if let Some(diagnostics) = diagnostics {
        let _ = diagnostics.record_worker_failed(message);
    }
}

impl WorkerPlugins {
    /// Starts the endpoint and every worker of `workers`, whose Agent scopes start and
    /// end in `scopes`; `None` when there are none or the endpoint cannot start
    /// (reported). Call inside a Tokio runtime.
    pub async fn start(
        workers: &[WorkerConfig],
        context: Option<&Diagnostics>,
        diagnostics: Option<&PipelineDiagnostics>,
        scopes: Arc<dyn ScopeControl>,
    ) -> Option<WorkerPlugins> {
        if workers.is_empty() {
            return None;
        }
        let specs: Vec<(WorkerSpec, WorkerCredentials)> = workers
            .iter()
            .map(|config| {
                let spec = spec_of(config);
                let credentials = new_credentials(&spec.plugin_id);
                (spec, credentials)
            })
            .collect();
        let context = context.cloned().unwrap_or_else(Diagnostics::disabled);
        let credentials: Vec<WorkerCredentials> = specs
            .iter()
            .map(|(_, credentials)| credentials.clone())
            .collect();
        // A plugin marks its steps as Agent scopes in this pipeline, as a program
        // under `wattline run` does.
        let (agent_scopes, slot) = AgentScopesService::new(credentials.clone());
        slot.attach(scopes);
        // Loopback TCP as well only when some worker is told to use it.
        let loopback_tcp = specs
            .iter()
            .any(|(spec, _)| spec.transport == WorkerTransport::Tcp);
        let endpoint = match HostEndpoint::start_for_plugins(
            context,
            credentials,
            agent_scopes.clone(),
            loopback_tcp,
        ) {
            Ok(endpoint) => endpoint,
            Err(error) => {
                report(diagnostics, &format!("no worker started: {error}"));
                return None;
            }
        };
        let mut running = Vec::new();
        for (spec, credentials) in specs {
            let host = match (spec.transport, endpoint.tcp_address()) {
                (WorkerTransport::Tcp, Some(address)) => HostAddress::Tcp(address),
                _ => HostAddress::Unix(endpoint.socket_path()),
            };
            match RunningWorker::start(&spec, credentials, endpoint.directory(), host).await {
                Ok(worker) => running.push(worker),
                Err(error) => report(diagnostics, &error.to_string()),
            }
        }
        Some(WorkerPlugins {
            endpoint,
            running,
            diagnostics: diagnostics.cloned(),
            agent_scopes,
            _scopes_attached: slot,
        })
    }

    /// The plugin ids of the workers that are running.
    pub fn running(&self) -> Vec<&str> {
        self.running.iter().map(RunningWorker::plugin_id).collect()
    }

    /// Stops every worker (each closes its diagnostics first), then the endpoint; a
    /// worker that died during the run is reported.
    pub async fn stop(self) {
        for worker in self.running {
            let activation_id = worker.activation_id().to_owned();
            if let Some(died) = worker.stop().await {
                report(self.diagnostics.as_ref(), &died);
            }
            // What a plugin left open ends with it, flagged as its program's exit.
            self.agent_scopes.end_open_scopes(&activation_id);
        }
        self.endpoint.shutdown().await;
    }
}

//! wattline's Rust worker SDK: a program outside the pipeline records diagnostics into
//! the pipeline's diagnostics context and marks its own Agent scopes, over the host
//! endpoint's Unix socket.
//!
//! Two ways in:
//!
//! - **A worker plugin** (`kind = "worker"` in `plugins.toml`): implement
//!   [`WorkerPlugin`] and call [`serve_plugin`]. The pipeline starts the program with
//!   the reference system's environment contract (`NEMO_RELAY_WORKER_SOCKET`,
//!   `NEMO_RELAY_HOST_SOCKET`, `NEMO_RELAY_WORKER_ID`, `NEMO_RELAY_WORKER_TOKEN`),
//!   calls `Register` with the plugin's configuration and `Shutdown` at the end.
//! - **The program under `wattline run`**: [`HostConnection::from_env`] reads
//!   `WATTLINE_HOST_SOCKET`, `WATTLINE_HOST_ACTIVATION_ID` and `WATTLINE_HOST_TOKEN`.
//!
//! Either way, [`diagnostics`](HostConnection::diagnostics) negotiates with the host's
//! `RelayDiagnostics` (grpc-v1) once and gives a
//! [`WorkerDiagnostics`](diagnostics::WorkerDiagnostics) facade: a
//! bounded queue (the host's `max_pending_submissions` plus one in flight) drained by
//! one delivery task, each submission frozen to bytes when admitted, sequenced when
//! sent, and retried byte for byte within the negotiated attempts and deadline. When
//! the host cannot be reached, refuses the credentials or has collection off, the
//! facade is inert: recording is a no-op that skips its factory.
//!
//! ```no_run
//! use std::time::Duration;
//! use wattline_worker::HostConnection;
//! use wattline_worker::diagnostics::{
//!     DiagnosticExtensionDefinition, DiagnosticObservation,
//!     DiagnosticObservationOutcome as Outcome, DiagnosticObservationSeverity as Severity,
//!     extension_code,
//! };
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let host = HostConnection::from_env()?;
//! let planner = host.agent_scope("planner").await?;
//! let diagnostics = host.diagnostics().await.clone();
//! let lookup = diagnostics
//!     .component(
//!         "example.lookup",
//!         vec![extension_code(DiagnosticExtensionDefinition {
//!             name: "lookup_completed".into(),
//!             description: "A lookup completed".into(),
//!             outcome: Outcome::Success as i32,
//!             allowed_failure_classes: vec![],
//!         })],
//!     )
//!     .await?;
//! lookup.try_record_lazy(|| DiagnosticObservation {
//!     code: 1,
//!     count: 1,
//!     outcome: Outcome::Success as i32,
//!     severity: Severity::Info as i32,
//!     ..Default::default()
//! })?;
//! planner.end().await?;
//! diagnostics.close(Duration::from_secs(2)).await?;
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod agent_scope;
mod codes;
mod component;
mod connection;
mod delivery;
pub mod diagnostics;
mod endpoint;
mod env;
mod error;
mod negotiate;
mod plugin;
mod queue;
mod serve;
mod transport;
pub mod wire;

pub use agent_scope::{AgentScope, MAX_SCOPE_NAME_BYTES, ScopeRequest};
pub use connection::HostConnection;
pub use endpoint::Endpoint;
pub use env::{
    NEMO_RELAY_HOST_SOCKET, NEMO_RELAY_WORKER_ENDPOINT_FILE, NEMO_RELAY_WORKER_ID,
    NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES, NEMO_RELAY_WORKER_SOCKET, NEMO_RELAY_WORKER_TOKEN,
    WATTLINE_HOST_ACTIVATION_ID, WATTLINE_HOST_SOCKET, WATTLINE_HOST_TOKEN, WorkerEnvironment,
};
pub use error::{
    AgentScopeError, DiagnosticDeliveryError, EnvironmentError, PluginError, ServeError,
};
pub use plugin::{PluginContext, PluginRuntime, WorkerPlugin};
pub use serve::{serve_plugin, serve_plugin_with};
pub use wire::agent_scopes::{RemoteEnergyEstimate, RemoteModelCall};

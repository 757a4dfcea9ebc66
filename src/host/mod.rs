//! The host endpoint: a gRPC server on a Unix socket in a private directory (0700)
//! that it creates and removes, serving `nemo.relay.worker.v1.RelayDiagnostics` so
//! that worker plugins and the program under `wattline run` record into the
//! pipeline's diagnostics context with the reference system's worker SDKs, unchanged.

mod admission;
mod agent_scopes_service;
mod diagnostics_service;
pub mod plugins;
pub mod program;
pub mod worker;
pub mod worker_output;

use std::path::{Path, PathBuf};

use nemo_relay_worker_proto::v1::relay_diagnostics_server::RelayDiagnosticsServer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattline_actors::diagnostics::Diagnostics;
use wattline_worker::wire::agent_scopes::agent_scopes_server::AgentScopesServer;

pub use admission::Admission;
pub use agent_scopes_service::{
    AgentScopesService, MAX_OPEN_SCOPES_PER_CALLER, MAX_SCOPE_NAME_BYTES, RemoteScopeStart,
    ScopeControl, ScopeControlSlot,
};
pub use diagnostics_service::{
    DiagnosticsService, NOT_CONSUMED_METADATA, WorkerCredentials, limits,
};

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostEndpointError {
    /// The private directory could not be made.
    #[error("cannot create the host endpoint's directory {}: {source}", path.display())]
    Directory {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The socket could not be bound.
    #[error("cannot bind the host endpoint socket {}: {source}", path.display())]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// A running endpoint; stops serving and removes its directory when shut down or
/// dropped.
#[derive(Debug)]
pub struct HostEndpoint {
    directory: PathBuf,
    socket: PathBuf,
    cancel: CancellationToken,
    server: Option<JoinHandle<()>>,
}

impl HostEndpoint {
    /// Serves `context` to `workers` in a new private directory under `parent`
    /// (`std::env::temp_dir()` when `None`). Call inside a Tokio runtime.
    pub fn start(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        parent: Option<&Path>,
    ) -> Result<HostEndpoint, HostEndpointError> {
        Self::start_with_admission(context, workers, parent, Admission::default())
    }

    /// [`Self::start`] with other admission limits than the reference host's.
    pub fn start_with_admission(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        parent: Option<&Path>,
        admission: Admission,
    ) -> Result<HostEndpoint, HostEndpointError> {
        Self::serve(context, workers, None, parent, admission)
    }

    /// Serves `RelayDiagnostics` and, with `agent_scopes`, wattline's `AgentScopes`
    /// beside it, each behind its own `admission`.
    pub fn serve(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        agent_scopes: Option<AgentScopesService>,
        parent: Option<&Path>,
        admission: Admission,
    ) -> Result<HostEndpoint, HostEndpointError> {
        let directory = parent
            .map_or_else(std::env::temp_dir, Path::to_path_buf)
            .join(format!("wattline-host-{}", uuid::Uuid::now_v7().simple()));
        create_private_directory(&directory).map_err(|source| HostEndpointError::Directory {
            path: directory.clone(),
            source,
        })?;
        let socket = directory.join("host.sock");
        let listener = match tokio::net::UnixListener::bind(&socket) {
            Ok(listener) => listener,
            Err(source) => {
                let _ = std::fs::remove_dir_all(&directory);
                return Err(HostEndpointError::Bind {
                    path: socket,
                    source,
                });
            }
        };
        let service = DiagnosticsService::new(context, workers);
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let server = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let scopes = agent_scopes
                .map(|scopes| admission::Admitted::new(AgentScopesServer::new(scopes), admission));
            let served = tonic::transport::Server::builder()
                .add_service(admission::Admitted::new(
                    RelayDiagnosticsServer::new(service),
                    admission,
                ))
                .add_optional_service(scopes)
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await;
            if let Err(error) = served {
                tracing::warn!(%error, "host endpoint stopped");
            }
        });
        Ok(HostEndpoint {
            directory,
            socket,
            cancel,
            server: Some(server),
        })
    }

    /// The socket, for `NEMO_RELAY_HOST_SOCKET` (as `unix://` + this path).
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The private directory holding the socket.
    pub fn directory(&self) -> &Path {
        &self.directory
    }

    /// Stops serving, waits for the server to finish, removes the directory.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

impl Drop for HostEndpoint {
    fn drop(&mut self) {
        self.cancel.cancel();
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// A gRPC channel over the Unix socket at `path` (the authority is a placeholder, as
/// the SDKs' `localhost`).
pub async fn connect_unix(
    path: PathBuf,
) -> Result<tonic::transport::Channel, tonic::transport::Error> {
    tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
}

/// A directory only its owner can enter (0700), made with that mode from the start.
fn create_private_directory(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

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

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use nemo_relay_worker_proto::v1::relay_diagnostics_server::RelayDiagnosticsServer;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wattline_diagnostics::Diagnostics;
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
    /// No loopback TCP port could be bound.
    #[error("cannot listen on loopback TCP for the host endpoint: {0}")]
    BindTcp(std::io::Error),
}

/// A running endpoint; stops serving and removes its directory when shut down or
/// dropped.
#[derive(Debug)]
pub struct HostEndpoint {
    directory: PathBuf,
    socket: PathBuf,
    /// Where it also listens on loopback TCP, when asked.
    tcp: Option<SocketAddr>,
    cancel: CancellationToken,
    servers: Vec<JoinHandle<()>>,
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
        Self::serve_on(context, workers, agent_scopes, parent, admission, false)
    }

    /// [`Self::start`], also listening on a free loopback TCP port (the worker
    /// protocol's `http://127.0.0.1:PORT` endpoint, for workers told to use TCP);
    /// both listeners share one service and one admission.
    pub fn start_with_loopback_tcp(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        parent: Option<&Path>,
    ) -> Result<HostEndpoint, HostEndpointError> {
        Self::serve_on(context, workers, None, parent, Admission::default(), true)
    }

    /// The endpoint worker plugins are given: `RelayDiagnostics` and `agent_scopes`
    /// (so a plugin can mark steps), on a Unix socket and, with `loopback_tcp`, a
    /// loopback TCP port as well.
    pub fn start_for_plugins(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        agent_scopes: AgentScopesService,
        loopback_tcp: bool,
    ) -> Result<HostEndpoint, HostEndpointError> {
        Self::serve_on(
            context,
            workers,
            Some(agent_scopes),
            None,
            Admission::default(),
            loopback_tcp,
        )
    }

    fn serve_on(
        context: Diagnostics,
        workers: Vec<WorkerCredentials>,
        agent_scopes: Option<AgentScopesService>,
        parent: Option<&Path>,
        admission: Admission,
        loopback_tcp: bool,
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
        let tcp_listener = if loopback_tcp {
            match bind_loopback_tcp() {
                Ok(listener) => Some(listener),
                Err(source) => {
                    let _ = std::fs::remove_dir_all(&directory);
                    return Err(HostEndpointError::BindTcp(source));
                }
            }
        } else {
            None
        };
        let tcp = tcp_listener
            .as_ref()
            .and_then(|listener| listener.local_addr().ok());
        let diagnostics = admission::Admitted::new(
            RelayDiagnosticsServer::new(DiagnosticsService::new(context, workers)),
            admission,
        );
        let scopes = agent_scopes
            .map(|scopes| admission::Admitted::new(AgentScopesServer::new(scopes), admission));
        let router = tonic::transport::Server::builder()
            .add_service(diagnostics)
            .add_optional_service(scopes);
        let cancel = CancellationToken::new();
        let mut servers = Vec::new();
        if let Some(listener) = tcp_listener {
            let router = router.clone();
            let stop = cancel.clone();
            servers.push(tokio::spawn(async move {
                let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
                if let Err(error) = router
                    .serve_with_incoming_shutdown(incoming, stop.cancelled())
                    .await
                {
                    tracing::warn!(%error, "host endpoint (loopback TCP) stopped");
                }
            }));
        }
        let stop = cancel.clone();
        servers.push(tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            if let Err(error) = router
                .serve_with_incoming_shutdown(incoming, stop.cancelled())
                .await
            {
                tracing::warn!(%error, "host endpoint stopped");
            }
        }));
        Ok(HostEndpoint {
            directory,
            socket,
            tcp,
            cancel,
            servers,
        })
    }

    /// The loopback TCP address it also listens on, when started so.
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp
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
        for server in std::mem::take(&mut self.servers) {
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

/// A listener on a free loopback port (127.0.0.1:0).
fn bind_loopback_tcp() -> std::io::Result<tokio::net::TcpListener> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// A directory only its owner can enter (0700), made with that mode from the start.
fn create_private_directory(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}

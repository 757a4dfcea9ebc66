//! Serving a worker plugin: [`serve_plugin`] binds the `PluginWorker` server on the
//! socket the host named and answers the lifecycle (`Handshake`, `Health` and
//! `Validate` check credentials; `Register` runs the plugin with its JSON
//! configuration; `Shutdown` closes diagnostics within 2 s, answers and stops the
//! server, so the program can exit). Every request must carry the activation's id
//! and token.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nemo_relay_worker_proto::WORKER_PROTOCOL_GRPC_V1;
use nemo_relay_worker_proto::v1::plugin_worker_server::{PluginWorker, PluginWorkerServer};
use nemo_relay_worker_proto::v1::{
    CancelInvocationRequest, HandshakeRequest, HandshakeResponse, HealthRequest, HealthResponse,
    InvokeRequest, InvokeResponse, JsonEnvelope, RegisterRequest, RegisterResponse,
    ShutdownRequest, StreamChunk, ValidateRequest, ValidateResponse, WorkerAck, WorkerError,
};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::connection::HostConnection;
use crate::diagnostics::SHUTDOWN_DRAIN;
use crate::endpoint::Endpoint;
use crate::env::WorkerEnvironment;
use crate::error::{PluginError, ServeError};
use crate::plugin::{PluginContext, PluginRuntime, WorkerPlugin};

/// This SDK's name in `Handshake` and `Health`.
const SDK_NAME: &str = "wattline-worker";
/// How long the server may take to finish its connections after `Shutdown`.
const STOP_GRACE: Duration = Duration::from_secs(1);

/// Serves `plugin` with the environment the host set (see [`WorkerEnvironment`])
/// until the host calls `Shutdown`.
///
/// Errors: a missing or malformed variable, a socket that cannot be bound, or a
/// failed server.
pub async fn serve_plugin(plugin: impl WorkerPlugin) -> Result<(), ServeError> {
    serve_plugin_with(plugin, WorkerEnvironment::from_env()?).await
}

/// A bound worker endpoint.
enum Listener {
    Unix(tokio::net::UnixListener),
    Tcp(tokio::net::TcpListener),
}

/// Binds `endpoint`; with it the endpoint as resolved (the port given for port 0).
fn bind(endpoint: &Endpoint) -> Result<(Listener, Endpoint), ServeError> {
    let failed = |source| ServeError::Bind {
        endpoint: endpoint.clone(),
        source,
    };
    match endpoint {
        Endpoint::Unix(path) => tokio::net::UnixListener::bind(path)
            .map(|listener| (Listener::Unix(listener), endpoint.clone()))
            .map_err(failed),
        Endpoint::Tcp(address) => {
            let listener = std::net::TcpListener::bind(address)
                .and_then(|listener| {
                    listener.set_nonblocking(true)?;
                    tokio::net::TcpListener::from_std(listener)
                })
                .map_err(failed)?;
            let resolved = listener.local_addr().map_err(failed)?;
            Ok((Listener::Tcp(listener), Endpoint::Tcp(resolved)))
        }
    }
}

/// Writes `endpoint` to `path` whole: a reader sees the old file or the new one.
fn write_endpoint_file(path: &Path, endpoint: &Endpoint) -> Result<(), ServeError> {
    let failed = |source| ServeError::EndpointFile {
        path: path.to_path_buf(),
        source,
    };
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = std::path::PathBuf::from(temporary);
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    std::fs::write(&temporary, endpoint.to_string())
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|source| {
            let _ = std::fs::remove_file(&temporary);
            failed(source)
        })
}

/// [`serve_plugin`] with an explicit environment (tests, custom launchers). Removes
/// the worker socket when it returns.
pub async fn serve_plugin_with(
    plugin: impl WorkerPlugin,
    environment: WorkerEnvironment,
) -> Result<(), ServeError> {
    let (listener, resolved) = bind(&environment.worker_endpoint)?;
    if let Some(file) = &environment.endpoint_file {
        write_endpoint_file(file, &resolved)?;
    }
    let runtime = environment.host_endpoint.clone().map(|endpoint| {
        PluginRuntime::new(HostConnection::new(
            endpoint,
            environment.activation_id.clone(),
            environment.token.clone(),
        ))
    });
    let stop = CancellationToken::new();
    let service = WorkerService {
        plugin,
        activation_id: environment.activation_id.clone(),
        token: environment.token.clone(),
        runtime: runtime.clone(),
        registered: AtomicBool::new(false),
        stop: stop.clone(),
    };
    let server = PluginWorkerServer::new(service)
        .max_decoding_message_size(environment.max_message_bytes)
        .max_encoding_message_size(environment.max_message_bytes);
    let router = tonic::transport::Server::builder().add_service(server);
    let stopped = stop.clone().cancelled_owned();
    let mut serving: Pin<Box<dyn Future<Output = Result<(), tonic::transport::Error>> + Send>> =
        match listener {
            Listener::Unix(listener) => Box::pin(router.serve_with_incoming_shutdown(
                tokio_stream::wrappers::UnixListenerStream::new(listener),
                stopped,
            )),
            Listener::Tcp(listener) => Box::pin(router.serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                stopped,
            )),
        };
    let served = tokio::select! {
        served = &mut serving => served,
        () = stop.cancelled() => {
            // A host that keeps its connection open must not keep the worker alive.
            tokio::time::timeout(STOP_GRACE, &mut serving).await.unwrap_or(Ok(()))
        }
    };
    if let Some(runtime) = &runtime
        && let Err(error) = runtime.close(SHUTDOWN_DRAIN).await
    {
        tracing::warn!(%error, "closing worker diagnostics");
    }
    if let Some(path) = environment.worker_endpoint.unix_path() {
        let _ = std::fs::remove_file(path);
    }
    served.map_err(ServeError::from)
}

/// The `PluginWorker` service for one activation.
struct WorkerService<P> {
    plugin: P,
    activation_id: String,
    token: String,
    runtime: Option<PluginRuntime>,
    registered: AtomicBool,
    stop: CancellationToken,
}

fn worker_error(code: &str, message: impl Into<String>) -> WorkerError {
    WorkerError {
        code: code.to_owned(),
        message: message.into(),
        retryable: false,
        downstream_continuation_id: None,
    }
}

impl From<PluginError> for WorkerError {
    fn from(error: PluginError) -> WorkerError {
        worker_error(&error.code, error.message)
    }
}

/// The plugin's configuration: JSON bytes in the envelope, `null` when absent.
fn config_of(envelope: Option<&JsonEnvelope>) -> Result<serde_json::Value, WorkerError> {
    match envelope {
        None => Ok(serde_json::Value::Null),
        Some(envelope) if envelope.json.is_empty() => Ok(serde_json::Value::Null),
        Some(envelope) => serde_json::from_slice(&envelope.json).map_err(|error| {
            worker_error(
                "invalid_config",
                format!("the configuration is not JSON: {error}"),
            )
        }),
    }
}

impl<P: WorkerPlugin> WorkerService<P> {
    /// `PERMISSION_DENIED` unless the request carries this activation's credentials.
    fn authorize(&self, activation_id: &str, token: &str) -> Result<(), Status> {
        if activation_id == self.activation_id && token == self.token {
            Ok(())
        } else {
            Err(Status::permission_denied("unknown activation or token"))
        }
    }

    fn register_plugin(&self, request: &RegisterRequest) -> Result<(), WorkerError> {
        if self.registered.swap(true, Ordering::AcqRel) {
            return Err(worker_error(
                "already_registered",
                "this activation is already registered",
            ));
        }
        let config = config_of(request.config.as_ref())?;
        let mut context = PluginContext::new(
            request.plugin_id.clone(),
            request.activation_id.clone(),
            self.runtime.clone(),
        );
        let registered = catch_unwind(AssertUnwindSafe(|| {
            self.plugin.register(&mut context, config)
        }));
        match registered {
            Ok(result) => result.map_err(WorkerError::from),
            Err(_) => Err(worker_error("panicked", "the plugin panicked in register")),
        }
    }
}

type ChunkStream = std::pin::Pin<
    Box<dyn tokio_stream::Stream<Item = Result<StreamChunk, Status>> + Send + 'static>,
>;

#[tonic::async_trait]
impl<P: WorkerPlugin> PluginWorker for WorkerService<P> {
    async fn handshake(
        &self,
        request: Request<HandshakeRequest>,
    ) -> Result<Response<HandshakeResponse>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        if !request.worker_protocol.is_empty() && request.worker_protocol != WORKER_PROTOCOL_GRPC_V1
        {
            return Err(Status::failed_precondition(format!(
                "this worker speaks {WORKER_PROTOCOL_GRPC_V1}"
            )));
        }
        Ok(Response::new(HandshakeResponse {
            plugin_id: self.plugin.plugin_id().to_owned(),
            plugin_kind: self.plugin.plugin_id().to_owned(),
            allows_multiple_components: self.plugin.allows_multiple_components(),
            worker_protocol: WORKER_PROTOCOL_GRPC_V1.to_owned(),
            sdk_name: SDK_NAME.to_owned(),
            sdk_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_name: "rust".to_owned(),
            runtime_version: String::new(),
            supported_surfaces: Vec::new(),
        }))
    }

    async fn health(
        &self,
        request: Request<HealthRequest>,
    ) -> Result<Response<HealthResponse>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        Ok(Response::new(HealthResponse {
            ok: true,
            message: String::new(),
            plugin_id: self.plugin.plugin_id().to_owned(),
            worker_protocol: WORKER_PROTOCOL_GRPC_V1.to_owned(),
            sdk_name: SDK_NAME.to_owned(),
            sdk_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_name: "rust".to_owned(),
            runtime_version: String::new(),
        }))
    }

    async fn validate(
        &self,
        request: Request<ValidateRequest>,
    ) -> Result<Response<ValidateResponse>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        let error = config_of(request.config.as_ref())
            .and_then(|config| self.plugin.validate(&config).map_err(WorkerError::from))
            .err();
        Ok(Response::new(ValidateResponse {
            diagnostics: None,
            error,
        }))
    }

    async fn register(
        &self,
        request: Request<RegisterRequest>,
    ) -> Result<Response<RegisterResponse>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        Ok(Response::new(RegisterResponse {
            registrations: Vec::new(),
            error: self.register_plugin(&request).err(),
            conditional_middleware_guardrails: Vec::new(),
        }))
    }

    async fn invoke(
        &self,
        request: Request<InvokeRequest>,
    ) -> Result<Response<InvokeResponse>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        Err(Status::unimplemented("this worker registers no callbacks"))
    }

    type InvokeStreamStream = ChunkStream;

    async fn invoke_stream(
        &self,
        request: Request<InvokeRequest>,
    ) -> Result<Response<ChunkStream>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        Err(Status::unimplemented("this worker registers no callbacks"))
    }

    async fn cancel_invocation(
        &self,
        request: Request<CancelInvocationRequest>,
    ) -> Result<Response<WorkerAck>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        Ok(Response::new(WorkerAck {
            accepted: false,
            message: "no invocation is running".to_owned(),
        }))
    }

    async fn shutdown(
        &self,
        request: Request<ShutdownRequest>,
    ) -> Result<Response<WorkerAck>, Status> {
        let request = request.into_inner();
        self.authorize(&request.activation_id, &request.auth_token)?;
        let message = match &self.runtime {
            Some(runtime) => match runtime.close(SHUTDOWN_DRAIN).await {
                Ok(()) => String::new(),
                Err(error) => format!("diagnostics: {error}"),
            },
            None => String::new(),
        };
        self.stop.cancel();
        Ok(Response::new(WorkerAck {
            accepted: true,
            message,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_envelope_is_json_or_null() {
        let envelope = |json: &[u8]| JsonEnvelope {
            schema: "nemo.relay.Json@1".into(),
            json: json.to_vec(),
        };
        assert_eq!(config_of(None), Ok(serde_json::Value::Null));
        assert_eq!(config_of(Some(&envelope(b""))), Ok(serde_json::Value::Null));
        assert_eq!(
            config_of(Some(&envelope(br#"{"backend":"primary"}"#))),
            Ok(serde_json::json!({"backend": "primary"}))
        );
        let refused = config_of(Some(&envelope(b"{not json"))).unwrap_err();
        assert_eq!(refused.code, "invalid_config");
    }
}

//! Worker plugins: separate programs the pipeline starts with the reference system's
//! environment contract, registers over their `PluginWorker` socket, and stops at
//! shutdown. A worker that fails to start or register, or dies, is reported and never
//! stops the pipeline.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nemo_relay_worker_proto::v1::plugin_worker_client::PluginWorkerClient;
use nemo_relay_worker_proto::v1::{JsonEnvelope, RegisterRequest, ShutdownRequest};
use tonic::transport::Channel;

use wattline_config::WorkerTransport;
use wattline_worker::Endpoint;

use super::WorkerCredentials;
use super::worker_output::{WorkerOutput, WorkerOutputSink};

/// How long a worker may take to bind its socket.
pub const BIND_LIMIT: Duration = Duration::from_secs(10);
/// How often the host looks for the socket meanwhile.
const BIND_POLL: Duration = Duration::from_millis(25);
/// How long a worker may take to answer one call.
pub const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How long a worker may take to exit after `Shutdown` before it is killed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The schema of the JSON the SDKs accept as a plugin's configuration.
pub const CONFIG_SCHEMA: &str = "nemo.relay.Json@1";

/// One worker plugin to run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerSpec {
    /// The plugin's id, passed to `Register`; also names its diagnostics namespace.
    pub plugin_id: String,
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// The plugin's own configuration, passed to `Register` as JSON.
    pub config: serde_json::Value,
    /// Where its stdout and stderr lines go (appended, each prefixed with the plugin
    /// id); `None`: wattline's stderr.
    pub log_file: Option<PathBuf>,
    /// Unix sockets, or loopback TCP.
    pub transport: WorkerTransport,
}

/// Where a started worker finds the host endpoint.
#[derive(Debug, Clone, Copy)]
pub enum HostAddress<'a> {
    /// Its Unix socket.
    Unix(&'a Path),
    /// Its loopback TCP address.
    Tcp(std::net::SocketAddr),
}

/// Why a worker is not running.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The command is empty.
    #[error("worker `{plugin_id}`: `command` is empty")]
    NoCommand {
        /// The plugin.
        plugin_id: String,
    },
    /// Its `log_file` cannot be opened for appending.
    #[error("worker `{plugin_id}`: cannot open its log file {}: {source}", path.display())]
    LogFile {
        /// The plugin.
        plugin_id: String,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The program did not start.
    #[error("worker `{plugin_id}`: cannot run {program:?}: {source}")]
    Spawn {
        /// The plugin.
        plugin_id: String,
        /// The program.
        program: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It never bound its socket, or exited first.
    #[error("worker `{plugin_id}`: {reason}")]
    NotListening {
        /// The plugin.
        plugin_id: String,
        /// What happened instead.
        reason: String,
    },
    /// `Register` failed or the worker refused.
    #[error("worker `{plugin_id}`: register failed: {reason}")]
    Register {
        /// The plugin.
        plugin_id: String,
        /// The status or the worker's error.
        reason: String,
    },
}

/// A running, registered worker.
#[derive(Debug)]
pub struct RunningWorker {
    plugin_id: String,
    credentials: WorkerCredentials,
    child: tokio::process::Child,
    output: WorkerOutput,
    client: PluginWorkerClient<Channel>,
}

/// A namespace for `plugin_id`: lowercase `[a-z0-9_]`, other characters as `_`.
pub fn namespace_of(plugin_id: &str) -> String {
    let namespace: String = plugin_id
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    if namespace.is_empty() {
        "worker".to_owned()
    } else {
        namespace
    }
}

/// Fresh credentials for one activation of `plugin_id`.
pub fn new_credentials(plugin_id: &str) -> WorkerCredentials {
    WorkerCredentials {
        activation_id: uuid::Uuid::now_v7().to_string(),
        token: uuid::Uuid::now_v7().to_string(),
        namespace: namespace_of(plugin_id),
    }
}

/// The worker's command: `program` with `arguments` and the spec's environment, told
/// where the host listens and where it is to listen itself (`listens`), its output
/// piped (wattline's stdout may carry the report: the worker's lines never go there).
fn worker_command(
    program: &str,
    arguments: &[String],
    spec: &WorkerSpec,
    listens: &WorkerListens,
    host: HostAddress<'_>,
) -> tokio::process::Command {
    let host_endpoint = match host {
        HostAddress::Unix(path) => Endpoint::Unix(path.to_path_buf()),
        HostAddress::Tcp(address) => Endpoint::Tcp(address),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(arguments)
        .envs(&spec.env)
        .env("NEMO_RELAY_HOST_SOCKET", host_endpoint.to_string());
    match listens {
        WorkerListens::Socket(socket) => {
            command.env("NEMO_RELAY_WORKER_SOCKET", unix_endpoint(socket));
        }
        WorkerListens::EndpointFile(file) => {
            command
                .env("NEMO_RELAY_WORKER_SOCKET", "tcp://127.0.0.1:0")
                .env("NEMO_RELAY_WORKER_ENDPOINT_FILE", file);
        }
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Calls `Register` with the worker's credentials and configuration: `None` once it
/// is accepted, else why not (the worker's error, the call's status, or no answer
/// within [`CALL_LIMIT`]).
async fn register(
    client: &mut PluginWorkerClient<Channel>,
    spec: &WorkerSpec,
    credentials: &WorkerCredentials,
) -> Option<String> {
    let register = RegisterRequest {
        activation_id: credentials.activation_id.clone(),
        plugin_id: spec.plugin_id.clone(),
        auth_token: credentials.token.clone(),
        config: Some(JsonEnvelope {
            schema: CONFIG_SCHEMA.into(),
            json: spec.config.to_string().into_bytes(),
        }),
    };
    match tokio::time::timeout(CALL_LIMIT, client.register(register)).await {
        Ok(Ok(response)) => response
            .into_inner()
            .error
            .map(|error| format!("{}: {}", error.code, error.message)),
        Ok(Err(status)) => Some(format!("{}: {}", status.code(), status.message())),
        Err(_) => Some(format!("no answer within {} s", CALL_LIMIT.as_secs())),
    }
}

impl RunningWorker {
    /// The activation id the worker registered with.
    pub fn activation_id(&self) -> &str {
        &self.credentials.activation_id
    }

    /// Starts `spec` with `credentials`, its socket (or, over TCP, its endpoint file)
    /// in `directory`, the host at `host`, waits for it to listen, and calls
    /// `Register`.
    pub async fn start(
        spec: &WorkerSpec,
        credentials: WorkerCredentials,
        directory: &Path,
        host: HostAddress<'_>,
    ) -> Result<RunningWorker, WorkerError> {
        let plugin_id = spec.plugin_id.clone();
        let (program, arguments) =
            spec.command
                .split_first()
                .ok_or_else(|| WorkerError::NoCommand {
                    plugin_id: plugin_id.clone(),
                })?;
        let sink = WorkerOutputSink::open(spec.log_file.as_deref()).map_err(|source| {
            WorkerError::LogFile {
                plugin_id: plugin_id.clone(),
                path: spec.log_file.clone().unwrap_or_default(),
                source,
            }
        })?;
        let listens = match spec.transport {
            WorkerTransport::Unix => WorkerListens::Socket(
                directory.join(format!("worker-{}.sock", credentials.namespace)),
            ),
            WorkerTransport::Tcp => WorkerListens::EndpointFile(
                directory.join(format!("worker-{}.endpoint", credentials.namespace)),
            ),
        };
        let mut command = worker_command(program, arguments, spec, &listens, host);
        let mut child = command
            .env("NEMO_RELAY_WORKER_ID", &credentials.activation_id)
            .env("NEMO_RELAY_WORKER_TOKEN", &credentials.token)
            .spawn()
            .map_err(|source| WorkerError::Spawn {
                plugin_id: plugin_id.clone(),
                program: program.clone(),
                source,
            })?;
        let output =
            WorkerOutput::forward(&plugin_id, child.stdout.take(), child.stderr.take(), sink);
        let channel = match wait_for_worker(&mut child, &listens).await {
            Ok(channel) => channel,
            Err(reason) => {
                let _ = child.kill().await;
                output.drain().await;
                return Err(WorkerError::NotListening { plugin_id, reason });
            }
        };
        let mut client = PluginWorkerClient::new(channel);
        let error = register(&mut client, spec, &credentials).await;
        if let Some(reason) = error {
            let _ = child.kill().await;
            output.drain().await;
            return Err(WorkerError::Register { plugin_id, reason });
        }
        Ok(RunningWorker {
            plugin_id,
            credentials,
            child,
            output,
            client,
        })
    }

    /// The plugin's id.
    pub fn plugin_id(&self) -> &str {
        &self.plugin_id
    }

    /// Calls `Shutdown`, waits [`SHUTDOWN_GRACE`] for the worker to exit, then kills it,
    /// and writes its last lines. Says so when the worker had already died during the
    /// run.
    pub async fn stop(mut self) -> Option<String> {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.output.drain().await;
            return Some(format!(
                "worker `{}` exited ({status}) during the run",
                self.plugin_id
            ));
        }
        let request = ShutdownRequest {
            activation_id: self.credentials.activation_id.clone(),
            auth_token: self.credentials.token.clone(),
            reason: "pipeline shutdown".into(),
        };
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.client.shutdown(request)).await;
        if tokio::time::timeout(SHUTDOWN_GRACE, self.child.wait())
            .await
            .is_err()
        {
            // The Rust SDK 0.11 answers `accepted: false` and keeps serving.
            let _ = self.child.kill().await;
        }
        self.output.drain().await;
        None
    }
}

fn unix_endpoint(path: &Path) -> String {
    format!("unix://{}", path.display())
}

/// How the host finds a worker it started.
enum WorkerListens {
    /// On this Unix socket.
    Socket(PathBuf),
    /// On the loopback TCP endpoint it writes to this file.
    EndpointFile(PathBuf),
}

/// Waits for the worker to listen, [`BIND_LIMIT`] at most, and connects. A TCP worker
/// must announce a loopback endpoint: any other is refused, named.
async fn wait_for_worker(
    child: &mut tokio::process::Child,
    listens: &WorkerListens,
) -> Result<Channel, String> {
    let deadline = Instant::now() + BIND_LIMIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited ({status}) before listening"));
        }
        match listens {
            WorkerListens::Socket(socket) => {
                if socket.exists()
                    && let Ok(channel) = super::connect_unix(socket.to_path_buf()).await
                {
                    return Ok(channel);
                }
            }
            WorkerListens::EndpointFile(file) => {
                if let Ok(text) = std::fs::read_to_string(file)
                    && !text.trim().is_empty()
                {
                    let announced = text.trim();
                    let address = match Endpoint::parse(announced) {
                        Ok(Endpoint::Tcp(address)) => address,
                        Ok(Endpoint::Unix(_)) => {
                            return Err(format!(
                                "announced {announced:?} in {}: a TCP worker must announce a TCP endpoint",
                                file.display()
                            ));
                        }
                        Err(reason) => {
                            return Err(format!(
                                "announced {announced:?} in {}: {reason}",
                                file.display()
                            ));
                        }
                    };
                    if let Ok(channel) = connect_tcp(address).await {
                        return Ok(channel);
                    }
                }
            }
        }
        if Instant::now() >= deadline {
            let place = match listens {
                WorkerListens::Socket(socket) => socket.display().to_string(),
                WorkerListens::EndpointFile(file) => {
                    format!("loopback TCP (no endpoint in {})", file.display())
                }
            };
            return Err(format!(
                "did not listen on {place} within {} s",
                BIND_LIMIT.as_secs()
            ));
        }
        tokio::time::sleep(BIND_POLL).await;
    }
}

/// A gRPC channel to a loopback worker.
async fn connect_tcp(address: std::net::SocketAddr) -> Result<Channel, tonic::transport::Error> {
    // A `SocketAddr` always makes a valid `http://` URI.
    tonic::transport::Endpoint::from_shared(format!("http://{address}"))?
        .connect()
        .await
}

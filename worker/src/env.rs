//! The environment contracts: the reference system's worker variables, set by the
//! pipeline for a worker plugin, and wattline's own, set by `wattline run` for the
//! command it measures. Parsing takes a lookup function so tests need not touch the
//! process environment.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::endpoint::Endpoint;

use nemo_relay_worker_proto::{DEFAULT_WORKER_MAX_MESSAGE_BYTES, parse_worker_max_message_bytes};

use crate::error::EnvironmentError;

/// Where the worker binds its `PluginWorker` server (`unix:///abs/path`, or loopback
/// `tcp://host:port` / `http://host:port`, port 0 for any free one).
pub const NEMO_RELAY_WORKER_SOCKET: &str = "NEMO_RELAY_WORKER_SOCKET";
/// The host endpoint serving `RelayDiagnostics`, in the same forms.
pub const NEMO_RELAY_HOST_SOCKET: &str = "NEMO_RELAY_HOST_SOCKET";
/// Optional: a file the worker writes its resolved endpoint to once it listens (the
/// port it was given when it asked for port 0).
pub const NEMO_RELAY_WORKER_ENDPOINT_FILE: &str = "NEMO_RELAY_WORKER_ENDPOINT_FILE";
/// The activation id (a UUID).
pub const NEMO_RELAY_WORKER_ID: &str = "NEMO_RELAY_WORKER_ID";
/// The activation's token.
pub const NEMO_RELAY_WORKER_TOKEN: &str = "NEMO_RELAY_WORKER_TOKEN";
/// Optional limit for one gRPC message of the worker server, bytes (default 4 MiB).
pub const NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES: &str = "NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES";
/// Set by `wattline run`: the host endpoint's socket, a path optionally prefixed
/// `unix://` (or a loopback `tcp://`/`http://` endpoint).
pub const WATTLINE_HOST_SOCKET: &str = "WATTLINE_HOST_SOCKET";
/// Set by `wattline run`: the activation id of the measured command.
pub const WATTLINE_HOST_ACTIVATION_ID: &str = "WATTLINE_HOST_ACTIVATION_ID";
/// Set by `wattline run`: the measured command's token.
pub const WATTLINE_HOST_TOKEN: &str = "WATTLINE_HOST_TOKEN";

/// What the pipeline tells a worker plugin it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnvironment {
    /// Where to bind the `PluginWorker` server.
    pub worker_endpoint: Endpoint,
    /// The host endpoint; `None` when the host gave none (diagnostics then have no
    /// runtime).
    pub host_endpoint: Option<Endpoint>,
    /// Where to write the resolved worker endpoint once listening, when asked.
    pub endpoint_file: Option<PathBuf>,
    /// The activation id every request must carry.
    pub activation_id: String,
    /// The token every request must carry.
    pub token: String,
    /// The largest gRPC message the worker server sends or receives, bytes.
    pub max_message_bytes: usize,
}

impl WorkerEnvironment {
    /// Reads the reference system's worker variables from the process environment.
    pub fn from_env() -> Result<WorkerEnvironment, EnvironmentError> {
        Self::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads the worker variables through `lookup`.
    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<WorkerEnvironment, EnvironmentError> {
        let worker_endpoint = endpoint(
            NEMO_RELAY_WORKER_SOCKET,
            &required(&lookup, NEMO_RELAY_WORKER_SOCKET)?,
        )?;
        let host_endpoint = optional(&lookup, NEMO_RELAY_HOST_SOCKET)?
            .map(|value| endpoint(NEMO_RELAY_HOST_SOCKET, &value))
            .transpose()?;
        let endpoint_file = optional(&lookup, NEMO_RELAY_WORKER_ENDPOINT_FILE)?.map(PathBuf::from);
        let max_message_bytes = match optional(&lookup, NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES)? {
            None => DEFAULT_WORKER_MAX_MESSAGE_BYTES,
            Some(value) => parse_worker_max_message_bytes(&value)
                .map_err(|reason| EnvironmentError::MessageLimit { reason })?,
        };
        Ok(WorkerEnvironment {
            worker_endpoint,
            host_endpoint,
            endpoint_file,
            activation_id: required(&lookup, NEMO_RELAY_WORKER_ID)?,
            token: required(&lookup, NEMO_RELAY_WORKER_TOKEN)?,
            max_message_bytes,
        })
    }
}

/// What `wattline run` tells the command it measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostEnvironment {
    pub(crate) endpoint: Endpoint,
    pub(crate) activation_id: String,
    pub(crate) token: String,
}

impl HostEnvironment {
    /// Reads `WATTLINE_HOST_*` through `lookup`.
    pub(crate) fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<HostEnvironment, EnvironmentError> {
        Ok(HostEnvironment {
            endpoint: endpoint(
                WATTLINE_HOST_SOCKET,
                &required(&lookup, WATTLINE_HOST_SOCKET)?,
            )?,
            activation_id: required(&lookup, WATTLINE_HOST_ACTIVATION_ID)?,
            token: required(&lookup, WATTLINE_HOST_TOKEN)?,
        })
    }
}

/// A set, non-blank, Unicode variable, or `None` when unset.
fn optional(
    lookup: &impl Fn(&str) -> Option<OsString>,
    name: &'static str,
) -> Result<Option<String>, EnvironmentError> {
    let Some(value) = lookup(name) else {
        return Ok(None);
    };
    let value = value
        .into_string()
        .map_err(|_| EnvironmentError::NotUnicode { name })?;
    if value.trim().is_empty() {
        return Err(EnvironmentError::Blank { name });
    }
    Ok(Some(value))
}

fn required(
    lookup: &impl Fn(&str) -> Option<OsString>,
    name: &'static str,
) -> Result<String, EnvironmentError> {
    optional(lookup, name)?.ok_or(EnvironmentError::Missing { name })
}

/// `unix:///abs/path`, `/abs/path`, or a loopback `tcp://host:port` /
/// `http://host:port` (see [`Endpoint::parse`]); the error names the variable.
fn endpoint(name: &'static str, value: &str) -> Result<Endpoint, EnvironmentError> {
    Endpoint::parse(value).map_err(|reason| EnvironmentError::Endpoint {
        name,
        value: value.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), OsString::from(*value)))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_worker_contract_is_read_with_its_defaults() {
        let environment = WorkerEnvironment::from_lookup(lookup(&[
            (NEMO_RELAY_WORKER_SOCKET, "unix:///run/w/worker.sock"),
            (NEMO_RELAY_HOST_SOCKET, "unix:///run/w/host.sock"),
            (NEMO_RELAY_WORKER_ID, "act"),
            (NEMO_RELAY_WORKER_TOKEN, "tok"),
        ]))
        .unwrap();
        assert_eq!(
            environment,
            WorkerEnvironment {
                worker_endpoint: Endpoint::Unix("/run/w/worker.sock".into()),
                host_endpoint: Some(Endpoint::Unix("/run/w/host.sock".into())),
                endpoint_file: None,
                activation_id: "act".into(),
                token: "tok".into(),
                max_message_bytes: 4 * 1024 * 1024,
            }
        );
    }

    #[test]
    fn a_missing_or_malformed_variable_is_named() {
        let missing_token = WorkerEnvironment::from_lookup(lookup(&[
            (NEMO_RELAY_WORKER_SOCKET, "unix:///w.sock"),
            (NEMO_RELAY_WORKER_ID, "act"),
        ]));
        assert_eq!(
            missing_token,
            Err(EnvironmentError::Missing {
                name: NEMO_RELAY_WORKER_TOKEN
            })
        );
        let remote = WorkerEnvironment::from_lookup(lookup(&[(
            NEMO_RELAY_WORKER_SOCKET,
            "tcp://192.0.2.1:9",
        )]));
        assert!(
            matches!(remote, Err(EnvironmentError::Endpoint { name, reason, .. })
                if name == NEMO_RELAY_WORKER_SOCKET && reason.contains("not a loopback")),
            "{remote:?}"
        );
        let tcp = WorkerEnvironment::from_lookup(lookup(&[
            (NEMO_RELAY_WORKER_SOCKET, "tcp://127.0.0.1:0"),
            (NEMO_RELAY_HOST_SOCKET, "http://localhost:7001"),
            (NEMO_RELAY_WORKER_ID, "act"),
            (NEMO_RELAY_WORKER_TOKEN, "tok"),
            (NEMO_RELAY_WORKER_ENDPOINT_FILE, "/run/w/endpoint"),
        ]))
        .unwrap();
        assert_eq!(
            (tcp.worker_endpoint, tcp.host_endpoint, tcp.endpoint_file),
            (
                Endpoint::Tcp(([127, 0, 0, 1], 0).into()),
                Some(Endpoint::Tcp(([127, 0, 0, 1], 7001).into())),
                Some(PathBuf::from("/run/w/endpoint"))
            )
        );
        let limit = WorkerEnvironment::from_lookup(lookup(&[
            (NEMO_RELAY_WORKER_SOCKET, "/w.sock"),
            (NEMO_RELAY_WORKER_ID, "act"),
            (NEMO_RELAY_WORKER_TOKEN, "tok"),
            (NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES, "0"),
        ]));
        assert!(
            limit
                .unwrap_err()
                .to_string()
                .contains(NEMO_RELAY_WORKER_MAX_MESSAGE_BYTES)
        );
    }

    #[test]
    fn the_wattline_run_contract_takes_a_path_with_or_without_the_scheme() {
        for socket in ["/tmp/h/host.sock", "unix:///tmp/h/host.sock"] {
            let environment = HostEnvironment::from_lookup(lookup(&[
                (WATTLINE_HOST_SOCKET, socket),
                (WATTLINE_HOST_ACTIVATION_ID, "act"),
                (WATTLINE_HOST_TOKEN, "tok"),
            ]))
            .unwrap();
            assert_eq!(
                environment.endpoint,
                Endpoint::Unix(PathBuf::from("/tmp/h/host.sock"))
            );
            assert_eq!(
                (
                    environment.activation_id.as_str(),
                    environment.token.as_str()
                ),
                ("act", "tok")
            );
        }
        let tcp = HostEnvironment::from_lookup(lookup(&[
            (WATTLINE_HOST_SOCKET, "tcp://127.0.0.1:7001"),
            (WATTLINE_HOST_ACTIVATION_ID, "act"),
            (WATTLINE_HOST_TOKEN, "tok"),
        ]))
        .unwrap();
        assert_eq!(tcp.endpoint, Endpoint::Tcp(([127, 0, 0, 1], 7001).into()));
        for (socket, expected) in [
            ("host.sock", "the socket path must be absolute"),
            ("unix://host.sock", "the socket path must be absolute"),
            (
                "http://10.1.2.3:1",
                "the host is not a loopback address: workers speak to this machine only",
            ),
        ] {
            let error = HostEnvironment::from_lookup(lookup(&[
                (WATTLINE_HOST_SOCKET, socket),
                (WATTLINE_HOST_ACTIVATION_ID, "act"),
                (WATTLINE_HOST_TOKEN, "tok"),
            ]))
            .unwrap_err();
            assert_eq!(
                error,
                EnvironmentError::Endpoint {
                    name: WATTLINE_HOST_SOCKET,
                    value: socket.into(),
                    reason: expected
                }
            );
        }
        let blank = HostEnvironment::from_lookup(lookup(&[
            (WATTLINE_HOST_SOCKET, "/h.sock"),
            (WATTLINE_HOST_ACTIVATION_ID, "  "),
            (WATTLINE_HOST_TOKEN, "tok"),
        ]));
        assert_eq!(
            blank,
            Err(EnvironmentError::Blank {
                name: WATTLINE_HOST_ACTIVATION_ID
            })
        );
    }
}

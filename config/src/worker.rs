//! `kind = "worker"`: a worker plugin the pipeline starts, a separate program speaking
//! the reference system's grpc-v1 worker protocol. Unlike the other kinds, a file may
//! hold several, one per `plugin_id`; layers merge them by `plugin_id`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// `[components.config]` of a `worker` component.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// The plugin's id, passed to `Register`; non-blank, unique.
    pub plugin_id: String,
    /// The program and its arguments, run without a shell; non-empty.
    pub command: Vec<String>,
    /// Extra environment for the program.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The plugin's own configuration, passed to `Register` as JSON.
    #[serde(default)]
    pub config: toml::Table,
    /// Where the program's stdout and stderr lines go (appended, each prefixed with
    /// the plugin id); unset: wattline's stderr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
    /// How the worker and the host reach each other: Unix sockets in a private
    /// directory (the default), or loopback TCP (`tcp://127.0.0.1:0` for the worker,
    /// which announces its port in `NEMO_RELAY_WORKER_ENDPOINT_FILE`), as the worker
    /// protocol allows where Unix sockets are not used.
    #[serde(default)]
    pub transport: WorkerTransport,
}

/// The transport between a worker plugin and the host endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerTransport {
    /// Unix sockets in the host's private directory.
    #[default]
    Unix,
    /// Loopback TCP, ports chosen by the OS.
    Tcp,
}

impl WorkerConfig {
    /// Checks every field; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.plugin_id.trim().is_empty() {
            return Err(FieldError::new("plugin_id", "must not be blank"));
        }
        match self.command.first() {
            None => return Err(FieldError::new("command", "must name a program")),
            Some(program) if program.trim().is_empty() => {
                return Err(FieldError::new("command[0]", "must not be blank"));
            }
            Some(_) => {}
        }
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(FieldError::new(
                    format!("env.{name}"),
                    "a variable name must be non-empty, without `=` or NUL",
                ));
            }
        }
        if self
            .log_file
            .as_ref()
            .is_some_and(|path| path.as_os_str().is_empty())
        {
            return Err(FieldError::new("log_file", "must not be empty"));
        }
        Ok(())
    }
}

/// One layer's `worker` entry: the fields it sets, checked for shape; a later layer
/// can complete it (a user's file adding `config` to a system-wide worker).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerLayer {
    /// Always present: it says which worker the entry is.
    pub plugin_id: String,
    /// The program and its arguments.
    pub command: Option<Vec<String>>,
    /// Extra environment.
    pub env: Option<BTreeMap<String, String>>,
    /// The plugin's own configuration.
    pub config: Option<toml::Table>,
    /// Where the program's output lines go.
    pub log_file: Option<PathBuf>,
    /// The transport.
    pub transport: Option<WorkerTransport>,
}

impl WorkerLayer {
    /// Checks the fields this layer sets, as [`WorkerConfig::validate`] would.
    pub fn validate(&self) -> Result<(), FieldError> {
        WorkerConfig {
            plugin_id: self.plugin_id.clone(),
            command: self
                .command
                .clone()
                .unwrap_or_else(|| vec!["(set by another layer)".to_owned()]),
            env: self.env.clone().unwrap_or_default(),
            config: toml::Table::new(),
            log_file: self.log_file.clone(),
            transport: self.transport.unwrap_or_default(),
        }
        .validate()
    }
}

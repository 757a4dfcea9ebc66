//! One `plugins.toml` document: parsing, per-file validation, and the component list.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use crate::atof::AtofConfig;
use crate::diagnostics::DiagnosticsLimits;
use crate::energy::EnergyConfig;
use crate::error::{ConfigError, FieldError};
use crate::opentelemetry::OpenTelemetryConfig;
use crate::resource_metrics::ResourceMetricsConfig;

/// The only document version this build reads.
pub const SUPPORTED_VERSION: i64 = 1;

/// Component kinds this build knows, in the order `config show` writes them.
pub const KNOWN_KINDS: &[&str] = &[
    ComponentKind::RESOURCE_METRICS,
    ComponentKind::ENERGY,
    ComponentKind::DIAGNOSTICS,
    ComponentKind::ATOF,
    ComponentKind::OPENTELEMETRY,
    ComponentKind::WORKER,
];

/// A component kind known to this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ComponentKind {
    /// `resource_metrics`: CPU, memory, process, disk, network and GPU readings.
    ResourceMetrics,
    /// `diagnostics`: the pipeline's diagnostics context and its limits. On by default.
    Diagnostics,
    /// `energy`: power into kWh, cost and CO2. On by default.
    Energy,
    /// `atof`: the ATOF JSON-lines file exporter. Off unless enabled.
    Atof,
    /// `opentelemetry`: the OTLP metrics exporter. Off unless enabled.
    OpenTelemetry,
    /// `worker`: a worker plugin to start (several per file, one per `plugin_id`).
    Worker,
}

impl ComponentKind {
    const RESOURCE_METRICS: &'static str = "resource_metrics";
    const DIAGNOSTICS: &'static str = "diagnostics";
    const ENERGY: &'static str = "energy";
    const ATOF: &'static str = "atof";
    const OPENTELEMETRY: &'static str = "opentelemetry";
    const WORKER: &'static str = "worker";

    /// The kind's name as written in `plugins.toml`.
    pub fn name(self) -> &'static str {
        match self {
            ComponentKind::ResourceMetrics => Self::RESOURCE_METRICS,
            ComponentKind::Diagnostics => Self::DIAGNOSTICS,
            ComponentKind::Energy => Self::ENERGY,
            ComponentKind::Atof => Self::ATOF,
            ComponentKind::OpenTelemetry => Self::OPENTELEMETRY,
            ComponentKind::Worker => Self::WORKER,
        }
    }

    /// Looks a kind up by its `plugins.toml` name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            Self::RESOURCE_METRICS => Some(ComponentKind::ResourceMetrics),
            Self::DIAGNOSTICS => Some(ComponentKind::Diagnostics),
            Self::ENERGY => Some(ComponentKind::Energy),
            Self::ATOF => Some(ComponentKind::Atof),
            Self::OPENTELEMETRY => Some(ComponentKind::OpenTelemetry),
            Self::WORKER => Some(ComponentKind::Worker),
            _ => None,
        }
    }

    /// Deserializes and checks a `config` table of this kind.
    fn validate_config(self, table: &toml::Table) -> Result<(), FieldError> {
        match self {
            ComponentKind::ResourceMetrics => {
                let config: ResourceMetricsConfig = deserialize_table(table)?;
                config.validate()
            }
            ComponentKind::Energy => {
                let config: EnergyConfig = deserialize_table(table)?;
                config.validate()
            }
            ComponentKind::Diagnostics => {
                let limits: DiagnosticsLimits = deserialize_table(table)?;
                limits.validate().map_err(|error| {
                    FieldError::new(
                        error.field,
                        format!(
                            "must be within {}..={} (got {})",
                            error.min, error.max, error.value
                        ),
                    )
                })
            }
            // A layer may set part of a worker; the merge checks the whole.
            ComponentKind::Worker => {
                let layer: crate::worker::WorkerLayer = deserialize_table(table)?;
                layer.validate()
            }
            ComponentKind::Atof => {
                let config: AtofConfig = deserialize_table(table)?;
                config.validate()
            }
            ComponentKind::OpenTelemetry => {
                let config: OpenTelemetryConfig = deserialize_table(table)?;
                config.validate()
            }
        }
    }
}

/// Deserializes a TOML table into `T`, reporting the failing field's path.
pub(crate) fn deserialize_table<T: DeserializeOwned>(table: &toml::Table) -> Result<T, FieldError> {
    let value = toml::Value::Table(table.clone());
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        let path = if path == "." { String::new() } else { path };
        FieldError::new(path, error.into_inner().to_string())
    })
}

/// One `[[components]]` entry after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentEntry {
    /// The component kind.
    pub kind: ComponentKind,
    /// `enabled` (default `true`).
    pub enabled: bool,
    /// The `config` table as written (defaults are applied after merging).
    pub config: toml::Table,
}

/// A validated `plugins.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginsDocument {
    /// Where it came from (a path, or a label such as `<code>`), used in errors.
    pub source_name: String,
    /// Its components, at most one per kind; workers are in [`Self::workers`].
    pub components: BTreeMap<ComponentKind, ComponentEntry>,
    /// Its `worker` components, in file order (several allowed, one per `plugin_id`).
    pub workers: Vec<ComponentEntry>,
}

impl PluginsDocument {
    /// Parses and validates `text`; every error names `source_name`, the field path and
    /// the rule. Never panics, whatever the bytes.
    pub fn parse(source_name: &str, text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = text.parse().map_err(|error: toml::de::Error| {
            ConfigError::new(
                source_name,
                "",
                format!("not valid TOML: {}", error.to_string().trim_end()),
            )
        })?;
        Self::from_table(source_name, &table)
    }

    /// Validates an already-parsed document table (configuration passed in code).
    pub fn from_table(source_name: &str, table: &toml::Table) -> Result<Self, ConfigError> {
        let error = |path: String, rule: String| ConfigError::new(source_name, path, rule);
        for key in table.keys() {
            if key != "version" && key != "components" {
                return Err(error(
                    key.clone(),
                    format!("unknown field `{key}`, expected `version` or `components`"),
                ));
            }
        }
        match table.get("version") {
            None => {
                return Err(error(
                    "version".into(),
                    format!("missing; write `version = {SUPPORTED_VERSION}`"),
                ));
            }
            Some(toml::Value::Integer(SUPPORTED_VERSION)) => {}
            Some(other) => {
                return Err(error(
                    "version".into(),
                    format!("unsupported version {other} (expected {SUPPORTED_VERSION})"),
                ));
            }
        }
        let entries = match table.get("components") {
            None => &Vec::new(),
            Some(toml::Value::Array(entries)) => entries,
            Some(other) => {
                return Err(error(
                    "components".into(),
                    format!("must be an array of tables (got {})", other.type_str()),
                ));
            }
        };
        let mut components = BTreeMap::new();
        let mut workers = Vec::new();
        let mut worker_ids: BTreeMap<String, usize> = BTreeMap::new();
        let mut first_position = BTreeMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let at = format!("components[{index}]");
            let component = parse_entry(entry, &at).map_err(|e| error(e.path, e.rule))?;
            if component.kind == ComponentKind::Worker {
                let Some(plugin_id) = component.config.get("plugin_id").and_then(|id| id.as_str())
                else {
                    return Err(error(
                        format!("{at}.config.plugin_id"),
                        "missing; a worker needs its plugin_id".into(),
                    ));
                };
                if let Some(first) = worker_ids.insert(plugin_id.to_owned(), index) {
                    return Err(error(
                        format!("{at}.config.plugin_id"),
                        format!(
                            "worker `{plugin_id}` appears more than once in this file (first at components[{first}])"
                        ),
                    ));
                }
                workers.push(component);
                continue;
            }
            if let Some(first) = first_position.insert(component.kind, index) {
                return Err(error(
                    format!("{at}.kind"),
                    format!(
                        "kind `{}` appears more than once in this file (first at components[{first}])",
                        component.kind.name()
                    ),
                ));
            }
            components.insert(component.kind, component);
        }
        Ok(PluginsDocument {
            source_name: source_name.to_string(),
            components,
            workers,
        })
    }
}

fn parse_entry(entry: &toml::Value, at: &str) -> Result<ComponentEntry, FieldError> {
    let Some(entry) = entry.as_table() else {
        return Err(FieldError::new(
            at,
            format!("must be a table (got {})", entry.type_str()),
        ));
    };
    for key in entry.keys() {
        if !matches!(key.as_str(), "kind" | "enabled" | "config") {
            return Err(FieldError::new(
                format!("{at}.{key}"),
                format!("unknown field `{key}`, expected one of `kind`, `enabled`, `config`"),
            ));
        }
    }
    let kind_name = match entry.get("kind") {
        Some(toml::Value::String(name)) => name,
        Some(other) => {
            return Err(FieldError::new(
                format!("{at}.kind"),
                format!("must be a string (got {})", other.type_str()),
            ));
        }
        None => return Err(FieldError::new(format!("{at}.kind"), "missing")),
    };
    let kind = ComponentKind::from_name(kind_name).ok_or_else(|| {
        let known: Vec<String> = KNOWN_KINDS.iter().map(|k| format!("`{k}`")).collect();
        FieldError::new(
            format!("{at}.kind"),
            format!(
                "unknown component kind `{kind_name}`, expected one of {}",
                known.join(", ")
            ),
        )
    })?;
    let enabled = match entry.get("enabled") {
        None => true,
        Some(toml::Value::Boolean(enabled)) => *enabled,
        Some(other) => {
            return Err(FieldError::new(
                format!("{at}.enabled"),
                format!("must be true or false (got {})", other.type_str()),
            ));
        }
    };
    let config = match entry.get("config") {
        None => toml::Table::new(),
        Some(toml::Value::Table(config)) => config.clone(),
        Some(other) => {
            return Err(FieldError::new(
                format!("{at}.config"),
                format!("must be a table (got {})", other.type_str()),
            ));
        }
    };
    kind.validate_config(&config).map_err(|error| {
        let path = if error.path.is_empty() {
            format!("{at}.config")
        } else {
            format!("{at}.config.{}", error.path)
        };
        FieldError::new(path, error.rule)
    })?;
    Ok(ComponentEntry {
        kind,
        enabled,
        config,
    })
}

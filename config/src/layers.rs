//! Layered discovery of `plugins.toml` files and their merge into one effective
//! configuration.
//!
//! Layers, lowest precedence first (as the reference documents it): the file given with
//! `--config` (a directory means its `plugins.toml`), else
//! `$XDG_CONFIG_HOME/wattline/plugins.toml` (`~/.config/wattline/plugins.toml` when
//! `XDG_CONFIG_HOME` is unset); then `/etc/wattline/plugins.toml`; then configuration
//! passed in code. Tables merge recursively (a later scalar or array replaces an
//! earlier one), components match by `kind`, and an entry with `enabled = false`
//! contributes nothing.

use std::path::{Path, PathBuf};

use crate::atof::AtofConfig;
use crate::diagnostics::DiagnosticsLimits;
use crate::document::{ComponentKind, PluginsDocument, deserialize_table};
use crate::energy::{EnergyConfig, EnergySettings, FactorOrigin};
use crate::error::{ConfigError, FieldError};
use crate::opentelemetry::OpenTelemetryConfig;
use crate::resource_metrics::ResourceMetricsConfig;
use crate::worker::WorkerConfig;

/// The application directory name under the configuration roots.
pub const APP_DIRECTORY: &str = "wattline";
/// The file name looked for in each configuration directory.
pub const FILE_NAME: &str = "plugins.toml";

/// Where to look for configuration files. Built from the environment in production and
/// from temporary directories in tests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Discovery {
    /// A path given on the command line: a file, or a directory holding `plugins.toml`.
    pub explicit: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME`.
    pub xdg_config_home: Option<PathBuf>,
    /// `$HOME`, for the `~/.config` fallback.
    pub home: Option<PathBuf>,
    /// The system directory, `/etc` in production.
    pub system_config_dir: Option<PathBuf>,
}

impl Discovery {
    /// Reads `XDG_CONFIG_HOME` and `HOME`; the system directory is `/etc`.
    pub fn from_environment(explicit: Option<PathBuf>) -> Self {
        let non_empty = |name: &str| {
            std::env::var_os(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        Discovery {
            explicit,
            xdg_config_home: non_empty("XDG_CONFIG_HOME"),
            home: non_empty("HOME"),
            system_config_dir: Some(PathBuf::from("/etc")),
        }
    }

    /// The candidate files, lowest precedence first, and whether each must exist.
    pub fn candidate_files(&self) -> Vec<(PathBuf, bool)> {
        let mut files = Vec::new();
        if let Some(explicit) = &self.explicit {
            let file = if explicit.is_dir() {
                explicit.join(FILE_NAME)
            } else {
                explicit.clone()
            };
            files.push((file, true));
        } else if let Some(xdg) = &self.xdg_config_home {
            files.push((xdg.join(APP_DIRECTORY).join(FILE_NAME), false));
        } else if let Some(home) = &self.home {
            files.push((
                home.join(".config").join(APP_DIRECTORY).join(FILE_NAME),
                false,
            ));
        }
        if let Some(system) = &self.system_config_dir {
            files.push((system.join(APP_DIRECTORY).join(FILE_NAME), false));
        }
        files
    }

    /// Reads and validates every layer that exists, lowest precedence first.
    pub fn load(&self) -> Result<Vec<PluginsDocument>, ConfigError> {
        let mut documents = Vec::new();
        for (path, required) in self.candidate_files() {
            if let Some(document) = load_file(&path, required)? {
                documents.push(document);
            }
        }
        Ok(documents)
    }
}

/// Reads and validates one file; a missing optional file is `Ok(None)`.
pub fn load_file(path: &Path, required: bool) -> Result<Option<PluginsDocument>, ConfigError> {
    let source_name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|error| {
                ConfigError::new(
                    &source_name,
                    "",
                    format!(
                        "not valid UTF-8 (at byte {})",
                        error.utf8_error().valid_up_to()
                    ),
                )
            })?;
            PluginsDocument::parse(&source_name, &text).map(Some)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !required => Ok(None),
        Err(error) => Err(ConfigError::new(
            source_name,
            "",
            format!("cannot be read: {error}"),
        )),
    }
}

/// The merged configuration with defaults applied: `None` for a component no layer
/// enabled.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectiveConfig {
    /// The `resource_metrics` component, when enabled.
    pub resource_metrics: Option<ResourceMetricsConfig>,
    /// The `diagnostics` component: on unless a layer disables it and none enables it.
    pub diagnostics: Option<DiagnosticsLimits>,
    /// The `energy` component, on by default, with where each factor came from.
    pub energy: Option<EnergySettings>,
    /// The `atof` file exporter, when enabled.
    pub atof: Option<AtofConfig>,
    /// The `opentelemetry` metrics exporter, when enabled.
    pub opentelemetry: Option<OpenTelemetryConfig>,
    /// The worker plugins to start, in the order first seen.
    pub workers: Vec<WorkerConfig>,
}

impl Default for EffectiveConfig {
    fn default() -> Self {
        EffectiveConfig {
            resource_metrics: None,
            diagnostics: Some(DiagnosticsLimits::default()),
            energy: Some(EnergySettings::default()),
            atof: None,
            opentelemetry: None,
            workers: Vec::new(),
        }
    }
}

/// Kinds that are on when no layer mentions them.
const ON_BY_DEFAULT: &[ComponentKind] = &[ComponentKind::Diagnostics, ComponentKind::Energy];

/// The source name of configuration passed in code.
pub const CODE_SOURCE: &str = "<code>";

impl EffectiveConfig {
    /// Checks every component by the rules a file is checked by: a configuration built
    /// or changed in code (where no parse ran) gets the same errors, named
    /// `<code>: COMPONENT.FIELD: RULE`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let named = |component: &str, error: FieldError| {
            ConfigError::new(
                CODE_SOURCE,
                format!("{component}.{}", error.path),
                error.rule,
            )
        };
        if let Some(resource) = &self.resource_metrics {
            resource
                .validate()
                .map_err(|error| named("resource_metrics", error))?;
        }
        if let Some(limits) = &self.diagnostics {
            limits
                .validate()
                .map_err(|error| ConfigError::new(CODE_SOURCE, "diagnostics", error.to_string()))?;
        }
        if let Some(energy) = &self.energy {
            energy
                .config
                .validate()
                .map_err(|error| named("energy", error))?;
        }
        if let Some(atof) = &self.atof {
            atof.validate().map_err(|error| named("atof", error))?;
        }
        if let Some(otlp) = &self.opentelemetry {
            otlp.validate()
                .map_err(|error| named("opentelemetry", error))?;
        }
        for (index, worker) in self.workers.iter().enumerate() {
            worker
                .validate()
                .map_err(|error| named(&format!("workers[{index}]"), error))?;
        }
        Ok(())
    }

    /// Merges `layers` (lowest precedence first) and applies defaults.
    pub fn merge(layers: &[PluginsDocument]) -> Result<Self, ConfigError> {
        let mut merged: std::collections::BTreeMap<ComponentKind, toml::Table> = ON_BY_DEFAULT
            .iter()
            .map(|kind| (*kind, toml::Table::new()))
            .collect();
        for layer in layers {
            for entry in layer.components.values().filter(|entry| entry.enabled) {
                let table = merged.entry(entry.kind).or_default();
                merge_tables(table, &entry.config);
            }
        }
        // A default-on kind that some layer switched off and no layer switched on stays
        // off; for every other kind, a disabled entry contributes nothing.
        for kind in ON_BY_DEFAULT {
            let mentioned = |enabled: bool| {
                layers.iter().any(|layer| {
                    layer
                        .components
                        .get(kind)
                        .is_some_and(|entry| entry.enabled == enabled)
                })
            };
            if mentioned(false) && !mentioned(true) {
                merged.remove(kind);
            }
        }
        let mut effective = EffectiveConfig {
            resource_metrics: None,
            diagnostics: None,
            energy: None,
            atof: None,
            opentelemetry: None,
            workers: Vec::new(),
        };
        for (kind, table) in &merged {
            let at = format!("components[kind = \"{}\"].config", kind.name());
            let field_error = |error: FieldError| {
                let path = if error.path.is_empty() {
                    at.clone()
                } else {
                    format!("{at}.{}", error.path)
                };
                ConfigError::new("merged configuration", path, error.rule)
            };
            match kind {
                ComponentKind::ResourceMetrics => {
                    let config: ResourceMetricsConfig =
                        deserialize_table(table).map_err(field_error)?;
                    config.validate().map_err(field_error)?;
                    effective.resource_metrics = Some(config);
                }
                ComponentKind::Energy => {
                    let config: EnergyConfig = deserialize_table(table).map_err(field_error)?;
                    config.validate().map_err(field_error)?;
                    let mut settings = EnergySettings {
                        config,
                        ..EnergySettings::default()
                    };
                    for layer in layers {
                        if let Some(entry) =
                            layer.components.get(kind).filter(|entry| entry.enabled)
                        {
                            let origin = if layer.source_name == CODE_SOURCE {
                                FactorOrigin::Code
                            } else {
                                FactorOrigin::File(layer.source_name.clone())
                            };
                            settings.note_layer(&entry.config, origin);
                        }
                    }
                    effective.energy = Some(settings);
                }
                ComponentKind::Diagnostics => {
                    let limits: DiagnosticsLimits =
                        deserialize_table(table).map_err(field_error)?;
                    limits.validate().map_err(|error| {
                        field_error(FieldError::new(error.field, error.to_string()))
                    })?;
                    effective.diagnostics = Some(limits);
                }
                ComponentKind::Atof => {
                    let config: AtofConfig = deserialize_table(table).map_err(field_error)?;
                    config.validate().map_err(field_error)?;
                    effective.atof = Some(config);
                }
                ComponentKind::OpenTelemetry => {
                    let config: OpenTelemetryConfig =
                        deserialize_table(table).map_err(field_error)?;
                    config.validate().map_err(field_error)?;
                    effective.opentelemetry = Some(config);
                }
                // Workers are merged by plugin_id below, never by kind.
                ComponentKind::Worker => {}
            }
        }
        effective.workers = merge_workers(layers)?;
        Ok(effective)
    }

    /// The effective configuration as a `plugins.toml` document, every default written
    /// out.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        let mut components = Vec::new();
        if let Some(config) = &self.resource_metrics {
            components.push(component_table(ComponentKind::ResourceMetrics, config)?);
        }
        if let Some(settings) = &self.energy {
            components.push(component_table(ComponentKind::Energy, &settings.config)?);
        } else {
            components.push(disabled_component(ComponentKind::Energy));
        }
        match &self.diagnostics {
            Some(limits) => components.push(component_table(ComponentKind::Diagnostics, limits)?),
            None => {
                let mut table = toml::Table::new();
                table.insert(
                    "kind".into(),
                    toml::Value::String(ComponentKind::Diagnostics.name().into()),
                );
                table.insert("enabled".into(), toml::Value::Boolean(false));
                components.push(toml::Value::Table(table));
            }
        }
        if let Some(config) = &self.atof {
            components.push(component_table(ComponentKind::Atof, config)?);
        }
        if let Some(config) = &self.opentelemetry {
            components.push(component_table(ComponentKind::OpenTelemetry, config)?);
        }
        for worker in &self.workers {
            components.push(component_table(ComponentKind::Worker, worker)?);
        }
        let mut document = toml::Table::new();
        document.insert("version".into(), toml::Value::Integer(1));
        document.insert("components".into(), toml::Value::Array(components));
        toml::to_string(&document)
            .map_err(|error| ConfigError::new("effective configuration", "", error.to_string()))
    }
}

fn disabled_component(kind: ComponentKind) -> toml::Value {
    let mut table = toml::Table::new();
    table.insert("kind".into(), toml::Value::String(kind.name().into()));
    table.insert("enabled".into(), toml::Value::Boolean(false));
    toml::Value::Table(table)
}

fn component_table<T: serde::Serialize>(
    kind: ComponentKind,
    config: &T,
) -> Result<toml::Value, ConfigError> {
    let config = toml::Value::try_from(config).map_err(|error| {
        ConfigError::new("effective configuration", kind.name(), error.to_string())
    })?;
    let mut table = toml::Table::new();
    table.insert("kind".into(), toml::Value::String(kind.name().into()));
    table.insert("enabled".into(), toml::Value::Boolean(true));
    table.insert("config".into(), config);
    Ok(toml::Value::Table(table))
}

/// The workers of `layers`, merged by `plugin_id` (later layers on top), each
/// validated; an entry with `enabled = false` contributes nothing.
fn merge_workers(layers: &[PluginsDocument]) -> Result<Vec<WorkerConfig>, ConfigError> {
    let mut merged: Vec<(String, toml::Table)> = Vec::new();
    for layer in layers {
        for entry in layer.workers.iter().filter(|entry| entry.enabled) {
            let Some(plugin_id) = entry.config.get("plugin_id").and_then(|id| id.as_str()) else {
                continue;
            };
            match merged.iter_mut().find(|(id, _)| id == plugin_id) {
                Some((_, table)) => merge_tables(table, &entry.config),
                None => merged.push((plugin_id.to_owned(), entry.config.clone())),
            }
        }
    }
    merged
        .into_iter()
        .map(|(plugin_id, table)| {
            let at = format!("components[kind = \"worker\", plugin_id = \"{plugin_id}\"].config");
            let field_error = |error: FieldError| {
                ConfigError::new(
                    "merged configuration",
                    format!("{at}.{}", error.path),
                    error.rule,
                )
            };
            let config: WorkerConfig = deserialize_table(&table).map_err(field_error)?;
            config.validate().map_err(field_error)?;
            Ok(config)
        })
        .collect()
}

/// Recursively merges `overlay` into `base`: tables merge, anything else is replaced.
pub fn merge_tables(base: &mut toml::Table, overlay: &toml::Table) {
    for (key, value) in overlay {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(existing)), toml::Value::Table(incoming)) => {
                merge_tables(existing, incoming);
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// What the layers say of one component, for a host that has its own default for it
/// (the CLI measures with `resource_metrics` when no file mentions the component).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentSwitch {
    /// No layer mentions it.
    Unmentioned,
    /// Some layer switches it off and none on; the first such layer's source.
    Disabled(String),
    /// Some layer switches it on.
    Enabled,
}

impl ComponentSwitch {
    /// How `layers` leave `kind`.
    pub fn of(layers: &[PluginsDocument], kind: ComponentKind) -> Self {
        let entries = || {
            layers
                .iter()
                .filter_map(|layer| layer.components.get(&kind).map(|entry| (layer, entry)))
        };
        if entries().any(|(_, entry)| entry.enabled) {
            return ComponentSwitch::Enabled;
        }
        match entries().next() {
            Some((layer, _)) => ComponentSwitch::Disabled(layer.source_name.clone()),
            None => ComponentSwitch::Unmentioned,
        }
    }
}

/// The layer (its source) that last sets `polling.enabled` of an enabled
/// `resource_metrics` entry, with the value it sets; `None` when no layer sets it.
pub fn polling_setting(layers: &[PluginsDocument]) -> Option<(String, bool)> {
    layers.iter().rev().find_map(|layer| {
        let entry = layer
            .components
            .get(&ComponentKind::ResourceMetrics)
            .filter(|entry| entry.enabled)?;
        let enabled = entry
            .config
            .get("polling")?
            .as_table()?
            .get("enabled")?
            .as_bool()?;
        Some((layer.source_name.clone(), enabled))
    })
}

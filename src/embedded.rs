//! What the language packages (Python, Node.js) share: their options turned into a
//! configuration and a target by the same rules as the CLI's, a pipeline started from
//! them, and one-shot collection. The packages only move values across; every rule
//! lives here once.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use wattline_config::{ConfigError, EffectiveConfig, MeasurementScopeSetting, PluginsDocument};

use crate::{AgentScope, EnergyReport, Pipeline, ScopeTarget, snapshot::Snapshot};

pub mod gpu_records;

/// Where the configuration comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum ConfigSource {
    /// The library defaults ([`crate::library_default_config`]); no file is read.
    #[default]
    Defaults,
    /// A plugins.toml (or a directory holding one), layered as the CLI layers it.
    File(PathBuf),
    /// A plugins.toml table given in code as JSON text; errors name it `<config>`.
    Json(String),
    /// The plugin host's layering (the reference's `initialize`): the discovered
    /// files (`explicit` replacing the user's file, the system file kept), then the
    /// table given in code as JSON text, which overrides them.
    Layered {
        /// A plugins.toml (or a directory holding one) in place of the user's file.
        explicit: Option<PathBuf>,
        /// The configuration given in code, as JSON text; errors name it `<config>`.
        json: String,
    },
}

/// Makes the GPU source of each pipeline started with it (`None`: GPU reading is
/// off): how a language package plugs in a source written in that language.
#[derive(Clone)]
pub struct GpuSourceHook(
    pub Arc<dyn Fn() -> Option<Box<dyn wattline_gpu::GpuSource>> + Send + Sync>,
);

impl std::fmt::Debug for GpuSourceHook {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("GpuSourceHook")
    }
}

impl PartialEq for GpuSourceHook {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The options every embedded API takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EmbeddedOptions {
    /// The configuration.
    pub config: ConfigSource,
    /// `global`, `application_process`, `process_tree` or `runtime_default`; `None`
    /// keeps the configuration's.
    pub scope: Option<String>,
    /// The process measured by process scopes (default: the calling process).
    pub pid: Option<u32>,
    /// Turns polling on at this period.
    pub interval_ms: Option<u64>,
    /// Turns the ATOF exporter on, writing here.
    pub atof_dir: Option<PathBuf>,
    /// Turns OTLP on towards this URL.
    pub otlp_endpoint: Option<String>,
    /// `false` reads no GPU.
    pub gpu: bool,
    /// Replaces GPU source selection (with `gpu` on).
    pub gpu_source: Option<GpuSourceHook>,
}

/// Why an embedded call failed: a refused configuration, or anything else.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The configuration or an option was refused (names source, field and rule).
    #[error("{0}")]
    Config(ConfigError),
    /// The pipeline or the measured process failed.
    #[error("{0}")]
    Other(String),
}

impl From<ConfigError> for EmbeddedError {
    fn from(error: ConfigError) -> Self {
        EmbeddedError::Config(error)
    }
}

fn option_error(option: &str, rule: impl Into<String>) -> EmbeddedError {
    EmbeddedError::Config(ConfigError::new(option, "", rule))
}

/// The remote model call a binding's span end describes, from its JSON
/// (`{"attributes": {…}, "estimate": {…}}`, see
/// [`wattline_model::remote_call::remote_call_from_span_end_json`]); `None` without
/// one or for a span that is no remote model call.
pub fn span_end_call(
    span_end: Option<&str>,
) -> Result<Option<wattline_model::remote_call::RemoteCall>, EmbeddedError> {
    match span_end {
        None => Ok(None),
        Some(text) => wattline_model::remote_call::remote_call_from_span_end_json(text)
            .map_err(EmbeddedError::Other),
    }
}

/// The configuration `source` names, with defaults applied.
pub fn load(source: &ConfigSource) -> Result<EffectiveConfig, EmbeddedError> {
    match source {
        ConfigSource::Defaults => Ok(crate::library_default_config()),
        ConfigSource::File(path) => Ok(crate::load_config(Some(path.clone()))?),
        ConfigSource::Json(json) => Ok(EffectiveConfig::merge(&[document_from_json(json)?])?),
        ConfigSource::Layered { explicit, json } => {
            let mut layers =
                wattline_config::Discovery::from_environment(explicit.clone()).load()?;
            layers.push(document_from_json(json)?);
            Ok(EffectiveConfig::merge(&layers)?)
        }
    }
}

/// A plugins.toml table given in code as JSON text, checked by the file's rules.
fn document_from_json(json: &str) -> Result<PluginsDocument, ConfigError> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(|error| {
        ConfigError::new("<config>", "", format!("not JSON-like data: {error}"))
    })?;
    let table = toml::Table::try_from(&value).map_err(|error| {
        ConfigError::new(
            "<config>",
            "",
            format!("cannot be a plugins.toml table (TOML has no null): {error}"),
        )
    })?;
    PluginsDocument::from_table("<config>", &table)
}

fn scope_setting(scope: Option<&str>) -> Result<Option<MeasurementScopeSetting>, EmbeddedError> {
    Ok(match scope {
        None => None,
        Some("global") => Some(MeasurementScopeSetting::Global),
        Some("application_process") => Some(MeasurementScopeSetting::ApplicationProcess),
        Some("process_tree") => Some(MeasurementScopeSetting::ProcessTree),
        Some("runtime_default") => Some(MeasurementScopeSetting::RuntimeDefault),
        Some(other) => {
            return Err(option_error(
                "scope",
                format!(
                    "must be one of global, application_process, process_tree, \
                     runtime_default (got {other:?})"
                ),
            ));
        }
    })
}

/// The target: the option's scope, else the configuration's; `runtime_default` is the
/// tree rooted at `pid` (default: this process), as for every embedded API.
pub fn target(
    config: &EffectiveConfig,
    scope: Option<&str>,
    pid: Option<u32>,
) -> Result<ScopeTarget, EmbeddedError> {
    let setting = match scope_setting(scope)? {
        Some(setting) => setting,
        None => config
            .resource_metrics
            .as_ref()
            .map_or(MeasurementScopeSetting::RuntimeDefault, |resource| {
                resource.measurement_scope
            }),
    };
    let pid = pid.unwrap_or_else(std::process::id);
    crate::scope_target::resolve_target(setting, MeasurementScopeSetting::ProcessTree, Some(pid))
        .map_err(|error| EmbeddedError::Other(error.to_string()))
}

/// The configuration and target of a pipeline started with `options`.
pub fn pipeline_config(
    options: &EmbeddedOptions,
) -> Result<(EffectiveConfig, ScopeTarget), EmbeddedError> {
    let mut config = load(&options.config)?;
    if let Some(interval) = options.interval_ms {
        let resource = config.resource_metrics.get_or_insert_with(Default::default);
        resource.polling.enabled = true;
        resource.polling.interval_millis = interval;
        resource
            .validate()
            .map_err(|error| option_error("interval_ms", error.rule))?;
    }
    if let Some(directory) = &options.atof_dir {
        crate::overrides::enable_atof(&mut config, directory, "atof_dir")?;
    }
    if let Some(url) = &options.otlp_endpoint {
        crate::overrides::enable_otlp(&mut config, url, "otlp_endpoint")?;
    }
    if !options.gpu
        && let Some(resource) = config.resource_metrics.as_mut()
    {
        resource.gpu.enabled = false;
    }
    let target = target(&config, options.scope.as_deref(), options.pid)?;
    Ok((config, target))
}

/// Starts a pipeline with `options`. Call inside a Tokio runtime.
pub async fn start_pipeline(options: &EmbeddedOptions) -> Result<Pipeline, EmbeddedError> {
    let (config, target) = pipeline_config(options)?;
    spawn_pipeline(config, target, options).await
}

async fn spawn_pipeline(
    config: EffectiveConfig,
    target: ScopeTarget,
    options: &EmbeddedOptions,
) -> Result<Pipeline, EmbeddedError> {
    let mut builder = Pipeline::builder().config(config).scope(target);
    match (&options.gpu_source, options.gpu) {
        (_, false) => builder = builder.gpu_source(|| None),
        (Some(hook), true) => {
            let hook = Arc::clone(&hook.0);
            builder = builder.gpu_source(move || hook());
        }
        (None, true) => {}
    }
    builder
        .spawn()
        .await
        .map_err(|error| EmbeddedError::Other(error.to_string()))
}

/// A pipeline as a language package holds it: live Agent scopes kept by UUID (a
/// foreign caller holds a string, not a guard), and the final report kept so that a
/// second shutdown answers the same.
pub struct EmbeddedPipeline {
    pipeline: Pipeline,
    collects: bool,
    scopes: Mutex<HashMap<String, AgentScope>>,
    report: Mutex<Option<Option<EnergyReport>>>,
}

impl EmbeddedPipeline {
    /// Starts a pipeline with `options`. Call inside a Tokio runtime.
    pub async fn start(options: &EmbeddedOptions) -> Result<EmbeddedPipeline, EmbeddedError> {
        let (config, target) = pipeline_config(options)?;
        let collects = config.resource_metrics.is_some();
        Ok(EmbeddedPipeline {
            pipeline: spawn_pipeline(config, target, options).await?,
            collects,
            scopes: Mutex::new(HashMap::new()),
            report: Mutex::new(None),
        })
    }

    /// Whether its configuration has the `resource_metrics` component (`collect`
    /// needs it).
    pub fn collects(&self) -> bool {
        self.collects
    }

    fn scopes(&self) -> MutexGuard<'_, HashMap<String, AgentScope>> {
        self.scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn other(error: crate::Error) -> EmbeddedError {
        EmbeddedError::Other(error.to_string())
    }

    /// One on-demand snapshot: the first of this pipeline's series has no rates,
    /// later ones do.
    pub async fn collect(&self) -> Result<Snapshot, EmbeddedError> {
        self.check_collects()?;
        self.pipeline.collect().await.map_err(Self::other)
    }

    /// [`Self::collect`], the snapshot handed to `done` on the thread that finished it
    /// (for a binding's callback into its own runtime); `done` is called exactly once,
    /// possibly before this returns.
    pub fn collect_then(
        &self,
        done: impl FnOnce(Result<Snapshot, EmbeddedError>) + Send + 'static,
    ) {
        if let Err(error) = self.check_collects() {
            done(Err(error));
            return;
        }
        self.pipeline
            .collect_then(move |snapshot| done(snapshot.map_err(Self::other)));
    }

    fn check_collects(&self) -> Result<(), EmbeddedError> {
        if self.collects {
            return Ok(());
        }
        Err(EmbeddedError::Config(ConfigError::new(
            "config",
            "",
            "resource_metrics is disabled by the configuration: there is nothing to collect",
        )))
    }

    /// Starts an Agent scope of `weight` (1 when `None`) among the scopes live beside
    /// it, its span a child of the caller's span `traceparent` (W3C; its parent
    /// scope's span, else a trace of its own, when `None`), nested in the live scope
    /// `parent` (a UUID this returned) when given; its UUID names it in
    /// [`Self::end_scope`]. A `parent` that is not live here is refused, naming it.
    /// Synchronous, and needs no runtime: a binding calls it in place.
    pub fn start_scope(
        &self,
        name: &str,
        weight: Option<f64>,
        traceparent: Option<String>,
        parent: Option<&str>,
    ) -> Result<String, EmbeddedError> {
        let options = crate::ScopeOptions {
            weight,
            traceparent,
        };
        let mut scopes = self.scopes();
        let scope = match parent {
            None => self.pipeline.agent_scope_with(name, options),
            Some(parent) => match scopes.get(parent) {
                Some(parent) => parent.child_with(name, options),
                None => {
                    return Err(EmbeddedError::Other(format!(
                        "the parent scope {parent:?} is not a live scope of this pipeline"
                    )));
                }
            },
        }
        .map_err(Self::other)?;
        let uuid = scope.uuid().to_string();
        scopes.insert(uuid.clone(), scope);
        Ok(uuid)
    }

    /// Ends the Agent scope `uuid`; `false` when it was not live, an error when the
    /// pipeline has shut down. Synchronous, as [`Self::start_scope`]. `span_end`: the
    /// step's span at its end, as JSON ([`span_end_call`]): a remote model call's
    /// step keeps the call's estimate.
    pub fn end_scope(&self, uuid: &str, span_end: Option<&str>) -> Result<bool, EmbeddedError> {
        let remote_call = span_end_call(span_end)?;
        let Some(scope) = self.scopes().remove(uuid) else {
            return Ok(false);
        };
        match remote_call {
            Some(call) => scope.end_remote_call(call),
            None => scope.end(),
        }
        .map_err(Self::other)?;
        Ok(true)
    }

    /// The energy report so far.
    pub async fn flush(&self) -> Result<EnergyReport, EmbeddedError> {
        self.pipeline.flush().await.map_err(Self::other)
    }

    /// Sends what the exporters hold, with or without the energy component.
    pub async fn flush_telemetry(&self) -> Result<(), EmbeddedError> {
        self.pipeline.flush_telemetry().await.map_err(Self::other)
    }

    /// Ends the live scopes, stops the pipeline and returns its final report; a second
    /// call returns the same report.
    pub async fn shutdown(&self) -> Result<Option<EnergyReport>, EmbeddedError> {
        if let Some(report) = self.report.lock().ok().and_then(|stored| stored.clone()) {
            return Ok(report);
        }
        let live: Vec<AgentScope> = self.scopes().drain().map(|(_, scope)| scope).collect();
        for scope in live {
            let _ = scope.end();
        }
        let report = self.pipeline.shutdown().await.map_err(Self::other)?;
        if let Ok(mut stored) = self.report.lock() {
            *stored = Some(report.clone());
        }
        Ok(report)
    }
}

/// Agent scopes the calling process marks in the pipeline of `wattline run`, over its
/// host endpoint (`WATTLINE_HOST_*`): one connection per process, open scopes kept by
/// id for callers that hold a string.
#[cfg(unix)]
pub mod host_scopes {
    use std::collections::HashMap;
    use std::sync::{Mutex, MutexGuard, OnceLock};

    use super::EmbeddedError;

    fn connection() -> Result<wattline_worker::HostConnection, EmbeddedError> {
        static CONNECTION: OnceLock<wattline_worker::HostConnection> = OnceLock::new();
        if let Some(connection) = CONNECTION.get() {
            return Ok(connection.clone());
        }
        let connection = wattline_worker::HostConnection::from_env()
            .map_err(|error| EmbeddedError::Other(error.to_string()))?;
        Ok(CONNECTION.get_or_init(|| connection).clone())
    }

    fn open() -> MutexGuard<'static, HashMap<String, wattline_worker::AgentScope>> {
        static OPEN: OnceLock<Mutex<HashMap<String, wattline_worker::AgentScope>>> =
            OnceLock::new();
        OPEN.get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts scope `name` (of `weight`, 1 when `None`; its span a child of
    /// `traceparent`'s) in the run's pipeline, nested in the open scope
    /// `parent_scope_id` when given (the host refuses one that is not open); its id.
    pub async fn start(
        name: &str,
        weight: Option<f64>,
        traceparent: Option<&str>,
        parent_scope_id: Option<&str>,
    ) -> Result<String, EmbeddedError> {
        let options = wattline_worker::ScopeRequest {
            weight,
            traceparent,
            parent_scope_id,
        };
        let scope = connection()?
            .agent_scope_with(name, options)
            .await
            .map_err(|error| EmbeddedError::Other(error.to_string()))?;
        let id = scope.scope_id().to_owned();
        open().insert(id.clone(), scope);
        Ok(id)
    }

    /// Ends a scope [`start`] started; `false` when it was not open. `span_end` as
    /// for [`super::EmbeddedPipeline::end_scope`].
    pub async fn end(scope_id: &str, span_end: Option<&str>) -> Result<bool, EmbeddedError> {
        let remote_call = super::span_end_call(span_end)?;
        let Some(scope) = open().remove(scope_id) else {
            return Ok(false);
        };
        match remote_call {
            Some(call) => scope.end_remote_call(wire_call(call)).await,
            None => scope.end().await,
        }
        .map_err(|error| EmbeddedError::Other(error.to_string()))?;
        Ok(true)
    }

    /// `call` as the host protocol carries it.
    fn wire_call(
        call: wattline_model::remote_call::RemoteCall,
    ) -> wattline_worker::RemoteModelCall {
        wattline_worker::RemoteModelCall {
            operation: call.operation,
            provider: call.provider,
            model: call.model,
            input_tokens: call.input_tokens,
            output_tokens: call.output_tokens,
            estimate: call
                .estimate
                .map(|estimate| wattline_worker::RemoteEnergyEstimate {
                    low_kwh: estimate.low_kwh,
                    high_kwh: estimate.high_kwh,
                    estimator: estimate.estimator,
                    source: estimate.source,
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_table_is_checked_by_the_files_rules_and_named_config() {
        let bad = ConfigSource::Json(
            r#"{"version": 1, "components": [{"kind": "resource_metrics", "config": {"bogus": 1}}]}"#
                .into(),
        );
        let Err(EmbeddedError::Config(error)) = load(&bad) else {
            panic!("refused as configuration")
        };
        assert_eq!(error.source_name, "<config>");
        assert_eq!(error.field_path, "components[0].config.bogus");
        let null = ConfigSource::Json(r#"{"version": 1, "components": null}"#.into());
        assert!(matches!(load(&null), Err(EmbeddedError::Config(_))));
    }

    #[test]
    fn options_are_validated_and_named() {
        let interval = EmbeddedOptions {
            interval_ms: Some(0),
            gpu: true,
            ..EmbeddedOptions::default()
        };
        let Err(EmbeddedError::Config(error)) = pipeline_config(&interval) else {
            panic!("a zero interval is refused")
        };
        assert_eq!(error.source_name, "interval_ms");
        let scope = EmbeddedOptions {
            scope: Some("everything".into()),
            ..EmbeddedOptions::default()
        };
        let Err(EmbeddedError::Config(error)) = pipeline_config(&scope) else {
            panic!("an unknown scope is refused")
        };
        assert_eq!(error.source_name, "scope");
        let defaults = EmbeddedOptions::default();
        let (config, target) = pipeline_config(&defaults).unwrap();
        assert!(config.resource_metrics.is_some());
        assert!(
            matches!(target, ScopeTarget::ProcessTree(identity) if identity.pid == std::process::id()),
            "the library default is the tree rooted here"
        );
    }
}

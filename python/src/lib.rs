//! `wattline._native`: the Python package's bridge to the `wattline` crate. Every call
//! that waits (collection, flush, shutdown, a host round trip) releases the GIL and
//! runs on one process-wide Tokio runtime; data crosses as JSON, which the package's
//! Python layer turns into frozen dataclasses. No measurement logic lives here.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use wattline::config::{EffectiveConfig, MeasurementScopeSetting, PluginsDocument};

#[cfg(unix)]
mod worker;

create_exception!(
    _native,
    WattlineError,
    PyException,
    "Base class of every error wattline raises."
);
create_exception!(
    _native,
    ConfigError,
    WattlineError,
    "A configuration was refused; the message names the file or argument, the field path and the rule."
);

fn wattline_error(error: impl std::fmt::Display) -> PyErr {
    WattlineError::new_err(error.to_string())
}

fn config_error(error: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(error.to_string())
}

/// The one runtime every pipeline of the process runs on: its threads are made once,
/// so pipelines started again and again (a notebook) leave no threads behind.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("wattline")
                .enable_all()
                .build()
                .map_err(|error| error.to_string())
        })
        .as_ref()
        .map_err(|error| wattline_error(format!("cannot start the async runtime: {error}")))
}

/// Runs `future` on the runtime with the GIL released.
fn block_on<T: Send>(
    py: Python<'_>,
    future: impl std::future::Future<Output = T> + Send,
) -> PyResult<T> {
    let runtime = runtime()?;
    Ok(py.detach(|| runtime.block_on(future)))
}

/// The configuration: `path` (a plugins.toml, layered as the CLI layers it), else
/// `table_json` (a dict given in code, named `<config>` in errors), else the library's
/// defaults (resource_metrics on, polling off, energy and diagnostics on).
fn load_config(path: Option<PathBuf>, table_json: Option<String>) -> PyResult<EffectiveConfig> {
    if let Some(path) = path {
        return wattline::load_config(Some(path)).map_err(config_error);
    }
    let Some(json) = table_json else {
        return Ok(wattline::library_default_config());
    };
    let value: serde_json::Value = serde_json::from_str(&json)
        .map_err(|error| config_error(format!("<config>: not JSON-like data: {error}")))?;
    let table: toml::Table = toml::Table::try_from(&value).map_err(|error| {
        config_error(format!(
            "<config>: cannot be a plugins.toml table (TOML has no null): {error}"
        ))
    })?;
    let document = PluginsDocument::from_table("<config>", &table).map_err(config_error)?;
    EffectiveConfig::merge(&[document]).map_err(config_error)
}

fn scope_setting(scope: Option<&str>) -> PyResult<Option<MeasurementScopeSetting>> {
    Ok(match scope {
        None => None,
        Some("global") => Some(MeasurementScopeSetting::Global),
        Some("application_process") => Some(MeasurementScopeSetting::ApplicationProcess),
        Some("process_tree") => Some(MeasurementScopeSetting::ProcessTree),
        Some("runtime_default") => Some(MeasurementScopeSetting::RuntimeDefault),
        Some(other) => {
            return Err(config_error(format!(
                "scope: must be one of global, application_process, process_tree, \
                 runtime_default (got {other:?})"
            )));
        }
    })
}

/// The target: the argument's scope, else the configuration's; `runtime_default` is
/// the tree rooted at `pid` (default: this process), as for every embedded API.
fn target_of(
    config: &EffectiveConfig,
    scope: Option<&str>,
    pid: Option<u32>,
) -> PyResult<wattline::ScopeTarget> {
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
    wattline::resolve_target(setting, MeasurementScopeSetting::ProcessTree, Some(pid))
        .map_err(wattline_error)
}

/// One snapshot as JSON, from a pipeline started for it and shut down after (no
/// polling, no energy stage): the same reading `wattline collect` prints.
#[pyfunction]
#[pyo3(signature = (config_path=None, config_json=None, scope=None, pid=None))]
fn collect_json(
    py: Python<'_>,
    config_path: Option<PathBuf>,
    config_json: Option<String>,
    scope: Option<String>,
    pid: Option<u32>,
) -> PyResult<String> {
    let mut config = load_config(config_path, config_json)?;
    let target = target_of(&config, scope.as_deref(), pid)?;
    let Some(resource) = config.resource_metrics.as_mut() else {
        return Err(config_error(
            "resource_metrics is disabled by the configuration: there is nothing to collect",
        ));
    };
    resource.polling = Default::default();
    config.energy = None;
    let snapshot = block_on(py, async move {
        let pipeline = wattline::Pipeline::builder()
            .config(config)
            .scope(target)
            .spawn()
            .await?;
        let snapshot = pipeline.collect().await;
        let _ = pipeline.shutdown().await;
        snapshot
    })?
    .map_err(wattline_error)?;
    serde_json::to_string(&snapshot).map_err(wattline_error)
}

/// A running pipeline, driven from Python.
#[pyclass(module = "wattline._native")]
struct NativePipeline {
    pipeline: wattline::Pipeline,
    /// Live Agent scopes by UUID; ending one drops its guard.
    scopes: Mutex<HashMap<String, wattline::AgentScope>>,
    report: Mutex<Option<String>>,
}

impl NativePipeline {
    fn scopes(&self) -> MutexGuard<'_, HashMap<String, wattline::AgentScope>> {
        self.scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl NativePipeline {
    /// Starts a pipeline. `interval_ms` turns polling on at that period; `atof_dir`
    /// and `otlp_endpoint` turn those exporters on; `gpu=False` reads no GPU.
    #[staticmethod]
    #[pyo3(signature = (config_path=None, config_json=None, scope=None, pid=None, interval_ms=None, atof_dir=None, otlp_endpoint=None, gpu=true))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        config_path: Option<PathBuf>,
        config_json: Option<String>,
        scope: Option<String>,
        pid: Option<u32>,
        interval_ms: Option<u64>,
        atof_dir: Option<PathBuf>,
        otlp_endpoint: Option<String>,
        gpu: bool,
    ) -> PyResult<NativePipeline> {
        let mut config = load_config(config_path, config_json)?;
        if let Some(interval) = interval_ms {
            let resource = config.resource_metrics.get_or_insert_with(Default::default);
            resource.polling.enabled = true;
            resource.polling.interval_millis = interval;
            resource
                .validate()
                .map_err(|error| config_error(format!("interval_ms: {}", error.rule)))?;
        }
        if let Some(directory) = &atof_dir {
            wattline::overrides::enable_atof(&mut config, directory, "atof_dir")
                .map_err(config_error)?;
        }
        if let Some(url) = &otlp_endpoint {
            wattline::overrides::enable_otlp(&mut config, url, "otlp_endpoint")
                .map_err(config_error)?;
        }
        if !gpu && let Some(resource) = config.resource_metrics.as_mut() {
            resource.gpu.enabled = false;
        }
        let target = target_of(&config, scope.as_deref(), pid)?;
        let pipeline = block_on(py, async move {
            let mut builder = wattline::Pipeline::builder().config(config).scope(target);
            if !gpu {
                builder = builder.gpu_source(|| None);
            }
            builder.spawn().await
        })?
        .map_err(wattline_error)?;
        Ok(NativePipeline {
            pipeline,
            scopes: Mutex::new(HashMap::new()),
            report: Mutex::new(None),
        })
    }

    /// One on-demand snapshot as JSON.
    fn collect_json(&self, py: Python<'_>) -> PyResult<String> {
        let pipeline = self.pipeline.clone();
        let snapshot =
            block_on(py, async move { pipeline.collect().await })?.map_err(wattline_error)?;
        serde_json::to_string(&snapshot).map_err(wattline_error)
    }

    /// Starts an Agent scope; its UUID.
    fn start_scope(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let pipeline = self.pipeline.clone();
        let name = name.to_owned();
        let scope = block_on(py, async move { pipeline.agent_scope(&name).await })?
            .map_err(wattline_error)?;
        let uuid = scope.uuid().to_string();
        self.scopes().insert(uuid.clone(), scope);
        Ok(uuid)
    }

    /// Ends the Agent scope `uuid`; `False` when it was not live.
    fn end_scope(&self, py: Python<'_>, uuid: &str) -> PyResult<bool> {
        let Some(scope) = self.scopes().remove(uuid) else {
            return Ok(false);
        };
        block_on(py, async move { scope.end().await })?.map_err(wattline_error)?;
        Ok(true)
    }

    /// The energy report so far, as JSON.
    fn flush_json(&self, py: Python<'_>) -> PyResult<String> {
        let pipeline = self.pipeline.clone();
        let report =
            block_on(py, async move { pipeline.flush().await })?.map_err(wattline_error)?;
        report.to_json().map_err(wattline_error)
    }

    /// Stops the pipeline (ending live scopes) and returns the final report as JSON;
    /// again after the first call, the same report.
    fn shutdown_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        if let Some(report) = self.report.lock().ok().and_then(|report| report.clone()) {
            return Ok(Some(report));
        }
        let live: Vec<wattline::AgentScope> = self.scopes().drain().map(|(_, s)| s).collect();
        let pipeline = self.pipeline.clone();
        let report = block_on(py, async move {
            for scope in live {
                let _ = scope.end().await;
            }
            pipeline.shutdown().await
        })?
        .map_err(wattline_error)?;
        let json = report
            .map(|report| report.to_json())
            .transpose()
            .map_err(wattline_error)?;
        if let Ok(mut stored) = self.report.lock() {
            stored.clone_from(&json);
        }
        Ok(json)
    }
}

/// The CLI's table for a report given as JSON.
#[pyfunction]
fn report_table(report_json: &str) -> PyResult<String> {
    let report: wattline::EnergyReport = serde_json::from_str(report_json)
        .map_err(|error| wattline_error(format!("not a wattline report: {error}")))?;
    Ok(report.to_table())
}

/// Starts an Agent scope in the pipeline of `wattline run` over its host endpoint
/// (`WATTLINE_HOST_*`); the scope id.
#[cfg(unix)]
#[pyfunction]
fn host_start_scope(py: Python<'_>, name: &str) -> PyResult<String> {
    let connection = host_connection()?;
    let name = name.to_owned();
    let scope = block_on(py, async move { connection.agent_scope(&name).await })?
        .map_err(wattline_error)?;
    let id = scope.scope_id().to_owned();
    host_scopes().insert(id.clone(), scope);
    Ok(id)
}

/// Ends a scope [`host_start_scope`] started; `False` when it was not open.
#[cfg(unix)]
#[pyfunction]
fn host_end_scope(py: Python<'_>, scope_id: &str) -> PyResult<bool> {
    let Some(scope) = host_scopes().remove(scope_id) else {
        return Ok(false);
    };
    block_on(py, async move { scope.end().await })?.map_err(wattline_error)?;
    Ok(true)
}

#[cfg(unix)]
fn host_connection() -> PyResult<wattline_worker::HostConnection> {
    static CONNECTION: OnceLock<wattline_worker::HostConnection> = OnceLock::new();
    if let Some(connection) = CONNECTION.get() {
        return Ok(connection.clone());
    }
    let connection = wattline_worker::HostConnection::from_env().map_err(wattline_error)?;
    Ok(CONNECTION.get_or_init(|| connection).clone())
}

#[cfg(unix)]
fn host_scopes() -> MutexGuard<'static, HashMap<String, wattline_worker::AgentScope>> {
    static SCOPES: OnceLock<Mutex<HashMap<String, wattline_worker::AgentScope>>> = OnceLock::new();
    SCOPES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How long the Python layer waits for a pipeline to stop when the interpreter exits.
const EXIT_GRACE: Duration = Duration::from_secs(5);

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("WattlineError", module.py().get_type::<WattlineError>())?;
    module.add("ConfigError", module.py().get_type::<ConfigError>())?;
    module.add("EXIT_GRACE_SECONDS", EXIT_GRACE.as_secs_f64())?;
    module.add_function(wrap_pyfunction!(collect_json, module)?)?;
    module.add_function(wrap_pyfunction!(report_table, module)?)?;
    #[cfg(unix)]
    {
        module.add_function(wrap_pyfunction!(host_start_scope, module)?)?;
        module.add_function(wrap_pyfunction!(host_end_scope, module)?)?;
    }
    module.add_class::<NativePipeline>()?;
    #[cfg(unix)]
    worker::add_to(module)?;
    Ok(())
}

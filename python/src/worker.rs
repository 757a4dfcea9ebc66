//! The Python worker SDK's bridge to the Rust worker SDK (`wattline-worker`): one
//! delivery implementation serves both languages. `wattline/worker.py` is the Python
//! face (the reference's class and method names); this file only moves calls and data
//! across, releasing the GIL wherever the Rust side waits.

use std::sync::Arc;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use wattline_worker::diagnostics::{
    DiagnosticCodeDefinition, DiagnosticComponent, DiagnosticExtensionDefinition,
    DiagnosticObservation, WorkerDiagnostics,
};
use wattline_worker::wire::relay::diagnostic_code_definition::Definition;
use wattline_worker::{
    AgentScope, DiagnosticDeliveryError as DeliveryError, HostConnection, PluginContext,
    PluginError, PluginRuntime, WorkerPlugin,
};

use super::{WattlineError, block_on, runtime, wattline_error};

create_exception!(
    _native,
    NativeDeliveryError,
    WattlineError,
    "A diagnostic delivery failure; args[0] is its kind."
);

/// The error's stable kind, as the reference's `DiagnosticDeliveryError.kind`.
fn delivery_error(error: DeliveryError) -> PyErr {
    let kind = match error {
        DeliveryError::Full => "full",
        DeliveryError::Invalid => "invalid",
        DeliveryError::NotConsumed => "not_consumed",
        DeliveryError::Rejected => "rejected",
        DeliveryError::Uncertain => "uncertain",
        DeliveryError::Closed => "closed",
    };
    NativeDeliveryError::new_err(kind)
}

/// The reference Python SDK's limit for `flush` and `close` when none is given.
const LOCAL_LIFECYCLE_TIMEOUT: Duration = Duration::from_secs(2);

fn seconds(timeout: Option<f64>) -> Duration {
    timeout
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map_or(LOCAL_LIFECYCLE_TIMEOUT, Duration::from_secs_f64)
}

/// One code definition as the Python layer passes it: `(builtin_name, None)` or
/// `(None, (name, description, outcome, allowed_failure_classes))`.
type CodeTuple = (Option<String>, Option<(String, String, i32, Vec<String>)>);

fn code_definition((builtin, extension): CodeTuple) -> DiagnosticCodeDefinition {
    let definition = match (builtin, extension) {
        (Some(name), _) => Some(Definition::BuiltinName(name)),
        (None, Some((name, description, outcome, allowed_failure_classes))) => {
            Some(Definition::Extension(DiagnosticExtensionDefinition {
                name,
                description,
                outcome,
                allowed_failure_classes,
            }))
        }
        // Neither: the SDK refuses the declaration as Invalid, naming nothing secret.
        (None, None) => None,
    };
    DiagnosticCodeDefinition { definition }
}

/// An observation as the Python layer encodes it.
type ObservationTuple = (
    u32,
    u64,
    i32,
    i32,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// A worker's diagnostics facade.
#[pyclass(module = "wattline._native")]
pub struct NativeWorkerDiagnostics {
    inner: WorkerDiagnostics,
}

#[pymethods]
impl NativeWorkerDiagnostics {
    /// `available`, `disabled`, `unavailable` or `unsupported`.
    fn availability(&self) -> &'static str {
        self.inner.availability().as_str()
    }

    /// The SDK-local delivery totals.
    fn delivery_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.inner.delivery_stats();
        let dict = PyDict::new(py);
        dict.set_item("dropped", stats.dropped)?;
        dict.set_item("rejected", stats.rejected)?;
        dict.set_item("uncertain", stats.uncertain)?;
        dict.set_item("delivered", stats.delivered)?;
        Ok(dict)
    }

    /// Registers component `name` with its codes and waits for the host's receipt.
    fn component(
        &self,
        py: Python<'_>,
        name: String,
        codes: Vec<CodeTuple>,
    ) -> PyResult<NativeDiagnosticComponent> {
        let diagnostics = self.inner.clone();
        let codes = codes.into_iter().map(code_definition).collect();
        let component = block_on(py, async move { diagnostics.component(&name, codes).await })?
            .map_err(delivery_error)?;
        Ok(NativeDiagnosticComponent {
            inner: Arc::new(component),
        })
    }

    /// Waits until everything accepted so far is settled, at most `timeout` seconds.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let diagnostics = self.inner.clone();
        block_on(py, async move { diagnostics.flush(seconds(timeout)).await })?
            .map_err(delivery_error)
    }

    /// Flushes, closes the session and stops delivery.
    #[pyo3(signature = (timeout=None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let diagnostics = self.inner.clone();
        block_on(py, async move { diagnostics.close(seconds(timeout)).await })?
            .map_err(delivery_error)
    }
}

/// A registered component.
#[pyclass(module = "wattline._native")]
pub struct NativeDiagnosticComponent {
    inner: Arc<DiagnosticComponent>,
}

#[pymethods]
impl NativeDiagnosticComponent {
    /// Calls `make` (which returns an encoded observation) only when the queue admits
    /// the record; its exception, if any, propagates and nothing is recorded.
    fn try_record_lazy(&self, py: Python<'_>, make: Py<PyAny>) -> PyResult<()> {
        let mut raised: Option<PyErr> = None;
        let result = self.inner.try_record_lazy(|| {
            match make
                .call0(py)
                .and_then(|value| value.extract::<ObservationTuple>(py))
            {
                Ok((
                    code,
                    count,
                    outcome,
                    severity,
                    failure_class,
                    detail,
                    request_id,
                    session_id,
                    observed_unix_micros,
                )) => DiagnosticObservation {
                    code,
                    count,
                    outcome,
                    severity,
                    failure_class,
                    detail,
                    request_id,
                    session_id,
                    observed_unix_micros,
                    ..Default::default()
                },
                Err(error) => {
                    raised = Some(error);
                    // Count 0 is refused as Invalid: the failed factory records nothing.
                    DiagnosticObservation::default()
                }
            }
        });
        if let Some(error) = raised {
            return Err(error);
        }
        result.map_err(delivery_error)
    }

    /// Closes the registration on the host after everything recorded before it.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let component = Arc::clone(&self.inner);
        block_on(py, async move { component.close().await })?.map_err(delivery_error)
    }
}

/// The activation's runtime handle, as `PluginContext.runtime` gives it.
#[pyclass(module = "wattline._native")]
pub struct NativePluginRuntime {
    inner: PluginRuntime,
}

#[pymethods]
impl NativePluginRuntime {
    /// The activation's diagnostics facade, negotiated on the first call.
    fn diagnostics(&self, py: Python<'_>) -> PyResult<NativeWorkerDiagnostics> {
        let runtime = self.inner.clone();
        let inner = block_on(py, async move { runtime.diagnostics().await.clone() })?;
        Ok(NativeWorkerDiagnostics { inner })
    }

    /// Starts the Agent scope `name` on the host; it lasts until `end()`.
    fn agent_scope(&self, py: Python<'_>, name: String) -> PyResult<NativeAgentScope> {
        let runtime = self.inner.clone();
        let scope = block_on(py, async move { runtime.agent_scope(&name).await })?
            .map_err(wattline_error)?;
        Ok(NativeAgentScope {
            name: scope.name().to_owned(),
            scope_id: scope.scope_id().to_owned(),
            inner: std::sync::Mutex::new(Some(scope)),
        })
    }
}

/// An Agent scope a worker started on the host.
#[pyclass(module = "wattline._native")]
pub struct NativeAgentScope {
    name: String,
    scope_id: String,
    /// `None` once ended.
    inner: std::sync::Mutex<Option<AgentScope>>,
}

#[pymethods]
impl NativeAgentScope {
    /// The scope's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The host's id for the scope.
    #[getter]
    fn scope_id(&self) -> &str {
        &self.scope_id
    }

    /// Ends the scope on the host; a second call does nothing.
    fn end(&self, py: Python<'_>) -> PyResult<()> {
        let scope = match self.inner.lock() {
            Ok(mut guard) => guard.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        let Some(scope) = scope else {
            return Ok(());
        };
        block_on(py, async move { scope.end().await })?.map_err(wattline_error)
    }
}

/// The diagnostics facade of a program under `wattline run` (`WATTLINE_HOST_*`).
#[pyfunction]
pub fn host_diagnostics(py: Python<'_>) -> PyResult<NativeWorkerDiagnostics> {
    let connection = HostConnection::from_env().map_err(wattline_error)?;
    let inner = block_on(py, async move { connection.diagnostics().await.clone() })?;
    Ok(NativeWorkerDiagnostics { inner })
}

/// The runtime of a program under `wattline run` (`WATTLINE_HOST_*`): its diagnostics
/// and Agent scopes, as a worker plugin's `PluginContext.runtime`.
#[pyfunction]
pub fn host_runtime() -> PyResult<NativePluginRuntime> {
    let connection = HostConnection::from_env().map_err(wattline_error)?;
    Ok(NativePluginRuntime {
        inner: PluginRuntime::from_connection(connection),
    })
}

/// A Python plugin seen by the Rust SDK: calls go to the Python adapter
/// (`wattline.worker._Adapter`), which runs the user's methods, async ones included.
struct PythonPlugin {
    adapter: Py<PyAny>,
    plugin_id: String,
    allows_multiple_components: bool,
}

fn plugin_error(code: &str, error: &PyErr) -> PluginError {
    PluginError::new(code, error.to_string())
}

impl WorkerPlugin for PythonPlugin {
    fn plugin_id(&self) -> &str {
        &self.plugin_id
    }

    fn register(
        &self,
        context: &mut PluginContext,
        config: serde_json::Value,
    ) -> Result<(), PluginError> {
        let runtime = context.runtime();
        let (plugin_id, activation_id) = (
            context.plugin_id().to_owned(),
            context.activation_id().to_owned(),
        );
        // The Python side may wait on the host (diagnostics() negotiates): move the
        // runtime's other tasks off this thread while it runs.
        tokio::task::block_in_place(|| {
            Python::attach(|py| {
                let runtime = runtime
                    .map(|inner| Py::new(py, NativePluginRuntime { inner }))
                    .transpose()?;
                self.adapter.call_method1(
                    py,
                    "register",
                    (plugin_id, activation_id, runtime, config.to_string()),
                )?;
                Ok::<(), PyErr>(())
            })
        })
        .map_err(|error| plugin_error("register_failed", &error))
    }

    fn validate(&self, config: &serde_json::Value) -> Result<(), PluginError> {
        tokio::task::block_in_place(|| {
            Python::attach(|py| {
                let problem: Option<String> = self
                    .adapter
                    .call_method1(py, "validate", (config.to_string(),))?
                    .extract(py)?;
                Ok::<Option<String>, PyErr>(problem)
            })
        })
        .map_err(|error| plugin_error("validate_failed", &error))?
        .map_or(Ok(()), |problem| {
            Err(PluginError::new("invalid_config", problem))
        })
    }

    fn allows_multiple_components(&self) -> bool {
        self.allows_multiple_components
    }
}

/// Serves the plugin behind `adapter` with the host's environment until `Shutdown`.
#[pyfunction]
pub fn serve_plugin(py: Python<'_>, adapter: Py<PyAny>) -> PyResult<()> {
    let plugin_id: String = adapter.getattr(py, "plugin_id")?.extract(py)?;
    let allows_multiple_components: bool = adapter
        .getattr(py, "allows_multiple_components")?
        .extract(py)?;
    let plugin = PythonPlugin {
        adapter,
        plugin_id,
        allows_multiple_components,
    };
    let runtime = runtime(py)?;
    py.detach(|| runtime.block_on(wattline_worker::serve_plugin(plugin)))
        .map_err(wattline_error)
}

/// Adds the worker bridge to the module.
pub fn add_to(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add(
        "NativeDeliveryError",
        module.py().get_type::<NativeDeliveryError>(),
    )?;
    module.add_class::<NativeWorkerDiagnostics>()?;
    module.add_class::<NativeDiagnosticComponent>()?;
    module.add_class::<NativePluginRuntime>()?;
    module.add_class::<NativeAgentScope>()?;
    module.add_function(wrap_pyfunction!(host_diagnostics, module)?)?;
    module.add_function(wrap_pyfunction!(host_runtime, module)?)?;
    module.add_function(wrap_pyfunction!(serve_plugin, module)?)?;
    Ok(())
}

//! `wattline._native`: the Python package's bridge to the `wattline` crate. Every call
//! that waits (collection, flush, shutdown, a host round trip) releases the GIL and
//! runs on one process-wide Tokio runtime; an in-process Agent scope's start and end
//! wait for nothing and run in place, GIL held, no runtime entered. Data crosses as
//! JSON, which the package's Python layer turns into frozen dataclasses. No
//! measurement logic lives here.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::prelude::*;
use wattline::embedded::{self, ConfigSource, EmbeddedError, EmbeddedOptions, EmbeddedPipeline};

use crate::completions::Completions;

mod completions;
mod plugin_host;
#[cfg(unix)]
mod worker;

// A `RuntimeError`, as the reference's errors are: code written for it that catches
// `RuntimeError` catches wattline's.
create_exception!(
    _native,
    WattlineError,
    pyo3::exceptions::PyRuntimeError,
    "Base class of every error wattline raises (a RuntimeError)."
);
create_exception!(
    _native,
    ConfigError,
    WattlineError,
    "A configuration was refused; the message names the file or argument, the field path and the rule."
);

pub(crate) fn wattline_error(error: impl std::fmt::Display) -> PyErr {
    WattlineError::new_err(error.to_string())
}

pub(crate) fn config_error(error: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(error.to_string())
}

/// The one runtime every pipeline of the process runs on: its threads are made once,
/// so pipelines started again and again (a notebook) leave no threads behind. A forked
/// child gets a runtime of its own: the parent's threads do not survive the fork, and
/// a future given to the parent's runtime there would wait for ever. The parent's is
/// left as it is in the child (dropping it would wait for threads that are not there).
///
/// It takes the GIL's token: the lock below is only ever held with the GIL, and
/// `os.fork` holds the GIL too, so no thread holds the lock when a child is forked and
/// the child's first call cannot wait for ever on it (`test_a_fork_while_another_
/// thread_calls_in_leaves_the_child_free`).
pub(crate) fn runtime(_gil: Python<'_>) -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: Mutex<Option<(u32, &'static tokio::runtime::Runtime)>> = Mutex::new(None);
    let mut current = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    // Cached, no system call: this is asked on every call that waits.
    let process = wattline::current_process_id();
    if let Some((owner, runtime)) = *current
        && owner == process
    {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("wattline")
        .enable_all()
        .build()
        .map_err(|error| wattline_error(format!("cannot start the async runtime: {error}")))?;
    let runtime: &'static tokio::runtime::Runtime = Box::leak(Box::new(runtime));
    *current = Some((process, runtime));
    Ok(runtime)
}

/// Runs `future` on the runtime with the GIL released.
pub(crate) fn block_on<T: Send>(
    py: Python<'_>,
    future: impl std::future::Future<Output = T> + Send,
) -> PyResult<T> {
    let runtime = runtime(py)?;
    Ok(py.detach(|| runtime.block_on(future)))
}

/// The options as the shared embedded rules take them (`wattline::embedded`).
fn options(
    config_path: Option<PathBuf>,
    config_json: Option<String>,
    scope: Option<String>,
    pid: Option<u32>,
) -> EmbeddedOptions {
    let config = match (config_path, config_json) {
        (Some(path), _) => ConfigSource::File(path),
        (None, Some(json)) => ConfigSource::Json(json),
        (None, None) => ConfigSource::Defaults,
    };
    EmbeddedOptions {
        config,
        scope,
        pid,
        gpu: true,
        ..EmbeddedOptions::default()
    }
}

/// A GPU source written in Python: `adapter._sample_json()` (the package's wrapper of
/// the user's `sample()`, `python/wattline/_gpu.py`) answers JSON text or `None`; it
/// runs on a blocking worker with the GIL taken for the call.
pub(crate) fn python_gpu_source(adapter: Py<PyAny>) -> embedded::GpuSourceHook {
    let adapter = std::sync::Arc::new(adapter);
    embedded::GpuSourceHook(std::sync::Arc::new(move || {
        let adapter = std::sync::Arc::clone(&adapter);
        let name = Python::try_attach(|py| {
            adapter
                .getattr(py, "name")
                .and_then(|name| name.extract::<String>(py))
                .ok()
        })
        .flatten()
        .unwrap_or_else(|| "python".to_owned());
        let answer = move || {
            Python::try_attach(|py| {
                adapter
                    .call_method0(py, "_sample_json")
                    .and_then(|answer| answer.extract::<Option<String>>(py))
                    .map_err(|error| error.to_string())
            })
            .unwrap_or(Ok(None))
        };
        Some(
            Box::new(embedded::gpu_records::LanguageGpuSource::new(name, answer))
                as Box<dyn wattline::gpu::GpuSource>,
        )
    }))
}

pub(crate) fn embedded_error(error: EmbeddedError) -> PyErr {
    match error {
        EmbeddedError::Config(error) => config_error(error),
        EmbeddedError::Other(message) => wattline_error(message),
    }
}

/// A running pipeline (`wattline::embedded::EmbeddedPipeline`), driven from Python.
#[pyclass(module = "wattline._native")]
struct NativePipeline {
    inner: Arc<EmbeddedPipeline>,
}

impl NativePipeline {
    /// Runs `call` on the pipeline with the GIL released.
    fn run<T: Send, F>(
        &self,
        py: Python<'_>,
        call: impl FnOnce(Arc<EmbeddedPipeline>) -> F,
    ) -> PyResult<T>
    where
        F: std::future::Future<Output = Result<T, EmbeddedError>> + Send,
    {
        block_on(py, call(Arc::clone(&self.inner)))?.map_err(embedded_error)
    }
}

fn json(value: impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(&value).map_err(wattline_error)
}

#[pymethods]
impl NativePipeline {
    /// Starts a pipeline. `interval_ms` turns polling on at that period; `atof_dir`
    /// and `otlp_endpoint` turn those exporters on; `gpu=False` reads no GPU.
    /// `gpu_source` (the package's adapter of a Python source) replaces GPU source
    /// selection.
    #[staticmethod]
    #[pyo3(signature = (config_path=None, config_json=None, scope=None, pid=None, interval_ms=None, atof_dir=None, otlp_endpoint=None, gpu=true, gpu_source=None))]
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
        gpu_source: Option<Py<PyAny>>,
    ) -> PyResult<NativePipeline> {
        let options = EmbeddedOptions {
            interval_ms,
            atof_dir,
            otlp_endpoint,
            gpu,
            gpu_source: gpu_source.map(python_gpu_source),
            ..options(config_path, config_json, scope, pid)
        };
        let inner = block_on(py, async move { EmbeddedPipeline::start(&options).await })?
            .map_err(embedded_error)?;
        Ok(NativePipeline {
            inner: Arc::new(inner),
        })
    }

    /// One on-demand snapshot as JSON.
    fn collect_json(&self, py: Python<'_>) -> PyResult<String> {
        json(self.run(py, |pipeline| async move { pipeline.collect().await })?)
    }

    /// Starts one on-demand snapshot and returns at once; its JSON, or its error,
    /// is left in `completions` under `token` for the event loop to take. No thread
    /// waits on the runtime, and no runtime thread takes the GIL to pass it on.
    fn collect_json_into(&self, completions: &Completions, token: u64) {
        let completion = completions.sender(token);
        self.inner.collect_then(move |snapshot| {
            completion.finish(snapshot.map_err(embedded_error).and_then(json));
        });
    }

    /// Starts an Agent scope, nested in the live scope `parent` (a UUID this
    /// returned) when given; its UUID. A send to the pipeline, made in place: no
    /// runtime is entered and the GIL is kept (a start takes microseconds, less than
    /// releasing and taking it back).
    #[pyo3(signature = (name, weight=None, traceparent=None, parent=None))]
    fn start_scope(
        &self,
        name: &str,
        weight: Option<f64>,
        traceparent: Option<String>,
        parent: Option<&str>,
    ) -> PyResult<String> {
        self.inner
            .start_scope(name, weight, traceparent, parent)
            .map_err(embedded_error)
    }

    /// Ends the Agent scope `uuid`; `False` when it was not live, a `WattlineError`
    /// when the pipeline has shut down. In place, as `start_scope`. `span_end`: the
    /// step's span at its end as JSON (`{"attributes": {...}, "estimate": {...}}`): a
    /// remote model call's step keeps the call's estimate.
    #[pyo3(signature = (uuid, span_end=None))]
    fn end_scope(&self, uuid: &str, span_end: Option<&str>) -> PyResult<bool> {
        self.inner.end_scope(uuid, span_end).map_err(embedded_error)
    }

    /// The energy report so far, as JSON.
    fn flush_json(&self, py: Python<'_>) -> PyResult<String> {
        json(self.run(py, |pipeline| async move { pipeline.flush().await })?)
    }

    /// Stops the pipeline (ending live scopes) and returns the final report as JSON;
    /// again after the first call, the same report.
    fn shutdown_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let report = self.run(py, |pipeline| async move { pipeline.shutdown().await })?;
        report.map(json).transpose()
    }
}

/// The CLI's table for a report given as JSON.
#[pyfunction]
fn report_table(report_json: &str) -> PyResult<String> {
    let report: wattline::EnergyReport = serde_json::from_str(report_json)
        .map_err(|error| wattline_error(format!("not a wattline report: {error}")))?;
    Ok(wattline::report::render_table(&report))
}

/// The report rebuilt from an ATOF event file (plain, zstd or any part of a rotated
/// set), as `wattline report FILE` rebuilds it, as JSON. Read without the GIL.
#[pyfunction]
fn report_json_from_atof(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    let report = py
        .detach(|| wattline::report_from_atof(&path))
        .map_err(|error| wattline_error(error.to_string()))?;
    json(report)
}

/// Starts an Agent scope in the pipeline of `wattline run` over its host endpoint
/// (`WATTLINE_HOST_*`), nested in the open scope `parent` (a scope id) when given;
/// the scope id.
#[cfg(unix)]
#[pyfunction]
#[pyo3(signature = (name, weight=None, traceparent=None, parent=None))]
fn host_start_scope(
    py: Python<'_>,
    name: String,
    weight: Option<f64>,
    traceparent: Option<String>,
    parent: Option<String>,
) -> PyResult<String> {
    block_on(py, async move {
        let (traceparent, parent) = (traceparent.as_deref(), parent.as_deref());
        embedded::host_scopes::start(&name, weight, traceparent, parent).await
    })?
    .map_err(embedded_error)
}

/// Ends a scope [`host_start_scope`] started; `False` when it was not open.
/// `span_end` as for `Pipeline.end_scope`.
#[cfg(unix)]
#[pyfunction]
#[pyo3(signature = (scope_id, span_end=None))]
fn host_end_scope(py: Python<'_>, scope_id: String, span_end: Option<String>) -> PyResult<bool> {
    block_on(py, async move {
        embedded::host_scopes::end(&scope_id, span_end.as_deref()).await
    })?
    .map_err(embedded_error)
}

/// How long the Python layer waits for a pipeline to stop when the interpreter exits.
const EXIT_GRACE: Duration = Duration::from_secs(5);

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("WattlineError", module.py().get_type::<WattlineError>())?;
    module.add("ConfigError", module.py().get_type::<ConfigError>())?;
    module.add("EXIT_GRACE_SECONDS", EXIT_GRACE.as_secs_f64())?;
    module.add_function(wrap_pyfunction!(report_table, module)?)?;
    module.add_function(wrap_pyfunction!(report_json_from_atof, module)?)?;
    #[cfg(unix)]
    {
        module.add_function(wrap_pyfunction!(host_start_scope, module)?)?;
        module.add_function(wrap_pyfunction!(host_end_scope, module)?)?;
    }
    module.add_class::<NativePipeline>()?;
    module.add_class::<Completions>()?;
    plugin_host::add_to(module)?;
    #[cfg(unix)]
    worker::add_to(module)?;
    Ok(())
}

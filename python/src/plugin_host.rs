//! The reference's plugin-host shape for Python (`wattline.plugin.initialize` /
//! `activate`, `wattline.resource_metrics.collect`): the crate's facade
//! (`wattline::plugin`, `wattline::api::resource_metrics`) on the package's runtime.

use std::path::PathBuf;

use pyo3::prelude::*;
use wattline::plugin::{HeldActivation, PluginError};

use crate::completions::Completions;
use crate::{block_on, config_error, python_gpu_source, wattline_error};

fn plugin_error(error: PluginError) -> PyErr {
    match error {
        PluginError::Config(error) => config_error(error),
        other => wattline_error(other),
    }
}

/// The process's plugin host while it is active.
#[pyclass(module = "wattline._native")]
struct NativePluginHost {
    activation: HeldActivation,
}

#[pymethods]
impl NativePluginHost {
    /// Starts the host from a plugins.toml document given as JSON text, layered over
    /// the files (`additional_plugins_toml` in place of the user's). `gpu=False` reads
    /// no GPU; `gpu_source` (the package's adapter) replaces source selection.
    #[staticmethod]
    #[pyo3(signature = (config_json, additional_plugins_toml=None, gpu=true, gpu_source=None))]
    fn start(
        py: Python<'_>,
        config_json: String,
        additional_plugins_toml: Option<PathBuf>,
        gpu: bool,
        gpu_source: Option<Py<PyAny>>,
    ) -> PyResult<NativePluginHost> {
        let hook = match (gpu, gpu_source) {
            (false, _) => Some(None),
            (true, Some(source)) => Some(Some(python_gpu_source(source))),
            (true, None) => None,
        };
        let activation = block_on(py, async move {
            wattline::plugin::dynamic::initialize_json(
                config_json,
                additional_plugins_toml.as_deref(),
                hook,
            )
            .await
        })?
        .map_err(plugin_error)?;
        Ok(NativePluginHost {
            activation: HeldActivation::new(activation),
        })
    }

    /// Whether it has not been closed.
    #[getter]
    fn is_active(&self) -> bool {
        self.activation.is_active()
    }

    /// Closes the host and waits for its pipeline to stop; repeated calls are safe.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, self.activation.close())?.map_err(plugin_error)
    }
}

/// Starts one snapshot on the active host's on-demand series and returns at once;
/// its JSON, or its error, is left in `completions` under `token`.
#[pyfunction]
fn host_collect_json_into(completions: &Completions, token: u64) {
    let completion = completions.sender(token);
    wattline::api::resource_metrics::collect_then(move |snapshot| {
        completion.finish(snapshot.map_err(plugin_error).and_then(crate::json));
    });
}

pub(crate) fn add_to(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<NativePluginHost>()?;
    module.add_function(wrap_pyfunction!(host_collect_json_into, module)?)?;
    Ok(())
}

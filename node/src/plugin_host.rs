//! The reference's plugin-host shape for Node.js (`wattline/plugin`'s `initialize`,
//! `collectResourceMetrics`): the crate's facade (`wattline::plugin`,
//! `wattline::api::resource_metrics`).

use napi::bindgen_prelude::*;
use napi_derive::napi;
use wattline::plugin::{HeldActivation, PluginError};

use crate::gpu_source::{self, GpuSampler};
use crate::{failure, to_tagged_json};

fn plugin_error(error: PluginError) -> Error {
    match error {
        PluginError::Config(error) => failure("WATTLINE_CONFIG", error),
        other => failure("WATTLINE_ERROR", other),
    }
}

/// The process's plugin host while it is active.
#[napi]
pub struct NativePluginHost {
    activation: HeldActivation,
}

/// Starts the host from a plugins.toml document as JSON text, layered over the files
/// (`additional_plugins_toml` in place of the user's). `gpu: false` reads no GPU;
/// `gpu_sampler` is a GPU source written in JavaScript.
#[napi]
pub async fn start_plugin_host(
    config_json: String,
    additional_plugins_toml: Option<String>,
    gpu: bool,
    gpu_sampler: Option<GpuSampler>,
    gpu_source_name: Option<String>,
) -> Result<NativePluginHost> {
    let hook = match (gpu, gpu_sampler) {
        (false, _) => Some(None),
        (true, Some(sampler)) => Some(Some(gpu_source::hook(sampler, gpu_source_name))),
        (true, None) => None,
    };
    let path = additional_plugins_toml.map(std::path::PathBuf::from);
    let activation = wattline::plugin::dynamic::initialize_json(config_json, path.as_deref(), hook)
        .await
        .map_err(plugin_error)?;
    Ok(NativePluginHost {
        activation: HeldActivation::new(activation),
    })
}

#[napi]
impl NativePluginHost {
    /// Whether it has not been closed.
    #[napi(getter)]
    pub fn is_active(&self) -> bool {
        self.activation.is_active()
    }

    /// Sends what the host's exporters hold.
    #[napi]
    pub async fn flush_telemetry(&self) -> Result<()> {
        match self.activation.pipeline() {
            Some(pipeline) => pipeline
                .flush_telemetry()
                .await
                .map_err(crate::embedded_error),
            None => Ok(()),
        }
    }

    /// Closes the host and waits for its pipeline to stop; repeated calls are safe.
    #[napi]
    pub async fn close(&self) -> Result<()> {
        self.activation.close().await.map_err(plugin_error)
    }
}

/// One snapshot on the active host's on-demand series, as tagged JSON.
#[napi]
pub async fn host_collect_json() -> Result<String> {
    let snapshot = wattline::api::resource_metrics::collect()
        .await
        .map_err(plugin_error)?;
    to_tagged_json(&snapshot)
}

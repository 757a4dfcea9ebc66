//! The reference's plugin-host shape (`nemo_relay::plugin`), for code written against
//! it: [`PluginConfig`] with [`PluginComponentSpec`]s, [`dynamic::initialize`] and
//! [`PluginHostActivation::close`]. A thin facade: the activation is an
//! [`EmbeddedPipeline`] started from the configuration, the one process-wide host
//! that [`crate::api::resource_metrics::collect`] reads.
//!
//! ```no_run
//! use wattline::api::resource_metrics;
//! use wattline::plugin::dynamic::initialize;
//! use wattline::plugin::{PluginComponentSpec, PluginConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = PluginConfig {
//!     components: vec![PluginComponentSpec::new("resource_metrics")],
//!     ..PluginConfig::default()
//! };
//! let mut activation = initialize(config, None).await?;
//! let snapshot = resource_metrics::collect().await;
//! activation.close()?;
//! println!("{:?}", snapshot?.cpu);
//! # Ok(())
//! # }
//! ```

#[path = "native_plugin.rs"]
mod native;
pub(crate) use native::register_native;
pub use native::{
    NativePlugin, NativePluginContext, NativePluginError, PluginRuntime, diagnostics,
};

use std::sync::{Arc, Mutex, MutexGuard};

use crate::embedded::{ConfigSource, EmbeddedError, EmbeddedOptions, EmbeddedPipeline};
use wattline_model::report::EnergyReport;

/// One top-level component: its kind, whether it runs, its own configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginComponentSpec {
    /// The registered kind (`resource_metrics`, `energy`, `atof`, ...).
    pub kind: String,
    /// Whether the component is activated (a disabled one is still validated).
    pub enabled: bool,
    /// The component's own fields, as in `plugins.toml`.
    pub config: serde_json::Map<String, serde_json::Value>,
}

impl PluginComponentSpec {
    /// An enabled component of `kind` with its defaults.
    pub fn new(kind: impl Into<String>) -> Self {
        PluginComponentSpec {
            kind: kind.into(),
            enabled: true,
            config: serde_json::Map::new(),
        }
    }

    /// The same component with `config` as its fields.
    pub fn with_config(mut self, config: serde_json::Map<String, serde_json::Value>) -> Self {
        self.config = config;
        self
    }
}

/// The configuration given in code: it overrides the `plugins.toml` files.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// The schema version (1).
    pub version: u32,
    /// The components, in order.
    pub components: Vec<PluginComponentSpec>,
}

impl Default for PluginConfig {
    fn default() -> Self {
        PluginConfig {
            version: 1,
            components: Vec::new(),
        }
    }
}

impl PluginConfig {
    /// The document as `plugins.toml` has it, as JSON text.
    pub fn to_json(&self) -> String {
        let components: Vec<serde_json::Value> = self
            .components
            .iter()
            .map(|component| {
                serde_json::json!({
                    "kind": component.kind,
                    "enabled": component.enabled,
                    "config": component.config,
                })
            })
            .collect();
        serde_json::json!({ "version": self.version, "components": components }).to_string()
    }
}

/// Why the plugin host could not start, or a call on it failed.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The configuration was refused (names source, field path and rule).
    #[error("invalid argument: {0}")]
    Config(wattline_config::ConfigError),
    /// Another activation owns the process's plugin host.
    #[error("conflict: plugin configuration is owned by an active plugin host; close it first")]
    Conflict,
    /// `resource_metrics.collect()` without an activation that has the component.
    #[error(
        "invalid argument: resource_metrics.collect() requires an active resource_metrics component"
    )]
    NoResourceMetrics,
    /// The pipeline failed.
    #[error("{0}")]
    Pipeline(String),
}

impl From<EmbeddedError> for PluginError {
    fn from(error: EmbeddedError) -> Self {
        match error {
            EmbeddedError::Config(error) => PluginError::Config(error),
            EmbeddedError::Other(message) => PluginError::Pipeline(message),
        }
    }
}

/// The process's one active host: the activation's number and its pipeline.
type ActiveHost = Option<(u64, Arc<EmbeddedPipeline>)>;

fn active_host() -> MutexGuard<'static, ActiveHost> {
    static ACTIVE: Mutex<ActiveHost> = Mutex::new(None);
    ACTIVE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The active host's pipeline, if an activation holds one.
pub fn active_pipeline() -> Option<Arc<EmbeddedPipeline>> {
    active_host()
        .as_ref()
        .map(|(_, pipeline)| Arc::clone(pipeline))
}

/// The owned lifetime of the process's plugin host: close it (or drop it) to stop.
pub struct PluginHostActivation {
    id: u64,
    pipeline: Option<Arc<EmbeddedPipeline>>,
}

impl std::fmt::Debug for PluginHostActivation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PluginHostActivation")
            .field("active", &self.is_active())
            .finish()
    }
}

impl PluginHostActivation {
    /// Whether it has not been closed.
    pub fn is_active(&self) -> bool {
        self.pipeline.is_some()
    }

    /// The pipeline behind it, while active.
    pub fn pipeline(&self) -> Option<&Arc<EmbeddedPipeline>> {
        self.pipeline.as_ref()
    }

    /// Releases the process's host at once (a later `collect()` fails) and returns
    /// the pipeline to stop.
    fn release(&mut self) -> Option<Arc<EmbeddedPipeline>> {
        let pipeline = self.pipeline.take()?;
        let mut active = active_host();
        if active.as_ref().is_some_and(|(id, _)| *id == self.id) {
            *active = None;
        }
        Some(pipeline)
    }

    /// Closes the host and waits for its pipeline to stop; its final report. A
    /// second call does nothing (`None`).
    pub async fn shutdown(&mut self) -> Result<Option<EnergyReport>, PluginError> {
        match self.release() {
            Some(pipeline) => Ok(pipeline.shutdown().await?),
            None => Ok(None),
        }
    }

    /// Closes the host: released at once, its pipeline stopped (waited for on a
    /// multi-threaded Tokio runtime, else finished in the background). Repeated
    /// calls are safe.
    pub fn close(&mut self) -> Result<(), PluginError> {
        let Some(pipeline) = self.release() else {
            return Ok(());
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside any runtime: the pipeline's actors run on the one it started
            // on, and stop when their handles go (with it).
            return Ok(());
        };
        if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            tokio::task::block_in_place(|| runtime.block_on(pipeline.shutdown()))?;
        } else {
            runtime.spawn(async move { pipeline.shutdown().await });
        }
        Ok(())
    }
}

impl Drop for PluginHostActivation {
    fn drop(&mut self) {
        if let Some(pipeline) = self.release()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { pipeline.shutdown().await });
        }
    }
}

/// An activation as a language package holds it: behind a shared reference (its
/// object), closed once from whichever call comes first.
#[derive(Debug)]
pub struct HeldActivation {
    activation: Mutex<Option<PluginHostActivation>>,
}

impl HeldActivation {
    /// Holds `activation`.
    pub fn new(activation: PluginHostActivation) -> Self {
        HeldActivation {
            activation: Mutex::new(Some(activation)),
        }
    }

    fn held(&self) -> MutexGuard<'_, Option<PluginHostActivation>> {
        self.activation
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether it has not been closed.
    pub fn is_active(&self) -> bool {
        self.held()
            .as_ref()
            .is_some_and(PluginHostActivation::is_active)
    }

    /// The pipeline behind it, while active.
    pub fn pipeline(&self) -> Option<Arc<EmbeddedPipeline>> {
        self.held()
            .as_ref()
            .and_then(|activation| activation.pipeline().cloned())
    }

    /// Closes the host and waits for its pipeline to stop; repeated calls are safe.
    pub async fn close(&self) -> Result<(), PluginError> {
        let taken = self.held().take();
        if let Some(mut activation) = taken {
            activation.shutdown().await?;
        }
        Ok(())
    }
}

/// The plugin host's entry points.
pub mod dynamic {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::embedded::GpuSourceHook;

    /// Starts the process's plugin host from `config`, layered over the
    /// `plugins.toml` files (`additional_plugins_toml` in place of the user's file);
    /// refused while another activation is active. Call inside a Tokio runtime.
    pub async fn initialize(
        config: PluginConfig,
        additional_plugins_toml: Option<&Path>,
    ) -> Result<PluginHostActivation, PluginError> {
        initialize_json(config.to_json(), additional_plugins_toml, None).await
    }

    /// [`initialize`] for a configuration given as JSON text (the language packages'
    /// documents), with `gpu_source` in place of GPU source selection (`Some(None)`:
    /// GPU reading off).
    pub async fn initialize_json(
        config_json: String,
        additional_plugins_toml: Option<&Path>,
        gpu_source: Option<Option<GpuSourceHook>>,
    ) -> Result<PluginHostActivation, PluginError> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        if active_host().is_some() {
            return Err(PluginError::Conflict);
        }
        let options = EmbeddedOptions {
            config: ConfigSource::Layered {
                explicit: additional_plugins_toml.map(Path::to_path_buf),
                json: config_json,
            },
            gpu: !matches!(gpu_source, Some(None)),
            gpu_source: gpu_source.flatten(),
            ..EmbeddedOptions::default()
        };
        let pipeline = Arc::new(EmbeddedPipeline::start(&options).await?);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let won = {
            let mut active = active_host();
            let free = active.is_none();
            if free {
                *active = Some((id, Arc::clone(&pipeline)));
            }
            free
        };
        if !won {
            // Another activation took the host while this one started.
            let _ = pipeline.shutdown().await;
            return Err(PluginError::Conflict);
        }
        Ok(PluginHostActivation {
            id,
            pipeline: Some(pipeline),
        })
    }
}

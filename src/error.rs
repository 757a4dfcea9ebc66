//! Why a pipeline call failed: the one error type of the library API, apart from the
//! pipeline and the Agent-scope guards that both return it.

use wattline_actors::error::PipelineError;
use wattline_config::ConfigError;
use wattline_config::energy::EnvironmentError;

/// Why a pipeline call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A `GENAI_*` variable had a bad value.
    #[error(transparent)]
    Environment(#[from] EnvironmentError),
    /// The scope could not be set up.
    #[error(transparent)]
    Scope(#[from] crate::scope_target::ScopeError),
    /// The pipeline failed or is stopped.
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// An exporter could not start.
    #[error(transparent)]
    Exporter(#[from] crate::exporting::ExporterError),
    /// A scope's weight was not a positive, finite number.
    #[error("scope weight {weight} for {name:?} is not a positive, finite number")]
    ScopeWeight {
        /// The scope's name.
        name: String,
        /// The weight given.
        weight: f64,
    },
    /// A scope's `traceparent` was not a W3C trace-context value.
    #[error("scope {name:?}: {source}")]
    ScopeTraceparent {
        /// The scope's name.
        name: String,
        /// What is wrong with it.
        source: wattline_model::trace_context::TraceParentError,
    },
    /// A scope was ended after its pipeline had shut down: the shutdown ended it, at
    /// that instant.
    #[error("cannot end scope {uuid}: the pipeline has shut down (which ended the scope)")]
    ScopeAfterShutdown {
        /// The scope's UUID.
        uuid: uuid::Uuid,
    },
    /// This process is a child forked from the one that started the pipeline.
    #[error(
        "this pipeline belongs to process {owner}; after a fork, start a new pipeline in the child (this is process {current})"
    )]
    ForkedChild {
        /// The process that spawned the pipeline.
        owner: u32,
        /// This process.
        current: u32,
    },
    /// A native plugin's registration failed.
    #[error("native plugin registration failed: {source}")]
    NativePlugin {
        /// What it said.
        source: crate::plugin::NativePluginError,
    },
}

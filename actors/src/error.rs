//! Why the pipeline could not do what was asked: below the wiring, so the actors that
//! answer with it (the on-demand actor's callers) need not reach up into it.

/// Why the pipeline could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// An actor could not be spawned.
    #[error("cannot start the pipeline: {0}")]
    Spawn(String),
    /// The `resource_metrics` component is not enabled.
    #[error("the resource_metrics component is not enabled")]
    ResourceMetricsDisabled,
    /// The `energy` component is not enabled.
    #[error("the energy component is not enabled")]
    EnergyDisabled,
    /// The pipeline has been shut down.
    #[error("the pipeline has been shut down")]
    Stopped,
    /// The diagnostics limits are invalid.
    #[error("diagnostics: {0}")]
    Diagnostics(String),
}

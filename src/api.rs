//! The reference's API paths (`nemo_relay::api`), for code written against it.

/// On-demand snapshots from the active plugin host ([`crate::plugin`]).
pub mod resource_metrics {
    use crate::plugin::{PluginError, active_pipeline};
    use crate::snapshot::Snapshot;

    /// One snapshot on the active host's on-demand series (no mark): the first has
    /// no rates, later ones do. Needs an activation whose configuration has the
    /// `resource_metrics` component, as in the reference.
    pub async fn collect() -> Result<Snapshot, PluginError> {
        let pipeline = active_pipeline()
            .filter(|pipeline| pipeline.collects())
            .ok_or(PluginError::NoResourceMetrics)?;
        Ok(pipeline.collect().await?)
    }
}

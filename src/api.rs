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

    /// [`collect`] for bindings: `done` gets the snapshot on the thread that finished
    /// it (no thread woken only to pass it on), exactly once.
    pub fn collect_then(done: impl FnOnce(Result<Snapshot, PluginError>) + Send + 'static) {
        match active_pipeline().filter(|pipeline| pipeline.collects()) {
            Some(pipeline) => {
                pipeline.collect_then(move |snapshot| done(snapshot.map_err(PluginError::from)))
            }
            None => done(Err(PluginError::NoResourceMetrics)),
        }
    }
}

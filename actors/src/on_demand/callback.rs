//! Where an on-demand snapshot goes, and the one hand-over two parties race for: the
//! blocking thread that reads (it hands the snapshot over where it is finished, so no
//! thread is woken only to pass it on) and the task that bounds the collection (it
//! hands over what is there when the read is late).

use std::sync::{Arc, Mutex, PoisonError};

use crate::error::PipelineError;
use wattline_model::snapshot::Snapshot;

/// Where an on-demand snapshot goes: called once, with the snapshot, or with
/// [`PipelineError::Stopped`] when the pipeline stopped before it was taken (dropped
/// uncalled).
pub struct SnapshotCallback(Option<Box<dyn FnOnce(SnapshotResult) + Send>>);

/// What a [`SnapshotCallback`] is called with.
pub type SnapshotResult = Result<Snapshot, PipelineError>;

impl SnapshotCallback {
    /// A callback calling `done`.
    pub fn new(done: impl FnOnce(SnapshotResult) + Send + 'static) -> Self {
        SnapshotCallback(Some(Box::new(done)))
    }

    /// Calls it with `result`.
    pub fn call(mut self, result: SnapshotResult) {
        if let Some(done) = self.0.take() {
            done(result);
        }
    }
}

impl Drop for SnapshotCallback {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(PipelineError::Stopped));
        }
    }
}

/// One collection's callback, shared by whoever may hand its snapshot over: the first
/// to do so does, the others find it gone.
#[derive(Clone)]
pub(super) struct Delivery(Arc<Mutex<Option<SnapshotCallback>>>);

impl Delivery {
    pub(super) fn new(done: SnapshotCallback) -> Self {
        Delivery(Arc::new(Mutex::new(Some(done))))
    }

    /// Hands `snapshot` over, unless it was handed over already.
    pub(super) fn deliver(&self, snapshot: Snapshot) {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(done) = taken {
            done.call(Ok(snapshot));
        }
    }
}

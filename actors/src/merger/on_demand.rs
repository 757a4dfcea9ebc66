//! The on-demand series' OS samplers, owned by one worker: an on-demand collection
//! resolves the scope and runs every OS category's read in turn on one blocking
//! thread, instead of handing the tick to each sampler actor's blocking thread and
//! back (about a dozen cross-thread wake-ups, each waiting for a CPU on a busy
//! machine). The sampler actors keep the polling series' state, this worker the
//! on-demand series'; the GPU sampler, whose source is one per pipeline, is still
//! asked through its actor.
//!
//! A read that hangs cannot stall the pipeline: it holds only the blocking thread and
//! the worker's samplers, which it puts back when it ends. Until then a collection
//! finds them taken and leaves their categories `null`, as a sampler actor still
//! reading an earlier tick does.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use crate::diagnostics::{PipelineDiagnostics, SamplerCategory, SamplerFailure};
use crate::pipeline::error::PipelineError;
use crate::samplers::{
    CategoryReading, CategorySampler, SampleRequest, SamplerFactory, SamplerOutput,
};
use wattline_model::snapshot::Snapshot;

/// One category's on-demand sampler and the factory that replaces it after a panic.
struct OnDemandSampler {
    category: SamplerCategory,
    factory: SamplerFactory,
    sampler: Box<dyn CategorySampler>,
}

/// The worker's samplers, taken out of their slot while a collection reads.
pub(super) struct OnDemandSamplers {
    samplers: Vec<OnDemandSampler>,
}

/// One category's answer, as the merger assembles them.
pub(super) type CategoryOutput = (SamplerCategory, SamplerOutput<CategoryReading>);

impl OnDemandSamplers {
    /// Reads every category in turn for `request`. A sampler that panics is replaced
    /// by a fresh one (its baselines start over), its category is `null` this time and
    /// the restart is recorded, as the supervisor does for a sampler actor.
    pub(super) fn sample(
        &mut self,
        request: &SampleRequest,
        diagnostics: Option<&PipelineDiagnostics>,
    ) -> Vec<CategoryOutput> {
        let mut outputs = Vec::with_capacity(self.samplers.len());
        for entry in &mut self.samplers {
            let sampler = &mut entry.sampler;
            match catch_unwind(AssertUnwindSafe(|| sampler.sample_category(request))) {
                Ok(output) => outputs.push((entry.category, output)),
                Err(payload) => {
                    let detail = panic_message(payload.as_ref());
                    tracing::warn!(
                        category = entry.category.as_str(),
                        %detail,
                        "on-demand sampler panicked; replaced"
                    );
                    if let Some(diagnostics) = diagnostics {
                        let _ = diagnostics.record_sampler_failure(
                            entry.category,
                            SamplerFailure::Restarted,
                            &detail,
                        );
                    }
                    entry.sampler = (entry.factory)();
                }
            }
        }
        outputs
    }
}

/// Where the worker's samplers wait between on-demand collections.
pub(super) struct OnDemandWorker {
    categories: Vec<SamplerCategory>,
    slot: Arc<Mutex<Option<OnDemandSamplers>>>,
}

impl OnDemandWorker {
    /// A worker with one fresh sampler per factory.
    pub(super) fn new(factories: Vec<(SamplerCategory, SamplerFactory)>) -> Self {
        let samplers: Vec<OnDemandSampler> = factories
            .into_iter()
            .map(|(category, factory)| OnDemandSampler {
                category,
                sampler: factory(),
                factory,
            })
            .collect();
        OnDemandWorker {
            categories: samplers.iter().map(|entry| entry.category).collect(),
            slot: Arc::new(Mutex::new(Some(OnDemandSamplers { samplers }))),
        }
    }

    /// The categories it reads.
    pub(super) fn categories(&self) -> &[SamplerCategory] {
        &self.categories
    }

    /// Takes the samplers out; `None` while an earlier collection's read holds them.
    pub(super) fn take(&self) -> Option<OnDemandSamplers> {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Where the samplers go back when a read is done (from the blocking thread).
    pub(super) fn return_slot(&self) -> OnDemandReturn {
        OnDemandReturn(Arc::clone(&self.slot))
    }
}

/// Puts a worker's samplers back into its slot.
pub(super) struct OnDemandReturn(Arc<Mutex<Option<OnDemandSamplers>>>);

impl OnDemandReturn {
    /// Puts `samplers` back for the next collection.
    pub(super) fn put(&self, samplers: OnDemandSamplers) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(samplers);
    }
}

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

/// An on-demand collection's callback and the tick lock it holds, shared by the
/// blocking thread that reads (it calls it where the snapshot is finished: no thread
/// is woken only to pass it on) and the task that bounds the collection (it calls it
/// when the read is late).
#[derive(Clone)]
pub(super) struct Delivery(Arc<Mutex<Option<(SnapshotCallback, TickLock)>>>);

/// The merger's one-tick-at-a-time lock, held by a collection.
pub(super) type TickLock = tokio::sync::OwnedMutexGuard<()>;

impl Delivery {
    pub(super) fn new(done: SnapshotCallback, lock: TickLock) -> Self {
        Delivery(Arc::new(Mutex::new(Some((done, lock)))))
    }

    /// Whether the snapshot is still to be handed over.
    pub(super) fn is_pending(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Releases the tick lock and hands `snapshot` over, unless it was handed over
    /// already.
    pub(super) fn deliver(&self, snapshot: Snapshot) {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((done, lock)) = taken {
            drop(lock);
            done.call(Ok(snapshot));
        }
    }
}

/// A panic payload's message, when it has one.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|message| message.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::{ResolvedScope, ScopeStatus, ScopeTarget};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;
    use wattline_model::series::SamplingSeries;

    /// Panics on its first sample after being built the first time; answers otherwise.
    struct Flaky {
        panics: bool,
    }

    impl CategorySampler for Flaky {
        fn category(&self) -> SamplerCategory {
            SamplerCategory::Process
        }

        fn sample_category(&mut self, _request: &SampleRequest) -> SamplerOutput<CategoryReading> {
            if self.panics {
                panic!("flaky read");
            }
            SamplerOutput {
                reading: CategoryReading::Process(Default::default()),
                coverage: Default::default(),
                problems: Default::default(),
            }
        }
    }

    #[test]
    fn a_panicking_sampler_is_replaced_its_category_missing_once_and_the_restart_recorded() {
        let built = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&built);
        let factory: SamplerFactory = Arc::new(move || {
            let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
            Box::new(Flaky { panics: first }) as Box<dyn CategorySampler>
        });
        let worker = OnDemandWorker::new(vec![(SamplerCategory::Process, factory)]);
        let (context, diagnostics) = crate::pipeline::open_diagnostics(Some(Default::default()))
            .unwrap()
            .unwrap();
        let request = SampleRequest {
            series: SamplingSeries::OnDemand,
            scope: Arc::new(ResolvedScope::unavailable(
                ScopeTarget::Global,
                ScopeStatus::ListingFailed("test".into()),
            )),
            environment: Arc::default(),
            taken_at: Instant::now(),
        };

        let mut samplers = worker.take().unwrap();
        assert!(worker.take().is_none(), "taken while a read holds them");
        let first = samplers.sample(&request, Some(&diagnostics));
        let second = samplers.sample(&request, Some(&diagnostics));
        worker.return_slot().put(samplers);

        assert!(first.is_empty());
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].0, SamplerCategory::Process);
        assert_eq!(
            built.load(Ordering::SeqCst),
            2,
            "built once, then once more"
        );
        assert!(worker.take().is_some(), "put back");
        assert_eq!(
            crate::diagnostics::recent_codes(&context),
            vec!["sampler.process.restarted"]
        );
    }
}

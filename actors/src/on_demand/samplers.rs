//! The on-demand series' own OS samplers, built from the same factories as the sampler
//! actors': a collection reads every OS category in turn on one blocking thread,
//! instead of handing the tick to each sampler actor's blocking thread and back (about
//! a dozen cross-thread wake-ups, each waiting for a CPU on a busy machine). The
//! sampler actors keep the polling series' state, these the on-demand series'.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::merger::tick_plan::CategoryOutput;
use crate::samplers::{CategorySampler, SampleRequest, SamplerFactory};
use wattline_diagnostics::{PipelineDiagnostics, SamplerFailure};
use wattline_model::category::SamplerCategory;

/// One category's on-demand sampler and the factory that replaces it after a panic.
struct OnDemandSampler {
    category: SamplerCategory,
    factory: SamplerFactory,
    sampler: Box<dyn CategorySampler>,
}

/// The on-demand actor's samplers, lent to one collection's read at a time.
pub(crate) struct OnDemandSamplers {
    samplers: Vec<OnDemandSampler>,
}

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
                    let detail = crate::panics::panic_message(payload.as_ref());
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

    /// One fresh sampler per factory.
    pub(super) fn new(factories: Vec<(SamplerCategory, SamplerFactory)>) -> Self {
        OnDemandSamplers {
            samplers: factories
                .into_iter()
                .map(|(category, factory)| OnDemandSampler {
                    category,
                    sampler: factory(),
                    factory,
                })
                .collect(),
        }
    }

    /// The categories they read.
    pub(super) fn categories(&self) -> Vec<SamplerCategory> {
        self.samplers.iter().map(|entry| entry.category).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samplers::{CategoryReading, SamplerOutput};
    use crate::scope::{ResolvedScope, ScopeStatus, ScopeTarget};
    use std::sync::Arc;
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
        let mut samplers = OnDemandSamplers::new(vec![(SamplerCategory::Process, factory)]);
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

        let first = samplers.sample(&request, Some(&diagnostics));
        let second = samplers.sample(&request, Some(&diagnostics));

        assert!(first.is_empty());
        assert_eq!(second.len(), 1);
        assert_eq!(second[0].0, SamplerCategory::Process);
        assert_eq!(
            built.load(Ordering::SeqCst),
            2,
            "built once, then once more"
        );
        assert_eq!(
            crate::diagnostics::recent_codes(&context),
            vec!["sampler.process.restarted"]
        );
    }
}

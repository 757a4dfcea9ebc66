//! One synchronous collection: the merger's tick (`prepare_tick`, then
//! `finish_tick`) with each enabled sampler asked in turn instead of through its
//! actor; for one-shot use and benchmarks.

use std::path::PathBuf;

use wattline_config::ResourceMetricsConfig;

use crate::categories::sampler_factories;
use crate::merger::tick::{finish_tick, prepare_tick};
use crate::samplers::CategorySampler;
use crate::samplers::environment::EnvironmentReader;
use crate::scope::ScopeTarget;
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;

/// Collects snapshots of one target with one configuration.
pub struct Collector {
    root: PathBuf,
    target: ScopeTarget,
    config: ResourceMetricsConfig,
    environment: EnvironmentReader,
    samplers: Vec<Box<dyn CategorySampler>>,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Collector")
            .field("root", &self.root)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Collector {
    /// A collector reading the OS under `root` (`/` in production).
    pub fn new(root: PathBuf, target: ScopeTarget, config: ResourceMetricsConfig) -> Self {
        Collector {
            environment: EnvironmentReader::new(&root),
            samplers: sampler_factories(&root, &config)
                .into_iter()
                .map(|(_, make)| make())
                .collect(),
            root,
            target,
            config,
        }
    }

    /// Adds a GPU sampler over `source` (the GPU category stays `null` without one).
    pub fn with_gpu_source(mut self, source: Option<Box<dyn wattline_gpu::GpuSource>>) -> Self {
        if self.config.gpu.enabled {
            self.samplers
                .push(Box::new(crate::samplers::gpu::GpuSampler::new(
                    source,
                    self.config.gpu.clone(),
                    None,
                )));
        }
        self
    }

    /// Takes one snapshot in `series`.
    pub fn collect(&mut self, series: SamplingSeries) -> Snapshot {
        let request = prepare_tick(
            &self.root,
            self.target,
            None,
            &self.environment,
            series,
            None,
        );
        let outputs = self
            .samplers
            .iter_mut()
            .map(|sampler| (sampler.category(), sampler.sample_category(&request)))
            .collect();
        finish_tick(&self.config, &request.scope, outputs, None)
    }
}

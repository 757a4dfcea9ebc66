//! One synchronous collection: resolve the scope once, read the environment once, ask
//! each enabled sampler in turn, assemble the snapshot. The pipeline's actors run the
//! same samplers and the same assembly; this path serves one-shot use and benchmarks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use wattline_config::ResourceMetricsConfig;

use crate::diagnostics::PipelineDiagnostics;
use crate::environment::EnvironmentReader;
use crate::merger::snapshot_builder::assemble_snapshot;
use crate::readings::SamplingSeries;
use crate::samplers::{CategorySampler, SampleRequest, samplers_for};
use crate::scope::{ScopeTarget, resolve_scope};
use crate::snapshot::Snapshot;

/// Collects snapshots of one target with one configuration.
pub struct Collector {
    root: PathBuf,
    target: ScopeTarget,
    config: ResourceMetricsConfig,
    environment: EnvironmentReader,
    samplers: Vec<Box<dyn CategorySampler>>,
    diagnostics: Option<PipelineDiagnostics>,
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
            samplers: samplers_for(&root, &config),
            root,
            target,
            config,
            diagnostics: None,
        }
    }

    /// Adds a GPU sampler over `source` (the GPU category stays `null` without one).
    pub fn with_gpu_source(mut self, source: Option<Box<dyn crate::gpu::GpuSource>>) -> Self {
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

    /// Records read failures into `diagnostics` from now on.
    pub fn with_diagnostics(mut self, diagnostics: PipelineDiagnostics) -> Self {
        self.diagnostics = Some(diagnostics);
        self
    }

    /// Takes one snapshot in `series`.
    pub fn collect(&mut self, series: SamplingSeries) -> Snapshot {
        let taken_at = Instant::now();
        let scope = Arc::new(resolve_scope(&self.root, self.target));
        let (environment, environment_errors) = self.environment.read(&scope);
        let request = SampleRequest {
            series,
            scope: Arc::clone(&scope),
            environment: Arc::new(environment),
            taken_at,
        };
        let mut outputs = Vec::with_capacity(self.samplers.len());
        for sampler in &mut self.samplers {
            let output = sampler.sample_category(&request);
            if let Some(diagnostics) = &self.diagnostics {
                crate::diagnostics::record_read_problems(
                    diagnostics,
                    sampler.category(),
                    &output.problems,
                );
            }
            outputs.push(output);
        }
        if let Some(diagnostics) = &self.diagnostics {
            crate::pipeline::merger_actor::record_environment_errors(
                diagnostics,
                &environment_errors,
            );
        }
        assemble_snapshot(&self.config, &scope, outputs, Utc::now())
    }
}

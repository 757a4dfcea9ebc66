//! One collection: resolve the scope once, ask each enabled sampler, merge into a
//! snapshot. The pipeline's actors run the same samplers; this is the synchronous core
//! they share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use wattline_config::ResourceMetricsConfig;

use crate::merger::convert;
use crate::readings::{FieldCoverage, SamplingSeries};
use crate::samplers::cpu::CpuSampler;
use crate::samplers::{SampleRequest, SamplerOutput};
use crate::scope::{ResolvedScope, ScopeTarget, resolve_scope};
use crate::snapshot::{OperatingSystem, ProcessSampling, Snapshot};

/// Collects snapshots of one target with one configuration.
#[derive(Debug)]
pub struct Collector {
    root: PathBuf,
    target: ScopeTarget,
    config: ResourceMetricsConfig,
    cpu: CpuSampler,
}

impl Collector {
    /// A collector reading the OS under `root` (`/` in production).
    pub fn new(root: PathBuf, target: ScopeTarget, config: ResourceMetricsConfig) -> Self {
        Collector {
            cpu: CpuSampler::new(root.clone()),
            root,
            target,
            config,
        }
    }

    /// The root directory the OS is read under.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Takes one snapshot in `series`.
    pub fn collect(&mut self, series: SamplingSeries) -> Snapshot {
        let taken_at = Instant::now();
        let scope = Arc::new(resolve_scope(&self.root, self.target));
        let request = SampleRequest {
            series,
            scope: Arc::clone(&scope),
            taken_at,
        };
        let mut coverage = FieldCoverage::new();
        let cpu = self.config.cpu.enabled.then(|| {
            let output = self.cpu.sample(&request);
            let metrics = convert::cpu(&output.reading, &self.config.units.cpu);
            merge_coverage(&mut coverage, output);
            metrics
        });
        Snapshot {
            timestamp: Utc::now(),
            operating_system: OperatingSystem::current(),
            measurement_scope: self.target.measurement_scope(),
            process_sampling: process_sampling(&scope, coverage),
            cpu,
            memory: None,
            process: None,
            disk: None,
            gpu: None,
            network: None,
        }
    }
}

fn merge_coverage<R>(coverage: &mut FieldCoverage, output: SamplerOutput<R>) {
    coverage.extend(output.coverage);
}

/// The snapshot's `process_sampling`: `null` when processes could not be listed or no
/// process sum was attempted.
pub fn process_sampling(scope: &ResolvedScope, coverage: FieldCoverage) -> Option<ProcessSampling> {
    if scope.is_unavailable() || coverage.is_empty() {
        return None;
    }
    Some(ProcessSampling {
        visible_processes: scope.visible_processes,
        sampled_processes: scope.processes.len() as u64,
        field_sampled_processes: coverage
            .into_iter()
            .map(|(field, count)| (field.to_string(), count))
            .collect::<BTreeMap<_, _>>(),
    })
}

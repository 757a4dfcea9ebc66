//! One tick, in the two halves every collection path shares: the actor pipeline's
//! merger and the one-shot [`crate::collector::Collector`] differ only in how they ask
//! the samplers in between (actors with a deadline, or in turn).

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use wattline_config::ResourceMetricsConfig;

use super::snapshot_builder::assemble_snapshot;
use crate::diagnostics::{PipelineDiagnostics, SamplerCategory};
use crate::environment::EnvironmentReader;
use crate::readings::SamplingSeries;
use crate::samplers::{CategoryReading, ReadProblems, SampleRequest, SamplerOutput};
use crate::scope::{ResolvedScope, ScopeTarget, resolve_scope};
use crate::snapshot::Snapshot;

/// What every sampler of one tick gets: the scope, resolved once, and the
/// environment (cgroup, pressure) read once for it.
pub fn prepare_tick(
    root: &std::path::Path,
    target: ScopeTarget,
    environment: &EnvironmentReader,
    series: SamplingSeries,
    diagnostics: Option<&PipelineDiagnostics>,
) -> SampleRequest {
    let taken_at = Instant::now();
    let scope = resolve_scope(root, target);
    let (read, errors) = environment.read(&scope);
    if let Some(diagnostics) = diagnostics {
        record_environment_errors(diagnostics, &errors);
    }
    SampleRequest {
        series,
        scope: Arc::new(scope),
        environment: Arc::new(read),
        taken_at,
    }
}

/// The snapshot from the outputs that arrived (a category missing here is `null`),
/// each category's read problems recorded first.
pub fn finish_tick(
    config: &ResourceMetricsConfig,
    scope: &ResolvedScope,
    outputs: Vec<(SamplerCategory, SamplerOutput<CategoryReading>)>,
    diagnostics: Option<&PipelineDiagnostics>,
) -> Snapshot {
    if let Some(diagnostics) = diagnostics {
        for (category, output) in &outputs {
            crate::diagnostics::record_read_problems(diagnostics, *category, &output.problems);
        }
    }
    let outputs = outputs.into_iter().map(|(_, output)| output).collect();
    assemble_snapshot(config, scope, outputs, Utc::now())
}

/// cgroup and pressure files feed the CPU and memory categories; their read failures
/// are counted under the CPU sampler's codes.
fn record_environment_errors(
    diagnostics: &PipelineDiagnostics,
    errors: &[crate::platform::ReadError],
) {
    let mut problems = ReadProblems::default();
    errors.iter().for_each(|error| problems.add(error));
    crate::diagnostics::record_read_problems(diagnostics, SamplerCategory::Cpu, &problems);
}

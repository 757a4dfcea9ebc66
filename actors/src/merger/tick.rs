//! One tick, in the two halves every collection path shares: the actor pipeline's
//! merger and the one-shot [`crate::collector::Collector`] differ only in how they ask
//! the samplers in between (actors with a deadline, or in turn).

use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use wattline_config::ResourceMetricsConfig;

use super::snapshot_builder::assemble_snapshot;
use crate::samplers::environment::EnvironmentReader;
use crate::samplers::{
    CategoryReading, ReadProblems, SampleRequest, SamplerOutput, record_read_problems,
};
use crate::scope::{ResolvedScope, ScopeTarget, add_group_members, resolve_scope};
use wattline_diagnostics::PipelineDiagnostics;
use wattline_model::category::SamplerCategory;
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;

/// What every sampler of one tick gets: the scope, resolved once, and the
/// environment (cgroup, pressure) read once for it.
/// With `command_group` (the measured command's own cgroup), its members join a
/// process tree: children that daemonised are counted.
pub fn prepare_tick(
    root: &std::path::Path,
    target: ScopeTarget,
    command_group: Option<&std::path::Path>,
    environment: &EnvironmentReader,
    series: SamplingSeries,
    diagnostics: Option<&PipelineDiagnostics>,
) -> SampleRequest {
    let taken_at = Instant::now();
    let mut scope = resolve_scope(root, target);
    if let Some(group) = command_group {
        add_group_members(root, &mut scope, group);
    }
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
            record_read_problems(diagnostics, *category, &output.problems);
        }
    }
    let outputs = outputs.into_iter().map(|(_, output)| output).collect();
    assemble_snapshot(config, scope, outputs, Utc::now())
}

/// cgroup and pressure files feed the CPU, memory and process categories; each read
/// failure is counted under the category its file belongs to.
fn record_environment_errors(
    diagnostics: &PipelineDiagnostics,
    errors: &[crate::platform::ReadError],
) {
    for category in [
        SamplerCategory::Cpu,
        SamplerCategory::Memory,
        SamplerCategory::Process,
    ] {
        let mut problems = ReadProblems::default();
        errors
            .iter()
            .filter(|error| environment_category(error.path()) == category)
            .for_each(|error| problems.add(error));
        record_read_problems(diagnostics, category, &problems);
    }
}

/// The category an environment file feeds, by its name: cgroup files are named by
/// their controller (`memory.max`, `pids.current`, `cpu.stat`), pressure files by
/// their resource (`memory.pressure`, `/proc/pressure/memory`). Anything else (group
/// membership) is the CPU category's, as the scope's environment.
fn environment_category(path: &std::path::Path) -> SamplerCategory {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default();
    if name.starts_with("memory") {
        SamplerCategory::Memory
    } else if name.starts_with("pids") {
        SamplerCategory::Process
    } else {
        SamplerCategory::Cpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_failure_counts_under_the_category_its_file_feeds() {
        let file = |path: &str| std::path::PathBuf::from(path);
        for (path, category) in [
            (
                "/sys/fs/cgroup/app/memory.pressure",
                SamplerCategory::Memory,
            ),
            ("/proc/pressure/memory", SamplerCategory::Memory),
            (
                "/sys/fs/cgroup/memory/app/memory.limit_in_bytes",
                SamplerCategory::Memory,
            ),
            ("/sys/fs/cgroup/app/pids.max", SamplerCategory::Process),
            ("/proc/pressure/cpu", SamplerCategory::Cpu),
            ("/sys/fs/cgroup/app/cpu.stat", SamplerCategory::Cpu),
        ] {
            assert_eq!(environment_category(&file(path)), category, "{path}");
        }

        let (context, components) = crate::pipeline::open_diagnostics(Some(Default::default()))
            .unwrap()
            .unwrap();
        let denied = |path: &str| crate::platform::ReadError::PermissionDenied { path: file(path) };
        record_environment_errors(
            &components,
            &[
                denied("/proc/pressure/memory"),
                denied("/proc/pressure/cpu"),
            ],
        );
        assert_eq!(
            crate::diagnostics::recent_codes(&context),
            vec![
                "sampler.cpu.permission_denied",
                "sampler.memory.permission_denied"
            ]
        );
    }
}

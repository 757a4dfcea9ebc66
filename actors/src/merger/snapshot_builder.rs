//! Assembles one snapshot from the tick's scope and each category's base-unit output.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use wattline_config::ResourceMetricsConfig;

use crate::readings::FieldCoverage;
use crate::samplers::{CategoryReading, SamplerOutput};
use crate::scope::ResolvedScope;
use wattline_model::snapshot::{OperatingSystem, ProcessSampling, Snapshot};

/// Builds the snapshot. A category whose output is missing (disabled, or its sampler
/// missed the deadline) is `null`.
pub fn assemble_snapshot(
    config: &ResourceMetricsConfig,
    scope: &ResolvedScope,
    outputs: Vec<SamplerOutput<CategoryReading>>,
    timestamp: DateTime<Utc>,
) -> Snapshot {
    let units = &config.units;
    let mut coverage = FieldCoverage::new();
    let mut snapshot = Snapshot {
        timestamp,
        operating_system: OperatingSystem::current(),
        measurement_scope: scope.target.measurement_scope(),
        process_sampling: None,
        cpu: None,
        memory: None,
        process: None,
        disk: None,
        gpu: None,
        network: None,
    };
    for output in outputs {
        coverage.extend(output.coverage);
        let descriptor = crate::categories::descriptor(output.reading.category());
        (descriptor.fill)(&mut snapshot, output.reading, units);
    }
    snapshot.process_sampling = process_sampling(scope, coverage);
    snapshot
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

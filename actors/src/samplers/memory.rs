//! The memory sampler: system memory from `/proc/meminfo`; resident, private, virtual
//! and peak memory of the scope's processes; limit, accounting, pressure and events of
//! an exclusive cgroup.

use std::path::PathBuf;

use super::per_process::{from_stats, read_per_process};
use super::{ReadProblems, SampleRequest, SamplerOutput};
use crate::platform::os::meminfo::read_meminfo;
use crate::platform::os::process_status::read_process_status;
use crate::platform::os::smaps_rollup::read_smaps_rollup;
use crate::platform::os::system_constants::page_size_bytes;
use crate::readings::FieldCoverage;
use crate::samplers::environment::Environment;
use crate::scope::{ResolvedScope, ScopeTarget};
use wattline_model::snapshot::{LimitEventKind, LimitResource};
use wattline_model::snapshot::{LimitEventReading, MemoryReading};

/// Canonical coverage keys of the memory sums.
pub const RESIDENT_FIELD: &str = "memory.resident";
/// See [`RESIDENT_FIELD`].
pub const PRIVATE_FIELD: &str = "memory.private";
/// See [`RESIDENT_FIELD`].
pub const VIRTUAL_FIELD: &str = "memory.virtual_memory";
/// Peak resident memory, application scope only.
pub const PEAK_RESIDENT_FIELD: &str = "memory.peak_resident";
/// macOS only; always zero processes here.
pub const PHYSICAL_FOOTPRINT_FIELD: &str = "memory.physical_footprint";

/// The memory sampler's state.
#[derive(Debug)]
pub struct MemorySampler {
    root: PathBuf,
    page_size: u64,
    buffer: Vec<u8>,
}

impl MemorySampler {
    /// A sampler reading the OS under `root`.
    pub fn new(root: PathBuf) -> Self {
        MemorySampler {
            root,
            page_size: page_size_bytes(),
            buffer: Vec::with_capacity(4096),
        }
    }

    /// Samples the memory category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<MemoryReading> {
        let mut problems = ReadProblems::default();
        let mut reading = MemoryReading::default();
        match read_meminfo(&self.root) {
            Ok(Some(info)) => reading.system = info.system_memory(),
            Ok(None) => {}
            Err(error) => problems.add(&error),
        }
        let scope = &request.scope;
        let mut coverage = FieldCoverage::new();
        if !scope.is_unavailable() && !matches!(scope.target, ScopeTarget::Global) {
            self.sample_processes(scope, &mut reading, &mut coverage, &mut problems);
        }
        apply_environment(&request.environment, scope.target, &mut reading);
        SamplerOutput {
            reading,
            coverage,
            problems,
        }
    }

    fn sample_processes(
        &mut self,
        scope: &ResolvedScope,
        reading: &mut MemoryReading,
        coverage: &mut FieldCoverage,
        problems: &mut ReadProblems,
    ) {
        // Resident and virtual sizes come from the `stat` the scope already read. A
        // zombie's zeros there mean "no address space", not "none used": it lacks both.
        let page_size = self.page_size;
        let from_stat = from_stats(scope, |p| {
            if p.is_zombie() {
                (None, None)
            } else {
                (
                    p.resident_pages.checked_mul(page_size),
                    Some(p.virtual_bytes),
                )
            }
        });
        let (resident, resident_count) = from_stat.sum(|(resident, _)| *resident);
        let (virtual_total, virtual_count) = from_stat.sum(|(_, virtual_bytes)| *virtual_bytes);
        let buffer = &mut self.buffer;
        let root = &self.root;
        let private = read_per_process(scope, problems, |pid| {
            Ok(read_smaps_rollup(root, pid, buffer)?.map(|rollup| rollup.private_bytes()))
        });
        let (private_total, private_count) = private.sum(|bytes| Some(*bytes));
        reading.resident_bytes = resident;
        reading.virtual_bytes = virtual_total;
        reading.private_bytes = private_total;
        coverage.insert(RESIDENT_FIELD, resident_count);
        coverage.insert(VIRTUAL_FIELD, virtual_count);
        coverage.insert(PRIVATE_FIELD, private_count);
        coverage.insert(PHYSICAL_FOOTPRINT_FIELD, 0);
        // One process has one peak; a changing tree has none.
        if let ScopeTarget::ApplicationProcess(identity) = scope.target {
            match read_process_status(root, identity.pid, buffer) {
                Ok(status) => reading.peak_resident_bytes = status.and_then(|s| s.vm_hwm_bytes),
                Err(error) => problems.add(&error),
            }
            coverage.insert(
                PEAK_RESIDENT_FIELD,
                u64::from(reading.peak_resident_bytes.is_some()),
            );
        }
    }
}

/// Fills the environment fields: cgroup values in process scopes, system pressure in
/// global scope.
fn apply_environment(environment: &Environment, target: ScopeTarget, reading: &mut MemoryReading) {
    if let ScopeTarget::Global = target {
        if let Some(pressure) = &environment.system_memory_pressure {
            reading.some_pressure_microseconds = pressure.some_total_us;
            reading.full_pressure_microseconds = pressure.full_total_us;
        }
        return;
    }
    let Some(group) = &environment.cgroup else {
        return;
    };
    reading.limit_bytes = group.memory_limit_bytes;
    reading.environment_accounted_bytes = group.memory_current_bytes;
    reading.some_pressure_microseconds = group.memory_pressure_some_us;
    reading.full_pressure_microseconds = group.memory_pressure_full_us;
    reading.out_of_memory_events = group.memory_oom_kill_events.or(group.memory_oom_events);
    let maximum = group.memory_max_events.or(group.memory_failcnt);
    let events = [
        (LimitEventKind::High, group.memory_high_events),
        (LimitEventKind::Maximum, maximum),
        (
            LimitEventKind::OutOfMemory,
            group.memory_oom_events.or(group.memory_oom_kill_events),
        ),
    ];
    reading.limit_events = events
        .into_iter()
        .filter(|(_, count)| count.is_some())
        .map(|(event, count)| LimitEventReading {
            resource: LimitResource::Memory,
            event,
            count,
        })
        .collect();
}

//! The measured environment beside the processes: the exclusive cgroup's counters and
//! limits (process scopes) or system pressure (global scope), read once per tick and
//! shared by the CPU, memory and process samplers.

use std::path::{Path, PathBuf};

use crate::platform::ReadError;
use crate::platform::linux::cgroup_files::CgroupReadings;
use crate::platform::os::cgroup::{
    CgroupLayout, find_exclusive_group, read_cgroup_layout, read_cgroup_readings,
};
use crate::platform::os::pressure::{Pressure, PressureResource, read_system_pressure};
use crate::scope::{ResolvedScope, ScopeTarget};

/// Environment readings of one tick, base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Environment {
    /// Counters and limits of the cgroup that holds exactly the measured processes.
    pub cgroup: Option<CgroupReadings>,
    /// `/proc/pressure/cpu` (global scope).
    pub system_cpu_pressure: Option<Pressure>,
    /// `/proc/pressure/memory` (global scope).
    pub system_memory_pressure: Option<Pressure>,
}

/// Reads the environment; the cgroup layout is detected once.
#[derive(Debug)]
pub struct EnvironmentReader {
    root: PathBuf,
    layout: Option<CgroupLayout>,
}

impl EnvironmentReader {
    /// Detects the cgroup layout under `root` (absent or unreadable → no cgroup data).
    pub fn new(root: &Path) -> Self {
        let layout = match read_cgroup_layout(root) {
            Ok(layout) => layout,
            Err(error) => {
                tracing::debug!(%error, "cgroup layout unreadable");
                None
            }
        };
        EnvironmentReader {
            root: root.to_path_buf(),
            layout,
        }
    }

    /// Reads this tick's environment for `scope`; failures are returned beside the
    /// readings so the caller can record them.
    pub fn read(&self, scope: &ResolvedScope) -> (Environment, Vec<ReadError>) {
        let mut errors = Vec::new();
        let mut environment = Environment::default();
        if scope.is_unavailable() {
            return (environment, errors);
        }
        match scope.target {
            ScopeTarget::Global => {
                let mut pressure = |resource| match read_system_pressure(&self.root, resource) {
                    Ok(pressure) => pressure,
                    Err(error) => {
                        errors.push(error);
                        None
                    }
                };
                environment.system_cpu_pressure = pressure(PressureResource::Cpu);
                environment.system_memory_pressure = pressure(PressureResource::Memory);
            }
            ScopeTarget::ApplicationProcess(_) | ScopeTarget::ProcessTree(_) => {
                let Some(layout) = &self.layout else {
                    return (environment, errors);
                };
                // The exclusivity rule needs every live process of the scope; a scope
                // with unreadable processes cannot prove it owns its group.
                if !scope.fully_sampled() {
                    return (environment, errors);
                }
                let pids: Vec<u32> = scope.processes.iter().map(|p| p.pid).collect();
                // The first parent outside the scope (a tree's root's parent): usually
                // in the same groups, when they are shared, and cheap to ask.
                let mut sorted = pids.clone();
                sorted.sort_unstable();
                let witness = scope
                    .processes
                    .iter()
                    .map(|process| process.parent_pid)
                    .find(|parent| *parent != 0 && sorted.binary_search(parent).is_err());
                match find_exclusive_group(&self.root, layout, &pids, witness) {
                    Ok(Some(group)) => {
                        let (readings, read_errors) = read_cgroup_readings(&group);
                        errors.extend(read_errors);
                        environment.cgroup = Some(readings);
                    }
                    Ok(None) => {}
                    Err(error) => errors.push(error),
                }
            }
        }
        (environment, errors)
    }
}

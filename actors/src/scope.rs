//! Scope resolution: which processes a tick measures, each with its identity (pid +
//! start time), resolved once per tick and shared by every sampler.
//!
//! Each process's `stat` is read here exactly once per tick; samplers reuse the parsed
//! `ProcessStat` rather than reading it again.

use std::collections::HashMap;
use std::path::Path;

use crate::platform::ReadErrorClass;
use crate::platform::os::cgroup_command::read_group_members;
use crate::platform::os::process_list::{list_all_process_ids, read_children, read_children_of};
use crate::platform::os::process_stat::{ProcessStat, read_process_stat};
use wattline_model::snapshot::MeasurementScope;

/// A process's identity: a pid alone can be reused, pid + start time cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessIdentity {
    /// Process ID.
    pub pid: u32,
    /// Start time after boot, clock ticks.
    pub start_ticks: u64,
}

impl ProcessIdentity {
    /// The identity of the process `stat` describes.
    pub fn of(stat: &ProcessStat) -> Self {
        ProcessIdentity {
            pid: stat.pid,
            start_ticks: stat.start_ticks,
        }
    }
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeTarget {
    /// Every process visible in `/proc`.
    Global,
    /// One process, without children.
    ApplicationProcess(ProcessIdentity),
    /// A root process and its live descendants.
    ProcessTree(ProcessIdentity),
}

impl ScopeTarget {
    /// The scope this target reports.
    pub fn measurement_scope(&self) -> MeasurementScope {
        match self {
            ScopeTarget::Global => MeasurementScope::Global,
            ScopeTarget::ApplicationProcess(_) => MeasurementScope::ApplicationProcess,
            ScopeTarget::ProcessTree(_) => MeasurementScope::ProcessTree,
        }
    }

    /// The root's identity, for process scopes.
    pub fn root(&self) -> Option<ProcessIdentity> {
        match self {
            ScopeTarget::Global => None,
            ScopeTarget::ApplicationProcess(root) | ScopeTarget::ProcessTree(root) => Some(*root),
        }
    }
}

/// Builds a target for `pid`, reading its start time now so a later reuse of the pid is
/// detected.
pub fn identify_process(
    root: &Path,
    pid: u32,
) -> Result<ProcessIdentity, crate::platform::ReadError> {
    let stat = read_process_stat(root, pid, &mut Vec::new())?;
    Ok(ProcessIdentity {
        pid,
        start_ticks: stat.start_ticks,
    })
}

/// Whether the scope could be measured this tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeStatus {
    /// The process list is in `processes`.
    Ready,
    /// The root process has exited: the snapshot is unavailable.
    RootGone,
    /// The root's pid now belongs to another process: the snapshot is unavailable.
    RootIdentityChanged,
    /// `/proc` could not be listed.
    ListingFailed(String),
}

/// The processes one tick measures.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedScope {
    /// The target this was resolved for.
    pub target: ScopeTarget,
    /// Whether the list is usable.
    pub status: ScopeStatus,
    /// Processes listed when collection began, including those that exited before
    /// their `stat` was read.
    pub visible_processes: u64,
    /// Processes whose `stat` was read, in listing order (root first for process
    /// scopes).
    pub processes: Vec<ProcessStat>,
    /// Listed processes that exited before they were read (skipped, not a failure).
    pub exited_after_listing: u64,
    /// Listed processes that could not be read (access denied, unparsable) or whose
    /// pid was reused by an unrelated process: process totals of application and tree
    /// scopes are unavailable when this is not zero.
    pub unreadable_processes: u64,
}

impl ResolvedScope {
    /// True when the snapshot must be the spec's unavailable snapshot.
    pub fn is_unavailable(&self) -> bool {
        self.status != ScopeStatus::Ready
    }

    /// True when every listed process that is still alive was read: the condition for
    /// process totals in application and tree scopes.
    pub fn fully_sampled(&self) -> bool {
        self.status == ScopeStatus::Ready && self.unreadable_processes == 0
    }

    /// A scope that could not be measured this tick.
    pub fn unavailable(target: ScopeTarget, status: ScopeStatus) -> Self {
        ResolvedScope {
            target,
            status,
            visible_processes: 0,
            processes: Vec::new(),
            exited_after_listing: 0,
            unreadable_processes: 0,
        }
    }
}

/// Resolves `target` against the `/proc` under `root`.
pub fn resolve_scope(root: &Path, target: ScopeTarget) -> ResolvedScope {
    match target {
        ScopeTarget::Global => resolve_global(root, target),
        ScopeTarget::ApplicationProcess(identity) => match read_root(root, identity) {
            Ok(stat) => ResolvedScope {
                target,
                status: ScopeStatus::Ready,
                visible_processes: 1,
                processes: vec![stat],
                exited_after_listing: 0,
                unreadable_processes: 0,
            },
            Err(status) => ResolvedScope::unavailable(target, status),
        },
        ScopeTarget::ProcessTree(identity) => resolve_tree(root, target, identity),
    }
}

/// Adds the members of `group` (the command's own cgroup) that the tree walk did not
/// find: a child that daemonised was re-parented away from the tree but is still the
/// command's. Only a process tree that resolved is extended; a group that cannot be
/// read adds nothing (the tree stands as walked).
pub fn add_group_members(root: &Path, scope: &mut ResolvedScope, group: &Path) {
    if scope.is_unavailable() || !matches!(scope.target, ScopeTarget::ProcessTree(_)) {
        return;
    }
    let members = match read_group_members(group) {
        Ok(members) => members,
        Err(error) => {
            tracing::debug!(%error, "the command's cgroup could not be listed");
            return;
        }
    };
    let known: std::collections::HashSet<u32> = scope.processes.iter().map(|p| p.pid).collect();
    let mut buf = Vec::with_capacity(512);
    for pid in members.into_iter().filter(|pid| !known.contains(pid)) {
        scope.visible_processes += 1;
        match read_process_stat(root, pid, &mut buf) {
            Ok(stat) => scope.processes.push(stat),
            Err(error) if error.class() == ReadErrorClass::TargetGone => {
                scope.exited_after_listing += 1
            }
            Err(_) => scope.unreadable_processes += 1,
        }
    }
}

fn read_root(root: &Path, identity: ProcessIdentity) -> Result<ProcessStat, ScopeStatus> {
    match read_process_stat(root, identity.pid, &mut Vec::with_capacity(512)) {
        Ok(stat) if stat.start_ticks == identity.start_ticks => Ok(stat),
        Ok(_) => Err(ScopeStatus::RootIdentityChanged),
        Err(error) if error.class() == ReadErrorClass::TargetGone => Err(ScopeStatus::RootGone),
        Err(error) => Err(ScopeStatus::ListingFailed(error.to_string())),
    }
}

/// Lists every process and reads each one's `stat`: the global scope as it is, and
/// the parents a tree is found from where the kernel has no `children` files.
fn resolve_global(root: &Path, target: ScopeTarget) -> ResolvedScope {
    let pids = match list_all_process_ids(root) {
        Ok(pids) => pids,
        Err(error) => {
            return ResolvedScope::unavailable(
                target,
                ScopeStatus::ListingFailed(error.to_string()),
            );
        }
    };
    let mut scope = ResolvedScope {
        target,
        status: ScopeStatus::Ready,
        visible_processes: pids.len() as u64,
        processes: Vec::with_capacity(pids.len()),
        exited_after_listing: 0,
        unreadable_processes: 0,
    };
    let mut buf = Vec::with_capacity(512);
    for pid in pids {
        match read_process_stat(root, pid, &mut buf) {
            Ok(stat) => scope.processes.push(stat),
            Err(error) if error.class() == ReadErrorClass::TargetGone => {
                scope.exited_after_listing += 1
            }
            Err(_) => scope.unreadable_processes += 1,
        }
    }
    scope
}

fn resolve_tree(root: &Path, target: ScopeTarget, identity: ProcessIdentity) -> ResolvedScope {
    let root_stat = match read_root(root, identity) {
        Ok(stat) => stat,
        Err(status) => return ResolvedScope::unavailable(target, status),
    };
    let mut children = Vec::new();
    match read_children(root, identity.pid, &mut children) {
        // Children read are proof enough that the files exist.
        Ok(()) if !children.is_empty() || children_files_supported(root, identity.pid) => {
            resolve_tree_by_children(root, target, root_stat, children)
        }
        // Kernels built without CONFIG_PROC_CHILDREN have no `children` files: find
        // descendants from every process's parent pid instead.
        _ => resolve_tree_by_parent_scan(root, target, root_stat),
    }
}

fn children_files_supported(root: &Path, pid: u32) -> bool {
    root.join(format!("proc/{pid}/task/{pid}/children"))
        .exists()
}

fn resolve_tree_by_children(
    root: &Path,
    target: ScopeTarget,
    root_stat: ProcessStat,
    first_children: Vec<u32>,
) -> ResolvedScope {
    let mut scope = ResolvedScope {
        target,
        status: ScopeStatus::Ready,
        visible_processes: 1,
        processes: vec![root_stat],
        exited_after_listing: 0,
        unreadable_processes: 0,
    };
    // Breadth-first: (child pid, the parent it was listed under).
    let mut queue: std::collections::VecDeque<(u32, u32)> = first_children
        .into_iter()
        .map(|child| (child, root_stat.pid))
        .collect();
    let mut children = Vec::new();
    let mut buf = Vec::with_capacity(512);
    while let Some((pid, parent)) = queue.pop_front() {
        scope.visible_processes += 1;
        match read_process_stat(root, pid, &mut buf) {
            Ok(stat) if stat.parent_pid == parent => {
                children.clear();
                if read_children_of(root, &stat, &mut children).is_ok() {
                    queue.extend(children.iter().map(|&child| (child, pid)));
                }
                scope.processes.push(stat);
            }
            // The listed child exited and its pid now names an unrelated process.
            Ok(_) => scope.unreadable_processes += 1,
            Err(error) if error.class() == ReadErrorClass::TargetGone => {
                scope.exited_after_listing += 1
            }
            Err(_) => scope.unreadable_processes += 1,
        }
    }
    scope
}

fn resolve_tree_by_parent_scan(
    root: &Path,
    target: ScopeTarget,
    root_stat: ProcessStat,
) -> ResolvedScope {
    let everything = resolve_global(root, ScopeTarget::Global);
    if everything.is_unavailable() {
        return ResolvedScope::unavailable(target, everything.status);
    }
    // A process that vanished or cannot be read here cannot be placed in the tree; the
    // parent scan sees only what it can read.
    let others: Vec<ProcessStat> = everything
        .processes
        .into_iter()
        .filter(|p| p.pid != root_stat.pid)
        .collect();
    let descendants = descendants_of(root_stat, &others);
    let mut processes = Vec::with_capacity(descendants.len() + 1);
    processes.push(root_stat);
    processes.extend(descendants);
    // A process whose `stat` could not be read may be in the tree, with its whole
    // subtree: the totals cannot claim to be complete, so it is counted here (the
    // tree's totals are then unavailable), never silently dropped.
    ResolvedScope {
        target,
        status: ScopeStatus::Ready,
        visible_processes: processes.len() as u64 + everything.unreadable_processes,
        processes,
        exited_after_listing: 0,
        unreadable_processes: everything.unreadable_processes,
    }
}

/// The descendants of `root` among `stats`, breadth-first. A child must have started
/// no earlier than its parent: a parent pid that was reused cannot adopt older
/// processes.
pub fn descendants_of(root: ProcessStat, stats: &[ProcessStat]) -> Vec<ProcessStat> {
    let mut by_parent: HashMap<u32, Vec<&ProcessStat>> = HashMap::new();
    for stat in stats {
        by_parent.entry(stat.parent_pid).or_default().push(stat);
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        if let Some(children) = by_parent.get(&parent.pid) {
            for child in children {
                if child.start_ticks >= parent.start_ticks && child.pid != root.pid {
                    found.push(**child);
                    frontier.push(**child);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, parent_pid: u32, start_ticks: u64) -> ProcessStat {
        ProcessStat {
            pid,
            parent_pid,
            state: b'S',
            user_ticks: 0,
            system_ticks: 0,
            thread_count: 1,
            start_ticks,
            virtual_bytes: 0,
            resident_pages: 0,
        }
    }

    #[test]
    fn descendants_follow_parent_links_transitively() {
        let root = stat(10, 1, 100);
        let others = [
            stat(11, 10, 101),
            stat(12, 11, 102),
            stat(13, 1, 50),
            stat(14, 12, 103),
        ];
        let mut pids: Vec<u32> = descendants_of(root, &others)
            .iter()
            .map(|s| s.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![11, 12, 14]);
    }

    #[test]
    fn an_older_process_is_not_adopted_by_a_reused_parent_pid() {
        let root = stat(10, 1, 500);
        let others = [stat(11, 10, 400)];
        assert!(descendants_of(root, &others).is_empty());
    }
}

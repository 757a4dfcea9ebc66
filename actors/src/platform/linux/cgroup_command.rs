//! A fresh cgroup for a measured command, so its cgroup fields (CPU usage and
//! throttling, memory and its limit, OOM and pids events) describe the command alone,
//! and a child that daemonises is still found through the group.
//!
//! The group is made under wattline's own group in each hierarchy, never at a mount's
//! root: the command stays inside every limit wattline itself runs under. On cgroup v2
//! the controllers are enabled in wattline's group for its children where the kernel
//! allows it (the no-internal-processes rule refuses it in a group that holds
//! processes other than at the root); the group is still made, with `cpu.stat` and
//! pressure, and the refusal is kept as a note. On v1 (and hybrid) one group is made
//! per hierarchy of `cpu`, `cpuacct`, `memory` and `pids`, plus the unified one of a
//! hybrid host for pressure.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::cgroup::{CgroupLayout, CgroupMount, read_proc_cgroup};
use crate::platform::ReadError;

/// The v1 controllers a command's group is made for.
pub const COMMAND_V1_CONTROLLERS: [&str; 4] = ["cpu", "cpuacct", "memory", "pids"];

/// Why no group could be made for the command.
#[derive(Debug, thiserror::Error)]
pub enum CommandCgroupError {
    /// No cgroup hierarchy is mounted (or readable) here.
    #[error("no cgroup hierarchy is mounted under {0}")]
    NoHierarchy(PathBuf),
    /// wattline's own group could not be read.
    #[error("wattline's own cgroup: {0}")]
    OwnGroup(#[from] ReadError),
    /// A directory could not be made (not root, and no delegated subtree).
    #[error("cannot create {path}: {error} (run as root, or from a delegated cgroup v2 subtree)")]
    Create {
        /// The group that was to be made.
        path: PathBuf,
        /// The system's refusal.
        error: io::Error,
    },
}

/// The groups made for one command, one per hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandCgroup {
    /// The group directories, the membership one (unified, else `memory`) first.
    pub groups: Vec<PathBuf>,
    /// What is less than complete, in words (controllers the kernel did not enable).
    pub notes: Vec<String>,
}

impl CommandCgroup {
    /// The `cgroup.procs` file of each group: the command writes its pid to each
    /// before it runs.
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.groups
            .iter()
            .map(|group| group.join("cgroup.procs"))
            .collect()
    }

    /// The group whose members are the command's processes.
    pub fn membership_group(&self) -> Option<&Path> {
        self.groups.first().map(PathBuf::as_path)
    }
}

/// Makes a group named `name` under the group of process `own_pid` in every
/// hierarchy of `layout`. Groups already made are removed again when a later one
/// fails, so a failure leaves nothing behind.
pub fn create_command_cgroup(
    root: &Path,
    layout: &CgroupLayout,
    own_pid: u32,
    name: &str,
) -> Result<CommandCgroup, CommandCgroupError> {
    let own = read_proc_cgroup(root, own_pid, &mut Vec::with_capacity(512))?
        .ok_or_else(|| CommandCgroupError::NoHierarchy(root.to_path_buf()))?;
    let mut parents: Vec<PathBuf> = Vec::new();
    let mut add = |mount: &CgroupMount, path: Option<&str>| {
        if let Some(group) = path.and_then(|path| mount.group(path))
            && !parents.contains(&group.dir)
        {
            parents.push(group.dir);
        }
    };
    if let Some(mount) = layout.unified() {
        add(mount, own.unified.as_deref());
    }
    // Co-mounted controllers (`cpu,cpuacct`) share one directory: made once.
    for controller in COMMAND_V1_CONTROLLERS {
        if let Some(mount) = layout.v1_controller(controller) {
            add(mount, own.v1_path(controller));
        }
    }
    if parents.is_empty() {
        return Err(CommandCgroupError::NoHierarchy(root.to_path_buf()));
    }
    let mut made = CommandCgroup {
        groups: Vec::with_capacity(parents.len()),
        notes: Vec::new(),
    };
    for parent in parents {
        remove_stale_siblings(root, &parent, name);
        let group = parent.join(name);
        if let Err(error) = fs::create_dir(&group) {
            remove_groups(&made.groups);
            return Err(CommandCgroupError::Create { path: group, error });
        }
        made.groups.push(group);
    }
    if let CgroupLayout::V2 { .. } = layout
        && let Some(group) = made.groups.first()
        && let Some(note) = enable_v2_controllers(group)
    {
        made.notes.push(note);
    }
    Ok(made)
}

/// Removes the empty groups an earlier run left behind when it was killed before it
/// could clean up: siblings named like `name` up to its last `-` (`wattline-run-`),
/// ending in the pid of a process that no longer exists. A group still holding
/// processes is kept (the kernel refuses to remove it).
fn remove_stale_siblings(root: &Path, parent: &Path, name: &str) {
    let Some((prefix, _)) = name.rsplit_once('-') else {
        return;
    };
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|sibling| sibling.strip_prefix(prefix))
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !root.join(format!("proc/{pid}")).exists() {
            let _ = remove_tree(&entry.path());
        }
    }
}

/// Enables `cpu`, `memory` and `pids` for the children of `group`'s parent; returns
/// what could not be enabled, in words.
fn enable_v2_controllers(group: &Path) -> Option<String> {
    let parent = group.parent()?;
    let available = fs::read_to_string(parent.join("cgroup.controllers")).unwrap_or_default();
    let mut refused = Vec::new();
    for controller in ["cpu", "memory", "pids"] {
        if !available.split_whitespace().any(|c| c == controller) {
            refused.push(format!(
                "{controller} (not offered to {})",
                parent.display()
            ));
            continue;
        }
        if let Err(error) = fs::write(
            parent.join("cgroup.subtree_control"),
            format!("+{controller}"),
        ) {
            refused.push(format!("{controller} ({error})"));
        }
    }
    (!refused.is_empty()).then(|| {
        format!(
            "cgroup v2 controllers not enabled for the command's group: {}; a group that \
             holds processes cannot enable them for its children (no internal processes), \
             so the fields they feed stay null",
            refused.join(", ")
        )
    })
}

/// The pids in `group` and its sub-groups (a process may move itself further down).
pub fn read_group_members(group: &Path) -> Result<Vec<u32>, ReadError> {
    let mut pids = Vec::new();
    let mut stack = vec![group.to_path_buf()];
    while let Some(current) = stack.pop() {
        let procs = current.join("cgroup.procs");
        match fs::read_to_string(&procs) {
            Ok(text) => pids.extend(parse_procs(&text)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(ReadError::from_io(&procs, error)),
        }
        let entries = match fs::read_dir(&current) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(ReadError::from_io(&current, error)),
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    Ok(pids)
}

/// The pids of a `cgroup.procs` text; a line that is no pid is skipped (the kernel
/// writes only pids).
fn parse_procs(text: &str) -> impl Iterator<Item = u32> + '_ {
    text.lines().filter_map(|line| line.trim().parse().ok())
}

/// Removes the command's groups, deepest first; a group still holding processes (a
/// daemon that outlived the command) cannot be removed and is returned with them.
pub fn remove_command_cgroup(cgroup: &CommandCgroup) -> Vec<(PathBuf, io::Error)> {
    cgroup
        .groups
        .iter()
        .filter_map(|group| remove_tree(group).err().map(|error| (group.clone(), error)))
        .collect()
}

fn remove_groups(groups: &[PathBuf]) {
    for group in groups {
        let _ = remove_tree(group);
    }
}

/// `rmdir` of a group and the sub-groups a process made inside it, children first.
fn remove_tree(group: &Path) -> io::Result<()> {
    if let Ok(entries) = fs::read_dir(group) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                remove_tree(&entry.path())?;
            }
        }
    }
    match fs::remove_dir(group) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::linux::cgroup::read_cgroup_layout;

    /// A pure v2 host as a fixture: mountinfo, `/proc/PID/cgroup`, and wattline's
    /// group offering cpu, memory and pids.
    fn v2_fixture() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let proc = root.path().join("proc/self");
        fs::create_dir_all(&proc).unwrap();
        fs::write(
            proc.join("mountinfo"),
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        )
        .unwrap();
        fs::create_dir_all(root.path().join("proc/4242")).unwrap();
        fs::write(
            root.path().join("proc/4242/cgroup"),
            "0::/user.slice/job.scope\n",
        )
        .unwrap();
        let own = root.path().join("sys/fs/cgroup/user.slice/job.scope");
        fs::create_dir_all(&own).unwrap();
        fs::write(own.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        fs::write(own.join("cgroup.subtree_control"), "").unwrap();
        root
    }

    #[test]
    fn a_v2_group_is_made_under_our_own_and_its_controllers_enabled() {
        let root = v2_fixture();
        let layout = read_cgroup_layout(root.path()).unwrap().unwrap();
        let made = create_command_cgroup(root.path(), &layout, 4242, "wattline-run-7").unwrap();
        let own = root.path().join("sys/fs/cgroup/user.slice/job.scope");
        assert_eq!(made.groups, vec![own.join("wattline-run-7")]);
        assert!(made.groups[0].is_dir());
        // A plain file takes each write whole: the last controller written is there.
        assert_eq!(
            fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "+pids"
        );
        assert!(made.notes.is_empty(), "{:?}", made.notes);
        assert_eq!(
            made.procs_files(),
            vec![own.join("wattline-run-7/cgroup.procs")]
        );
        assert!(remove_command_cgroup(&made).is_empty());
        assert!(!made.groups[0].exists());
    }

    #[test]
    fn controllers_not_offered_are_a_note_not_a_failure() {
        let root = v2_fixture();
        let own = root.path().join("sys/fs/cgroup/user.slice/job.scope");
        fs::write(own.join("cgroup.controllers"), "cpu\n").unwrap();
        let layout = read_cgroup_layout(root.path()).unwrap().unwrap();
        let made = create_command_cgroup(root.path(), &layout, 4242, "run").unwrap();
        assert_eq!(made.notes.len(), 1);
        assert!(
            made.notes[0].contains("memory (not offered"),
            "{:?}",
            made.notes
        );
        assert!(
            made.notes[0].contains("pids (not offered"),
            "{:?}",
            made.notes
        );
    }

    #[test]
    fn a_group_that_exists_already_is_refused_naming_it() {
        let root = v2_fixture();
        let layout = read_cgroup_layout(root.path()).unwrap().unwrap();
        let own = root.path().join("sys/fs/cgroup/user.slice/job.scope");
        fs::create_dir(own.join("taken")).unwrap();
        let error = create_command_cgroup(root.path(), &layout, 4242, "taken").unwrap_err();
        assert!(error.to_string().contains("taken"), "{error}");
    }

    #[test]
    fn a_group_left_by_a_killed_run_is_removed_and_a_live_one_kept() {
        let root = v2_fixture();
        let own = root.path().join("sys/fs/cgroup/user.slice/job.scope");
        // In the fixture's /proc, 4242 is alive and 4294967295 is not.
        let stale = own.join("wattline-run-4294967295");
        let live = own.join("wattline-run-4242");
        fs::create_dir(&stale).unwrap();
        fs::create_dir(&live).unwrap();
        let layout = read_cgroup_layout(root.path()).unwrap().unwrap();
        create_command_cgroup(root.path(), &layout, 4242, "wattline-run-1").unwrap();
        assert!(!stale.exists());
        assert!(live.exists());
    }

    #[test]
    fn members_are_read_from_the_group_and_its_sub_groups() {
        let group = tempfile::tempdir().unwrap();
        fs::write(group.path().join("cgroup.procs"), "10\n11\n").unwrap();
        fs::create_dir(group.path().join("inner")).unwrap();
        fs::write(group.path().join("inner/cgroup.procs"), "12\n").unwrap();
        let mut members = read_group_members(group.path()).unwrap();
        members.sort_unstable();
        assert_eq!(members, vec![10, 11, 12]);
        assert_eq!(
            read_group_members(&group.path().join("gone")).unwrap(),
            Vec::<u32>::new()
        );
    }
}

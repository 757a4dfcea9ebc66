//! A measured command in a cgroup of its own (`wattline run`): made before the command
//! starts, joined by the command before it runs, its members counted in the process
//! tree, removed when the command is done. The file work is
//! the Linux platform reader's (`platform/linux/cgroup_command.rs`); elsewhere than Linux every call says
//! "not supported".

use std::path::{Path, PathBuf};

use crate::platform::os::cgroup::read_cgroup_layout;
pub use crate::platform::os::cgroup_command::{CommandCgroup, CommandCgroupError};
use crate::platform::os::cgroup_command::{create_command_cgroup, remove_command_cgroup};

/// Makes a group named `name` under this process's own group in every hierarchy of
/// the host whose filesystems are under `root` (`/`).
pub fn create(root: &Path, name: &str) -> Result<CommandCgroup, CommandCgroupError> {
    let layout = read_cgroup_layout(root)?
        .ok_or_else(|| CommandCgroupError::NoHierarchy(root.to_path_buf()))?;
    create_command_cgroup(root, &layout, std::process::id(), name)
}

/// Removes the groups; a group that still holds processes (a daemon that outlived the
/// command) stays, and is returned with why.
pub fn remove(cgroup: &CommandCgroup) -> Vec<(PathBuf, std::io::Error)> {
    remove_command_cgroup(cgroup)
}

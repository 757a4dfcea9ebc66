//! Counts one process's open file descriptors from the entries of `/proc/PID/fd`.

use std::fs;
use std::path::Path;

use super::{ReadError, is_absent, proc_pid_dir};

/// Counts the entries of `root/proc/PID/fd` without following or stat-ing them.
///
/// `Ok(None)` when the `fd` directory is absent but `/proc/PID` exists;
/// [`ReadError::Gone`] when the process has exited (its directory is gone, or the
/// listing fails with ENOENT/ESRCH); [`ReadError::PermissionDenied`] for processes the
/// caller may not inspect.
pub fn read_fd_count(root: &Path, pid: u32) -> Result<Option<u64>, ReadError> {
    let pid_dir = proc_pid_dir(root, pid);
    let path = pid_dir.join("fd");
    let gone_or_absent = |path: std::path::PathBuf| {
        if matches!(pid_dir.try_exists(), Ok(true)) {
            Ok(None)
        } else {
            Err(ReadError::Gone { path })
        }
    };
    let entries = match fs::read_dir(&path) {
        Ok(entries) => entries,
        Err(err) if is_absent(&err) => return gone_or_absent(path),
        Err(err) => return Err(ReadError::from_io(&path, err)),
    };
    let mut count: u64 = 0;
    for entry in entries {
        match entry {
            Ok(_) => count = count.saturating_add(1),
            // The directory emptied under us: the process is exiting.
            Err(err) if is_absent(&err) => return gone_or_absent(path),
            Err(err) => return Err(ReadError::from_io(&path, err)),
        }
    }
    Ok(Some(count))
}

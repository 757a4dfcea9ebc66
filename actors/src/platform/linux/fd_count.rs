//! Counts one process's open file descriptors: from the size the kernel gives
//! `/proc/PID/fd` (Linux 6.2 and later), or from that directory's entries.

use std::fs;
use std::path::Path;

use super::{ReadError, is_absent, proc_pid_dir};

/// `statfs`'s filesystem type of procfs.
#[cfg(target_os = "linux")]
const PROC_SUPER_MAGIC: i64 = 0x9fa0;

/// How a root's `/proc` tells a process's descriptor count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdCountSource {
    /// `stat` of `/proc/PID/fd` gives the count as the directory's size: procfs on
    /// Linux 6.2 or later. One syscall a process instead of five (open, `fstat`, two
    /// `getdents64`, close).
    DirectorySize,
    /// The entries of `/proc/PID/fd`, counted: older kernels (whose `fd` directories
    /// have size 0) and fixture trees (whose directories' sizes are not counts).
    Listing,
}

/// Which source `root/proc` offers: [`FdCountSource::DirectorySize`] when it is a
/// procfs mount whose `self/fd` has a size (this process always holds a descriptor).
/// The readers build on every OS for their fixture tests; off Linux this is
/// [`FdCountSource::Listing`].
pub fn fd_count_source(root: &Path) -> FdCountSource {
    let proc_dir = root.join("proc");
    let sized = is_procfs(&proc_dir)
        && fs::metadata(proc_dir.join("self/fd")).is_ok_and(|metadata| metadata.len() > 0);
    if sized {
        FdCountSource::DirectorySize
    } else {
        FdCountSource::Listing
    }
}

#[cfg(target_os = "linux")]
fn is_procfs(path: &Path) -> bool {
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data, zeroed is valid.
    let mut info: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and outlives the call; `info` is writable.
    let result = unsafe { libc::statfs(path.as_ptr(), &mut info) };
    // `f_type` is i64 on x86_64 glibc, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    let filesystem = i64::from(info.f_type);
    result == 0 && filesystem == PROC_SUPER_MAGIC
}

#[cfg(not(target_os = "linux"))]
fn is_procfs(_path: &Path) -> bool {
    false
}

/// Counts the open descriptors of `root/proc/PID`, from `source`. A directory size is
/// taken only where a listing would be allowed too (this process, or one whose `fd`
/// directory this user owns and may read), so a process the caller may not inspect
/// is [`ReadError::PermissionDenied`] either way; otherwise the entries are counted,
/// without following or stat-ing them.
///
/// `Ok(None)` when the `fd` directory is absent but `/proc/PID` exists;
/// [`ReadError::Gone`] when the process has exited (its directory is gone, or the
/// listing fails with ENOENT/ESRCH).
pub fn read_fd_count(
    root: &Path,
    pid: u32,
    source: FdCountSource,
) -> Result<Option<u64>, ReadError> {
    let pid_dir = proc_pid_dir(root, pid);
    let path = pid_dir.join("fd");
    let gone_or_absent = |path: std::path::PathBuf| {
        if matches!(pid_dir.try_exists(), Ok(true)) {
            Ok(None)
        } else {
            Err(ReadError::Gone { path })
        }
    };
    if source == FdCountSource::DirectorySize {
        match fs::metadata(&path) {
            Ok(metadata) => {
                let listable = pid == std::process::id() || owner_may_list(&metadata);
                if metadata.is_dir() && metadata.len() > 0 && listable {
                    return Ok(Some(metadata.len()));
                }
            }
            Err(err) if is_absent(&err) => return gone_or_absent(path),
            // Anything else: the listing below says what is wrong.
            Err(_) => {}
        }
    }
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

/// Whether this process's user owns the directory `metadata` describes and its owner
/// bits let it list it.
#[cfg(unix)]
fn owner_may_list(metadata: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let user = unsafe { libc::geteuid() };
    listing_allowed(metadata.uid(), metadata.mode(), user)
}

#[cfg(not(unix))]
fn owner_may_list(_metadata: &fs::Metadata) -> bool {
    false
}

/// Whether `user` may list a directory owned by `owner` with `mode` by its owner bits
/// alone (the kernel's first check for `/proc/PID/fd`; capabilities are left to a
/// listing to find out).
fn listing_allowed(owner: u32, mode: u32, user: u32) -> bool {
    owner == user && mode & 0o500 == 0o500
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_owner_with_read_and_search_bits_is_taken_at_the_size() {
        assert!(listing_allowed(1000, 0o40500, 1000));
        assert!(listing_allowed(0, 0o40700, 0));
        assert!(!listing_allowed(1000, 0o40500, 1001), "another user");
        assert!(!listing_allowed(0, 0o40500, 1000), "a root-owned process");
        assert!(!listing_allowed(1000, 0o40100, 1000), "no read bit");
        assert!(!listing_allowed(1000, 0o40400, 1000), "no search bit");
    }
}

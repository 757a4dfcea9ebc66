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
    DirectorySize {
        /// This process may list every process's `fd` directory, whoever owns it: it
        /// holds `CAP_DAC_READ_SEARCH` or `CAP_DAC_OVERRIDE` and every user id is
        /// mapped (an agent running as root). Otherwise a size is taken only where
        /// the owner bits let this user list the directory.
        any_owner: bool,
    },
    /// The entries of `/proc/PID/fd`, counted: older kernels (whose `fd` directories
    /// have size 0) and fixture trees (whose directories' sizes are not counts).
    Listing,
}

/// Which source `root/proc` offers: [`FdCountSource::DirectorySize`] when it is a
/// procfs mount whose `self/fd` has a size (this process always holds a descriptor),
/// with whether this process may list any process's (its `self/status` capabilities
/// and `self/uid_map`). The readers build on every OS for their fixture tests; off
/// Linux this is [`FdCountSource::Listing`].
pub fn fd_count_source(root: &Path) -> FdCountSource {
    let proc_dir = root.join("proc");
    let sized = is_procfs(&proc_dir)
        && fs::metadata(proc_dir.join("self/fd")).is_ok_and(|metadata| metadata.len() > 0);
    if !sized {
        return FdCountSource::Listing;
    }
    let status = fs::read_to_string(proc_dir.join("self/status")).unwrap_or_default();
    let uid_map = fs::read_to_string(proc_dir.join("self/uid_map")).unwrap_or_default();
    FdCountSource::DirectorySize {
        any_owner: effective_capabilities(&status).is_some_and(may_read_any_directory)
            && maps_every_user_id(&uid_map),
    }
}

/// The `CapEff:` mask of a `/proc/PID/status` text.
fn effective_capabilities(status: &str) -> Option<u64> {
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// Whether `capabilities` let a process read and search any directory.
fn may_read_any_directory(capabilities: u64) -> bool {
    const CAP_DAC_OVERRIDE: u32 = 1;
    const CAP_DAC_READ_SEARCH: u32 = 2;
    capabilities & (1 << CAP_DAC_OVERRIDE | 1 << CAP_DAC_READ_SEARCH) != 0
}

/// Whether a `/proc/PID/uid_map` text maps every user id to itself (the initial user
/// namespace's map): a capability then covers every process's files.
fn maps_every_user_id(uid_map: &str) -> bool {
    let mut lines = uid_map.lines().filter(|line| !line.trim().is_empty());
    let identity = lines.next().is_some_and(|line| {
        line.split_ascii_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]
    });
    identity && lines.next().is_none()
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
/// taken only where a listing would be allowed too (any process, for an agent that may
/// list every one; else this process, or one whose `fd` directory this user owns and
/// may read), so a process the caller may not inspect is
/// [`ReadError::PermissionDenied`] either way; otherwise the entries are counted,
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
    if let FdCountSource::DirectorySize { any_owner } = source {
        match fs::metadata(&path) {
            Ok(metadata) => {
                let listable = any_owner || pid == std::process::id() || owner_may_list(&metadata);
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
    fn root_with_every_capability_in_the_initial_namespace_may_list_any_directory() {
        let status = "Name:\tagent\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let capabilities = effective_capabilities(status).unwrap();
        assert!(may_read_any_directory(capabilities));
        assert!(maps_every_user_id("         0          0 4294967295\n"));
    }

    #[test]
    fn a_user_without_the_capabilities_or_in_a_mapped_namespace_may_not() {
        let status = "CapEff:\t0000000000000000\n";
        assert!(!may_read_any_directory(
            effective_capabilities(status).unwrap()
        ));
        // CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE alone is enough; CAP_CHOWN is not.
        assert!(may_read_any_directory(1 << 2));
        assert!(may_read_any_directory(1 << 1));
        assert!(!may_read_any_directory(1));
        assert_eq!(effective_capabilities("Name:\tx\n"), None);
        assert_eq!(effective_capabilities("CapEff:\tnot-hex\n"), None);
        // A container's namespace maps a range: a capability there does not cover
        // files of users it does not map.
        assert!(!maps_every_user_id("         0     100000      65536\n"));
        assert!(!maps_every_user_id("0 0 1000\n1000 2000 1\n"));
        assert!(!maps_every_user_id(""));
    }

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

//! Queries filesystem capacity for a real path with `statvfs(3)`, in bytes.
//!
//! Unlike the other readers this one takes no root: `statvfs` asks the kernel about the
//! filesystem that contains a live path, so there is no file to redirect into a fixture
//! tree. Tests use `/` and a missing path; the arithmetic is tested through
//! [`FsCapacity::from_blocks`].

#[cfg(unix)]
use std::ffi::CString;
#[cfg(unix)]
use std::io;
#[cfg(unix)]
use std::mem::MaybeUninit;
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
#[cfg(unix)]
use std::path::Path;

#[cfg(unix)]
use super::{ParseError, ReadError};

/// Capacity of the filesystem containing a path, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsCapacity {
    /// Size of the filesystem (`f_blocks × f_frsize`), bytes.
    pub total_bytes: u64,
    /// Free space available to unprivileged callers (`f_bavail × f_frsize`), bytes.
    pub available_bytes: u64,
    /// Free space including blocks reserved for root (`f_bfree × f_frsize`), bytes.
    pub free_bytes: u64,
}

impl FsCapacity {
    /// Computes byte capacities from `statvfs` block counts.
    ///
    /// Uses the fragment size `frsize`, falling back to `bsize` when a filesystem
    /// reports a zero fragment size. Products saturate at `u64::MAX`.
    pub fn from_blocks(frsize: u64, bsize: u64, blocks: u64, bfree: u64, bavail: u64) -> Self {
        let unit = if frsize == 0 { bsize } else { frsize };
        FsCapacity {
            total_bytes: blocks.saturating_mul(unit),
            available_bytes: bavail.saturating_mul(unit),
            free_bytes: bfree.saturating_mul(unit),
        }
    }
}

/// Widens a libc integer field (`u32` or `u64` depending on the target) to `u64`.
#[allow(clippy::useless_conversion)]
fn wide<T: Into<u64>>(value: T) -> u64 {
    value.into()
}

/// Queries the filesystem containing `path` (a real path, not joined under a root).
///
/// Errors carry `path`: EACCES → [`ReadError::PermissionDenied`], a missing path or
/// any other failure → [`ReadError::Io`], a path with a NUL byte →
/// [`ReadError::Parse`]. The caller keeps its entry with null capacities on error.
#[cfg(unix)]
pub fn statvfs(path: &Path) -> Result<FsCapacity, ReadError> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ReadError::parse(path, ParseError::NulInPath))?;
    let mut stat = MaybeUninit::<libc::statvfs>::uninit();
    loop {
        // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call, and
        // `stat` points to writable memory sized for one `libc::statvfs`.
        let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(ReadError::from_io(path, err));
        }
    }
    // SAFETY: `statvfs` returned 0, so it fully initialised `stat`.
    let stat = unsafe { stat.assume_init() };
    Ok(FsCapacity::from_blocks(
        wide(stat.f_frsize),
        wide(stat.f_bsize),
        wide(stat.f_blocks),
        wide(stat.f_bfree),
        wide(stat.f_bavail),
    ))
}

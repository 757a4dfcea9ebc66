//! Linux OS readers: pure functions of a root directory (`/` in production, a fixture
//! tree in tests) that return raw counters in base units (bytes, microseconds, counts).
//!
//! Each reader file pairs a `read_*` function (opens the file under `root`, maps OS
//! errors) with a `parse_*` function (turns text into a typed value, no I/O). This
//! module holds only what the readers share: the file-reading helpers and the
//! `kB`/number field parsers.
//!
//! Conventions shared by every reader:
//! - an absent file is `Ok(None)`, never an error;
//! - under `/proc/PID`, a missing `/proc/PID` directory or ESRCH is [`ReadError::Gone`];
//! - EACCES/EPERM is [`ReadError::PermissionDenied`], other I/O is [`ReadError::Io`],
//!   bad content is [`ReadError::Parse`];
//! - file bytes that are not UTF-8 are decoded lossily (no allocation when valid), so
//!   odd bytes in a process name or interface name never fail a read;
//! - no reader panics on any input.

pub mod cgroup;
pub mod cgroup_command;
pub mod cgroup_files;
pub mod cgroup_v1;
pub mod cgroup_v2;
pub mod fd_count;
pub mod filesystem;
pub mod host_name;
pub mod meminfo;
pub mod net_dev;
pub mod pressure;
pub mod process_io;
pub mod process_list;
pub mod process_stat;
pub mod process_status;
pub mod rapl;
pub mod smaps_rollup;
#[cfg(unix)]
pub mod system_constants;
pub mod system_stat;

pub use crate::platform::error::{ParseError, ReadError};

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Bytes in one `kB` as printed by `/proc` (the kernel means KiB).
const KIB: u64 = 1024;

/// Reads the whole file at `path` into `buf` (cleared first).
///
/// Returns `Ok(true)` when `buf` holds the file, `Ok(false)` when the file is absent
/// (ENOENT, ENOTDIR, or EOPNOTSUPP, which the kernel returns for disabled features such
/// as pressure files booted with `psi=0`). Other failures map through
/// [`ReadError::from_io`].
pub fn read_file(path: &Path, buf: &mut Vec<u8>) -> Result<bool, ReadError> {
    read_file_to(path, buf, FileEnd::EmptyRead)
}

/// How a read shows that a file has no more to give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileEnd {
    /// A read returns 0: any file.
    EmptyRead,
    /// A read returns less than was asked: a file the kernel writes in one piece (a
    /// `/proc/PID` file from one `show`, such as `stat`, `status`, `io`, `cgroup`,
    /// `smaps_rollup`; or a regular file), whose read gives everything it holds up to
    /// the size asked. One syscall a file fewer; a poll makes three a process.
    ShortRead,
}

fn read_file_to(path: &Path, buf: &mut Vec<u8>, end: FileEnd) -> Result<bool, ReadError> {
    buf.clear();
    let result = File::open(path).and_then(|mut file| read_to(&mut file, buf, end));
    match result {
        Ok(_) => Ok(true),
        Err(err) if is_absent(&err) => Ok(false),
        Err(err) => Err(ReadError::from_io(path, err)),
    }
}

/// Reads `file` to its end, appending to `buf`. Not `File::read_to_end`, which first
/// asks the file's size (`statx`, `lseek`): `/proc` and sysfs files report 0 or a
/// page whatever they hold, so for them that is two wasted syscalls per read.
pub fn read_unsized(file: &mut File, buf: &mut Vec<u8>) -> io::Result<usize> {
    read_to(file, buf, FileEnd::EmptyRead)
}

fn read_to(file: &mut File, buf: &mut Vec<u8>, end: FileEnd) -> io::Result<usize> {
    let start = buf.len();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => return Ok(buf.len() - start),
            Ok(read) => {
                buf.extend_from_slice(&chunk[..read]);
                if end == FileEnd::ShortRead && read < chunk.len() {
                    return Ok(buf.len() - start);
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// `root/proc/PID`.
pub fn proc_pid_dir(root: &Path, pid: u32) -> PathBuf {
    let mut dir = root.join("proc");
    dir.push(pid.to_string());
    dir
}

/// Reads `root/proc/PID/<name>`, a file the kernel writes in one piece (`stat`,
/// `status`, `io`, `cgroup`, `smaps_rollup`; not `task/TID/children`, whose records
/// come a page at a time), into `buf` (cleared first).
///
/// Returns `Ok(true)` when read, `Ok(false)` when the file is absent but `/proc/PID`
/// still exists (a kernel without that feature), and [`ReadError::Gone`] when
/// `/proc/PID` itself is gone or the kernel answers ESRCH (the process exited).
pub fn read_pid_file(
    root: &Path,
    pid: u32,
    name: &str,
    buf: &mut Vec<u8>,
) -> Result<bool, ReadError> {
    let dir = proc_pid_dir(root, pid);
    let path = dir.join(name);
    if read_file_to(&path, buf, FileEnd::ShortRead)? {
        return Ok(true);
    }
    if matches!(dir.try_exists(), Ok(true)) {
        Ok(false)
    } else {
        Err(ReadError::Gone { path })
    }
}

/// Whether an I/O error means "the file is not there" rather than a failure.
pub(crate) fn is_absent(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound
        || matches!(
            err.raw_os_error(),
            Some(libc::ENOTDIR) | Some(libc::EOPNOTSUPP)
        )
}

/// Parses a decimal `u64` field value (already trimmed).
pub(crate) fn parse_u64(field: &'static str, value: &str) -> Result<u64, ParseError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::invalid(field, value));
    }
    value.parse().map_err(|_| ParseError::Overflow(field))
}

/// Parses the value part of a `/proc` `Key:   123 kB` line into bytes; a value without
/// a unit is returned as is (counts such as `Threads:`).
pub(crate) fn parse_kib_value(field: &'static str, value: &str) -> Result<u64, ParseError> {
    let mut parts = value.split_ascii_whitespace();
    let number = parts.next().unwrap_or("");
    let unit = parts.next();
    if parts.next().is_some() {
        return Err(ParseError::invalid(field, value));
    }
    let n = parse_u64(field, number)?;
    match unit {
        None => Ok(n),
        Some("kB") => n.checked_mul(KIB).ok_or(ParseError::Overflow(field)),
        Some(_) => Err(ParseError::invalid(field, value)),
    }
}

/// Calls `on(key, value)` for every `Key: value` line of a `/proc` file (meminfo,
/// status, io, smaps_rollup). Empty lines are skipped; a non-empty line without `:`
/// is malformed. `on` returns `Ok(true)` to stop early (all wanted keys seen).
pub(crate) fn for_each_colon_line(
    text: &str,
    mut on: impl FnMut(&str, &str) -> Result<bool, ParseError>,
) -> Result<(), ParseError> {
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(ParseError::malformed(index, line));
        };
        if on(key, value.trim())? {
            break;
        }
    }
    Ok(())
}

/// Stores `parse_kib_value(field, value)` into `slot`.
pub(crate) fn set_kib(
    slot: &mut Option<u64>,
    field: &'static str,
    value: &str,
) -> Result<(), ParseError> {
    *slot = Some(parse_kib_value(field, value)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture `root/proc/42/status` of `size` bytes, each line numbered.
    fn fixture_status(size: usize) -> (tempfile::TempDir, Vec<u8>) {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proc/42");
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = Vec::new();
        let mut line = 0;
        while text.len() < size {
            text.extend_from_slice(format!("Line{line}:\t{line}\n").as_bytes());
            line += 1;
        }
        text.truncate(size);
        std::fs::write(dir.join("status"), &text).unwrap();
        (root, text)
    }

    #[test]
    fn a_pid_file_longer_than_one_read_comes_whole() {
        // Shorter than a read, exactly one, one and a byte, several.
        for size in [100, 4096, 4097, 10_000] {
            let (root, text) = fixture_status(size);
            let mut buf = b"left over".to_vec();
            assert!(read_pid_file(root.path(), 42, "status", &mut buf).unwrap());
            assert_eq!(buf, text, "{size} bytes");
        }
    }

    #[test]
    fn a_pid_file_of_this_process_comes_whole() {
        let mut buf = Vec::new();
        assert!(read_pid_file(Path::new("/"), std::process::id(), "status", &mut buf).unwrap());
        let text = String::from_utf8(buf).unwrap();
        // The kernel's last line of `status`, so nothing was cut.
        let whole = std::fs::read_to_string("/proc/self/status").unwrap();
        let last_key = |text: &str| {
            text.lines()
                .last()
                .and_then(|line| line.split(':').next())
                .map(str::to_owned)
        };
        assert_eq!(last_key(&text), last_key(&whole));
        assert!(text.ends_with('\n'));
    }
}

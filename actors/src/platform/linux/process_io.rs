//! Reads one process's storage and syscall I/O counters from `/proc/PID/io`.

use std::path::Path;

use super::{ParseError, ReadError, for_each_colon_line, parse_u64, proc_pid_dir, read_pid_file};

/// Lifetime counters from `/proc/PID/io`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessIo {
    /// `read_bytes`: bytes fetched from the storage layer.
    pub read_bytes: u64,
    /// `write_bytes`: bytes sent to the storage layer.
    pub write_bytes: u64,
    /// `syscr`: read-like system calls.
    pub syscr: u64,
    /// `syscw`: write-like system calls.
    pub syscw: u64,
}

/// Parses `/proc/PID/io` text. Fails when one of the four fields is missing or not a
/// number, or a line has no `:`.
pub fn parse_process_io(text: &str) -> Result<ProcessIo, ParseError> {
    let mut read = None;
    let mut write = None;
    let mut syscr = None;
    let mut syscw = None;
    for_each_colon_line(text, |key, value| {
        match key {
            "read_bytes" => read = Some(parse_u64("read_bytes", value)?),
            "write_bytes" => write = Some(parse_u64("write_bytes", value)?),
            "syscr" => syscr = Some(parse_u64("syscr", value)?),
            "syscw" => syscw = Some(parse_u64("syscw", value)?),
            _ => {}
        }
        Ok(false)
    })?;
    Ok(ProcessIo {
        read_bytes: read.ok_or(ParseError::MissingField("read_bytes"))?,
        write_bytes: write.ok_or(ParseError::MissingField("write_bytes"))?,
        syscr: syscr.ok_or(ParseError::MissingField("syscr"))?,
        syscw: syscw.ok_or(ParseError::MissingField("syscw"))?,
    })
}

/// Reads `root/proc/PID/io` using `buf` as scratch space.
///
/// The kernel allows this file only to callers that may ptrace the process, so other
/// users' processes (and, in some containers, even pid 1 for root) give
/// [`ReadError::PermissionDenied`]. `Ok(None)` when the file is absent (kernel without
/// task I/O accounting); [`ReadError::Gone`] when the process has exited.
pub fn read_process_io(
    root: &Path,
    pid: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<ProcessIo>, ReadError> {
    if !read_pid_file(root, pid, "io", buf)? {
        return Ok(None);
    }
    parse_process_io(&String::from_utf8_lossy(buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&proc_pid_dir(root, pid).join("io"), e))
}

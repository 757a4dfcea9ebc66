//! Reads one process's memory sizes and thread count from `/proc/PID/status`.

use std::path::Path;

use super::{ParseError, ReadError, for_each_colon_line, parse_kib_value, read_pid_file, set_kib};

/// Fields of `/proc/PID/status`, memory in bytes.
///
/// The `Vm*` lines are absent for kernel threads and zombies (no address space), so
/// they are `None` there; `Threads` is always present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStatus {
    /// `VmSize`: virtual address space, bytes.
    pub vm_size_bytes: Option<u64>,
    /// `VmHWM`: peak resident set size, bytes.
    pub vm_hwm_bytes: Option<u64>,
    /// `VmRSS`: resident set size, bytes.
    pub vm_rss_bytes: Option<u64>,
    /// `Threads`: number of threads.
    pub threads: u64,
}

/// Parses `/proc/PID/status` text. Fails when `Threads` is missing, a wanted value is
/// not a number, or a line has no `:`. Stops reading at `Threads` (the last wanted key).
pub fn parse_process_status(text: &str) -> Result<ProcessStatus, ParseError> {
    let mut vm_size = None;
    let mut vm_hwm = None;
    let mut vm_rss = None;
    let mut threads = None;
    for_each_colon_line(text, |key, value| {
        match key {
            "VmSize" => set_kib(&mut vm_size, "VmSize", value)?,
            "VmHWM" => set_kib(&mut vm_hwm, "VmHWM", value)?,
            "VmRSS" => set_kib(&mut vm_rss, "VmRSS", value)?,
            "Threads" => {
                threads = Some(parse_kib_value("Threads", value)?);
                // The kernel prints Threads after every Vm* line.
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    })?;
    Ok(ProcessStatus {
        vm_size_bytes: vm_size,
        vm_hwm_bytes: vm_hwm,
        vm_rss_bytes: vm_rss,
        threads: threads.ok_or(ParseError::MissingField("Threads"))?,
    })
}

/// Reads `root/proc/PID/status` using `buf` as scratch space.
///
/// `Ok(None)` when the file is absent but `/proc/PID` exists; [`ReadError::Gone`] when
/// the process has exited.
pub fn read_process_status(
    root: &Path,
    pid: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<ProcessStatus>, ReadError> {
    if !read_pid_file(root, pid, "status", buf)? {
        return Ok(None);
    }
    parse_process_status(&String::from_utf8_lossy(buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&super::proc_pid_dir(root, pid).join("status"), e))
}

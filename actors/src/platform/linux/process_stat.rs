//! `/proc/PID/stat`: parent, CPU times, threads, start time (identity), memory sizes.

use std::path::{Path, PathBuf};

use super::read_pid_file;
use crate::platform::error::{ParseError, ReadError};

/// The fields of `/proc/PID/stat` the samplers use, in the kernel's units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessStat {
    /// Process ID.
    pub pid: u32,
    /// Parent process ID.
    pub parent_pid: u32,
    /// One-letter state (`R`, `S`, `Z`, ...).
    pub state: u8,
    /// User-mode CPU time, clock ticks.
    pub user_ticks: u64,
    /// Kernel-mode CPU time, clock ticks.
    pub system_ticks: u64,
    /// Number of threads.
    pub thread_count: u64,
    /// Start time after boot, clock ticks: with the pid, the process's identity.
    pub start_ticks: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Resident set size, pages.
    pub resident_pages: u64,
}

impl ProcessStat {
    /// Whether the process has exited and awaits its parent (`Z`): it keeps its CPU
    /// times but has no address space.
    pub fn is_zombie(&self) -> bool {
        self.state == b'Z'
    }
}

/// The path of a process's `stat` file under `root`.
pub fn stat_path(root: &Path, pid: u32) -> PathBuf {
    root.join(format!("proc/{pid}/stat"))
}

/// Reads and parses `/proc/PID/stat` into the reusable `buf`; a vanished process is
/// [`ReadError::Gone`].
pub fn read_process_stat(
    root: &Path,
    pid: u32,
    buf: &mut Vec<u8>,
) -> Result<ProcessStat, ReadError> {
    if !read_pid_file(root, pid, "stat", buf)? {
        return Err(ReadError::Gone {
            path: stat_path(root, pid),
        });
    }
    parse_process_stat(buf).map_err(|detail| {
        ReadError::parse(
            &stat_path(root, pid),
            ParseError::InvalidValue {
                field: "stat",
                value: detail,
            },
        )
    })
}

/// Parses the content of `/proc/PID/stat`.
///
/// The command name sits in parentheses and may itself contain spaces and `)`, so the
/// fields are counted from the last `)`.
pub fn parse_process_stat(text: &[u8]) -> Result<ProcessStat, String> {
    let open = text
        .iter()
        .position(|&byte| byte == b'(')
        .ok_or("no `(` before the command name")?;
    let close = text
        .iter()
        .rposition(|&byte| byte == b')')
        .ok_or("no `)` after the command name")?;
    if close < open {
        return Err("`)` before `(`".into());
    }
    let pid = parse_number(trim(&text[..open]), "pid")?;
    let rest = text.get(close + 1..).unwrap_or_default();
    // Fields after the name, 0-based: state=0, ppid=1, utime=11, stime=12,
    // num_threads=17, starttime=19, vsize=20, rss=21.
    let mut fields = rest
        .split(|&byte| byte == b' ' || byte == b'\n')
        .filter(|field| !field.is_empty());
    let mut take = |skip: usize, name: &str| -> Result<&[u8], String> {
        fields
            .nth(skip)
            .ok_or_else(|| format!("missing field `{name}`"))
    };
    let state = take(0, "state")?.first().copied().unwrap_or(b'?');
    let parent_pid = parse_number(take(0, "ppid")?, "ppid")?;
    let user_ticks = parse_number(take(9, "utime")?, "utime")?;
    let system_ticks = parse_number(take(0, "stime")?, "stime")?;
    let thread_count = parse_number(take(4, "num_threads")?, "num_threads")?;
    let start_ticks = parse_number(take(1, "starttime")?, "starttime")?;
    let virtual_bytes = parse_number(take(0, "vsize")?, "vsize")?;
    // rss is signed in the kernel's format; a negative value never describes memory.
    let resident_pages = parse_number(take(0, "rss")?, "rss").unwrap_or(0);
    Ok(ProcessStat {
        pid: u32::try_from(pid).map_err(|_| format!("`pid` {pid} is out of range"))?,
        parent_pid: u32::try_from(parent_pid)
            .map_err(|_| format!("`ppid` {parent_pid} is out of range"))?,
        state,
        user_ticks,
        system_ticks,
        thread_count,
        start_ticks,
        virtual_bytes,
        resident_pages,
    })
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Parses an unsigned decimal without allocating.
pub(crate) fn parse_number(bytes: &[u8], name: &str) -> Result<u64, String> {
    if bytes.is_empty() {
        return Err(format!("`{name}` is empty"));
    }
    let mut value: u64 = 0;
    for &byte in bytes {
        if !byte.is_ascii_digit() {
            return Err(format!(
                "`{name}` is not a number: {:?}",
                String::from_utf8_lossy(bytes)
            ));
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(byte - b'0')))
            .ok_or_else(|| format!("`{name}` overflows"))?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "1234 (my (weird) name) R 1 1234 1234 0 -1 4194560 1000 0 0 0 150 30 0 0 20 0 7 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0";

    #[test]
    fn parses_fields_after_the_last_parenthesis() {
        let stat = parse_process_stat(LINE.as_bytes()).unwrap();
        assert_eq!(stat.pid, 1234);
        assert_eq!(stat.parent_pid, 1);
        assert_eq!(stat.state, b'R');
        assert_eq!(stat.user_ticks, 150);
        assert_eq!(stat.system_ticks, 30);
        assert_eq!(stat.thread_count, 7);
        assert_eq!(stat.start_ticks, 98765);
        assert_eq!(stat.virtual_bytes, 123456789);
        assert_eq!(stat.resident_pages, 2048);
    }

    #[test]
    fn a_name_with_spaces_and_close_open_parentheses_parses() {
        let line = "77 (a ) (b c) S 5 77 77 0 -1 0 0 0 0 0 11 22 0 0 20 0 3 0 555 4096 9 0";
        let stat = parse_process_stat(line.as_bytes()).unwrap();
        assert_eq!(
            (
                stat.pid,
                stat.parent_pid,
                stat.user_ticks,
                stat.system_ticks
            ),
            (77, 5, 11, 22)
        );
        assert_eq!((stat.thread_count, stat.start_ticks), (3, 555));
    }

    #[test]
    fn truncated_or_garbage_input_is_an_error_not_a_panic() {
        for bad in [
            "",
            "12 (x",
            "12 (x) R",
            "x (y) R 1",
            "12 (x) R 1 2 3 4 5 6 7 8 9 10 abc 12",
            ")(",
            "\u{0}",
        ] {
            assert!(parse_process_stat(bad.as_bytes()).is_err(), "{bad:?}");
        }
        for end in 0..LINE.len() {
            let _ = parse_process_stat(&LINE.as_bytes()[..end]);
        }
    }
}

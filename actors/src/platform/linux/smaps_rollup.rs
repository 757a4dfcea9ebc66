//! Reads one process's resident and private memory from `/proc/PID/smaps_rollup`.

use std::path::Path;

use super::{ParseError, ReadError, for_each_colon_line, proc_pid_dir, read_pid_file, set_kib};

/// Totals from `/proc/PID/smaps_rollup`, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmapsRollup {
    /// `Rss`: resident set size, bytes.
    pub rss_bytes: u64,
    /// `Private_Clean`: private unmodified pages, bytes.
    pub private_clean_bytes: u64,
    /// `Private_Dirty`: private modified pages, bytes.
    pub private_dirty_bytes: u64,
    /// `Private_Hugetlb`: private hugetlbfs pages, bytes; `None` on kernels without it.
    pub private_hugetlb_bytes: Option<u64>,
}

impl SmapsRollup {
    /// Private memory, bytes: `Private_Clean + Private_Dirty + Private_Hugetlb`
    /// (a missing `Private_Hugetlb` counts as 0; saturates instead of overflowing).
    pub fn private_bytes(&self) -> u64 {
        self.private_clean_bytes
            .saturating_add(self.private_dirty_bytes)
            .saturating_add(self.private_hugetlb_bytes.unwrap_or(0))
    }
}

/// Parses `/proc/PID/smaps_rollup` text (the address-range header line is skipped).
/// Fails when `Rss`, `Private_Clean` or `Private_Dirty` is missing or not a `kB` value.
pub fn parse_smaps_rollup(text: &str) -> Result<SmapsRollup, ParseError> {
    let mut rss = None;
    let mut clean = None;
    let mut dirty = None;
    let mut hugetlb = None;
    for_each_colon_line(text, |key, value| {
        match key {
            "Rss" => set_kib(&mut rss, "Rss", value)?,
            "Private_Clean" => set_kib(&mut clean, "Private_Clean", value)?,
            "Private_Dirty" => set_kib(&mut dirty, "Private_Dirty", value)?,
            "Private_Hugetlb" => set_kib(&mut hugetlb, "Private_Hugetlb", value)?,
            _ => {}
        }
        Ok(false)
    })?;
    Ok(SmapsRollup {
        rss_bytes: rss.ok_or(ParseError::MissingField("Rss"))?,
        private_clean_bytes: clean.ok_or(ParseError::MissingField("Private_Clean"))?,
        private_dirty_bytes: dirty.ok_or(ParseError::MissingField("Private_Dirty"))?,
        private_hugetlb_bytes: hugetlb,
    })
}

/// Reads `root/proc/PID/smaps_rollup` using `buf` as scratch space.
///
/// `Ok(None)` when the file is absent (kernels before 4.14) or empty; [`ReadError::Gone`]
/// when the process has exited, including zombies (no address space: the kernel answers
/// ESRCH).
pub fn read_smaps_rollup(
    root: &Path,
    pid: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<SmapsRollup>, ReadError> {
    if !read_pid_file(root, pid, "smaps_rollup", buf)? || buf.is_empty() {
        return Ok(None);
    }
    parse_smaps_rollup(&String::from_utf8_lossy(buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&proc_pid_dir(root, pid).join("smaps_rollup"), e))
}

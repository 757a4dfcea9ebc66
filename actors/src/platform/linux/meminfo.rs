//! Reads system memory totals from `/proc/meminfo`, in bytes.

use std::path::Path;

use super::{ParseError, ReadError, for_each_colon_line, read_file, set_kib};
use wattline_model::snapshot::SystemMemoryReading;

/// System memory from `/proc/meminfo`, every value in bytes.
///
/// `MemTotal` and `MemFree` exist on every kernel; the rest are `None` when the line is
/// missing (`MemAvailable` appeared in Linux 3.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`: usable RAM, bytes.
    pub total_bytes: u64,
    /// `MemFree`: completely unused RAM, bytes.
    pub free_bytes: u64,
    /// `MemAvailable`: kernel estimate of memory available without swapping, bytes.
    pub available_bytes: Option<u64>,
    /// `Buffers`: block-device buffers, bytes.
    pub buffers_bytes: Option<u64>,
    /// `Cached`: page cache (includes `Shmem`), bytes.
    pub cached_bytes: Option<u64>,
    /// `SReclaimable`: reclaimable slab, bytes.
    pub sreclaimable_bytes: Option<u64>,
    /// `Shmem`: shared memory and tmpfs, bytes.
    pub shmem_bytes: Option<u64>,
}

impl MemInfo {
    /// System memory in use, bytes: `MemTotal − MemAvailable`.
    ///
    /// This follows the reference, which reports used ≈ total − available; it counts
    /// unreclaimable cache and shared memory as used, unlike `total − free − buffers −
    /// cached`. `None` when the kernel has no `MemAvailable` (before 3.14); saturates at
    /// zero if a kernel ever reports available above total.
    pub fn system_used_bytes(&self) -> Option<u64> {
        self.available_bytes
            .map(|available| self.total_bytes.saturating_sub(available))
    }

    /// The system part of the memory reading: everything the memory category takes
    /// from `/proc/meminfo`, so a new field of it changes only this file and the model.
    pub fn system_memory(&self) -> SystemMemoryReading {
        SystemMemoryReading {
            used_bytes: self.system_used_bytes(),
            total_bytes: Some(self.total_bytes),
            available_bytes: self.available_bytes,
        }
    }
}

/// Parses `/proc/meminfo` text. Fails when `MemTotal` or `MemFree` is missing, a wanted
/// value is not a number, or a line has no `:`.
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ParseError> {
    let mut total = None;
    let mut free = None;
    let mut available = None;
    let mut buffers = None;
    let mut cached = None;
    let mut sreclaimable = None;
    let mut shmem = None;
    for_each_colon_line(text, |key, value| {
        match key {
            "MemTotal" => set_kib(&mut total, "MemTotal", value)?,
            "MemFree" => set_kib(&mut free, "MemFree", value)?,
            "MemAvailable" => set_kib(&mut available, "MemAvailable", value)?,
            "Buffers" => set_kib(&mut buffers, "Buffers", value)?,
            "Cached" => set_kib(&mut cached, "Cached", value)?,
            "SReclaimable" => set_kib(&mut sreclaimable, "SReclaimable", value)?,
            "Shmem" => set_kib(&mut shmem, "Shmem", value)?,
            _ => {}
        }
        Ok(false)
    })?;
    Ok(MemInfo {
        total_bytes: total.ok_or(ParseError::MissingField("MemTotal"))?,
        free_bytes: free.ok_or(ParseError::MissingField("MemFree"))?,
        available_bytes: available,
        buffers_bytes: buffers,
        cached_bytes: cached,
        sreclaimable_bytes: sreclaimable,
        shmem_bytes: shmem,
    })
}

/// Reads `root/proc/meminfo`; `Ok(None)` when the file is absent.
pub fn read_meminfo(root: &Path) -> Result<Option<MemInfo>, ReadError> {
    let path = root.join("proc/meminfo");
    let mut buf = Vec::with_capacity(4096);
    if !read_file(&path, &mut buf)? {
        return Ok(None);
    }
    parse_meminfo(&String::from_utf8_lossy(&buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&path, e))
}

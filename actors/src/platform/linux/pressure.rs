//! Reads pressure-stall totals (PSI) from `/proc/pressure/*` and cgroup v2 `*.pressure` files.

use std::path::Path;

use super::{ParseError, ReadError, parse_u64, read_file};

/// Which resource a pressure file describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PressureResource {
    /// `cpu` / `cpu.pressure`.
    Cpu,
    /// `memory` / `memory.pressure`.
    Memory,
}

impl PressureResource {
    /// File name under `/proc/pressure/`.
    pub fn system_file(self) -> &'static str {
        match self {
            PressureResource::Cpu => "cpu",
            PressureResource::Memory => "memory",
        }
    }

    /// File name inside a cgroup v2 directory.
    pub fn cgroup_file(self) -> &'static str {
        match self {
            PressureResource::Cpu => "cpu.pressure",
            PressureResource::Memory => "memory.pressure",
        }
    }
}

/// Cumulative stall totals from one PSI file, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pressure {
    /// `some ... total=`: time at least one task stalled, µs.
    pub some_total_us: Option<u64>,
    /// `full ... total=`: time all non-idle tasks stalled, µs. Absent from
    /// `/proc/pressure/cpu` before Linux 5.13.
    pub full_total_us: Option<u64>,
}

/// Parses PSI text (`some avg10=.. avg60=.. avg300=.. total=N` and optional `full ...`).
///
/// The averages are ignored. A line that does not start with `some` or `full`, or that
/// lacks a numeric `total=`, is an error; empty text gives both totals `None`.
pub fn parse_pressure(text: &str) -> Result<Pressure, ParseError> {
    let mut pressure = Pressure::default();
    for (index, line) in text.lines().enumerate() {
        let mut tokens = line.split_ascii_whitespace();
        let (slot, field) = match tokens.next() {
            None => continue,
            Some("some") => (&mut pressure.some_total_us, "some total"),
            Some("full") => (&mut pressure.full_total_us, "full total"),
            Some(_) => return Err(ParseError::malformed(index, line)),
        };
        let total = tokens
            .find_map(|token| token.strip_prefix("total="))
            .ok_or(ParseError::MissingField(field))?;
        *slot = Some(parse_u64(field, total)?);
    }
    Ok(pressure)
}

/// Reads `path` as a PSI file; `Ok(None)` when absent or unsupported (EOPNOTSUPP).
pub fn read_pressure_file(path: &Path) -> Result<Option<Pressure>, ReadError> {
    let mut buf = Vec::with_capacity(256);
    if !read_file(path, &mut buf)? {
        return Ok(None);
    }
    parse_pressure(&String::from_utf8_lossy(&buf))
        .map(Some)
        .map_err(|e| ReadError::parse(path, e))
}

/// Reads system-wide pressure from `root/proc/pressure/{cpu,memory,io}`.
pub fn read_system_pressure(
    root: &Path,
    resource: PressureResource,
) -> Result<Option<Pressure>, ReadError> {
    let mut path = root.join("proc/pressure");
    path.push(resource.system_file());
    read_pressure_file(&path)
}

/// Reads a cgroup v2 group's pressure from `group_dir/{cpu,memory,io}.pressure`.
/// `group_dir` is a resolved directory (already under the root).
pub fn read_cgroup_pressure(
    group_dir: &Path,
    resource: PressureResource,
) -> Result<Option<Pressure>, ReadError> {
    read_pressure_file(&group_dir.join(resource.cgroup_file()))
}

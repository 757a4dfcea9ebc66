//! What the cgroup v1 and v2 readers share: a group's directory and its ancestors, the
//! readings both fill, and the small readers and parsers of cgroup files. Below the
//! hierarchy readers and the layout code that dispatches to them.

use std::path::{Path, PathBuf};

use super::{ParseError, ReadError, parse_u64, read_file};

/// A group directory together with the mount it lives under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupDir {
    /// The group's directory (under the root).
    pub dir: PathBuf,
    /// The hierarchy's mount directory; ancestor walks stop here.
    pub mount: PathBuf,
}

impl GroupDir {
    /// The group directory and its ancestors up to and including the mount directory.
    pub fn ancestors(&self) -> impl Iterator<Item = &Path> {
        self.dir
            .ancestors()
            .take_while(move |dir| dir.starts_with(&self.mount))
    }
}

/// Counters and limits of an exclusive group, base units. Every field is `None` when
/// its file is absent, unreadable, or its hierarchy is not exclusive; see the module
/// docs for which layout fills which field.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CgroupReadings {
    /// CPU time used by the group, µs.
    pub cpu_usage_us: Option<u64>,
    /// Periods in which the group was throttled, count.
    pub cpu_nr_throttled: Option<u64>,
    /// Time the group was throttled, µs (v1 nanoseconds truncated to µs).
    pub cpu_throttled_us: Option<u64>,
    /// Smallest CPU quota ÷ period over the group and its ancestors, logical processors.
    pub cpu_quota_limit: Option<f64>,
    /// Smallest number of CPUs in the effective cpuset over the group and ancestors.
    pub cpuset_cpu_count: Option<u64>,
    /// min(`cpu_quota_limit`, `cpuset_cpu_count`) when either exists, logical processors.
    pub effective_cpu_limit: Option<f64>,
    /// CPU pressure `some` total, µs.
    pub cpu_pressure_some_us: Option<u64>,
    /// CPU pressure `full` total, µs.
    pub cpu_pressure_full_us: Option<u64>,
    /// Memory charged to the group, bytes.
    pub memory_current_bytes: Option<u64>,
    /// Smallest memory limit over the group and its ancestors, bytes.
    pub memory_limit_bytes: Option<u64>,
    /// `memory.events high`: times usage went over `memory.high`, count.
    pub memory_high_events: Option<u64>,
    /// `memory.events max`: times usage was about to go over `memory.max`, count.
    pub memory_max_events: Option<u64>,
    /// `memory.events oom`: times the group hit its limit with allocation failing, count.
    pub memory_oom_events: Option<u64>,
    /// Processes killed by the OOM killer in the group, count.
    pub memory_oom_kill_events: Option<u64>,
    /// v1 `memory.failcnt`: times usage hit the limit, count.
    pub memory_failcnt: Option<u64>,
    /// v1 `memory.oom_control under_oom`: the group is under OOM now.
    pub memory_under_oom: Option<bool>,
    /// Memory pressure `some` total, µs.
    pub memory_pressure_some_us: Option<u64>,
    /// Memory pressure `full` total, µs.
    pub memory_pressure_full_us: Option<u64>,
    /// `pids.events max`: forks refused by `pids.max`, count.
    pub pids_max_events: Option<u64>,
}

impl CgroupReadings {
    /// Sets `effective_cpu_limit` from `cpu_quota_limit` and `cpuset_cpu_count`.
    pub(crate) fn finish(&mut self) {
        let cpuset = self.cpuset_cpu_count.map(|n| n as f64);
        self.effective_cpu_limit = min_opt(self.cpu_quota_limit, cpuset);
    }
}

/// Keeps the value of a read, pushing its error (if any) to `errors`.
pub(crate) fn keep<T>(
    result: Result<Option<T>, ReadError>,
    errors: &mut Vec<ReadError>,
) -> Option<T> {
    match result {
        Ok(value) => value,
        Err(err) => {
            errors.push(err);
            None
        }
    }
}

/// Sets `slot` to `value` unless it already holds something.
pub(crate) fn fill<T>(slot: &mut Option<T>, value: Option<T>) {
    if slot.is_none() {
        *slot = value;
    }
}

/// The smaller of two optional values (`None` means "no constraint").
pub(crate) fn min_opt<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}

/// Parses a file holding one unsigned number (`memory.current`, `memory.failcnt`, ...).
pub fn parse_single_u64(field: &'static str, text: &str) -> Result<u64, ParseError> {
    parse_u64(field, text.trim())
}

/// Reads `dir/<file>` as one unsigned number; `Ok(None)` when absent.
pub fn read_single_u64(dir: &Path, file: &'static str) -> Result<Option<u64>, ReadError> {
    read_parsed(dir, file, |text| parse_single_u64(file, text))
}

/// Reads `dir/<file>` and applies `parse`; `Ok(None)` when absent.
pub(crate) fn read_parsed<T>(
    dir: &Path,
    file: &str,
    parse: impl FnOnce(&str) -> Result<T, ParseError>,
) -> Result<Option<T>, ReadError> {
    let path = dir.join(file);
    let mut buf = Vec::with_capacity(256);
    if !read_file(&path, &mut buf)? {
        return Ok(None);
    }
    parse(&String::from_utf8_lossy(&buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&path, e))
}

/// Calls `on(key, value)` for each `key value` line of a flat-keyed cgroup file
/// (`cpu.stat`, `memory.events`, `pids.events`, `memory.oom_control`). A non-empty line
/// that is not exactly two tokens is malformed.
pub(crate) fn for_each_flat_keyed(
    text: &str,
    mut on: impl FnMut(&str, &str) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    for (index, line) in text.lines().enumerate() {
        let mut tokens = line.split_ascii_whitespace();
        let Some(key) = tokens.next() else {
            continue;
        };
        let (Some(value), None) = (tokens.next(), tokens.next()) else {
            return Err(ParseError::malformed(index, line));
        };
        on(key, value)?;
    }
    Ok(())
}

/// Stores `value` parsed as `u64` into `slot`.
pub(crate) fn set_u64(
    slot: &mut Option<u64>,
    field: &'static str,
    value: &str,
) -> Result<(), ParseError> {
    *slot = Some(parse_u64(field, value)?);
    Ok(())
}

/// Parses `pids.events` (v1 and v2): the `max` count, `None` when the key is missing.
pub fn parse_pids_events(text: &str) -> Result<Option<u64>, ParseError> {
    let mut max = None;
    for_each_flat_keyed(text, |key, value| match key {
        "max" => set_u64(&mut max, "max", value),
        _ => Ok(()),
    })?;
    Ok(max)
}

/// Counts the CPUs in a cpuset list such as `0-3,8,10-11` (gives 7). Empty text gives
/// 0. Fails on a reversed range or a non-number.
pub fn parse_cpuset_count(text: &str) -> Result<u64, ParseError> {
    let mut count: u64 = 0;
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let (low, high) = match part.split_once('-') {
            Some((low, high)) => (parse_u64("cpus", low)?, parse_u64("cpus", high)?),
            None => {
                let cpu = parse_u64("cpus", part)?;
                (cpu, cpu)
            }
        };
        if high < low {
            return Err(ParseError::invalid("cpus", part));
        }
        // `0-18446744073709551615` holds 2^64 CPUs: more than a u64 counts.
        count = (high - low)
            .checked_add(1)
            .and_then(|cpus| count.checked_add(cpus))
            .ok_or(ParseError::Overflow("cpus"))?;
    }
    Ok(count)
}

/// Smallest non-zero cpuset count of `file` over `group` and its ancestors.
pub(crate) fn min_cpuset_count(
    group: &GroupDir,
    file: &'static str,
    errors: &mut Vec<ReadError>,
) -> Option<u64> {
    group
        .ancestors()
        .filter_map(|dir| keep(read_parsed(dir, file, parse_cpuset_count), errors))
        .filter(|&count| count > 0)
        .min()
}

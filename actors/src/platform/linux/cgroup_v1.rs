//! Parses and reads cgroup v1 controller files (memory, cpu, cpuacct, cpuset, pids).

use std::collections::BTreeMap;
use std::path::Path;

use super::cgroup_files::{
    CgroupReadings, GroupDir, fill, for_each_flat_keyed, keep, min_cpuset_count, min_opt,
    parse_pids_events, read_parsed, read_single_u64, set_u64,
};
use super::{ParseError, ReadError, parse_u64};

/// `memory.limit_in_bytes` values at or above this mean "no limit" (the kernel shows
/// an unlimited group as `PAGE_COUNTER_MAX` × page size, e.g. 9223372036854771712).
pub const UNLIMITED_AT_OR_ABOVE: u64 = 1 << 62;

/// Nanoseconds per microsecond.
const NS_PER_US: u64 = 1000;

/// Parses `memory.limit_in_bytes`: bytes, or `None` when ≥ 2^62 (no limit).
pub fn parse_limit_in_bytes(text: &str) -> Result<Option<u64>, ParseError> {
    let value = parse_u64("memory.limit_in_bytes", text.trim())?;
    Ok((value < UNLIMITED_AT_OR_ABOVE).then_some(value))
}

/// Reads `dir/memory.limit_in_bytes`; `Ok(None)` when absent or unlimited.
pub fn read_memory_limit(dir: &Path) -> Result<Option<u64>, ReadError> {
    Ok(read_parsed(dir, "memory.limit_in_bytes", parse_limit_in_bytes)?.flatten())
}

/// State and counters from `memory.oom_control`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OomControl {
    /// `under_oom`: the group is currently out of memory.
    pub under_oom: Option<bool>,
    /// `oom_kill`: processes killed by the OOM killer (Linux ≥ 4.13).
    pub oom_kill: Option<u64>,
}

/// Parses `memory.oom_control` (`oom_kill_disable 0`, `under_oom 0`, `oom_kill 0`).
pub fn parse_oom_control(text: &str) -> Result<OomControl, ParseError> {
    let mut control = OomControl::default();
    let mut under_oom = None;
    for_each_flat_keyed(text, |key, value| match key {
        "under_oom" => set_u64(&mut under_oom, "under_oom", value),
        "oom_kill" => set_u64(&mut control.oom_kill, "oom_kill", value),
        _ => Ok(()),
    })?;
    control.under_oom = under_oom.map(|v| v != 0);
    Ok(control)
}

/// Reads `dir/memory.oom_control`; `Ok(None)` when absent.
pub fn read_oom_control(dir: &Path) -> Result<Option<OomControl>, ReadError> {
    read_parsed(dir, "memory.oom_control", parse_oom_control)
}

/// Counters from a v1 `cpu.stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    /// `nr_periods`: enforcement periods elapsed, count.
    pub nr_periods: Option<u64>,
    /// `nr_throttled`: periods in which the group was throttled, count.
    pub nr_throttled: Option<u64>,
    /// `throttled_time`: time throttled, NANOseconds.
    pub throttled_time_ns: Option<u64>,
}

/// Parses v1 `cpu.stat`; unknown keys are ignored.
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ParseError> {
    let mut stat = CpuStat::default();
    for_each_flat_keyed(text, |key, value| match key {
        "nr_periods" => set_u64(&mut stat.nr_periods, "nr_periods", value),
        "nr_throttled" => set_u64(&mut stat.nr_throttled, "nr_throttled", value),
        "throttled_time" => set_u64(&mut stat.throttled_time_ns, "throttled_time", value),
        _ => Ok(()),
    })?;
    Ok(stat)
}

/// Reads `dir/cpu.stat`; `Ok(None)` when absent.
pub fn read_cpu_stat(dir: &Path) -> Result<Option<CpuStat>, ReadError> {
    read_parsed(dir, "cpu.stat", parse_cpu_stat)
}

/// Parses `cpu.cfs_quota_us`: µs per period, or `None` for `-1` (no quota). Other
/// negative values fail.
pub fn parse_cfs_quota(text: &str) -> Result<Option<u64>, ParseError> {
    match text.trim() {
        "-1" => Ok(None),
        value => parse_u64("cpu.cfs_quota_us", value).map(Some),
    }
}

/// Parses `cpu.cfs_period_us`: µs, never 0.
pub fn parse_cfs_period(text: &str) -> Result<u64, ParseError> {
    match parse_u64("cpu.cfs_period_us", text.trim())? {
        0 => Err(ParseError::invalid("cpu.cfs_period_us", "0")),
        period => Ok(period),
    }
}

/// Reads `dir/cpu.cfs_quota_us` ÷ `dir/cpu.cfs_period_us` as logical processors;
/// `Ok(None)` when either file is absent or the quota is `-1`.
pub fn read_cfs_limit(dir: &Path) -> Result<Option<f64>, ReadError> {
    let Some(quota) = read_parsed(dir, "cpu.cfs_quota_us", parse_cfs_quota)?.flatten() else {
        return Ok(None);
    };
    let Some(period) = read_parsed(dir, "cpu.cfs_period_us", parse_cfs_period)? else {
        return Ok(None);
    };
    Ok(Some(quota as f64 / period as f64))
}

/// Reads the v1 `groups` (controller → exclusive group) into `out` (fields already set
/// are kept) and pushes non-absence failures to `errors`.
pub fn read_groups(
    groups: &BTreeMap<String, GroupDir>,
    out: &mut CgroupReadings,
    errors: &mut Vec<ReadError>,
) {
    if let Some(group) = groups.get("memory") {
        read_memory(group, out, errors);
    }
    if let Some(group) = groups.get("cpu") {
        read_cpu(group, out, errors);
    }
    if let Some(group) = groups.get("cpuacct") {
        let usage_ns = keep(read_single_u64(&group.dir, "cpuacct.usage"), errors);
        fill(&mut out.cpu_usage_us, usage_ns.map(|ns| ns / NS_PER_US));
    }
    if let Some(group) = groups.get("cpuset") {
        let count = min_cpuset_count(group, "cpuset.effective_cpus", errors)
            .or_else(|| min_cpuset_count(group, "cpuset.cpus", errors));
        out.cpuset_cpu_count = min_opt(out.cpuset_cpu_count, count);
    }
    if let Some(group) = groups.get("pids") {
        let max = keep(
            read_parsed(&group.dir, "pids.events", parse_pids_events),
            errors,
        );
        fill(&mut out.pids_max_events, max.flatten());
    }
}

/// Memory controller: usage, failcnt, OOM state, and the smallest limit up to the mount.
fn read_memory(group: &GroupDir, out: &mut CgroupReadings, errors: &mut Vec<ReadError>) {
    let dir = group.dir.as_path();
    fill(
        &mut out.memory_current_bytes,
        keep(read_single_u64(dir, "memory.usage_in_bytes"), errors),
    );
    fill(
        &mut out.memory_failcnt,
        keep(read_single_u64(dir, "memory.failcnt"), errors),
    );
    if let Some(control) = keep(read_oom_control(dir), errors) {
        fill(&mut out.memory_under_oom, control.under_oom);
        fill(&mut out.memory_oom_kill_events, control.oom_kill);
    }
    let limit = group
        .ancestors()
        .filter_map(|d| keep(read_memory_limit(d), errors))
        .min();
    out.memory_limit_bytes = min_opt(out.memory_limit_bytes, limit);
}

/// CPU controller: throttling (ns converted to µs) and the smallest CFS quota up to the
/// mount.
fn read_cpu(group: &GroupDir, out: &mut CgroupReadings, errors: &mut Vec<ReadError>) {
    if let Some(stat) = keep(read_cpu_stat(&group.dir), errors) {
        fill(&mut out.cpu_nr_throttled, stat.nr_throttled);
        fill(
            &mut out.cpu_throttled_us,
            stat.throttled_time_ns.map(|ns| ns / NS_PER_US),
        );
    }
    let mut limit = None;
    for dir in group.ancestors() {
        limit = min_opt(limit, keep(read_cfs_limit(dir), errors));
    }
    out.cpu_quota_limit = min_opt(out.cpu_quota_limit, limit);
}

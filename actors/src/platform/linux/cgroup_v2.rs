//! Parses and reads one cgroup v2 group's interface files (counters, events, limits).

use std::path::Path;

use super::cgroup_files::{
    CgroupReadings, GroupDir, fill, for_each_flat_keyed, keep, min_cpuset_count, min_opt,
    parse_pids_events, read_parsed, read_single_u64, set_u64,
};
use super::pressure::{PressureResource, read_cgroup_pressure};
use super::{ParseError, ReadError, parse_u64};

/// Counters from a v2 `cpu.stat`. `usage_usec` is always present; the throttling keys
/// need the cpu controller enabled for the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStat {
    /// `usage_usec`: CPU time used, µs.
    pub usage_usec: Option<u64>,
    /// `nr_throttled`: periods in which the group was throttled, count.
    pub nr_throttled: Option<u64>,
    /// `throttled_usec`: time throttled, µs.
    pub throttled_usec: Option<u64>,
}

/// Parses v2 `cpu.stat`; unknown keys are ignored, a non-numeric wanted value fails.
pub fn parse_cpu_stat(text: &str) -> Result<CpuStat, ParseError> {
    let mut stat = CpuStat::default();
    for_each_flat_keyed(text, |key, value| match key {
        "usage_usec" => set_u64(&mut stat.usage_usec, "usage_usec", value),
        "nr_throttled" => set_u64(&mut stat.nr_throttled, "nr_throttled", value),
        "throttled_usec" => set_u64(&mut stat.throttled_usec, "throttled_usec", value),
        _ => Ok(()),
    })?;
    Ok(stat)
}

/// Reads `dir/cpu.stat`; `Ok(None)` when absent.
pub fn read_cpu_stat(dir: &Path) -> Result<Option<CpuStat>, ReadError> {
    read_parsed(dir, "cpu.stat", parse_cpu_stat)
}

/// Counters from `memory.events` (hierarchical: includes descendants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryEvents {
    /// `high`: times usage went over `memory.high`.
    pub high: Option<u64>,
    /// `max`: times usage was about to go over `memory.max`.
    pub max: Option<u64>,
    /// `oom`: times the group's usage hit the limit and allocation failed.
    pub oom: Option<u64>,
    /// `oom_kill`: processes killed by the OOM killer.
    pub oom_kill: Option<u64>,
}

/// Parses `memory.events`; unknown keys (`low`, `oom_group_kill`) are ignored.
pub fn parse_memory_events(text: &str) -> Result<MemoryEvents, ParseError> {
    let mut events = MemoryEvents::default();
    for_each_flat_keyed(text, |key, value| match key {
        "high" => set_u64(&mut events.high, "high", value),
        "max" => set_u64(&mut events.max, "max", value),
        "oom" => set_u64(&mut events.oom, "oom", value),
        "oom_kill" => set_u64(&mut events.oom_kill, "oom_kill", value),
        _ => Ok(()),
    })?;
    Ok(events)
}

/// Reads `dir/memory.events`; `Ok(None)` when absent.
pub fn read_memory_events(dir: &Path) -> Result<Option<MemoryEvents>, ReadError> {
    read_parsed(dir, "memory.events", parse_memory_events)
}

/// Parses `memory.max` (or `memory.high`): `max` gives `None` (no limit), else bytes.
pub fn parse_memory_max(text: &str) -> Result<Option<u64>, ParseError> {
    match text.trim() {
        "max" => Ok(None),
        value => parse_u64("memory.max", value).map(Some),
    }
}

/// Reads `dir/memory.max`; `Ok(None)` when absent or `max`.
pub fn read_memory_max(dir: &Path) -> Result<Option<u64>, ReadError> {
    Ok(read_parsed(dir, "memory.max", parse_memory_max)?.flatten())
}

/// `cpu.max`: a quota of CPU time per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuMax {
    /// Allowed CPU time per period, µs; `None` for `max` (no quota).
    pub quota_us: Option<u64>,
    /// Period length, µs (never 0).
    pub period_us: u64,
}

impl CpuMax {
    /// The quota in logical processors (`quota / period`), `None` without a quota.
    pub fn limit_cpus(&self) -> Option<f64> {
        self.quota_us
            .map(|quota| quota as f64 / self.period_us as f64)
    }
}

/// Parses `cpu.max`: `$QUOTA $PERIOD` or `max $PERIOD` (the period may be omitted and
/// defaults to 100000). Fails on a zero period or non-numbers.
pub fn parse_cpu_max(text: &str) -> Result<CpuMax, ParseError> {
    let mut tokens = text.split_ascii_whitespace();
    let quota = match tokens.next() {
        None => return Err(ParseError::MissingField("cpu.max quota")),
        Some("max") => None,
        Some(quota) => Some(parse_u64("cpu.max quota", quota)?),
    };
    let period = match tokens.next() {
        None => 100_000,
        Some(period) => parse_u64("cpu.max period", period)?,
    };
    if tokens.next().is_some() {
        return Err(ParseError::invalid("cpu.max", text.trim()));
    }
    if period == 0 {
        return Err(ParseError::invalid("cpu.max period", "0"));
    }
    Ok(CpuMax {
        quota_us: quota,
        period_us: period,
    })
}

/// Reads `dir/cpu.max` as logical processors; `Ok(None)` when absent or unlimited.
pub fn read_cpu_max_limit(dir: &Path) -> Result<Option<f64>, ReadError> {
    Ok(read_parsed(dir, "cpu.max", parse_cpu_max)?.and_then(|m| m.limit_cpus()))
}

/// Reads one v2 group's files into `out` (fields already set are kept) and pushes
/// non-absence failures to `errors`. Limits take the minimum over the group and its
/// ancestors up to the mount.
pub fn read_group(group: &GroupDir, out: &mut CgroupReadings, errors: &mut Vec<ReadError>) {
    let dir = group.dir.as_path();
    if let Some(stat) = keep(read_cpu_stat(dir), errors) {
        fill(&mut out.cpu_usage_us, stat.usage_usec);
        fill(&mut out.cpu_nr_throttled, stat.nr_throttled);
        fill(&mut out.cpu_throttled_us, stat.throttled_usec);
    }
    if let Some(p) = keep(read_cgroup_pressure(dir, PressureResource::Cpu), errors) {
        fill(&mut out.cpu_pressure_some_us, p.some_total_us);
        fill(&mut out.cpu_pressure_full_us, p.full_total_us);
    }
    if let Some(p) = keep(read_cgroup_pressure(dir, PressureResource::Memory), errors) {
        fill(&mut out.memory_pressure_some_us, p.some_total_us);
        fill(&mut out.memory_pressure_full_us, p.full_total_us);
    }
    fill(
        &mut out.memory_current_bytes,
        keep(read_single_u64(dir, "memory.current"), errors),
    );
    if let Some(events) = keep(read_memory_events(dir), errors) {
        fill(&mut out.memory_high_events, events.high);
        fill(&mut out.memory_max_events, events.max);
        fill(&mut out.memory_oom_events, events.oom);
        fill(&mut out.memory_oom_kill_events, events.oom_kill);
    }
    fill(
        &mut out.pids_max_events,
        keep(read_parsed(dir, "pids.events", parse_pids_events), errors).flatten(),
    );

    let mut memory_limit = None;
    let mut cpu_limit = None;
    for ancestor in group.ancestors() {
        memory_limit = min_opt(memory_limit, keep(read_memory_max(ancestor), errors));
        cpu_limit = min_opt(cpu_limit, keep(read_cpu_max_limit(ancestor), errors));
    }
    out.memory_limit_bytes = min_opt(out.memory_limit_bytes, memory_limit);
    out.cpu_quota_limit = min_opt(out.cpu_quota_limit, cpu_limit);
    let cpuset = min_cpuset_count(group, "cpuset.cpus.effective", errors);
    out.cpuset_cpu_count = min_opt(out.cpuset_cpu_count, cpuset);
}

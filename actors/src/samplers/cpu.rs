//! The CPU sampler: user/system/total time over the scope's processes and the
//! consumption rate (per-process deltas in process scopes, `/proc/stat` in global).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use super::{ReadProblems, SampleRequest, SamplerOutput, SeriesBaselines, checked_sum};
use crate::platform::os::process_stat::ProcessStat;
use crate::platform::os::system_constants::clock_ticks_per_second;
use crate::platform::os::system_stat::{SystemCpuTimes, read_system_cpu_times};
use crate::readings::FieldCoverage;
use crate::samplers::environment::Environment;
use crate::scope::{ProcessIdentity, ResolvedScope, ScopeTarget};
use wattline_model::snapshot::{CpuReading, LimitEventReading};
use wattline_model::snapshot::{LimitEventKind, LimitResource};

/// Canonical coverage keys of the CPU time sums.
pub const USER_TIME_FIELD: &str = "cpu.user_time";
/// See [`USER_TIME_FIELD`].
pub const SYSTEM_TIME_FIELD: &str = "cpu.system_time";
/// See [`USER_TIME_FIELD`].
pub const TOTAL_TIME_FIELD: &str = "cpu.total_time";

/// What the next sample of a series compares against.
#[derive(Debug, Clone)]
enum CpuBaseline {
    /// Per-process CPU ticks by identity (process scopes).
    Processes {
        at: Instant,
        ticks: HashMap<ProcessIdentity, u64>,
    },
    /// System busy ticks (global scope).
    System { times: SystemCpuTimes },
}

/// The CPU sampler's state.
#[derive(Debug)]
pub struct CpuSampler {
    root: PathBuf,
    ticks_per_second: u64,
    baselines: SeriesBaselines<CpuBaseline>,
}

impl CpuSampler {
    /// A sampler reading the OS under `root`.
    pub fn new(root: PathBuf) -> Self {
        CpuSampler {
            root,
            ticks_per_second: clock_ticks_per_second(),
            baselines: SeriesBaselines::default(),
        }
    }

    /// Samples the CPU category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<CpuReading> {
        let scope = &request.scope;
        if scope.is_unavailable() {
            return SamplerOutput::default();
        }
        let mut problems = ReadProblems::default();
        let (times, coverage) = sum_cpu_times(scope, self.ticks_per_second);
        let previous = self.baselines.take(scope.target, request.series);
        let consumption = match scope.target {
            ScopeTarget::Global => match read_system_cpu_times(&self.root) {
                Ok(current) => {
                    let rate = match previous {
                        Some(CpuBaseline::System { times }) => {
                            system_consumption_rate(&times, &current)
                        }
                        _ => None,
                    };
                    self.baselines
                        .store(request.series, CpuBaseline::System { times: current });
                    rate
                }
                Err(error) => {
                    problems.add(&error);
                    None
                }
            },
            ScopeTarget::ApplicationProcess(_) | ScopeTarget::ProcessTree(_) => {
                let current = process_ticks(&scope.processes);
                let rate = match (&previous, scope.fully_sampled()) {
                    (Some(CpuBaseline::Processes { at, ticks }), true) => process_consumption_rate(
                        ticks,
                        &current,
                        request
                            .taken_at
                            .saturating_duration_since(*at)
                            .as_secs_f64(),
                        self.ticks_per_second,
                    ),
                    _ => None,
                };
                self.baselines.store(
                    request.series,
                    CpuBaseline::Processes {
                        at: request.taken_at,
                        ticks: current,
                    },
                );
                rate
            }
        };
        let mut reading = CpuReading {
            consumption_logical_processors: consumption,
            ..times
        };
        apply_environment(&request.environment, scope.target, &mut reading);
        SamplerOutput {
            reading,
            coverage,
            problems,
        }
    }
}

/// Fills throttling, limit and pressure: cgroup values in process scopes, system
/// pressure in global scope.
fn apply_environment(environment: &Environment, target: ScopeTarget, reading: &mut CpuReading) {
    if let ScopeTarget::Global = target {
        if let Some(pressure) = &environment.system_cpu_pressure {
            reading.some_pressure_microseconds = pressure.some_total_us;
            reading.full_pressure_microseconds = pressure.full_total_us;
        }
        return;
    }
    let Some(group) = &environment.cgroup else {
        return;
    };
    reading.throttled_microseconds = group.cpu_throttled_us;
    reading.effective_limit_logical_processors = group.effective_cpu_limit;
    reading.some_pressure_microseconds = group.cpu_pressure_some_us;
    reading.full_pressure_microseconds = group.cpu_pressure_full_us;
    if let Some(count) = group.cpu_nr_throttled {
        reading.limit_events.push(LimitEventReading {
            resource: LimitResource::Cpu,
            event: LimitEventKind::Throttled,
            count: Some(count),
        });
    }
}

/// Sums user and system time over the scope. Application and tree scopes are
/// all-or-nothing; global adds what each process supplies.
pub fn sum_cpu_times(scope: &ResolvedScope, ticks_per_second: u64) -> (CpuReading, FieldCoverage) {
    let supplied = scope.processes.len() as u64;
    let coverage = FieldCoverage::from([
        (USER_TIME_FIELD, supplied),
        (SYSTEM_TIME_FIELD, supplied),
        (TOTAL_TIME_FIELD, supplied),
    ]);
    let complete = matches!(scope.target, ScopeTarget::Global) || scope.fully_sampled();
    if !complete {
        return (CpuReading::default(), coverage);
    }
    let to_microseconds = |ticks: u64| -> Option<u64> {
        u64::try_from(u128::from(ticks) * 1_000_000 / u128::from(ticks_per_second.max(1))).ok()
    };
    let user = checked_sum(scope.processes.iter().map(|p| p.user_ticks)).and_then(to_microseconds);
    let system =
        checked_sum(scope.processes.iter().map(|p| p.system_ticks)).and_then(to_microseconds);
    let total = match (user, system) {
        (Some(user), Some(system)) => user.checked_add(system),
        _ => None,
    };
    (
        CpuReading {
            user_microseconds: user,
            system_microseconds: system,
            total_microseconds: total,
            ..CpuReading::default()
        },
        coverage,
    )
}

fn process_ticks(processes: &[ProcessStat]) -> HashMap<ProcessIdentity, u64> {
    processes
        .iter()
        .map(|p| {
            (
                ProcessIdentity::of(p),
                p.user_ticks.saturating_add(p.system_ticks),
            )
        })
        .collect()
}

/// Logical processors used between two samples of the same processes: the sum of each
/// process's CPU-time change (a newly seen process counts its whole lifetime), over
/// the elapsed time. `None` when any counter went backwards or no time passed.
pub fn process_consumption_rate(
    previous: &HashMap<ProcessIdentity, u64>,
    current: &HashMap<ProcessIdentity, u64>,
    elapsed_seconds: f64,
    ticks_per_second: u64,
) -> Option<f64> {
    if elapsed_seconds <= 0.0 || ticks_per_second == 0 {
        return None;
    }
    let mut delta_ticks: u64 = 0;
    for (identity, &now) in current {
        let before = previous.get(identity).copied().unwrap_or(0);
        delta_ticks = delta_ticks.checked_add(now.checked_sub(before)?)?;
    }
    let rate = delta_ticks as f64 / ticks_per_second as f64 / elapsed_seconds;
    rate.is_finite().then_some(rate)
}

/// The machine's CPU use between two `/proc/stat` readings, in logical processors:
/// the busy share of all processors' ticks times the processors. Measured in the
/// kernel's own ticks on both sides, so it never exceeds the machine's capacity, and
/// `None` when no tick has passed since the previous reading (nothing new to say).
pub fn system_consumption_rate(previous: &SystemCpuTimes, current: &SystemCpuTimes) -> Option<f64> {
    let busy = current.busy_ticks.checked_sub(previous.busy_ticks)?;
    let total = current.total_ticks.checked_sub(previous.total_ticks)?;
    if total == 0 || busy > total || current.logical_processors == 0 {
        return None;
    }
    let rate = busy as f64 / total as f64 * current.logical_processors as f64;
    rate.is_finite().then_some(rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pid: u32, start_ticks: u64) -> ProcessIdentity {
        ProcessIdentity { pid, start_ticks }
    }

    #[test]
    fn rate_counts_deltas_and_whole_lifetime_of_new_processes() {
        let previous = HashMap::from([(id(1, 10), 100), (id(2, 20), 50)]);
        // pid 2 is gone, pid 3 is new with 30 ticks of lifetime.
        let current = HashMap::from([(id(1, 10), 300), (id(3, 40), 30)]);
        let rate = process_consumption_rate(&previous, &current, 2.0, 100).unwrap();
        assert!((rate - (200.0 + 30.0) / 100.0 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_reused_pid_is_a_new_process_not_a_decrease() {
        let previous = HashMap::from([(id(1, 10), 500)]);
        let current = HashMap::from([(id(1, 99), 20)]);
        let rate = process_consumption_rate(&previous, &current, 1.0, 100).unwrap();
        assert!((rate - 0.2).abs() < 1e-12);
    }

    #[test]
    fn a_counter_going_backwards_makes_the_rate_unavailable() {
        let previous = HashMap::from([(id(1, 10), 500)]);
        let current = HashMap::from([(id(1, 10), 400)]);
        assert_eq!(
            process_consumption_rate(&previous, &current, 1.0, 100),
            None
        );
        assert_eq!(
            system_consumption_rate(&times(10, 100, 2), &times(9, 110, 2)),
            None
        );
    }

    #[test]
    fn zero_elapsed_time_gives_no_rate() {
        let map = HashMap::from([(id(1, 10), 5)]);
        assert_eq!(process_consumption_rate(&map, &map, 0.0, 100), None);
    }

    fn times(busy_ticks: u64, total_ticks: u64, logical_processors: u64) -> SystemCpuTimes {
        SystemCpuTimes {
            busy_ticks,
            total_ticks,
            logical_processors,
        }
    }

    #[test]
    fn system_rate_is_the_busy_share_of_every_processors_ticks() {
        // 4 processors, 200 ticks of them in the interval, 150 busy: 3 processors' worth.
        let rate = system_consumption_rate(&times(1000, 4000, 4), &times(1150, 4200, 4)).unwrap();
        assert!((rate - 3.0).abs() < 1e-12);
    }

    #[test]
    fn system_rate_is_null_when_no_tick_passed_and_never_above_capacity() {
        // Back-to-back readings inside one tick: nothing new, not a huge rate.
        assert_eq!(
            system_consumption_rate(&times(1000, 4000, 2), &times(1000, 4000, 2)),
            None
        );
        // One tick passed and it was busy: at most every processor, never more.
        let rate = system_consumption_rate(&times(1000, 4000, 2), &times(1001, 4001, 2)).unwrap();
        assert!((rate - 2.0).abs() < 1e-12);
    }
}

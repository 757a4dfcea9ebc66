//! The memory sampler: system memory from `/proc/meminfo`; resident, private, virtual
//! and peak memory of the scope's processes; limit, accounting, pressure and events of
//! an exclusive cgroup.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::per_process::{from_stats, read_per_process};
use super::{ReadProblems, SampleRequest, SamplerOutput};
use crate::platform::os::meminfo::read_meminfo;
use crate::platform::os::process_status::read_process_status;
use crate::platform::os::smaps_rollup::read_smaps_rollup;
use crate::platform::os::system_constants::page_size_bytes;
use crate::readings::FieldCoverage;
use crate::samplers::environment::Environment;
use crate::scope::{ProcessIdentity, ResolvedScope, ScopeTarget};
use wattline_model::snapshot::{LimitEventKind, LimitResource};
use wattline_model::snapshot::{LimitEventReading, MemoryReading};

/// Canonical coverage keys of the memory sums.
pub const RESIDENT_FIELD: &str = "memory.resident";
/// See [`RESIDENT_FIELD`].
pub const PRIVATE_FIELD: &str = "memory.private";
/// See [`RESIDENT_FIELD`].
pub const VIRTUAL_FIELD: &str = "memory.virtual_memory";
/// Peak resident memory, application scope only.
pub const PEAK_RESIDENT_FIELD: &str = "memory.peak_resident";
/// macOS only; always zero processes here.
pub const PHYSICAL_FOOTPRINT_FIELD: &str = "memory.physical_footprint";

/// The memory sampler's state.
#[derive(Debug)]
pub struct MemorySampler {
    root: PathBuf,
    page_size: u64,
    buffer: Vec<u8>,
    /// `memory.private_max_cpu_share` of the configuration.
    private_max_cpu_share: f64,
    /// Each process's last `private` figure, for processes of the last tick only.
    last_private: HashMap<ProcessIdentity, PrivateReading>,
}

/// One process's `private` figure, when it was read and what the read cost.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PrivateReading {
    bytes: u64,
    read_at: Instant,
    read_cost: Duration,
}

/// Whether `last` may stand for its process at `now` without breaking the budget:
/// a scope of `processes` processes may spend `max_cpu_share` of one CPU reading
/// `private`, so each process's read, which cost `read_cost`, is repeated no sooner
/// than `read_cost × processes × (1 / max_cpu_share − 1)` after it. A share of 1
/// reuses nothing.
fn private_reading_is_reusable(
    last: &PrivateReading,
    now: Instant,
    processes: usize,
    max_cpu_share: f64,
) -> bool {
    if max_cpu_share >= 1.0 {
        return false;
    }
    let allowed_age = last.read_cost.as_secs_f64() * processes as f64 * (1.0 / max_cpu_share - 1.0);
    now.saturating_duration_since(last.read_at).as_secs_f64() < allowed_age
}

impl MemorySampler {
    /// A sampler reading the OS under `root` whose reads of `private` take at most
    /// `private_max_cpu_share` of one CPU (`memory.private_max_cpu_share`).
    pub fn new(root: PathBuf, private_max_cpu_share: f64) -> Self {
        MemorySampler {
            root,
            page_size: page_size_bytes(),
            buffer: Vec::with_capacity(4096),
            private_max_cpu_share,
            last_private: HashMap::new(),
        }
    }

    /// Samples the memory category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<MemoryReading> {
        let mut problems = ReadProblems::default();
        let mut reading = MemoryReading::default();
        match read_meminfo(&self.root) {
            Ok(Some(info)) => reading.system = info.system_memory(),
            Ok(None) => {}
            Err(error) => problems.add(&error),
        }
        let scope = &request.scope;
        let mut coverage = FieldCoverage::new();
        if !scope.is_unavailable() && !matches!(scope.target, ScopeTarget::Global) {
            self.sample_processes(
                scope,
                request.taken_at,
                &mut reading,
                &mut coverage,
                &mut problems,
            );
        }
        apply_environment(&request.environment, scope.target, &mut reading);
        SamplerOutput {
            reading,
            coverage,
            problems,
        }
    }

    fn sample_processes(
        &mut self,
        scope: &ResolvedScope,
        taken_at: Instant,
        reading: &mut MemoryReading,
        coverage: &mut FieldCoverage,
        problems: &mut ReadProblems,
    ) {
        // Resident and virtual sizes come from the `stat` the scope already read. A
        // zombie's zeros there mean "no address space", not "none used": it lacks both.
        let page_size = self.page_size;
        let from_stat = from_stats(scope, |p| {
            if p.is_zombie() {
                (None, None)
            } else {
                (
                    p.resident_pages.checked_mul(page_size),
                    Some(p.virtual_bytes),
                )
            }
        });
        let (resident, resident_count) = from_stat.sum(|(resident, _)| *resident);
        let (virtual_total, virtual_count) = from_stat.sum(|(_, virtual_bytes)| *virtual_bytes);
        let buffer = &mut self.buffer;
        let root = &self.root;
        let share = self.private_max_cpu_share;
        let processes = scope.processes.len();
        let mut last_private = std::mem::take(&mut self.last_private);
        let mut this_tick = HashMap::with_capacity(processes);
        let private = read_per_process(scope, problems, |process| {
            let identity = ProcessIdentity::of(process);
            // A zombie has no address space left: it is read (and lacks the figure).
            if let Some(last) = last_private.remove(&identity)
                && !process.is_zombie()
                && private_reading_is_reusable(&last, taken_at, processes, share)
            {
                this_tick.insert(identity, last);
                return Ok(Some(last.bytes));
            }
            let started = Instant::now();
            let bytes = read_smaps_rollup(root, process.pid, buffer)?.map(|r| r.private_bytes());
            if let Some(bytes) = bytes {
                let read_cost = started.elapsed();
                let reading = PrivateReading {
                    bytes,
                    read_at: taken_at,
                    read_cost,
                };
                this_tick.insert(identity, reading);
            }
            Ok(bytes)
        });
        // Only this tick's processes are kept: the map never outgrows the scope.
        self.last_private = this_tick;
        let (private_total, private_count) = private.sum(|bytes| Some(*bytes));
        reading.resident_bytes = resident;
        reading.virtual_bytes = virtual_total;
        reading.private_bytes = private_total;
        coverage.insert(RESIDENT_FIELD, resident_count);
        coverage.insert(VIRTUAL_FIELD, virtual_count);
        coverage.insert(PRIVATE_FIELD, private_count);
        coverage.insert(PHYSICAL_FOOTPRINT_FIELD, 0);
        // One process has one peak; a changing tree has none.
        if let ScopeTarget::ApplicationProcess(identity) = scope.target {
            match read_process_status(root, identity.pid, buffer) {
                Ok(status) => reading.peak_resident_bytes = status.and_then(|s| s.vm_hwm_bytes),
                Err(error) => problems.add(&error),
            }
            coverage.insert(
                PEAK_RESIDENT_FIELD,
                u64::from(reading.peak_resident_bytes.is_some()),
            );
        }
    }
}

/// Fills the environment fields: cgroup values in process scopes, system pressure in
/// global scope.
fn apply_environment(environment: &Environment, target: ScopeTarget, reading: &mut MemoryReading) {
    if let ScopeTarget::Global = target {
        if let Some(pressure) = &environment.system_memory_pressure {
            reading.some_pressure_microseconds = pressure.some_total_us;
            reading.full_pressure_microseconds = pressure.full_total_us;
        }
        return;
    }
    let Some(group) = &environment.cgroup else {
        return;
    };
    reading.limit_bytes = group.memory_limit_bytes;
    reading.environment_accounted_bytes = group.memory_current_bytes;
    reading.some_pressure_microseconds = group.memory_pressure_some_us;
    reading.full_pressure_microseconds = group.memory_pressure_full_us;
    reading.out_of_memory_events = group.memory_oom_kill_events.or(group.memory_oom_events);
    let maximum = group.memory_max_events.or(group.memory_failcnt);
    let events = [
        (LimitEventKind::High, group.memory_high_events),
        (LimitEventKind::Maximum, maximum),
        (
            LimitEventKind::OutOfMemory,
            group.memory_oom_events.or(group.memory_oom_kill_events),
        ),
    ];
    reading.limit_events = events
        .into_iter()
        .filter(|(_, count)| count.is_some())
        .map(|(event, count)| LimitEventReading {
            resource: LimitResource::Memory,
            event,
            count,
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::{Child, Command};
    use std::sync::Arc;

    use super::*;
    use crate::scope::{identify_process, resolve_scope};
    use wattline_model::series::SamplingSeries;

    const MIB: u64 = 1024 * 1024;

    fn reading(bytes: u64, read_at: Instant, read_cost_micros: u64) -> PrivateReading {
        PrivateReading {
            bytes,
            read_at,
            read_cost: Duration::from_micros(read_cost_micros),
        }
    }

    #[test]
    fn a_private_reading_is_reused_until_its_share_of_the_budget_is_spent() {
        let read_at = Instant::now();
        let at = |micros: u64| read_at + Duration::from_micros(micros);
        // (read cost µs, processes, share, age µs, reused): the allowed age is
        // cost × processes × (1 / share − 1).
        let cases = [
            (1_000, 1, 0.01, 98_999, true),
            (1_000, 1, 0.01, 99_000, false),
            (1_000, 10, 0.01, 989_999, true),
            (1_000, 10, 0.01, 990_000, false),
            (500, 4, 0.5, 1_999, true),
            (500, 4, 0.5, 2_000, false),
            // A share of 1 reuses nothing, not even at the instant of the read.
            (1_000, 1, 1.0, 0, false),
        ];
        for (cost, processes, share, age, reused) in cases {
            let last = reading(7, read_at, cost);
            assert_eq!(
                private_reading_is_reusable(&last, at(age), processes, share),
                reused,
                "cost {cost} µs, {processes} processes, share {share}, age {age} µs"
            );
        }
        // A clock that reads earlier than the read (another series' tick) reuses.
        let last = reading(7, at(10), 1_000);
        assert!(private_reading_is_reusable(&last, read_at, 1, 0.01));
    }

    fn request(target: ScopeTarget, taken_at: Instant) -> SampleRequest {
        SampleRequest {
            series: SamplingSeries::Polling,
            scope: Arc::new(resolve_scope(Path::new("/"), target)),
            environment: Arc::default(),
            taken_at,
        }
    }

    fn private_bytes(sampler: &mut MemorySampler, target: ScopeTarget, at: Instant) -> Option<u64> {
        sampler.sample(&request(target, at)).reading.private_bytes
    }

    /// Touched memory: every page of it is resident and private to this process.
    fn touched(mib: u64) -> Vec<u8> {
        vec![1; (mib * MIB) as usize]
    }

    #[test]
    fn this_process_reads_fresh_within_the_budget_and_reused_inside_it() {
        let target = ScopeTarget::ApplicationProcess(
            identify_process(Path::new("/"), std::process::id()).unwrap(),
        );
        let start = Instant::now();
        let mut budgeted = MemorySampler::new("/".into(), 0.01);
        let before = private_bytes(&mut budgeted, target, start).unwrap();
        let grown = touched(256);
        // At the same instant the last figure stands; an hour on, it is read again.
        assert_eq!(private_bytes(&mut budgeted, target, start), Some(before));
        let later = private_bytes(&mut budgeted, target, start + Duration::from_secs(3600));
        assert!(
            later.unwrap() >= before + 200 * MIB,
            "{before} then {later:?}"
        );
        assert_eq!(budgeted.last_private.len(), 1);

        // A share of 1 reads at every snapshot.
        let mut always = MemorySampler::new("/".into(), 1.0);
        let first = private_bytes(&mut always, target, start).unwrap();
        let grown_again = touched(256);
        let second = private_bytes(&mut always, target, start).unwrap();
        assert!(second >= first + 200 * MIB, "{first} then {second}");
        drop((grown, grown_again));
    }

    struct Reaped(Child);

    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn a_process_that_became_a_zombie_is_not_given_its_last_figure() {
        // The root does not wait for its background child, which becomes a zombie
        // when killed.
        let root = Reaped(
            Command::new("sh")
                .args(["-c", "sleep 30 & exec sleep 30"])
                .spawn()
                .unwrap(),
        );
        let identity = identify_process(Path::new("/"), root.0.id()).unwrap();
        let target = ScopeTarget::ProcessTree(identity);
        let deadline = Instant::now() + Duration::from_secs(10);
        let child = loop {
            let scope = resolve_scope(Path::new("/"), target);
            if let Some(child) = scope.processes.iter().find(|p| p.pid != identity.pid) {
                break child.pid;
            }
            assert!(
                Instant::now() < deadline,
                "the background child never appeared"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let start = Instant::now();
        let mut sampler = MemorySampler::new("/".into(), 0.01);
        assert!(private_bytes(&mut sampler, target, start).is_some());
        assert_eq!(sampler.last_private.len(), 2);

        let killed = Command::new("kill")
            .arg(child.to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        loop {
            let scope = resolve_scope(Path::new("/"), target);
            if scope
                .processes
                .iter()
                .any(|p| p.pid == child && p.is_zombie())
            {
                break;
            }
            assert!(Instant::now() < deadline, "the child never became a zombie");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Still listed, without an address space: the tree has no total, as before
        // any figure was kept, and the zombie's figure is dropped.
        assert_eq!(private_bytes(&mut sampler, target, start), None);
        assert_eq!(sampler.last_private.len(), 1);
    }
}

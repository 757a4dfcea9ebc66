//! Real processes measured through the public API: CPU burned by a child shows in its
//! parent's process tree, an exited root gives the unavailable snapshot, odd process
//! names parse.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use wattline::config::{MeasurementScopeSetting, ResourceMetricsConfig};
use wattline::snapshot::MeasurementScope;
use wattline::{Collector, ScopeTarget, resolve_target};

const ROLE: &str = "WATTLINE_TEST_ROLE";

/// The target the CLI resolves for `setting` and `pid` (its runtime_default is global).
fn cli_target(setting: MeasurementScopeSetting, pid: u32) -> ScopeTarget {
    resolve_target(setting, MeasurementScopeSetting::Global, Some(pid)).unwrap()
}

/// Re-executed as a child: burns at least 200 ms of user CPU time as the kernel counts
/// it, prints the milliseconds the kernel recorded, then sleeps until killed.
#[test]
fn helper_burn_then_sleep() {
    if std::env::var(ROLE).as_deref() != Ok("burn") {
        return;
    }
    let ticks_per_second = 100; // checked against sysconf below
    // SAFETY: sysconf has no preconditions.
    assert_eq!(
        unsafe { libc::sysconf(libc::_SC_CLK_TCK) },
        ticks_per_second
    );
    let mut counter: u64 = 0;
    let user_ms = loop {
        for _ in 0..1_000_000 {
            counter = counter.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let user_ticks: u64 = after_name.split(' ').nth(11).unwrap().parse().unwrap();
        let user_ms = user_ticks * 1000 / ticks_per_second as u64;
        if user_ms >= 200 {
            break user_ms;
        }
    };
    println!("burned {user_ms} {counter}");
    std::thread::sleep(Duration::from_secs(60));
}

fn spawn_burner() -> (Child, u64) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_burn_then_sleep",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "burn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    // libtest may print "test NAME ... " on the same line before the helper's output.
    while !line.contains("burned ") {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "the burner exited early"
        );
        assert!(Instant::now() < deadline);
    }
    let after = &line[line.find("burned ").unwrap() + "burned ".len()..];
    let burned_ms = after.split(' ').next().unwrap().parse().unwrap();
    (child, burned_ms)
}

fn milliseconds(
    measurement: Option<wattline::snapshot::Measurement<wattline::config::units::DurationUnit>>,
) -> f64 {
    let measurement = measurement.expect("measurement present");
    assert_eq!(measurement.unit.name(), "milliseconds");
    measurement.value.as_f64()
}

#[test]
fn a_child_burning_cpu_shows_in_its_parents_process_tree() {
    let (mut child, burned_ms) = spawn_burner();
    let target = cli_target(MeasurementScopeSetting::ProcessTree, std::process::id());
    let snapshot = Collector::new(target, ResourceMetricsConfig::default()).collect();
    child.kill().unwrap();
    child.wait().unwrap();

    assert_eq!(snapshot.measurement_scope, MeasurementScope::ProcessTree);
    let sampling = snapshot.process_sampling.expect("process sampling present");
    assert!(sampling.sampled_processes >= 2, "{sampling:?}");
    assert_eq!(
        sampling.field_sampled_processes["cpu.user_time"],
        sampling.sampled_processes
    );
    let cpu = snapshot.cpu.expect("cpu category");
    let user = milliseconds(cpu.user_time);
    let system = milliseconds(cpu.system_time);
    assert!(
        user >= burned_ms as f64,
        "tree user time {user} ms < child's {burned_ms} ms"
    );
    assert_eq!(milliseconds(cpu.total_time), user + system);
    // First sample of the series: no rate yet.
    assert!(cpu.consumption_rate.is_none());
}

#[test]
fn the_child_alone_in_application_scope_has_at_least_what_it_burned() {
    let (mut child, burned_ms) = spawn_burner();
    let target = cli_target(MeasurementScopeSetting::ApplicationProcess, child.id());
    let snapshot = Collector::new(target, ResourceMetricsConfig::default()).collect();
    child.kill().unwrap();
    child.wait().unwrap();
    let cpu = snapshot.cpu.unwrap();
    let user = milliseconds(cpu.user_time);
    // The kernel's counter only grows; the child read it before we did.
    assert!(
        user >= burned_ms as f64 && user < burned_ms as f64 + 5_000.0,
        "{user} vs {burned_ms}"
    );
    assert_eq!(snapshot.process_sampling.unwrap().visible_processes, 1);
}

fn assert_unavailable(snapshot: &wattline::snapshot::Snapshot) {
    assert!(snapshot.process_sampling.is_none(), "{snapshot:?}");
    let cpu = snapshot
        .cpu
        .as_ref()
        .expect("an enabled category stays an object");
    assert!(cpu.user_time.is_none() && cpu.system_time.is_none() && cpu.total_time.is_none());
    assert!(cpu.consumption_rate.is_none());
}

#[test]
fn a_root_that_exited_gives_the_unavailable_snapshot() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let tree = cli_target(MeasurementScopeSetting::ProcessTree, pid);
    let application = cli_target(MeasurementScopeSetting::ApplicationProcess, pid);
    // Alive: available.
    assert!(
        Collector::new(tree, ResourceMetricsConfig::default())
            .collect()
            .process_sampling
            .is_some()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    for target in [tree, application] {
        let snapshot = Collector::new(target, ResourceMetricsConfig::default()).collect();
        assert_eq!(snapshot.measurement_scope, target.measurement_scope());
        assert_unavailable(&snapshot);
    }
}

#[test]
fn a_reused_pid_is_not_the_same_process() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let target = cli_target(MeasurementScopeSetting::ApplicationProcess, pid);
    let ScopeTarget::ApplicationProcess(mut identity) = target else {
        panic!("{target:?}")
    };
    // Pretend the pid was first seen with another start time, as after a reuse.
    identity.start_ticks += 1;
    let snapshot = Collector::new(
        ScopeTarget::ApplicationProcess(identity),
        ResourceMetricsConfig::default(),
    )
    .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_unavailable(&snapshot);
}

#[test]
fn a_process_whose_name_has_spaces_and_parentheses_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a ) (b c");
    std::os::unix::fs::symlink("/bin/sleep", &odd).unwrap();
    let mut child = Command::new(&odd).arg("30").spawn().unwrap();
    // Wait for the exec to land: until then the child still carries our thread name.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap();
        if comm.trim_end() == "a ) (b c" {
            break;
        }
        assert!(Instant::now() < deadline, "comm stayed {comm:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let target = cli_target(MeasurementScopeSetting::ApplicationProcess, child.id());
    let snapshot = Collector::new(target, ResourceMetricsConfig::default()).collect();
    child.kill().unwrap();
    child.wait().unwrap();
    let sampling = snapshot.process_sampling.expect("sampled");
    assert_eq!(
        (sampling.visible_processes, sampling.sampled_processes),
        (1, 1)
    );
    let cpu = snapshot.cpu.unwrap();
    assert!(cpu.user_time.is_some() && cpu.total_time.is_some());
}

#[test]
fn global_scope_sees_this_process_and_covers_what_it_sampled() {
    let snapshot = Collector::new(ScopeTarget::Global, ResourceMetricsConfig::default()).collect();
    assert_eq!(snapshot.measurement_scope, MeasurementScope::Global);
    let sampling = snapshot.process_sampling.unwrap();
    assert!(sampling.visible_processes >= sampling.sampled_processes);
    assert!(sampling.sampled_processes >= 2);
    assert_eq!(
        sampling.field_sampled_processes["cpu.total_time"],
        sampling.sampled_processes
    );
    assert!(milliseconds(snapshot.cpu.unwrap().total_time) > 0.0);
}

#[test]
fn process_scopes_need_a_pid() {
    let error = resolve_target(
        MeasurementScopeSetting::ProcessTree,
        MeasurementScopeSetting::Global,
        None,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the process_tree scope needs a process ID to measure"
    );
    assert_eq!(
        resolve_target(
            MeasurementScopeSetting::RuntimeDefault,
            MeasurementScopeSetting::Global,
            None
        )
        .unwrap(),
        ScopeTarget::Global
    );
}

//! Real work, measured: a re-executed copy of this test binary burns CPU, writes and
//! fsyncs a file, holds files open, starts threads and runs a child that exits between
//! two polls. The snapshots must see at least the known work.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wattline_actors::collector::Collector;
use wattline_actors::scope::{ScopeTarget, identify_process};
use wattline_config::ResourceMetricsConfig;
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;

const ROLE: &str = "WATTLINE_REAL_WORK_ROLE";
const WRITTEN_MIB: usize = 8;
const OPEN_FILES: usize = 20;
const EXTRA_THREADS: usize = 3;

fn user_and_system_ms_of_self() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1000 / per_second
}

/// The workload, when re-executed with the role set.
#[test]
fn helper_workload() {
    match std::env::var(ROLE).as_deref() {
        Ok("workload") => {}
        Ok("child") => {
            std::thread::sleep(Duration::from_secs(120));
            return;
        }
        _ => return,
    }
    let dir = PathBuf::from(std::env::var("WATTLINE_REAL_WORK_DIR").unwrap());
    // Write N MiB and make sure it reached storage.
    let mut file = std::fs::File::create(dir.join("written")).unwrap();
    let block = vec![7u8; 1024 * 1024];
    for _ in 0..WRITTEN_MIB {
        file.write_all(&block).unwrap();
    }
    file.sync_all().unwrap();
    // Hold K files open.
    let held: Vec<std::fs::File> = (0..OPEN_FILES)
        .map(|i| std::fs::File::create(dir.join(format!("held-{i}"))).unwrap())
        .collect();
    // Start T threads that stay alive.
    let _threads: Vec<_> = (0..EXTRA_THREADS)
        .map(|_| std::thread::spawn(|| std::thread::sleep(Duration::from_secs(120))))
        .collect();
    // Burn CPU until the kernel has counted at least 200 ms.
    let mut state: u64 = 1;
    while user_and_system_ms_of_self() < 200 {
        for _ in 0..1_000_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_workload",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, "child")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let burned = user_and_system_ms_of_self();
    println!("\nready {} {burned} {state}", child.id());
    // Wait for the test to ask for the child's exit, then reap it.
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    println!("reaped");
    std::io::stdin().read_line(&mut line).unwrap();
    drop(held);
}

struct Workload {
    process: std::process::Child,
    lines: BufReader<std::process::ChildStdout>,
    child_pid: u32,
    burned_ms: u64,
    _dir: tempfile::TempDir,
}

impl Workload {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut process = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "helper_workload",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE, "workload")
            .env("WATTLINE_REAL_WORK_DIR", dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap());
        let line = read_until(&mut lines, "ready ");
        let fields: Vec<&str> = line.split_whitespace().collect();
        Workload {
            child_pid: fields[1].parse().unwrap(),
            burned_ms: fields[2].parse().unwrap(),
            process,
            lines,
            _dir: dir,
        }
    }

    fn say(&mut self, text: &str) {
        let stdin = self.process.stdin.as_mut().unwrap();
        writeln!(stdin, "{text}").unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

fn read_until(lines: &mut BufReader<std::process::ChildStdout>, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut line = String::new();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "workload exited early"
        );
        if let Some(start) = line.find(prefix) {
            return line[start..].trim_end().to_string();
        }
        assert!(Instant::now() < deadline);
    }
}

fn value(measurement: &Option<impl serde::Serialize>) -> f64 {
    let json = serde_json::to_value(measurement).unwrap();
    json["value"]
        .as_f64()
        .unwrap_or_else(|| panic!("null measurement: {json}"))
}

fn config() -> ResourceMetricsConfig {
    let mut config = ResourceMetricsConfig::default();
    config.disk.filesystem_paths = vec!["/".into(), "/nonexistent-wattline-path".into()];
    config
}

#[test]
fn a_process_tree_doing_known_work_is_measured() {
    let mut workload = Workload::start();
    let root = identify_process(std::path::Path::new("/"), workload.process.id()).unwrap();
    let mut collector = Collector::new("/".into(), ScopeTarget::ProcessTree(root), config());

    let first: Snapshot = collector.collect(SamplingSeries::Polling);
    let cpu = first.cpu.as_ref().unwrap();
    assert!(
        value(&cpu.total_time) >= workload.burned_ms as f64,
        "{cpu:?}"
    );
    assert!(cpu.consumption_rate.is_none(), "first reading has no rate");
    let disk = first.disk.as_ref().unwrap();
    assert!(
        value(&disk.write_data) >= (WRITTEN_MIB * 1024 * 1024) as f64,
        "{disk:?}"
    );
    assert!(disk.read_throughput.is_none() && disk.write_throughput.is_none());
    assert!(value(&disk.write_operations) >= WRITTEN_MIB as f64);
    // A failing path keeps its entry with null capacities.
    assert_eq!(disk.filesystems.len(), 2);
    assert!(disk.filesystems[0].total_capacity.is_some());
    assert!(
        disk.filesystems[1].total_capacity.is_none()
            && disk.filesystems[1].path == "/nonexistent-wattline-path"
    );
    let process = first.process.as_ref().unwrap();
    assert_eq!(value(&process.descendant_count), 1.0, "{process:?}");
    assert_eq!(value(&process.active_count), 2.0);
    assert!(value(&process.open_file_descriptor_count) >= OPEN_FILES as f64);
    assert!(value(&process.thread_count) >= (EXTRA_THREADS + 1) as f64);
    let memory = first.memory.as_ref().unwrap();
    assert!(value(&memory.resident) > 0.0 && value(&memory.private) > 0.0);
    assert!(value(&memory.virtual_memory) >= value(&memory.resident));
    assert!(memory.peak_resident.is_none(), "no single peak for a tree");
    let sampling = first.process_sampling.as_ref().unwrap();
    assert_eq!(sampling.visible_processes, 2);
    assert_eq!(sampling.field_sampled_processes["disk.write_throughput"], 0);
    assert_eq!(sampling.field_sampled_processes["memory.private"], 2);

    // The child exits between the two polls.
    workload.say("kill-child");
    read_until(&mut workload.lines, "reaped");
    assert!(!std::path::Path::new(&format!("/proc/{}", workload.child_pid)).exists());
    std::thread::sleep(Duration::from_millis(50));

    let second = collector.collect(SamplingSeries::Polling);
    let process = second.process.as_ref().unwrap();
    assert_eq!(value(&process.descendant_count), 0.0);
    let cpu = second.cpu.as_ref().unwrap();
    assert!(
        value(&cpu.total_time) >= workload.burned_ms as f64,
        "the exited child did not null the totals"
    );
    let rate = value(&cpu.consumption_rate);
    // SAFETY: sysconf has no preconditions.
    let processors = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as f64;
    assert!((0.0..=processors + 0.5).contains(&rate), "rate {rate}");
    let disk = second.disk.as_ref().unwrap();
    assert!(value(&disk.write_throughput) >= 0.0);
    assert!(value(&disk.write_data) >= (WRITTEN_MIB * 1024 * 1024) as f64);
    assert_eq!(
        second
            .process_sampling
            .as_ref()
            .unwrap()
            .field_sampled_processes["disk.write_throughput"],
        1
    );
}

#[test]
fn the_on_demand_series_keeps_its_own_baseline() {
    let workload = Workload::start();
    let root = identify_process(std::path::Path::new("/"), workload.process.id()).unwrap();
    let mut collector = Collector::new("/".into(), ScopeTarget::ProcessTree(root), config());
    let polling_first = collector.collect(SamplingSeries::Polling);
    assert!(polling_first.cpu.unwrap().consumption_rate.is_none());
    let on_demand_first = collector.collect(SamplingSeries::OnDemand);
    assert!(
        on_demand_first.cpu.unwrap().consumption_rate.is_none(),
        "a new series starts without a rate"
    );
    let polling_second = collector.collect(SamplingSeries::Polling);
    assert!(polling_second.cpu.unwrap().consumption_rate.is_some());
}

#[test]
fn loopback_traffic_raises_lo_counters_by_at_least_what_was_sent() {
    let mut config = ResourceMetricsConfig::default();
    config.network.interfaces = vec!["lo".into(), "no-such-interface0".into()];
    let mut collector = Collector::new("/".into(), ScopeTarget::Global, config);
    let before = collector.collect(SamplingSeries::OnDemand);
    let network = before.network.unwrap();
    assert_eq!(
        network.interfaces.len(),
        1,
        "an unknown name gives no record"
    );
    assert_eq!(network.interfaces[0].name, "lo");
    let received_before = value(&network.interfaces[0].traffic.received_data);

    const SENT: usize = 4 * 1024 * 1024;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut sink = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut sink).unwrap();
        sink.len()
    });
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.write_all(&vec![1u8; SENT]).unwrap();
    drop(stream);
    assert_eq!(reader.join().unwrap(), SENT);

    let after = collector.collect(SamplingSeries::OnDemand);
    let network = after.network.unwrap();
    let lo = &network.interfaces[0].traffic;
    assert!(value(&lo.received_data) - received_before >= SENT as f64);
    assert!(value(&lo.receive_throughput) > 0.0);
    assert_eq!(
        value(&network.system.received_data),
        value(&lo.received_data)
    );
}

#[test]
fn no_matching_interface_leaves_system_measurements_null() {
    let mut config = ResourceMetricsConfig::default();
    config.network.interfaces = vec!["no-such-interface0".into()];
    let mut collector = Collector::new("/".into(), ScopeTarget::Global, config);
    let network = collector.collect(SamplingSeries::OnDemand).network.unwrap();
    assert!(network.interfaces.is_empty());
    assert!(network.system.received_data.is_none() && network.system.receive_errors.is_none());
}

#[test]
fn global_scope_leaves_per_process_memory_null_and_skips_unreadable_io() {
    let mut collector = Collector::new(
        "/".into(),
        ScopeTarget::Global,
        ResourceMetricsConfig::default(),
    );
    let snapshot = collector.collect(SamplingSeries::OnDemand);
    let memory = snapshot.memory.unwrap();
    assert!(
        memory.resident.is_none() && memory.private.is_none() && memory.peak_resident.is_none()
    );
    assert!(memory.system_total.is_some() && memory.system_available.is_some());
    let sampling = snapshot.process_sampling.unwrap();
    assert!(
        !sampling
            .field_sampled_processes
            .contains_key("memory.resident")
    );
    let io_denied = std::fs::read("/proc/1/io").is_err();
    let read_data_count = sampling.field_sampled_processes["disk.read_data"];
    if io_denied {
        // /proc/1/io is denied here: global adds the others and says so in coverage.
        assert!(read_data_count < sampling.sampled_processes);
    } else {
        // Readable (CAP_SYS_PTRACE): the processes still alive when read are counted.
        assert!(read_data_count > 0 && read_data_count <= sampling.sampled_processes);
    }
    assert!(snapshot.disk.unwrap().read_data.is_some());
    assert!(snapshot.process.unwrap().descendant_count.is_none());
}

#[test]
fn back_to_back_global_rates_are_null_or_within_the_machines_capacity() {
    // Collects a few milliseconds apart: the kernel's counters move in whole ticks, so
    // a rate over wall time would read several processors on this 2-core machine.
    let capacity = std::thread::available_parallelism().unwrap().get() as f64;
    let mut collector = Collector::new("/".into(), ScopeTarget::Global, config());
    collector.collect(SamplingSeries::OnDemand);
    let mut rates = Vec::new();
    for _ in 0..40 {
        let snapshot = collector.collect(SamplingSeries::OnDemand);
        let rate = snapshot.cpu.and_then(|cpu| cpu.consumption_rate);
        rates.push(rate.map(|measurement| measurement.value.as_f64()));
    }
    for rate in rates.iter().flatten() {
        assert!(
            (0.0..=capacity + 1e-9).contains(rate),
            "{rate} logical processors on a {capacity}-processor machine: {rates:?}"
        );
    }
}

#[test]
fn a_zombie_in_the_tree_makes_its_missing_memory_totals_null_not_partial() {
    // A parent that never reaps its child: the tree is the parent and a zombie.
    let mut parent = Command::new("python3")
        .args([
            "-c",
            "import os, sys, time\n\
             child = os.fork()\n\
             if child == 0:\n    os._exit(0)\n\
             print(child, flush=True)\n\
             time.sleep(30)\n",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(parent.stdout.take().unwrap());
    let mut line = String::new();
    lines.read_line(&mut line).unwrap();
    let zombie: u32 = line.trim().parse().unwrap();
    // Wait until the child has exited (state Z).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{zombie}/stat")).unwrap();
        if stat.contains(") Z ") {
            break;
        }
        assert!(Instant::now() < deadline, "the child never became a zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    let root = identify_process(std::path::Path::new("/"), parent.id()).unwrap();
    let mut collector = Collector::new("/".into(), ScopeTarget::ProcessTree(root), config());
    let snapshot = collector.collect(SamplingSeries::OnDemand);
    let _ = parent.kill();
    let _ = parent.wait();

    let sampling = snapshot.process_sampling.expect("process sampling");
    assert_eq!(sampling.sampled_processes, 2, "the parent and its zombie");
    let memory = snapshot.memory.expect("memory");
    assert!(memory.private.is_none(), "{:?}", memory.private);
    assert!(
        memory.virtual_memory.is_none(),
        "{:?}",
        memory.virtual_memory
    );
    assert!(memory.resident.is_none(), "{:?}", memory.resident);
    assert_eq!(sampling.field_sampled_processes["memory.private"], 1);
    assert_eq!(sampling.field_sampled_processes["memory.virtual_memory"], 1);
    // CPU time is a counter the zombie still has: its total stands.
    assert!(snapshot.cpu.unwrap().total_time.is_some());
}

#[test]
fn the_configured_private_budget_decides_whether_a_grown_process_is_read_again() {
    const MIB: f64 = 1024.0 * 1024.0;
    let this = identify_process(std::path::Path::new("/"), std::process::id()).unwrap();
    let target = ScopeTarget::ApplicationProcess(this);
    let private_bytes = |snapshot: Snapshot| {
        let memory = snapshot.memory.expect("memory");
        // `private` is in the default unit, kibibytes.
        value(&memory.private) * 1024.0
    };
    let mut grown = Vec::new();
    // (share, whether the second snapshot sees the growth): a read of a few hundred
    // µs under a share of a millionth stands for minutes; a share of 1 reads again.
    for (share, fresh) in [(1e-6, false), (1.0, true)] {
        let mut config = config();
        config.memory.private_max_cpu_share = share;
        let mut collector = Collector::new("/".into(), target, config);
        let before = private_bytes(collector.collect(SamplingSeries::OnDemand));
        grown.push(vec![1_u8; 256 << 20]);
        let after = private_bytes(collector.collect(SamplingSeries::OnDemand));
        if fresh {
            assert!(
                after >= before + 200.0 * MIB,
                "share {share}: {before} then {after}"
            );
        } else {
            assert_eq!(after, before, "share {share}");
        }
    }
    drop(grown);
}

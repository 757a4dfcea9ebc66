//! CPU time per snapshot, wattline beside a minimal hand-written reader doing the same
//! reads, with N extra idle processes (spawned and reaped here). Prints figures and
//! ratios from one run; asserts nothing (machines are shared and noisy).
//!
//! Run: `cargo bench -p wattline-actors --bench snapshot_cost`
//! (`WATTLINE_BENCH_ROUNDS` sets the rounds per figure, default 30;
//! `WATTLINE_BENCH_TREE_ONLY=1` runs only the 10-process tree.)

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use wattline_actors::collector::Collector;
use wattline_actors::scope::{ScopeTarget, identify_process};
use wattline_config::ResourceMetricsConfig;
use wattline_model::series::SamplingSeries;

/// CPU time (user + system) this process has used, ns.
fn process_cpu_nanos() -> u128 {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    time.tv_sec as u128 * 1_000_000_000 + time.tv_nsec as u128
}

/// The floor: the same OS reads with the least code around them.
fn floor_snapshot(buffer: &mut Vec<u8>) -> u64 {
    use std::io::Read;
    let mut checksum = 0u64;
    let read = |path: &Path, buffer: &mut Vec<u8>| -> bool {
        buffer.clear();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(buffer))
            .is_ok()
    };
    for system_file in [
        "/proc/meminfo",
        "/proc/stat",
        "/proc/net/dev",
        "/proc/pressure/cpu",
        "/proc/pressure/memory",
    ] {
        if read(Path::new(system_file), buffer) {
            checksum += buffer.len() as u64;
        }
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return checksum;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let base = Path::new("/proc").join(pid);
        if read(&base.join("stat"), buffer) {
            // utime and stime: fields 14 and 15, after the last ')'.
            if let Some(close) = buffer.iter().rposition(|&b| b == b')') {
                let fields = buffer[close + 2..].split(|&b| b == b' ');
                for field in fields.skip(11).take(2) {
                    checksum += field
                        .iter()
                        .fold(0u64, |n, d| n * 10 + u64::from(d.wrapping_sub(b'0')));
                }
            }
        }
        if read(&base.join("io"), buffer) {
            checksum += buffer.len() as u64;
        }
        if let Ok(fds) = std::fs::read_dir(base.join("fd")) {
            checksum += fds.count() as u64;
        }
    }
    checksum
}

fn spawn_idle(count: usize) -> Vec<Child> {
    (0..count)
        .filter_map(|_| {
            Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .ok()
        })
        .collect()
}

fn reap(children: Vec<Child>) {
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn cpu_micros_of(mut work: impl FnMut()) -> f64 {
    let before = process_cpu_nanos();
    work();
    (process_cpu_nanos() - before) as f64 / 1000.0
}

fn main() {
    let rounds: usize = std::env::var("WATTLINE_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    println!(
        "snapshot CPU time per snapshot (median of {rounds}), wattline beside the /proc floor\n"
    );
    println!(
        "{:>8} {:>10} {:>14} {:>14} {:>16} {:>8}",
        "extra N", "processes", "wattline µs", "floor µs", "floor µs/proc", "ratio"
    );
    let mut buffer = Vec::with_capacity(4096);
    // `WATTLINE_BENCH_TREE_ONLY=1`: only the 10-process tree (to profile it alone).
    let tree_only = std::env::var("WATTLINE_BENCH_TREE_ONLY").is_ok_and(|value| value == "1");
    let extras: &[usize] = if tree_only { &[] } else { &[0, 500, 2000] };
    for &extra in extras {
        global_row(rounds, extra, &mut buffer);
    }
    process_tree_rows(rounds);
    if !tree_only {
        smaps_rollup_by_resident_memory(rounds);
    }
}

/// One row of the global table: `extra` idle processes more, wattline's snapshot
/// beside the `/proc` floor (median CPU of `rounds`).
fn global_row(rounds: usize, extra: usize, buffer: &mut Vec<u8>) {
    let children = spawn_idle(extra);
    std::thread::sleep(Duration::from_millis(300));
    let processes = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0);
    let mut collector = Collector::new(
        "/".into(),
        ScopeTarget::Global,
        ResourceMetricsConfig::default(),
    );
    // Warm both once (page cache, allocator).
    collector.collect(SamplingSeries::Polling);
    std::hint::black_box(floor_snapshot(buffer));
    let mut ours = Vec::with_capacity(rounds);
    let mut floor = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        // Alternate, so drift in machine load hits both alike.
        ours.push(cpu_micros_of(|| {
            std::hint::black_box(collector.collect(SamplingSeries::Polling));
        }));
        floor.push(cpu_micros_of(|| {
            std::hint::black_box(floor_snapshot(buffer));
        }));
    }
    let (ours, floor) = (median(ours), median(floor));
    println!(
        "{extra:>8} {processes:>10} {ours:>14.0} {floor:>14.0} {:>16.1} {:>8.2}",
        floor / processes.max(1) as f64,
        ours / floor
    );
    reap(children);
}

/// The 10-process tree's rows: this process and nine children, `private` read at
/// every snapshot and within its budget, and what scope resolution costs of it.
fn process_tree_rows(rounds: usize) {
    // A 10-process tree: this process and nine children.
    let children = spawn_idle(9);
    std::thread::sleep(Duration::from_millis(200));
    let root = identify_process(Path::new("/"), std::process::id()).map(ScopeTarget::ProcessTree);
    if let Ok(target) = root {
        // Back to back, `private` is read again only as its CPU budget allows (the
        // default); with a share of 1 it is read at every snapshot, as at a 1 s poll.
        let mut every_read = ResourceMetricsConfig::default();
        every_read.memory.private_max_cpu_share = 1.0;
        let mut figures = Vec::new();
        for (name, config) in [
            ("private read at every snapshot (share 1)", every_read),
            (
                "private within its default budget (share 0.01)",
                ResourceMetricsConfig::default(),
            ),
        ] {
            let mut collector = Collector::new("/".into(), target, config);
            collector.collect(SamplingSeries::Polling);
            let cpu: Vec<f64> = (0..rounds)
                .map(|_| {
                    cpu_micros_of(|| {
                        std::hint::black_box(collector.collect(SamplingSeries::Polling));
                    })
                })
                .collect();
            let wall: Vec<f64> = (0..rounds)
                .map(|_| {
                    let start = std::time::Instant::now();
                    std::hint::black_box(collector.collect(SamplingSeries::Polling));
                    start.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            figures.push((name, median(cpu), median(wall)));
        }
        let resolution: Vec<f64> = (0..rounds)
            .map(|_| {
                cpu_micros_of(|| {
                    std::hint::black_box(wattline_actors::scope::resolve_scope(
                        Path::new("/"),
                        target,
                    ));
                })
            })
            .collect();
        let children_files =
            Path::new(&format!("/proc/{0}/task/{0}/children", std::process::id())).exists();
        println!("\n10-process process_tree snapshot, back to back (median); target <= 600 µs");
        for (name, cpu, wall) in figures {
            println!("  {name:48} {cpu:6.0} µs CPU {wall:6.0} µs wall");
        }
        println!(
            "  of which scope resolution: {:.0} µs ({})",
            median(resolution),
            if children_files {
                "walks /proc/PID/task/TID/children"
            } else {
                "no children files on this kernel: scans every /proc/PID/stat for parents"
            }
        );
    }
    reap(children);
}

/// What `private` costs as a process grows: this process's `smaps_rollup` read, as
/// is and with 1 GiB and 2 GiB more resident in 4 KiB pages (the page walk the
/// `memory.private_max_cpu_share` budget bounds).
fn smaps_rollup_by_resident_memory(rounds: usize) {
    let read_ms = || {
        let times: Vec<f64> = (0..rounds.min(20))
            .map(|_| {
                let start = std::time::Instant::now();
                std::hint::black_box(std::fs::read("/proc/self/smaps_rollup").ok());
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        median(times)
    };
    println!("\n/proc/self/smaps_rollup read, wall ms (median)");
    println!("  as is            {:8.2}", read_ms());
    let mut held = Vec::new();
    for gib in 1..=2 {
        // Written, so every page is resident.
        held.push(vec![1_u8; 1 << 30]);
        println!("  {gib} GiB more       {:8.2}", read_ms());
    }
    drop(held);
}

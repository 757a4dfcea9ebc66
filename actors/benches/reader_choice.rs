//! Why `/proc` is read by hand: the per-process reads a poll makes (`stat` and
//! `status` of every visible process), through wattline's readers, through `procfs`,
//! and through `sysinfo`'s process refresh, side by side in one run, as CPU time per
//! process and as ratios. Prints figures; asserts nothing.
//!
//! Run: `cargo bench -p wattline-actors --bench reader_choice`
//! (`WATTLINE_BENCH_ROUNDS` sets the rounds, default 30.)

use std::path::Path;

use wattline_actors::platform::os::process_list::list_all_process_ids;
use wattline_actors::platform::os::process_stat::read_process_stat;
use wattline_actors::platform::os::process_status::read_process_status;

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

/// CPU ns per round of `work`.
fn per_round(rounds: u32, mut work: impl FnMut() -> u64) -> f64 {
    let mut checksum = 0;
    let started = process_cpu_nanos();
    for _ in 0..rounds {
        checksum ^= work();
    }
    std::hint::black_box(checksum);
    (process_cpu_nanos() - started) as f64 / f64::from(rounds)
}

fn main() {
    let rounds: u32 = std::env::var("WATTLINE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let root = Path::new("/");
    let pids = list_all_process_ids(root).expect("/proc lists");
    let processes = pids.len() as f64;

    let ours = per_round(rounds, || {
        let mut buffer = Vec::with_capacity(4096);
        let mut sum = 0u64;
        for pid in &pids {
            if let Ok(stat) = read_process_stat(root, *pid, &mut buffer) {
                sum = sum.wrapping_add(stat.user_ticks);
            }
            if let Ok(Some(status)) = read_process_status(root, *pid, &mut buffer) {
                sum = sum.wrapping_add(status.threads);
            }
        }
        sum
    });
    let with_procfs = per_round(rounds, || {
        let mut sum = 0u64;
        for pid in &pids {
            let Ok(process) = procfs::process::Process::new(*pid as i32) else {
                continue;
            };
            if let Ok(stat) = process.stat() {
                sum = sum.wrapping_add(stat.utime);
            }
            if let Ok(status) = process.status() {
                sum = sum.wrapping_add(status.threads);
            }
        }
        sum
    });
    let mut system = sysinfo::System::new().expect("sysinfo starts");
    let with_sysinfo = per_round(rounds, || {
        system.refresh_processes(sysinfo::ProcessesToUpdate::All, true) as u64
    });

    println!("{} visible processes, {rounds} rounds", pids.len());
    println!(
        "wattline readers: {:>8.2} µs per process",
        ours / processes / 1e3
    );
    println!(
        "procfs 0.18:      {:>8.2} µs per process ({:.2}x wattline)",
        with_procfs / processes / 1e3,
        with_procfs / ours
    );
    println!(
        "sysinfo 0.40:     {:>8.2} µs per process ({:.2}x wattline; refreshes every field it knows)",
        with_sysinfo / processes / 1e3,
        with_sysinfo / ours
    );
}

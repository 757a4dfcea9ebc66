//! Property tests of the `/proc` parsers and the RAPL sysfs reader: no input makes them
//! panic, every error names its field or line, and generated valid files parse to the
//! numbers they were generated from.
//!
//! `PROPTEST_CASES=200000 cargo test -p wattline-actors --test fuzz_proc_parsers` for a
//! longer run.

#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;
#[path = "linux_support/mod.rs"]
mod linux_support;

use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::select;

use fuzz_support::{lossy, mutated, noise, runner_config, with_files};
use linux_support::{
    MEMINFO, NET_DEV, PRESSURE_CPU, PROC_IO, SMAPS_ROLLUP, STATUS, assert_names_field,
    assert_names_place,
};
use wattline_actors::platform::linux::meminfo::{MemInfo, parse_meminfo};
use wattline_actors::platform::linux::net_dev::{NetDevStats, parse_net_dev};
use wattline_actors::platform::linux::pressure::{Pressure, parse_pressure};
use wattline_actors::platform::linux::process_io::{ProcessIo, parse_process_io};
use wattline_actors::platform::linux::process_list::parse_children;
use wattline_actors::platform::linux::process_stat::{ProcessStat, parse_process_stat};
use wattline_actors::platform::linux::process_status::{ProcessStatus, parse_process_status};
use wattline_actors::platform::linux::rapl::read_rapl_zones;
use wattline_actors::platform::linux::smaps_rollup::{SmapsRollup, parse_smaps_rollup};
use wattline_actors::platform::linux::system_stat::parse_system_cpu_times;

/// Cases per test in CI; the parsers are pure, so this stays fast in debug builds.
const CI_CASES: u32 = 2000;
/// Cases per test that writes a fixture tree.
const CI_TREE_CASES: u32 = 300;
/// Most RAPL zones one case writes.
const MAX_RAPL_ZONES: usize = 4;

const KIB: u64 = 1024;

const PROC_STAT: &str = "1234 (my (weird) name) R 1 1234 1234 0 -1 4194560 1000 0 0 0 150 30 0 0 20 0 7 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n";
const SYSTEM_STAT: &str = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\ncpu1 50 3 25 500 10 2 1 1 0 0\nintr 1 0 0\nctxt 99\nbtime 1700000000\n";
const CHILDREN: &str = "12 345 6789 ";

const COLON_SAMPLES: &[&str] = &[MEMINFO, STATUS, SMAPS_ROLLUP, PROC_IO];
const TABLE_SAMPLES: &[&str] = &[NET_DEV, PRESSURE_CPU, PROC_STAT, SYSTEM_STAT, CHILDREN];

/// Values no `Key: value` field accepts, whether it wants a number or a `kB` size.
const INVALID_VALUES: &[&str] = &[
    "x",
    "-1",
    "-1 kB",
    "1.5",
    "1.5 kB",
    "",
    "18446744073709551616",
    "18446744073709551616 kB",
    "12 MB",
    "1 kB extra",
    "\u{fffd}",
];

/// Runs every `/proc` parser on `text`; each error must name a field or a line of it.
fn parse_all(text: &str) {
    assert_names_place(text, parse_meminfo(text).err());
    assert_names_place(text, parse_process_status(text).err());
    assert_names_place(text, parse_smaps_rollup(text).err());
    assert_names_place(text, parse_process_io(text).err());
    assert_names_place(text, parse_pressure(text).err());
    assert_names_place(text, parse_net_dev(text).err());
    if let Err(message) = parse_process_stat(text.as_bytes()) {
        assert!(message.contains('`'), "{message:?} names no field");
    }
    if let Err(message) = parse_system_cpu_times(text.as_bytes()) {
        assert!(message.contains("`cpu`"), "{message:?} names no field");
    }
    let mut children = Vec::new();
    parse_children(text.as_bytes(), &mut children);
}

/// A `Key: value` file: `fields` in order, each padded as the kernel pads it, with the
/// kernel's other lines between them.
fn colon_file(fields: &[(&str, String)], filler: &[&str]) -> String {
    let mut text = String::new();
    for (index, (key, value)) in fields.iter().enumerate() {
        if let Some(line) = filler.get(index) {
            text.push_str(line);
            text.push('\n');
        }
        let _ = writeln!(
            text,
            "{key}:{:>w$}",
            value,
            w = 16 - key.len().min(15) + value.len()
        );
    }
    text
}

/// A size in kB that fits in 64 bits once multiplied by 1024.
fn kib() -> impl Strategy<Value = u64> {
    prop_oneof![0..=u64::MAX / KIB, Just(u64::MAX / KIB), 0..100_000u64]
}

fn kb(value: u64) -> String {
    format!("{value} kB")
}

/// `fields` with the value of the one at `which` replaced by `bad`.
fn corrupt(fields: &mut [(&str, String)], which: usize, bad: &str) -> String {
    let key = fields[which].0.to_owned();
    fields[which].1 = bad.to_owned();
    key
}

fn meminfo_fields(values: &[u64; 7]) -> Vec<(&'static str, String)> {
    [
        "MemTotal",
        "MemFree",
        "MemAvailable",
        "Buffers",
        "Cached",
        "SReclaimable",
        "Shmem",
    ]
    .into_iter()
    .zip(values.iter().map(|v| kb(*v)))
    .collect()
}

const MEMINFO_FILLER: &[&str] = &[
    "SwapCached:   0 kB",
    "Active(anon):  1528 kB",
    "HugePages_Total:       0",
    "Hugepagesize:    2048 kB",
];

fn stat_line(comm: &str, stat: &ProcessStat) -> String {
    format!(
        "{} ({comm}) {} {} 77 77 0 -1 4194560 1000 0 0 0 {} {} 0 0 20 -5 {} 0 {} {} {} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
        stat.pid,
        stat.state as char,
        stat.parent_pid,
        stat.user_ticks,
        stat.system_ticks,
        stat.thread_count,
        stat.start_ticks,
        stat.virtual_bytes,
        stat.resident_pages
    )
}

fn process_stat() -> impl Strategy<Value = ProcessStat> {
    (
        any::<u32>(),
        any::<u32>(),
        select(b"RSDZTtXxKWPI".as_slice()),
        any::<[u64; 6]>(),
    )
        .prop_map(
            |(pid, parent_pid, state, [user, system, threads, start, virt, rss])| ProcessStat {
                pid,
                parent_pid,
                state,
                user_ticks: user,
                system_ticks: system,
                thread_count: threads,
                start_ticks: start,
                virtual_bytes: virt,
                resident_pages: rss,
            },
        )
}

/// A `net/dev` interface name: no `:`, no white space.
fn interface_name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.@ü-]{1,15}"
}

fn net_dev_text(interfaces: &[(String, [u64; 16])], tight: bool) -> String {
    let mut text = NET_DEV.lines().take(2).collect::<Vec<_>>().join("\n");
    text.push('\n');
    for (name, counters) in interfaces {
        let separator = if tight { "" } else { " " };
        let columns: Vec<String> = counters.iter().map(u64::to_string).collect();
        let _ = writeln!(text, "{name:>6}:{separator}{}", columns.join("    "));
    }
    text
}

fn rapl_content() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        2 => any::<u64>().prop_map(|n| Some(format!("{n}\n").into_bytes())),
        2 => fuzz_support::hostile_token().prop_map(Some),
        1 => Just(None),
    ]
}

/// What the readers make of a one-number file: the number, when it is one.
fn expected_number(content: &[u8]) -> Option<u64> {
    let text = lossy(content);
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn proc_parsers_never_panic_on_noise(bytes in noise()) {
        let text = lossy(&bytes);
        parse_all(&text);
        // The files with required keys never take noise for a reading.
        prop_assert!(parse_meminfo(&text).is_err());
        prop_assert!(parse_process_status(&text).is_err());
        prop_assert!(parse_smaps_rollup(&text).is_err());
        prop_assert!(parse_process_io(&text).is_err());
    }

    #[test]
    fn proc_parsers_never_panic_on_mutated_samples(
        bytes in prop_oneof![mutated(COLON_SAMPLES), mutated(TABLE_SAMPLES)],
    ) {
        parse_all(&lossy(&bytes));
    }

    #[test]
    fn meminfo_parses_to_the_generated_sizes(values in any::<[u64; 7]>().prop_map(|v| v.map(|n| n / KIB)), fill in 0..=4usize) {
        let text = colon_file(&meminfo_fields(&values), &MEMINFO_FILLER[..fill]);
        let [total, free, available, buffers, cached, sreclaimable, shmem] = values.map(|v| v * KIB);
        prop_assert_eq!(parse_meminfo(&text), Ok(MemInfo {
            total_bytes: total,
            free_bytes: free,
            available_bytes: Some(available),
            buffers_bytes: Some(buffers),
            cached_bytes: Some(cached),
            sreclaimable_bytes: Some(sreclaimable),
            shmem_bytes: Some(shmem),
        }));
    }

    #[test]
    fn a_bad_meminfo_value_is_named(
        values in any::<[u64; 7]>().prop_map(|v| v.map(|n| n / KIB)),
        which in 0..7usize,
        bad in prop_oneof![select(INVALID_VALUES).prop_map(str::to_owned), (u64::MAX / KIB + 1..).prop_map(kb)],
    ) {
        let mut fields = meminfo_fields(&values);
        let key = corrupt(&mut fields, which, &bad);
        let error = parse_meminfo(&colon_file(&fields, MEMINFO_FILLER));
        prop_assert!(error.is_err(), "{bad:?} accepted for {key}");
        assert_names_field(error.unwrap_err(), &key);
    }

    #[test]
    fn status_parses_to_the_generated_sizes(size in kib(), hwm in kib(), rss in kib(), threads in any::<u64>()) {
        let fields = [("VmSize", kb(size)), ("VmHWM", kb(hwm)), ("VmRSS", kb(rss)), ("Threads", threads.to_string())];
        let text = colon_file(&fields, &["Name:\tcat", "VmPeak:\t    3060 kB", "RssAnon:\t     112 kB"]);
        prop_assert_eq!(parse_process_status(&text), Ok(ProcessStatus {
            vm_size_bytes: Some(size * KIB),
            vm_hwm_bytes: Some(hwm * KIB),
            vm_rss_bytes: Some(rss * KIB),
            threads,
        }));
    }

    #[test]
    fn a_bad_status_value_is_named(which in 0..4usize, bad in select(INVALID_VALUES)) {
        let mut fields = [("VmSize", kb(3060)), ("VmHWM", kb(1732)), ("VmRSS", kb(1712)), ("Threads", "3".to_owned())];
        let key = corrupt(&mut fields, which, bad);
        let error = parse_process_status(&colon_file(&fields, &["Name:\tcat"]));
        prop_assert!(error.is_err(), "{bad:?} accepted for {key}");
        assert_names_field(error.unwrap_err(), &key);
    }

    #[test]
    fn smaps_rollup_parses_to_the_generated_sizes(rss in kib(), clean in kib(), dirty in kib(), hugetlb in proptest::option::of(kib())) {
        let mut fields = vec![("Rss", kb(rss)), ("Private_Clean", kb(clean)), ("Private_Dirty", kb(dirty))];
        if let Some(hugetlb) = hugetlb {
            fields.push(("Private_Hugetlb", kb(hugetlb)));
        }
        let header = "55c8ab217000-7ffff3c0c000 ---p 00000000 00:00 0                          [rollup]";
        let text = colon_file(&fields, &[header, "Pss:   481 kB"]);
        let parsed = parse_smaps_rollup(&text);
        prop_assert_eq!(&parsed, &Ok(SmapsRollup {
            rss_bytes: rss * KIB,
            private_clean_bytes: clean * KIB,
            private_dirty_bytes: dirty * KIB,
            private_hugetlb_bytes: hugetlb.map(|v| v * KIB),
        }));
        // The sum saturates instead of overflowing.
        let private = parsed.map(|p| p.private_bytes()).unwrap_or_default();
        prop_assert!(private >= (clean * KIB).max(dirty * KIB));
    }

    #[test]
    fn a_bad_smaps_rollup_value_is_named(which in 0..4usize, bad in select(INVALID_VALUES)) {
        let mut fields = [("Rss", kb(1760)), ("Private_Clean", kb(68)), ("Private_Dirty", kb(116)), ("Private_Hugetlb", kb(0))];
        let key = corrupt(&mut fields, which, bad);
        let error = parse_smaps_rollup(&colon_file(&fields, &[]));
        prop_assert!(error.is_err(), "{bad:?} accepted for {key}");
        assert_names_field(error.unwrap_err(), &key);
    }

    #[test]
    fn io_parses_to_the_generated_counters(values in any::<[u64; 4]>(), order in Just([0usize, 1, 2, 3]).prop_shuffle()) {
        let keys = ["read_bytes", "write_bytes", "syscr", "syscw"];
        let fields: Vec<(&str, String)> = order.iter().map(|&i| (keys[i], values[i].to_string())).collect();
        let text = colon_file(&fields, &["rchar: 6976", "wchar: 12"]);
        let [read_bytes, write_bytes, syscr, syscw] = values;
        prop_assert_eq!(parse_process_io(&text), Ok(ProcessIo { read_bytes, write_bytes, syscr, syscw }));
    }

    #[test]
    fn a_bad_io_value_is_named(which in 0..4usize, bad in select(INVALID_VALUES)) {
        let mut fields = [("read_bytes", "409600".to_owned()), ("write_bytes", "8192".to_owned()), ("syscr", "10".to_owned()), ("syscw", "3".to_owned())];
        let key = corrupt(&mut fields, which, bad);
        let error = parse_process_io(&colon_file(&fields, &[]));
        prop_assert!(error.is_err(), "{bad:?} accepted for {key}");
        assert_names_field(error.unwrap_err(), &key);
    }

    #[test]
    fn process_stat_parses_to_the_generated_fields(
        stat in process_stat(),
        comm in "[ -~]{0,15}",
    ) {
        prop_assert_eq!(parse_process_stat(stat_line(&comm, &stat).as_bytes()), Ok(stat));
    }

    #[test]
    fn a_bad_process_stat_field_is_named(
        stat in process_stat(),
        which in select(&[("ppid", 1usize), ("utime", 11), ("stime", 12), ("num_threads", 17), ("starttime", 19), ("vsize", 20)][..]),
        bad in select(&["x", "-1", "1.5", "18446744073709551616", "0x10", "\u{fffd}"][..]),
    ) {
        let (name, position) = which;
        let line = stat_line("cat", &stat);
        let (head, fields) = line.split_once(") ").unwrap_or_default();
        let mut fields: Vec<&str> = fields.split(' ').collect();
        fields[position] = bad;
        let line = format!("{head}) {}", fields.join(" "));
        let message = parse_process_stat(line.as_bytes());
        prop_assert!(message.is_err(), "{bad:?} accepted for {name}");
        let message = message.unwrap_err();
        prop_assert!(message.contains(name), "{message:?} does not name {name}");
    }

    #[test]
    fn system_stat_sums_the_generated_columns(
        columns in any::<[u64; 8]>().prop_map(|c| c.map(|n| n >> 4)),
        processors in 0..64usize,
    ) {
        let [user, nice, system, idle, iowait, irq, softirq, steal] = columns;
        let mut text = format!("cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0\n");
        for cpu in 0..processors {
            let _ = writeln!(text, "cpu{cpu} 1 2 3 4 5 6 7 8 0 0");
        }
        text.push_str("intr 1 2 3\nctxt 4\n");
        let times = parse_system_cpu_times(text.as_bytes()).map_err(TestCaseError::fail)?;
        let busy = user + nice + system + irq + softirq + steal;
        prop_assert_eq!(times.busy_ticks, busy);
        prop_assert_eq!(times.total_ticks, busy + idle + iowait);
        prop_assert_eq!(times.logical_processors, processors as u64);
    }

    #[test]
    fn system_stat_with_any_columns_is_a_reading_or_an_error(columns in proptest::collection::vec(any::<u64>(), 0..12)) {
        let columns: Vec<String> = columns.iter().map(u64::to_string).collect();
        let text = format!("cpu  {}\ncpu0 1 2 3 4\n", columns.join(" "));
        if let Ok(times) = parse_system_cpu_times(text.as_bytes()) {
            prop_assert!(times.total_ticks >= times.busy_ticks);
        }
    }

    #[test]
    fn pressure_parses_to_the_generated_totals(
        some in any::<u64>(),
        full in proptest::option::of(any::<u64>()),
        averages in any::<[u16; 3]>(),
    ) {
        let [a, b, c] = averages.map(|v| f64::from(v) / 100.0);
        let mut text = format!("some avg10={a:.2} avg60={b:.2} avg300={c:.2} total={some}\n");
        if let Some(full) = full {
            let _ = writeln!(text, "full avg10=0.00 avg60=0.00 avg300=0.00 total={full}");
        }
        prop_assert_eq!(parse_pressure(&text), Ok(Pressure { some_total_us: Some(some), full_total_us: full }));
    }

    #[test]
    fn a_bad_pressure_total_is_named(full in any::<bool>(), bad in select(&["x", "-1", "1.5", "", "18446744073709551616"][..])) {
        let (some_total, full_total) = if full { ("1".to_owned(), bad.to_owned()) } else { (bad.to_owned(), "1".to_owned()) };
        let text = format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={some_total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={full_total}\n");
        let error = parse_pressure(&text);
        prop_assert!(error.is_err());
        assert_names_field(error.unwrap_err(), if full { "full total" } else { "some total" });
    }

    #[test]
    fn net_dev_parses_to_the_generated_counters(
        interfaces in proptest::collection::vec((interface_name(), any::<[u64; 16]>()), 0..8),
        tight in any::<bool>(),
    ) {
        let expected: Vec<NetDevStats> = interfaces.iter().map(|(name, c)| NetDevStats {
            name: name.clone(),
            rx_bytes: c[0],
            rx_packets: c[1],
            rx_errs: c[2],
            tx_bytes: c[8],
            tx_packets: c[9],
            tx_errs: c[10],
        }).collect();
        prop_assert_eq!(parse_net_dev(&net_dev_text(&interfaces, tight)), Ok(expected));
    }

    #[test]
    fn a_bad_net_dev_counter_names_its_line(
        interfaces in proptest::collection::vec((interface_name(), any::<[u64; 16]>()), 1..8),
        row in any::<proptest::sample::Index>(),
        column in 0..16usize,
        bad in select(&["x", "-1", "1.5", "18446744073709551616", "\u{fffd}"][..]),
    ) {
        let row = row.index(interfaces.len());
        let text = net_dev_text(&interfaces, false);
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let (name, counters) = lines[row + 2].split_once(':').unwrap_or_default();
        let mut counters: Vec<&str> = counters.split_ascii_whitespace().collect();
        counters[column] = bad;
        lines[row + 2] = format!("{name}: {}", counters.join(" "));
        let error = parse_net_dev(&lines.join("\n"));
        prop_assert!(error.is_err());
        let shown = error.unwrap_err().to_string();
        prop_assert!(shown.starts_with(&format!("line {}: ", row + 3)), "{shown}");
        prop_assert!(shown.contains("`interface counter`"), "{shown}");
    }

    #[test]
    fn children_parse_to_the_generated_pids(pids in proptest::collection::vec(any::<u32>(), 0..64)) {
        let text: String = pids.iter().map(|pid| format!("{pid} ")).collect();
        let mut children = Vec::new();
        parse_children(text.as_bytes(), &mut children);
        prop_assert_eq!(children, pids);
    }
}

proptest! {
    #![proptest_config(runner_config(CI_TREE_CASES))]

    #[test]
    fn rapl_zones_read_back_or_name_their_file(
        zones in proptest::collection::vec((rapl_content(), rapl_content(), proptest::option::of("[a-z0-9-]{1,12}")), 0..=MAX_RAPL_ZONES),
    ) {
        let files = (0..MAX_RAPL_ZONES).flat_map(|index| {
            let zone = zones.get(index);
            [
                ("energy_uj", zone.and_then(|z| z.0.as_deref())),
                ("max_energy_range_uj", zone.and_then(|z| z.1.as_deref())),
                ("name", zone.and_then(|z| z.2.as_deref()).map(str::as_bytes)),
            ]
            .map(|(file, content)| (format!("sys/class/powercap/intel-rapl:{index}/{file}"), content))
        });
        let (read, errors) = with_files(files, read_rapl_zones)?;
        let mut expected_errors = 0;
        let mut expected = Vec::new();
        for (index, (energy, max, name)) in zones.iter().enumerate() {
            let zone = format!("intel-rapl:{index}");
            let Some(energy) = energy else { continue };
            let Some(energy) = expected_number(energy) else {
                expected_errors += 1;
                continue;
            };
            let max = match max {
                Some(max) => match expected_number(max) {
                    Some(max) => Some(max),
                    None => {
                        expected_errors += 1;
                        continue;
                    }
                },
                None => None,
            };
            expected.push((zone.clone(), name.clone().unwrap_or(zone), energy, max));
        }
        let read: Vec<_> = read.into_iter().map(|z| (z.zone, z.name, z.energy_microjoules, z.max_energy_range_microjoules)).collect();
        prop_assert_eq!(read, expected);
        prop_assert_eq!(errors.len(), expected_errors);
        for error in errors {
            let shown = error.to_string();
            let file = error.path().file_name().and_then(|f| f.to_str()).unwrap_or_default().to_owned();
            prop_assert!(file == "energy_uj" || file == "max_energy_range_uj", "{shown}");
            prop_assert!(shown.contains("intel-rapl:") && shown.contains(&file), "{shown}");
        }
    }
}

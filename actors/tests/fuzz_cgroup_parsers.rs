//! Property tests of the cgroup parsers (mountinfo, `/proc/PID/cgroup`, the v1 and v2
//! interface files) and of the group readers over a fuzzed group directory: no input
//! makes them panic, every error names its field, line or file, and generated valid
//! files parse to what they were generated from.
//!
//! `PROPTEST_CASES=200000 cargo test -p wattline-actors --test fuzz_cgroup_parsers` for
//! a longer run.

#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;
#[path = "linux_support/mod.rs"]
mod linux_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use proptest::prelude::*;
use proptest::sample::select;

use fuzz_support::{edge_u64, lossy, mutated, noise, runner_config, with_files};
use linux_support::{MOUNTINFO_HYBRID, MOUNTINFO_V2, assert_names_field, assert_names_place};
use wattline_actors::platform::linux::ParseError;
use wattline_actors::platform::linux::cgroup::{
    CgroupMountEntry, CgroupMountKind, ExclusiveGroup, ProcCgroup, V1Membership,
    parse_cgroup_mounts, parse_proc_cgroup, read_cgroup_readings, unescape_octal,
};
use wattline_actors::platform::linux::cgroup_files::{
    GroupDir, parse_cpuset_count, parse_pids_events, parse_single_u64,
};
use wattline_actors::platform::linux::{cgroup_v1, cgroup_v2};

/// Cases per test in CI; the parsers are pure, so this stays fast in debug builds.
const CI_CASES: u32 = 2000;
/// Cases per test that writes a group directory.
const CI_TREE_CASES: u32 = 300;

const PROC_CGROUP: &str = "12:pids:/user.slice/user-0.slice/session-2.scope\n11:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/user-0.slice/session-2.scope\n0::/user.slice/user-0.slice/session-2.scope\n";
const V2_CPU_STAT: &str = "usage_usec 123456\nuser_usec 100000\nsystem_usec 23456\nnr_periods 10\nnr_throttled 2\nthrottled_usec 5000\nnr_bursts 0\nburst_usec 0\n";
const V2_MEMORY_EVENTS: &str = "low 0\nhigh 3\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n";
const V1_CPU_STAT: &str = "nr_periods 10\nnr_throttled 2\nthrottled_time 5000000\n";
const V1_OOM_CONTROL: &str = "oom_kill_disable 0\nunder_oom 1\noom_kill 7\n";
const SINGLE_VALUES: &str = "max 100000\n";
const CPUSET: &str = "0-3,8,10-11\n";
const PIDS_EVENTS: &str = "max 12\n";

const SAMPLES: &[&str] = &[
    MOUNTINFO_HYBRID,
    MOUNTINFO_V2,
    PROC_CGROUP,
    V2_CPU_STAT,
    V2_MEMORY_EVENTS,
    V1_CPU_STAT,
    V1_OOM_CONTROL,
    SINGLE_VALUES,
    CPUSET,
    PIDS_EVENTS,
];

/// Values no numeric field accepts.
const INVALID_NUMBERS: &[&str] = &["x", "-1", "1.5", "18446744073709551616", "0x10", "\u{fffd}"];

/// Runs every cgroup parser on `text`; each error must name a field or a line of it.
fn parse_all(text: &str) {
    assert_names_place(text, parse_cgroup_mounts(text).err());
    assert_names_place(text, parse_proc_cgroup(text).err());
    assert_names_place(text, parse_cpuset_count(text).err());
    assert_names_place(text, parse_pids_events(text).err());
    assert_names_place(text, parse_single_u64("memory.current", text).err());
    assert_names_place(text, cgroup_v2::parse_cpu_stat(text).err());
    assert_names_place(text, cgroup_v2::parse_cpu_max(text).err());
    assert_names_place(text, cgroup_v2::parse_memory_events(text).err());
    assert_names_place(text, cgroup_v2::parse_memory_max(text).err());
    assert_names_place(text, cgroup_v1::parse_cpu_stat(text).err());
    assert_names_place(text, cgroup_v1::parse_oom_control(text).err());
    assert_names_place(text, cgroup_v1::parse_limit_in_bytes(text).err());
    assert_names_place(text, cgroup_v1::parse_cfs_quota(text).err());
    assert_names_place(text, cgroup_v1::parse_cfs_period(text).err());
    let _ = unescape_octal(text);
}

/// mountinfo's escaping: space, tab, newline and backslash as `\NNN`.
fn escape_octal(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => {
                let _ = write!(out, "\\{:03o}", c as u32);
            }
            other => out.push(other),
        }
    }
    out
}

/// A path as mountinfo may hold it: any printable text, spaces and newlines included.
fn mount_path() -> impl Strategy<Value = String> {
    "/[ -~\t\né]{0,24}"
}

#[derive(Debug, Clone)]
enum MountKind {
    V2,
    V1(Vec<&'static str>),
    Other(&'static str),
}

fn mount_kind() -> impl Strategy<Value = MountKind> {
    prop_oneof![
        Just(MountKind::V2),
        proptest::collection::vec(
            select(
                &[
                    "cpu",
                    "cpuacct",
                    "memory",
                    "pids",
                    "cpuset",
                    "name=systemd",
                    "rw",
                    "ro",
                    "xattr",
                    "noprefix",
                    "release_agent=/x"
                ][..]
            ),
            0..5,
        )
        .prop_map(MountKind::V1),
        select(&["ext4", "tmpfs", "proc", "cgroup2fs"][..]).prop_map(MountKind::Other),
    ]
}

fn mountinfo_line(
    id: usize,
    root: &str,
    mount_point: &str,
    optional: usize,
    kind: &MountKind,
) -> String {
    let optional: String = (0..optional).map(|i| format!(" shared:{i}")).collect();
    let (fs_type, super_options) = match kind {
        MountKind::V2 => ("cgroup2".to_owned(), "rw,nsdelegate".to_owned()),
        MountKind::V1(options) => ("cgroup".to_owned(), options.join(",")),
        MountKind::Other(fs) => ((*fs).to_owned(), "rw".to_owned()),
    };
    format!(
        "{id} 1 0:{id} {} {} rw,relatime{optional} - {fs_type} {fs_type} {super_options}\n",
        escape_octal(root),
        escape_octal(mount_point)
    )
}

fn expected_mount(root: &str, mount_point: &str, kind: &MountKind) -> Option<CgroupMountEntry> {
    let kind = match kind {
        MountKind::V2 => CgroupMountKind::V2,
        MountKind::V1(options) => CgroupMountKind::V1 {
            controllers: options
                .iter()
                .filter(|o| !["rw", "ro", "xattr", "noprefix"].contains(o))
                .filter(|o| !o.contains('=') || o.starts_with("name="))
                .map(|o| (*o).to_owned())
                .collect(),
        },
        MountKind::Other(_) => return None,
    };
    Some(CgroupMountEntry {
        mount_point: mount_point.to_owned(),
        cgroup_root: root.to_owned(),
        kind,
    })
}

/// A flat-keyed file (`key value` lines) from `fields`.
fn flat_keyed(fields: &[(&str, String)]) -> String {
    fields
        .iter()
        .map(|(key, value)| format!("{key} {value}\n"))
        .collect()
}

/// A flat-keyed file's parser, answering only its error.
type FlatKeyedParser = fn(&str) -> Option<ParseError>;

/// Flat-keyed files: a key the parser reads, the key to spoil, and the parser.
const FLAT_KEYED_FILES: &[(&str, &str, FlatKeyedParser)] = &[
    ("usage_usec", "nr_throttled", |text| {
        cgroup_v2::parse_cpu_stat(text).err()
    }),
    ("high", "oom_kill", |text| {
        cgroup_v2::parse_memory_events(text).err()
    }),
    ("nr_periods", "throttled_time", |text| {
        cgroup_v1::parse_cpu_stat(text).err()
    }),
    ("oom_kill_disable", "under_oom", |text| {
        cgroup_v1::parse_oom_control(text).err()
    }),
    ("nr_periods", "max", |text| parse_pids_events(text).err()),
];

/// Content for one file of a fuzzed group: valid, a mutated sample, or absent.
fn group_file(valid: &'static [&'static str]) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        2 => select(valid).prop_map(|text| Some(text.as_bytes().to_vec())),
        2 => mutated(valid).prop_map(Some),
        1 => Just(None),
    ]
}

/// The files a group directory can hold, each with the samples to start from.
const GROUP_FILES: &[(&str, &[&str])] = &[
    ("cpu.stat", &[V2_CPU_STAT, V1_CPU_STAT]),
    ("cpu.max", &["max 100000\n", "150000 100000\n", "50000\n"]),
    (
        "cpu.pressure",
        &[
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=12\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n",
        ],
    ),
    (
        "memory.pressure",
        &["some avg10=0.00 avg60=0.00 avg300=0.00 total=12\n"],
    ),
    ("memory.current", &["4096\n"]),
    ("memory.max", &["max\n", "1073741824\n"]),
    ("memory.events", &[V2_MEMORY_EVENTS]),
    ("pids.events", &[PIDS_EVENTS]),
    ("cpuset.cpus.effective", &[CPUSET, "0\n"]),
    ("memory.usage_in_bytes", &["4096\n"]),
    ("memory.failcnt", &["0\n"]),
    ("memory.oom_control", &[V1_OOM_CONTROL]),
    (
        "memory.limit_in_bytes",
        &["9223372036854771712\n", "1073741824\n"],
    ),
    ("cpu.cfs_quota_us", &["-1\n", "50000\n"]),
    ("cpu.cfs_period_us", &["100000\n", "0\n"]),
    ("cpuacct.usage", &["123456789\n"]),
    ("cpuset.effective_cpus", &[CPUSET]),
    ("cpuset.cpus", &["0-1\n"]),
];

fn group_contents() -> impl Strategy<Value = Vec<Option<Vec<u8>>>> {
    GROUP_FILES
        .iter()
        .map(|(_, samples)| group_file(samples))
        .collect::<Vec<_>>()
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn cgroup_parsers_never_panic_on_noise(bytes in noise()) {
        parse_all(&lossy(&bytes));
    }

    #[test]
    fn cgroup_parsers_never_panic_on_mutated_samples(bytes in mutated(SAMPLES)) {
        parse_all(&lossy(&bytes));
    }

    #[test]
    fn octal_escapes_decode_to_what_was_escaped(text in "[ -~\t\né\u{1F600}]{0,40}") {
        prop_assert_eq!(unescape_octal(&escape_octal(&text)), text);
    }

    #[test]
    fn mountinfo_parses_to_the_generated_cgroup_mounts(
        mounts in proptest::collection::vec((mount_path(), mount_path(), 0..3usize, mount_kind()), 0..8),
    ) {
        let text: String = mounts.iter().enumerate()
            .map(|(id, (root, point, optional, kind))| mountinfo_line(id, root, point, *optional, kind))
            .collect();
        let expected: Vec<CgroupMountEntry> = mounts.iter()
            .filter_map(|(root, point, _, kind)| expected_mount(root, point, kind))
            .collect();
        prop_assert_eq!(parse_cgroup_mounts(&text), Ok(expected));
    }

    #[test]
    fn proc_cgroup_parses_to_the_generated_memberships(
        v1 in proptest::collection::vec(
            (1..64u64, proptest::collection::vec(select(&["cpu", "cpuacct", "memory", "pids", "name=systemd"][..]), 1..3), "/[a-z0-9:._@-]{0,30}"),
            0..6,
        ),
        unified in proptest::option::of("/[a-z0-9:._@ -]{0,30}"),
    ) {
        let mut text = String::new();
        for (id, controllers, path) in &v1 {
            let _ = writeln!(text, "{id}:{}:{path}", controllers.join(","));
        }
        if let Some(path) = &unified {
            let _ = writeln!(text, "0::{path}");
        }
        let expected = ProcCgroup {
            unified,
            v1: v1.iter().map(|(_, controllers, path)| V1Membership {
                controllers: controllers.iter().map(|c| (*c).to_owned()).collect(),
                path: path.clone(),
            }).collect(),
        };
        prop_assert_eq!(parse_proc_cgroup(&text), Ok(expected));
    }

    #[test]
    fn a_bad_hierarchy_id_is_named(bad in select(INVALID_NUMBERS)) {
        let error = parse_proc_cgroup(&format!("0::/\n{bad}:memory:/a\n"));
        prop_assert!(error.is_err());
        assert_names_field(error.unwrap_err(), "hierarchy-id");
    }

    #[test]
    fn v2_cpu_stat_parses_to_the_generated_counters(values in any::<[u64; 3]>(), extra in any::<u64>()) {
        let [usage, throttled_count, throttled_time] = values;
        let text = flat_keyed(&[
            ("usage_usec", usage.to_string()),
            ("user_usec", extra.to_string()),
            ("nr_throttled", throttled_count.to_string()),
            ("throttled_usec", throttled_time.to_string()),
            ("nr_bursts", "0".into()),
        ]);
        prop_assert_eq!(cgroup_v2::parse_cpu_stat(&text), Ok(cgroup_v2::CpuStat {
            usage_usec: Some(usage),
            nr_throttled: Some(throttled_count),
            throttled_usec: Some(throttled_time),
        }));
    }

    #[test]
    fn v2_memory_events_parse_to_the_generated_counts(values in any::<[u64; 4]>()) {
        let [high, max, oom, oom_kill] = values;
        let text = flat_keyed(&[
            ("low", "0".into()),
            ("high", high.to_string()),
            ("max", max.to_string()),
            ("oom", oom.to_string()),
            ("oom_kill", oom_kill.to_string()),
            ("oom_group_kill", "0".into()),
        ]);
        prop_assert_eq!(cgroup_v2::parse_memory_events(&text), Ok(cgroup_v2::MemoryEvents {
            high: Some(high),
            max: Some(max),
            oom: Some(oom),
            oom_kill: Some(oom_kill),
        }));
    }

    #[test]
    fn a_bad_flat_keyed_value_is_named(
        file in select(FLAT_KEYED_FILES),
        bad in select(INVALID_NUMBERS),
    ) {
        let (good, key, parse) = file;
        let text = flat_keyed(&[(good, "1".into()), (key, bad.into())]);
        match parse(&text) {
            Some(error) => assert_names_field(error, key),
            None => prop_assert!(false, "{text:?} accepted"),
        }
    }

    #[test]
    fn v1_cpu_stat_and_oom_control_parse_to_the_generated_values(values in any::<[u64; 4]>(), under_oom in any::<bool>()) {
        let [periods, throttled, time, kills] = values;
        let stat = flat_keyed(&[("nr_periods", periods.to_string()), ("nr_throttled", throttled.to_string()), ("throttled_time", time.to_string())]);
        prop_assert_eq!(cgroup_v1::parse_cpu_stat(&stat), Ok(cgroup_v1::CpuStat {
            nr_periods: Some(periods),
            nr_throttled: Some(throttled),
            throttled_time_ns: Some(time),
        }));
        let control = flat_keyed(&[("oom_kill_disable", "0".into()), ("under_oom", u8::from(under_oom).to_string()), ("oom_kill", kills.to_string())]);
        prop_assert_eq!(cgroup_v1::parse_oom_control(&control), Ok(cgroup_v1::OomControl {
            under_oom: Some(under_oom),
            oom_kill: Some(kills),
        }));
    }

    #[test]
    fn limits_parse_to_the_generated_values(value in any::<u64>(), period in 1..=u64::MAX) {
        prop_assert_eq!(cgroup_v2::parse_memory_max(&format!("{value}\n")), Ok(Some(value)));
        prop_assert_eq!(cgroup_v2::parse_memory_max("max\n"), Ok(None));
        let limit = cgroup_v1::parse_limit_in_bytes(&format!("{value}\n"));
        prop_assert_eq!(limit, Ok((value < cgroup_v1::UNLIMITED_AT_OR_ABOVE).then_some(value)));
        prop_assert_eq!(cgroup_v1::parse_cfs_quota(&format!("{value}\n")), Ok(Some(value)));
        prop_assert_eq!(cgroup_v1::parse_cfs_period(&format!("{period}\n")), Ok(period));
        let max = cgroup_v2::parse_cpu_max(&format!("{value} {period}\n"));
        prop_assert_eq!(&max, &Ok(cgroup_v2::CpuMax { quota_us: Some(value), period_us: period }));
        let cpus = max.ok().and_then(|m| m.limit_cpus()).unwrap_or(f64::NAN);
        prop_assert!(cpus.is_finite() && cpus >= 0.0);
        prop_assert_eq!(parse_single_u64("memory.current", &format!("{value}\n")), Ok(value));
    }

    #[test]
    fn a_bad_limit_is_named(bad in select(INVALID_NUMBERS), period_bad in any::<bool>()) {
        let (text, field) = if period_bad { (format!("max {bad}"), "cpu.max period") } else { (format!("{bad} 100000"), "cpu.max quota") };
        let error = cgroup_v2::parse_cpu_max(&text);
        prop_assert!(error.is_err());
        assert_names_field(error.unwrap_err(), field);
        // `-1` is v1's "no quota".
        if bad != "-1" {
            let error = cgroup_v1::parse_cfs_quota(bad);
            prop_assert!(error.is_err());
            assert_names_field(error.unwrap_err(), "cpu.cfs_quota_us");
        }
        let error = cgroup_v2::parse_memory_max(bad);
        prop_assert!(error.is_err());
        assert_names_field(error.unwrap_err(), "memory.max");
    }

    #[test]
    fn cpuset_counts_the_generated_cpus(
        ranges in proptest::collection::vec((0..4096u64, 0..64u64), 0..12),
    ) {
        let text: Vec<String> = ranges.iter().map(|(low, width)| match width {
            0 => low.to_string(),
            _ => format!("{low}-{}", low + width),
        }).collect();
        let expected: u64 = ranges.iter().map(|(_, width)| width + 1).sum();
        prop_assert_eq!(parse_cpuset_count(&format!("{}\n", text.join(","))), Ok(expected));
    }

    #[test]
    fn cpuset_with_any_bounds_is_a_count_or_an_error(bounds in proptest::collection::vec((edge_u64(), edge_u64()), 1..4)) {
        let text: Vec<String> = bounds.iter().map(|(low, high)| format!("{low}-{high}")).collect();
        match parse_cpuset_count(&text.join(",")) {
            Ok(count) => prop_assert!(count >= 1),
            Err(error) => assert_names_field(error, "cpus"),
        }
    }
}

proptest! {
    #![proptest_config(runner_config(CI_TREE_CASES))]

    #[test]
    fn group_readers_never_panic_and_name_the_file_that_failed(contents in group_contents()) {
        let files = GROUP_FILES
            .iter()
            .zip(&contents)
            .map(|((file, _), content)| (format!("sys/fs/cgroup/app.slice/{file}"), content.as_deref()));
        let (readings, errors) = with_files(files, |root| {
            let mount = root.join("sys/fs/cgroup");
            let group = GroupDir { dir: mount.join("app.slice"), mount };
            let v1: BTreeMap<String, GroupDir> = ["memory", "cpu", "cpuacct", "cpuset", "pids"]
                .into_iter()
                .map(|controller| (controller.to_owned(), group.clone()))
                .collect();
            read_cgroup_readings(&ExclusiveGroup { unified: Some(group), v1 })
        })?;
        for error in &errors {
            let file = error.path().file_name().and_then(|f| f.to_str()).unwrap_or_default();
            prop_assert!(GROUP_FILES.iter().any(|(name, _)| *name == file), "{error}");
            prop_assert!(error.to_string().contains(file), "{error}");
        }
        for limit in [readings.cpu_quota_limit, readings.effective_cpu_limit].into_iter().flatten() {
            prop_assert!(limit >= 0.0 && !limit.is_nan(), "{readings:?}");
        }
    }
}

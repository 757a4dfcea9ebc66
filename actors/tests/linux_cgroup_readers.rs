//! Linux OS readers: cgroups: mountinfo and layout, /proc/PID/cgroup and the small formats, cgroup v2 fixture trees and the hybrid v1 layout of this machine. Parsers on real-format text, fixture trees under a temp
//! root, and smoke tests against this machine's real `/proc`.

#[path = "linux_support/mod.rs"]
mod linux_support;

use std::fs;
use std::path::{Path, PathBuf};

use wattline_actors::ReadErrorClass;
use wattline_actors::platform::linux::ParseError;
use wattline_actors::platform::linux::cgroup::{
    CgroupLayout, CgroupMount, CgroupMountEntry, CgroupMountKind, ProcCgroup, V1Membership,
    find_exclusive_group, parse_cgroup_mounts, parse_proc_cgroup, read_cgroup_layout,
    read_cgroup_readings, read_proc_cgroup, unescape_octal,
};
use wattline_actors::platform::linux::cgroup_files::{
    CgroupReadings, GroupDir, parse_cpuset_count, parse_pids_events,
};
use wattline_actors::platform::linux::cgroup_v1;
use wattline_actors::platform::linux::cgroup_v2;

use linux_support::*;

// cgroup: mountinfo and layout
// ---------------------------------------------------------------------------------

fn mount(fx: &Fixture, rel: &str) -> CgroupMount {
    CgroupMount {
        dir: fx.path(rel),
        cgroup_root: "/".into(),
    }
}

#[test]
fn mountinfo_hybrid_like_this_machine() {
    let mounts = parse_cgroup_mounts(MOUNTINFO_HYBRID).expect("parse");
    assert_eq!(mounts.len(), 10);
    assert_eq!(
        mounts[0],
        CgroupMountEntry {
            mount_point: "/sys/fs/cgroup/cpu".into(),
            cgroup_root: "/".into(),
            kind: CgroupMountKind::V1 {
                controllers: vec!["cpu".into()]
            },
        }
    );
    assert_eq!(
        mounts[8].kind,
        CgroupMountKind::V1 {
            controllers: vec!["name=systemd".into()]
        }
    );
    assert_eq!(mounts[9].kind, CgroupMountKind::V2);

    let fx = Fixture::new();
    let layout = CgroupLayout::from_mounts(fx.root(), &mounts);
    let CgroupLayout::Hybrid {
        controllers,
        unified,
    } = &layout
    else {
        panic!("expected hybrid, got {layout:?}");
    };
    assert_eq!(*unified, mount(&fx, "sys/fs/cgroup/unified"));
    assert_eq!(
        controllers.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "blkio",
            "cpu",
            "cpuacct",
            "cpuset",
            "devices",
            "freezer",
            "memory",
            "name=systemd",
            "pids"
        ]
    );
    assert_eq!(controllers["memory"], mount(&fx, "sys/fs/cgroup/memory"));
    assert_eq!(
        layout.v1_controller("cpuacct"),
        Some(&mount(&fx, "sys/fs/cgroup/cpuacct"))
    );
}

#[test]
fn mountinfo_pure_v2_v1_only_and_none() {
    let fx = Fixture::new();
    let v2 = parse_cgroup_mounts(MOUNTINFO_V2).expect("parse");
    assert_eq!(
        CgroupLayout::from_mounts(fx.root(), &v2),
        CgroupLayout::V2 {
            mount: mount(&fx, "sys/fs/cgroup")
        }
    );

    let v1_text = "\
31 23 0:28 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:11 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:14 - cgroup cgroup rw,memory
";
    let v1 = parse_cgroup_mounts(v1_text).expect("parse");
    let layout = CgroupLayout::from_mounts(fx.root(), &v1);
    let cpu = CgroupMount {
        dir: fx.path("sys/fs/cgroup/cpu,cpuacct"),
        cgroup_root: "/docker/abc".into(),
    };
    assert_eq!(layout.v1_controller("cpu"), Some(&cpu));
    assert_eq!(layout.v1_controller("cpuacct"), Some(&cpu));
    assert!(matches!(layout, CgroupLayout::V1 { .. }));
    assert_eq!(layout.unified(), None);

    let none = parse_cgroup_mounts("22 27 0:21 / /proc rw - proc proc rw\n").expect("parse");
    assert_eq!(none, vec![]);
    assert_eq!(
        CgroupLayout::from_mounts(fx.root(), &none),
        CgroupLayout::None
    );
}

#[test]
fn mountinfo_escapes_and_errors() {
    let text = "41 31 0:38 / /sys/fs/cgroup/my\\040cg\\134x rw - cgroup2 cgroup2 rw\n";
    let mounts = parse_cgroup_mounts(text).expect("parse");
    assert_eq!(mounts[0].mount_point, "/sys/fs/cgroup/my cg\\x");
    assert_eq!(unescape_octal("a\\011b\\012c\\9"), "a\tb\nc\\9");
    assert_eq!(unescape_octal("end\\04"), "end\\04");
    assert!(matches!(
        parse_cgroup_mounts("41 31 0:38 / /x rw cgroup2 cgroup2 rw\n"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
    assert!(matches!(
        parse_cgroup_mounts("41 31 - cgroup2 cgroup2 rw\n"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn layout_reader_absent_mountinfo_is_none() {
    let fx = Fixture::new();
    assert_eq!(read_cgroup_layout(fx.root()).expect("ok"), None);
    fx.file("proc/self/mountinfo", MOUNTINFO_V2);
    assert_eq!(
        read_cgroup_layout(fx.root()).expect("ok"),
        Some(CgroupLayout::V2 {
            mount: mount(&fx, "sys/fs/cgroup")
        })
    );
}

/// On the real machine every hierarchy in our own `/proc/self/cgroup` must resolve to
/// an existing directory under the detected mounts.
#[test]
fn real_layout_resolves_own_groups() {
    let root = Path::new("/");
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let Some(layout) = read_cgroup_layout(root).expect("read mountinfo") else {
        // No layout only where nothing of cgroup is mounted.
        assert!(
            !mountinfo.contains(" - cgroup"),
            "a cgroup mount that read_cgroup_layout missed:\n{mountinfo}"
        );
        return;
    };
    let has_v2 = mountinfo.lines().any(|l| l.contains(" - cgroup2 "));
    assert_eq!(layout.unified().is_some(), has_v2);
    let mut buf = Vec::new();
    let own = read_proc_cgroup(root, std::process::id(), &mut buf)
        .expect("read")
        .expect("present");
    if let (Some(mount), Some(path)) = (layout.unified(), own.unified.as_deref())
        && let Some(group) = mount.group(path)
    {
        assert!(group.dir.is_dir(), "{group:?}");
    }
    for controller in ["memory", "cpu", "pids"] {
        if let (Some(mount), Some(path)) =
            (layout.v1_controller(controller), own.v1_path(controller))
            && let Some(group) = mount.group(path)
        {
            assert!(group.dir.is_dir(), "{controller}: {group:?}");
        }
    }
}

// ---------------------------------------------------------------------------------
// cgroup: /proc/PID/cgroup and small file formats
// ---------------------------------------------------------------------------------

#[test]
fn proc_cgroup_parses_hybrid_lines() {
    let text =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/d2374a70\n2:cpu,cpuacct:/a:b\n0::/\n";
    let parsed = parse_proc_cgroup(text).expect("parse");
    assert_eq!(
        parsed,
        ProcCgroup {
            unified: Some("/".into()),
            v1: vec![
                V1Membership {
                    controllers: vec!["name=systemd".into()],
                    path: "/".into()
                },
                V1Membership {
                    controllers: vec!["pids".into()],
                    path: "/".into()
                },
                V1Membership {
                    controllers: vec!["memory".into()],
                    path: "/process_api/d2374a70".into()
                },
                V1Membership {
                    controllers: vec!["cpu".into(), "cpuacct".into()],
                    path: "/a:b".into()
                },
            ],
        }
    );
    assert_eq!(parsed.v1_path("cpuacct"), Some("/a:b"));
    assert_eq!(parsed.v1_path("blkio"), None);
    assert_eq!(
        parse_proc_cgroup("0::/user.slice/session-2.scope\n")
            .unwrap()
            .unified
            .as_deref(),
        Some("/user.slice/session-2.scope")
    );
}

#[test]
fn proc_cgroup_rejects_garbage() {
    assert!(matches!(
        parse_proc_cgroup("garbage"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
    assert_eq!(
        parse_proc_cgroup("x:memory:/\n"),
        Err(ParseError::InvalidValue {
            field: "hierarchy-id",
            value: "x".into()
        })
    );
    assert!(matches!(
        parse_proc_cgroup("0::\n"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn cgroup_mount_resolves_paths_under_its_root() {
    let m = CgroupMount {
        dir: PathBuf::from("/r/sys/fs/cgroup/memory"),
        cgroup_root: "/docker/abc".into(),
    };
    assert_eq!(
        m.group("/docker/abc/sub"),
        Some(GroupDir {
            dir: PathBuf::from("/r/sys/fs/cgroup/memory/sub"),
            mount: PathBuf::from("/r/sys/fs/cgroup/memory"),
        })
    );
    assert_eq!(
        m.group("/docker/abc").map(|g| g.dir),
        Some(PathBuf::from("/r/sys/fs/cgroup/memory"))
    );
    assert_eq!(m.group("/docker/abcdef"), None);
    assert_eq!(m.group("/other"), None);
    let plain = CgroupMount {
        dir: PathBuf::from("/r/cg"),
        cgroup_root: "/".into(),
    };
    assert_eq!(plain.group("/../../etc"), None);
    let g = plain.group("/a/b").expect("resolves");
    let ancestors: Vec<&Path> = g.ancestors().collect();
    assert_eq!(
        ancestors,
        [
            Path::new("/r/cg/a/b"),
            Path::new("/r/cg/a"),
            Path::new("/r/cg")
        ]
    );
}

#[test]
fn cpuset_counts() {
    assert_eq!(parse_cpuset_count("0-3,8,10-11\n"), Ok(7));
    assert_eq!(parse_cpuset_count("0"), Ok(1));
    assert_eq!(parse_cpuset_count("\n"), Ok(0));
    assert_eq!(
        parse_cpuset_count("3-1"),
        Err(ParseError::InvalidValue {
            field: "cpus",
            value: "3-1".into()
        })
    );
    assert!(parse_cpuset_count("0-").is_err());
    assert!(parse_cpuset_count("zero").is_err());
}

#[test]
fn cpuset_of_every_u64_is_an_overflow_not_a_panic() {
    // Found by fuzz_cgroup_parsers: `high - low + 1` overflowed (a panic in debug builds).
    assert_eq!(
        parse_cpuset_count("0-18446744073709551615"),
        Err(ParseError::Overflow("cpus"))
    );
    assert_eq!(parse_cpuset_count("1-18446744073709551615"), Ok(u64::MAX));
}

#[test]
fn v2_small_formats() {
    assert_eq!(cgroup_v2::parse_memory_max("max\n"), Ok(None));
    assert_eq!(
        cgroup_v2::parse_memory_max("536870912\n"),
        Ok(Some(512 * MIB))
    );
    assert!(cgroup_v2::parse_memory_max("lots").is_err());

    let unlimited = cgroup_v2::parse_cpu_max("max 100000\n").expect("parse");
    assert_eq!(unlimited.quota_us, None);
    assert_eq!(unlimited.limit_cpus(), None);
    assert_eq!(
        cgroup_v2::parse_cpu_max("150000 100000\n")
            .unwrap()
            .limit_cpus(),
        Some(1.5)
    );
    assert_eq!(
        cgroup_v2::parse_cpu_max("50000").unwrap().limit_cpus(),
        Some(0.5)
    );
    assert!(cgroup_v2::parse_cpu_max("1000 0").is_err());
    assert!(cgroup_v2::parse_cpu_max("").is_err());
    assert!(cgroup_v2::parse_cpu_max("1 2 3").is_err());

    let stat = "usage_usec 86143864\nuser_usec 63471781\nsystem_usec 22672082\nnice_usec 0\n";
    assert_eq!(
        cgroup_v2::parse_cpu_stat(stat),
        Ok(cgroup_v2::CpuStat {
            usage_usec: Some(86_143_864),
            nr_throttled: None,
            throttled_usec: None,
        })
    );
    assert!(matches!(
        cgroup_v2::parse_cpu_stat("usage_usec 1 2\n"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
    assert_eq!(parse_pids_events("max 3\nmax.imposed 0\n"), Ok(Some(3)));
    assert_eq!(parse_pids_events(""), Ok(None));
}

#[test]
fn v1_small_formats() {
    assert_eq!(
        cgroup_v1::parse_limit_in_bytes("9223372036854771712\n"),
        Ok(None)
    );
    assert_eq!(
        cgroup_v1::parse_limit_in_bytes("4611686018427387904"),
        Ok(None)
    );
    assert_eq!(
        cgroup_v1::parse_limit_in_bytes("4611686018427387903"),
        Ok(Some(4_611_686_018_427_387_903))
    );
    assert!(cgroup_v1::parse_limit_in_bytes("-1").is_err());
    assert_eq!(cgroup_v1::parse_cfs_quota("-1\n"), Ok(None));
    assert_eq!(cgroup_v1::parse_cfs_quota("150000\n"), Ok(Some(150_000)));
    assert!(cgroup_v1::parse_cfs_quota("-5").is_err());
    assert!(cgroup_v1::parse_cfs_period("0").is_err());
    assert_eq!(
        cgroup_v1::parse_oom_control("oom_kill_disable 0\nunder_oom 1\noom_kill 4\n"),
        Ok(cgroup_v1::OomControl {
            under_oom: Some(true),
            oom_kill: Some(4),
        })
    );
    assert_eq!(
        cgroup_v1::parse_cpu_stat(
            "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000\nnr_bursts 0\nburst_time 0\n"
        ),
        Ok(cgroup_v1::CpuStat {
            nr_periods: Some(10),
            nr_throttled: Some(4),
            throttled_time_ns: Some(2_500_000),
        })
    );
}

// ---------------------------------------------------------------------------------
// cgroup v2 fixture trees
// ---------------------------------------------------------------------------------

const JOB: &str = "sys/fs/cgroup/wattline.slice/job.scope";

/// Pure v2 host: pids 100 and 101 alone in `/wattline.slice/job.scope` (plus an empty
/// child group), with throttling, events, pressure and limits.
fn v2_fixture() -> Fixture {
    let fx = Fixture::new();
    fx.file("proc/self/mountinfo", MOUNTINFO_V2)
        .file("proc/100/cgroup", "0::/wattline.slice/job.scope\n")
        .file("proc/101/cgroup", "0::/wattline.slice/job.scope\n")
        .file("proc/1/cgroup", "0::/init.scope\n")
        .file("sys/fs/cgroup/cgroup.procs", "")
        .file("sys/fs/cgroup/cpuset.cpus.effective", "0-7\n")
        .file("sys/fs/cgroup/init.scope/cgroup.procs", "1\n")
        .file("sys/fs/cgroup/wattline.slice/cgroup.procs", "")
        .file("sys/fs/cgroup/wattline.slice/memory.max", "max\n")
        .file("sys/fs/cgroup/wattline.slice/cpu.max", "max 100000\n")
        .file("sys/fs/cgroup/wattline.slice/cpuset.cpus.effective", "0-7\n")
        .file(&format!("{JOB}/cgroup.procs"), "100\n101\n")
        .file(
            &format!("{JOB}/cpu.stat"),
            "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\nnr_periods 500\nnr_throttled 42\nthrottled_usec 987654\nnr_bursts 0\nburst_usec 0\n",
        )
        .file(&format!("{JOB}/memory.current"), "104857600\n")
        .file(
            &format!("{JOB}/memory.events"),
            "low 0\nhigh 17\nmax 5\noom 2\noom_kill 1\noom_group_kill 0\n",
        )
        .file(&format!("{JOB}/pids.events"), "max 3\n")
        .file(
            &format!("{JOB}/cpu.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5555\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=4444\n",
        )
        .file(
            &format!("{JOB}/memory.pressure"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=333\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=222\n",
        )
        .file(&format!("{JOB}/memory.max"), "1073741824\n")
        .file(&format!("{JOB}/cpu.max"), "150000 100000\n")
        .file(&format!("{JOB}/cpuset.cpus.effective"), "0-3\n")
        .file(&format!("{JOB}/idle/cgroup.procs"), "");
    fx
}

fn layout_of(fx: &Fixture) -> CgroupLayout {
    read_cgroup_layout(fx.root())
        .expect("read")
        .expect("mountinfo present")
}

#[test]
fn v2_exclusive_group_readings() {
    let fx = v2_fixture();
    let layout = layout_of(&fx);
    let group = find_exclusive_group(fx.root(), &layout, &[101, 100], None)
        .expect("ok")
        .expect("exclusive");
    assert_eq!(
        group.unified,
        Some(GroupDir {
            dir: fx.path(JOB),
            mount: fx.path("sys/fs/cgroup"),
        })
    );
    assert!(group.v1.is_empty());
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        readings,
        CgroupReadings {
            cpu_usage_us: Some(1_234_567),
            cpu_nr_throttled: Some(42),
            cpu_throttled_us: Some(987_654),
            cpu_quota_limit: Some(1.5),
            cpuset_cpu_count: Some(4),
            effective_cpu_limit: Some(1.5),
            cpu_pressure_some_us: Some(5555),
            cpu_pressure_full_us: Some(4444),
            memory_current_bytes: Some(100 * MIB),
            memory_limit_bytes: Some(GIB),
            memory_high_events: Some(17),
            memory_max_events: Some(5),
            memory_oom_events: Some(2),
            memory_oom_kill_events: Some(1),
            memory_failcnt: None,
            memory_under_oom: None,
            memory_pressure_some_us: Some(333),
            memory_pressure_full_us: Some(222),
            pids_max_events: Some(3),
        }
    );
}

#[test]
fn v2_group_with_foreign_pid_is_not_exclusive() {
    let fx = v2_fixture();
    fx.file(&format!("{JOB}/cgroup.procs"), "100\n101\n999\n");
    assert_eq!(
        find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101], None).expect("ok"),
        None
    );
}

#[test]
fn v2_child_group_with_foreign_pid_is_not_exclusive() {
    let fx = v2_fixture();
    fx.file(&format!("{JOB}/worker/cgroup.procs"), "555\n");
    assert_eq!(
        find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101], None).expect("ok"),
        None
    );
}

#[test]
fn v2_pids_in_different_groups_or_missing_from_group_are_not_exclusive() {
    let fx = v2_fixture();
    let layout = layout_of(&fx);
    // pid 1 lives in init.scope: the measured pids do not share one group.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100, 1], None).expect("ok"),
        None
    );
    // Measuring only 100 while 101 shares the group.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100], None).expect("ok"),
        None
    );
    // A pid that claims the group but is not in cgroup.procs.
    fx.file("proc/102/cgroup", "0::/wattline.slice/job.scope\n");
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100, 101, 102], None).expect("ok"),
        None
    );
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[], None).expect("ok"),
        None
    );
}

#[test]
fn v2_vanished_measured_pid_is_skipped() {
    let fx = v2_fixture();
    // pid 103 has no /proc directory any more: it exited after being listed.
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101, 103], None)
        .expect("ok")
        .expect("exclusive");
    assert_eq!(group.unified.map(|g| g.dir), Some(fx.path(JOB)));
}

#[test]
fn v2_parent_limits_win_when_smaller() {
    let fx = v2_fixture();
    fx.file("sys/fs/cgroup/wattline.slice/memory.max", "536870912\n")
        .file("sys/fs/cgroup/wattline.slice/cpu.max", "50000 100000\n")
        .file(&format!("{JOB}/cpu.max"), "200000 100000\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101], None)
        .expect("ok")
        .expect("exclusive");
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(readings.memory_limit_bytes, Some(512 * MIB));
    assert_eq!(readings.cpu_quota_limit, Some(0.5));
    assert_eq!(readings.cpuset_cpu_count, Some(4));
    assert_eq!(readings.effective_cpu_limit, Some(0.5));
}

#[test]
fn v2_cpuset_count_limits_effective_cpu() {
    let fx = v2_fixture();
    fx.file(&format!("{JOB}/cpu.max"), "300000 100000\n")
        .file(&format!("{JOB}/cpuset.cpus.effective"), "0-1\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101], None)
        .expect("ok")
        .expect("exclusive");
    let (readings, _) = read_cgroup_readings(&group);
    assert_eq!(readings.cpu_quota_limit, Some(3.0));
    assert_eq!(readings.cpuset_cpu_count, Some(2));
    assert_eq!(readings.effective_cpu_limit, Some(2.0));

    // Without any cpu.max the cpuset alone sets the limit.
    fs::remove_file(fx.path(&format!("{JOB}/cpu.max"))).unwrap();
    fx.file(&format!("{JOB}/cpuset.cpus.effective"), "0,2,4\n");
    let (readings, _) = read_cgroup_readings(&group);
    assert_eq!(readings.cpu_quota_limit, None);
    assert_eq!(readings.effective_cpu_limit, Some(3.0));
}

#[test]
fn v2_missing_files_are_none_and_bad_files_are_reported() {
    let fx = Fixture::new();
    fx.file("proc/self/mountinfo", MOUNTINFO_V2)
        .file("proc/100/cgroup", "0::/bare\n")
        .file("sys/fs/cgroup/bare/cgroup.procs", "100\n")
        .file("sys/fs/cgroup/bare/memory.current", "not a number\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100], None)
        .expect("ok")
        .expect("exclusive");
    let (readings, errors) = read_cgroup_readings(&group);
    assert_eq!(readings, CgroupReadings::default());
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].class(), ReadErrorClass::Invalid);
    assert_eq!(
        errors[0].path(),
        fx.path("sys/fs/cgroup/bare/memory.current")
    );
}

// ---------------------------------------------------------------------------------
// cgroup v1 hybrid fixture (this machine's layout)
// ---------------------------------------------------------------------------------

const PROC_CGROUP_HYBRID: &str = "\
9:name=systemd:/
8:pids:/wl
7:blkio:/
6:freezer:/
5:devices:/
4:memory:/process_api/abc
3:cpuset:/
2:cpuacct:/wl
1:cpu:/wl
0::/
";

/// Hybrid host like this one: pids 200 and 201 alone in v1 memory, cpu, cpuacct and
/// pids groups; the cpuset and unified groups are the roots, shared with pid 1.
fn hybrid_fixture() -> Fixture {
    let fx = Fixture::new();
    let big = "9223372036854771712\n";
    fx.file("proc/self/mountinfo", MOUNTINFO_HYBRID)
        .file("proc/200/cgroup", PROC_CGROUP_HYBRID)
        .file("proc/201/cgroup", PROC_CGROUP_HYBRID)
        // memory hierarchy
        .file("sys/fs/cgroup/memory/cgroup.procs", "1\n")
        .file("sys/fs/cgroup/memory/memory.limit_in_bytes", big)
        .file("sys/fs/cgroup/memory/process_api/cgroup.procs", "")
        .file("sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "536870912\n")
        .file("sys/fs/cgroup/memory/process_api/abc/cgroup.procs", "201\n200\n")
        .file("sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", big)
        .file("sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes", "32411648\n")
        .file("sys/fs/cgroup/memory/process_api/abc/memory.failcnt", "3\n")
        .file(
            "sys/fs/cgroup/memory/process_api/abc/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        // cpu hierarchy
        .file("sys/fs/cgroup/cpu/cgroup.procs", "1\n")
        .file("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n")
        .file("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n")
        .file("sys/fs/cgroup/cpu/wl/cgroup.procs", "200\n201\n")
        .file("sys/fs/cgroup/cpu/wl/cpu.cfs_quota_us", "150000\n")
        .file("sys/fs/cgroup/cpu/wl/cpu.cfs_period_us", "100000\n")
        .file(
            "sys/fs/cgroup/cpu/wl/cpu.stat",
            "nr_periods 10\nnr_throttled 4\nthrottled_time 2500000\nnr_bursts 0\nburst_time 0\n",
        )
        // cpuacct hierarchy
        .file("sys/fs/cgroup/cpuacct/wl/cgroup.procs", "200\n201\n")
        .file("sys/fs/cgroup/cpuacct/wl/cpuacct.usage", "5000000000\n")
        // cpuset hierarchy: root group, shared with pid 1
        .file("sys/fs/cgroup/cpuset/cgroup.procs", "1\n200\n201\n")
        .file("sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-1\n")
        // pids hierarchy
        .file("sys/fs/cgroup/pids/wl/cgroup.procs", "200\n201\n")
        .file("sys/fs/cgroup/pids/wl/pids.events", "max 2\n")
        // unified hierarchy: root group, shared with pid 1
        .file("sys/fs/cgroup/unified/cgroup.procs", "1\n200\n201\n")
        .file(
            "sys/fs/cgroup/unified/cpu.pressure",
            "some avg10=0.86 avg60=1.61 avg300=1.33 total=6653240\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .file("sys/fs/cgroup/unified/cpu.stat", "usage_usec 86143864\n");
    fx
}

#[test]
fn hybrid_v1_exclusive_groups_and_readings() {
    let fx = hybrid_fixture();
    let layout = layout_of(&fx);
    assert!(matches!(layout, CgroupLayout::Hybrid { .. }));
    let group = find_exclusive_group(fx.root(), &layout, &[200, 201], None)
        .expect("ok")
        .expect("exclusive");
    assert_eq!(group.unified, None);
    assert_eq!(
        group.v1.keys().map(String::as_str).collect::<Vec<_>>(),
        ["cpu", "cpuacct", "memory", "pids"]
    );
    assert_eq!(
        group.v1["memory"],
        GroupDir {
            dir: fx.path("sys/fs/cgroup/memory/process_api/abc"),
            mount: fx.path("sys/fs/cgroup/memory"),
        }
    );
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        readings,
        CgroupReadings {
            cpu_usage_us: Some(5_000_000),
            cpu_nr_throttled: Some(4),
            cpu_throttled_us: Some(2500),
            cpu_quota_limit: Some(1.5),
            cpuset_cpu_count: None,
            effective_cpu_limit: Some(1.5),
            cpu_pressure_some_us: None,
            cpu_pressure_full_us: None,
            memory_current_bytes: Some(32_411_648),
            memory_limit_bytes: Some(512 * MIB),
            memory_high_events: None,
            memory_max_events: None,
            memory_oom_events: None,
            memory_oom_kill_events: Some(1),
            memory_failcnt: Some(3),
            memory_under_oom: Some(false),
            memory_pressure_some_us: None,
            memory_pressure_full_us: None,
            pids_max_events: Some(2),
        }
    );
}

#[test]
fn hybrid_exclusive_unified_group_supplies_pressure() {
    let fx = hybrid_fixture();
    let lines = PROC_CGROUP_HYBRID.replace("0::/\n", "0::/wl\n");
    fx.file("proc/200/cgroup", &lines)
        .file("proc/201/cgroup", &lines)
        .file("sys/fs/cgroup/unified/cgroup.procs", "1\n")
        .file("sys/fs/cgroup/unified/wl/cgroup.procs", "200\n201\n")
        .file(
            "sys/fs/cgroup/unified/wl/cpu.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=700\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=70\n",
        )
        .file(
            "sys/fs/cgroup/unified/wl/memory.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=800\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=80\n",
        )
        .file("sys/fs/cgroup/unified/wl/cpu.stat", "usage_usec 4999999\nuser_usec 1\nsystem_usec 1\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[200, 201], None)
        .expect("ok")
        .expect("exclusive");
    assert_eq!(
        group.unified.as_ref().map(|g| g.dir.clone()),
        Some(fx.path("sys/fs/cgroup/unified/wl"))
    );
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(readings.cpu_pressure_some_us, Some(700));
    assert_eq!(readings.cpu_pressure_full_us, Some(70));
    assert_eq!(readings.memory_pressure_some_us, Some(800));
    assert_eq!(readings.memory_pressure_full_us, Some(80));
    // The unified cpu.stat is read first; v1 cpuacct does not overwrite it.
    assert_eq!(readings.cpu_usage_us, Some(4_999_999));
    // v1 memory still fills memory fields.
    assert_eq!(readings.memory_limit_bytes, Some(512 * MIB));
}

#[test]
fn hybrid_v1_unlimited_everywhere_gives_no_limits() {
    let fx = hybrid_fixture();
    fx.file(
        "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes",
        "9223372036854771712\n",
    )
    .file("sys/fs/cgroup/cpu/wl/cpu.cfs_quota_us", "-1\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[200, 201], None)
        .expect("ok")
        .expect("exclusive");
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(readings.memory_limit_bytes, None);
    assert_eq!(readings.cpu_quota_limit, None);
    assert_eq!(readings.effective_cpu_limit, None);
}

// ---------------------------------------------------------------------------------

#[test]
fn v2_a_tree_spread_over_sub_groups_of_its_group_is_exclusive() {
    let fx = v2_fixture();
    // The root stays in job.scope; its child moved to a sub-group of it.
    fx.file(&format!("{JOB}/cgroup.procs"), "100\n")
        .file(&format!("{JOB}/worker/cgroup.procs"), "101\n")
        .file("proc/101/cgroup", "0::/wattline.slice/job.scope/worker\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101], None)
        .expect("ok")
        .expect("the group holds exactly the tree");
    assert_eq!(group.unified.map(|g| g.dir), Some(fx.path(JOB)));
    // Measured from the child's side, its sub-group misses the root: not exclusive.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout_of(&fx), &[101, 100], None).expect("ok"),
        None
    );
}

/// `/proc/PID/stat` of a process in `state`, child of pid 1.
fn stat_of(pid: u32, state: char) -> String {
    format!(
        "{pid} (shell) {state} 1 {pid} {pid} 0 -1 4194560 1000 0 0 0 150 30 0 0 20 0 1 0 98765 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
    )
}

#[test]
fn v2_a_live_foreign_witness_in_the_group_or_under_it_decides_without_cgroup_procs() {
    for witness_group in [JOB.to_owned(), format!("{JOB}/idle")] {
        let fx = v2_fixture();
        let cgroup_path = witness_group.trim_start_matches("sys/fs/cgroup");
        fx.file("proc/200/cgroup", format!("0::{cgroup_path}\n"))
            .file("proc/200/stat", stat_of(200, 'S'));
        // An unreadable list would be an error: the witness spares reading it.
        fs::remove_file(fx.path(&format!("{JOB}/cgroup.procs"))).expect("remove");
        fx.dir(&format!("{JOB}/cgroup.procs"));
        let layout = layout_of(&fx);
        assert_eq!(
            find_exclusive_group(fx.root(), &layout, &[100, 101], Some(200)).expect("ok"),
            None,
            "{witness_group}"
        );
        assert!(find_exclusive_group(fx.root(), &layout, &[100, 101], None).is_err());
    }
}

#[test]
fn v2_a_witness_elsewhere_dead_zombie_or_measured_changes_nothing() {
    let fx = v2_fixture();
    fx.file("proc/200/cgroup", "0::/init.scope\n")
        .file("proc/200/stat", stat_of(200, 'S'))
        .file("proc/300/cgroup", "0::/wattline.slice/job.scope\n")
        .file("proc/300/stat", stat_of(300, 'Z'))
        .file("proc/400/cgroup", "0::/wattline.slice/job.scope\n");
    let layout = layout_of(&fx);
    let without = find_exclusive_group(fx.root(), &layout, &[100, 101], None).expect("ok");
    assert!(without.is_some());
    // Elsewhere, a zombie, gone (no stat), measured itself.
    for witness in [200, 300, 400, 500, 101] {
        assert_eq!(
            find_exclusive_group(fx.root(), &layout, &[100, 101], Some(witness)).expect("ok"),
            without,
            "witness {witness}"
        );
    }
}

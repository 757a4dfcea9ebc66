//! Linux OS readers: pressure, /proc/net/dev and statvfs. Parsers on real-format text, fixture trees under a temp
//! root, and smoke tests against this machine's real `/proc`.

#[path = "linux_support/mod.rs"]
mod linux_support;

use std::fs;
use std::path::Path;
use std::process::Command;

use wattline_actors::ReadErrorClass;
use wattline_actors::platform::linux::filesystem::{FsCapacity, statvfs};
use wattline_actors::platform::linux::net_dev::{NetDevStats, parse_net_dev, read_net_dev};
use wattline_actors::platform::linux::pressure::{
    Pressure, PressureResource, parse_pressure, read_cgroup_pressure, read_system_pressure,
};
use wattline_actors::platform::linux::{ParseError, ReadError};

use linux_support::*;

// Pressure
// ---------------------------------------------------------------------------------

#[test]
fn pressure_parses_some_and_full() {
    assert_eq!(
        parse_pressure(PRESSURE_CPU).expect("parse"),
        Pressure {
            some_total_us: Some(6_620_164),
            full_total_us: Some(0),
        }
    );
}

#[test]
fn pressure_cpu_on_old_kernel_has_no_full() {
    let text = "some avg10=0.00 avg60=0.12 avg300=0.50 total=123456789\n";
    assert_eq!(
        parse_pressure(text).expect("parse"),
        Pressure {
            some_total_us: Some(123_456_789),
            full_total_us: None,
        }
    );
    assert_eq!(parse_pressure("").expect("empty"), Pressure::default());
}

#[test]
fn pressure_rejects_garbage() {
    assert!(matches!(
        parse_pressure("partial avg10=0.00 total=5\n"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
    assert_eq!(
        parse_pressure("some avg10=0.00 avg60=0.00\n"),
        Err(ParseError::MissingField("some total"))
    );
    assert_eq!(
        parse_pressure("some total=5\nfull total=-1\n"),
        Err(ParseError::InvalidValue {
            field: "full total",
            value: "-1".into()
        })
    );
}

#[test]
fn pressure_readers_join_paths_from_root() {
    let fx = Fixture::new();
    fx.file("proc/pressure/cpu", PRESSURE_CPU)
        .file(
            "proc/pressure/memory",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=11\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n",
        )
        .file("grp/memory.pressure", "some avg10=1.00 avg60=0.00 avg300=0.00 total=99\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=42\n");
    let cpu = read_system_pressure(fx.root(), PressureResource::Cpu).expect("ok");
    assert_eq!(cpu.and_then(|p| p.some_total_us), Some(6_620_164));
    let mem = read_system_pressure(fx.root(), PressureResource::Memory).expect("ok");
    assert_eq!(
        mem,
        Some(Pressure {
            some_total_us: Some(11),
            full_total_us: Some(7)
        })
    );
    let grp = read_cgroup_pressure(&fx.path("grp"), PressureResource::Memory).expect("ok");
    assert_eq!(grp.and_then(|p| p.full_total_us), Some(42));
    assert_eq!(
        read_cgroup_pressure(&fx.path("grp"), PressureResource::Cpu).expect("ok"),
        None
    );
}

#[test]
fn real_system_pressure_if_present() {
    let present = Path::new("/proc/pressure/cpu").exists();
    let got = read_system_pressure(Path::new("/"), PressureResource::Cpu).expect("read");
    // psi=0 kernels keep the file but refuse reads (EOPNOTSUPP), which reads as None.
    if present && fs::read_to_string("/proc/pressure/cpu").is_ok() {
        assert!(got.expect("present").some_total_us.is_some());
    } else {
        assert_eq!(got, None);
    }
}

// ---------------------------------------------------------------------------------
// /proc/net/dev
// ---------------------------------------------------------------------------------

fn iface(name: &str, c: [u64; 6]) -> NetDevStats {
    NetDevStats {
        name: name.into(),
        rx_bytes: c[0],
        rx_packets: c[1],
        rx_errs: c[2],
        tx_bytes: c[3],
        tx_packets: c[4],
        tx_errs: c[5],
    }
}

#[test]
fn net_dev_parses_real_format_and_odd_names() {
    assert_eq!(
        parse_net_dev(NET_DEV).expect("parse"),
        vec![
            iface("lo", [3193, 29, 0, 3193, 29, 0]),
            iface("ifb0", [0, 0, 0, 0, 0, 0]),
            iface("eth0", [79_678_452, 3638, 7, 241_409, 2332, 5]),
            iface("br-1a2b.100", [10, 1, 0, 20, 2, 0]),
            iface("wg_ü0", [5, 6, 7, 13, 14, 15]),
            iface("eth1", [12_345_678_901, 4, 0, 9, 1, 0]),
        ]
    );
}

#[test]
fn net_dev_header_only_and_errors() {
    let header = NET_DEV.lines().take(2).collect::<Vec<_>>().join("\n");
    assert_eq!(parse_net_dev(&header).expect("parse"), vec![]);
    assert_eq!(
        parse_net_dev("only one line"),
        Err(ParseError::MissingField("header"))
    );
    let short = format!("{header}\n  eth0: 1 2 3\n");
    assert!(matches!(
        parse_net_dev(&short),
        Err(ParseError::MalformedLine { line: 3, .. })
    ));
    let long = format!("{header}\n  eth0: {}\n", "1 ".repeat(17));
    assert!(matches!(
        parse_net_dev(&long),
        Err(ParseError::MalformedLine { line: 3, .. })
    ));
    let no_colon = format!("{header}\n  eth0 1 2 3\n");
    assert!(matches!(
        parse_net_dev(&no_colon),
        Err(ParseError::MalformedLine { line: 3, .. })
    ));
    // A bad counter names its line: every interface's counters share one field name.
    let bad_num = format!("{header}\n  eth0: {}1x\n", "1 ".repeat(15));
    assert_eq!(
        parse_net_dev(&bad_num),
        Err(ParseError::OnLine {
            line: 3,
            detail: Box::new(ParseError::InvalidValue {
                field: "interface counter",
                value: "1x".into()
            })
        })
    );
}

#[test]
fn net_dev_reader_decodes_non_utf8_name_lossily() {
    let fx = Fixture::new();
    let header = NET_DEV.lines().take(2).collect::<Vec<_>>().join("\n");
    let mut text = format!("{header}\n").into_bytes();
    text.extend_from_slice(b"  e\xfft0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
    fx.file("proc/net/dev", text);
    let got = read_net_dev(fx.root()).expect("read").expect("present");
    assert_eq!(got, vec![iface("e\u{fffd}t0", [1, 2, 3, 9, 10, 11])]);
    assert_eq!(read_net_dev(&fx.path("nowhere")).expect("ok"), None);
}

#[test]
fn real_net_dev_lo_between_sysfs_reads() {
    let sys = |f: &str| -> Option<u64> {
        fs::read_to_string(format!("/sys/class/net/lo/statistics/{f}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let before = sys("rx_bytes");
    let all = read_net_dev(Path::new("/"))
        .expect("read")
        .expect("present");
    let after = sys("rx_bytes");
    let lo = all
        .iter()
        .find(|i| i.name == "lo")
        .expect("lo exists in every netns");
    if let (Some(before), Some(after)) = (before, after) {
        assert!(before <= lo.rx_bytes && lo.rx_bytes <= after);
    }
    assert!(lo.rx_packets <= lo.rx_bytes);
}

// ---------------------------------------------------------------------------------
// statvfs
// ---------------------------------------------------------------------------------

#[test]
fn fs_capacity_arithmetic() {
    assert_eq!(
        FsCapacity::from_blocks(4096, 8192, 100, 40, 30),
        FsCapacity {
            total_bytes: 409_600,
            available_bytes: 122_880,
            free_bytes: 163_840,
        }
    );
    // A zero fragment size falls back to the block size.
    assert_eq!(FsCapacity::from_blocks(0, 512, 10, 5, 2).total_bytes, 5120);
    assert_eq!(
        FsCapacity::from_blocks(4096, 4096, u64::MAX, 0, 0).total_bytes,
        u64::MAX
    );
}

#[test]
fn real_statvfs_root_matches_stat_f() {
    let cap = statvfs(Path::new("/")).expect("statvfs /");
    assert!(cap.total_bytes > 0);
    assert!(cap.available_bytes <= cap.free_bytes && cap.free_bytes <= cap.total_bytes);
    // Cross-check the total with coreutils when it is installed.
    if let Ok(out) = Command::new("stat")
        .args(["-f", "-c", "%S %b", "/"])
        .output()
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        let nums: Vec<u64> = text
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(cap.total_bytes, nums[0] * nums[1]);
    }
}

#[test]
fn statvfs_of_missing_path_is_an_error_with_the_path() {
    let path = Path::new("/definitely/not/here/wattline");
    let err = statvfs(path).expect_err("missing path");
    assert_eq!(err.path(), path);
    assert_eq!(err.class(), ReadErrorClass::Unavailable);
    match err {
        ReadError::Io { source, .. } => assert_eq!(source.kind(), std::io::ErrorKind::NotFound),
        other => panic!("expected Io, got {other:?}"),
    }
    let nul = statvfs(Path::new("/tmp/a\0b")).expect_err("NUL");
    assert!(matches!(
        nul,
        ReadError::Parse {
            detail: ParseError::NulInPath,
            ..
        }
    ));
}

// ---------------------------------------------------------------------------------

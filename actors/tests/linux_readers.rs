//! Tests for the Linux OS readers: parsers on real-format text, fixture trees under a
//! temp root, and smoke tests against this machine's real `/proc`.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wattline_actors::platform::linux::cgroup::{
    CgroupLayout, CgroupMount, CgroupMountEntry, CgroupMountKind, CgroupReadings, GroupDir,
    ProcCgroup, V1Membership, find_exclusive_group, parse_cgroup_mounts, parse_cpuset_count,
    parse_pids_events, parse_proc_cgroup, read_cgroup_layout, read_cgroup_readings,
    read_proc_cgroup, unescape_octal,
};
use wattline_actors::platform::linux::cgroup_v1;
use wattline_actors::platform::linux::cgroup_v2;
use wattline_actors::platform::linux::fd_count::read_fd_count;
use wattline_actors::platform::linux::filesystem::{FsCapacity, statvfs};
use wattline_actors::platform::linux::meminfo::{MemInfo, parse_meminfo, read_meminfo};
use wattline_actors::platform::linux::net_dev::{NetDevStats, parse_net_dev, read_net_dev};
use wattline_actors::platform::linux::pressure::{
    Pressure, PressureResource, parse_pressure, read_cgroup_pressure, read_system_pressure,
};
use wattline_actors::platform::linux::process_io::{ProcessIo, parse_process_io, read_process_io};
use wattline_actors::platform::linux::process_status::{
    ProcessStatus, parse_process_status, read_process_status,
};
use wattline_actors::platform::linux::smaps_rollup::{
    SmapsRollup, parse_smaps_rollup, read_smaps_rollup,
};
use wattline_actors::platform::linux::{ParseError, ReadError, ReadErrorClass};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * 1024 * 1024;

// ---------------------------------------------------------------------------------
// Fixture builder
// ---------------------------------------------------------------------------------

/// A temp directory standing in for `/`; files are written relative to it.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().expect("create temp dir"),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Writes `contents` at `rel`, creating parent directories.
    fn file(&self, rel: &str, contents: impl AsRef<[u8]>) -> &Self {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("fixture path has a parent")).expect("mkdir");
        fs::write(&path, contents).expect("write fixture file");
        self
    }

    /// Creates the directory `rel` (and parents).
    fn dir(&self, rel: &str) -> &Self {
        fs::create_dir_all(self.path(rel)).expect("mkdir");
        self
    }
}

// ---------------------------------------------------------------------------------
// Real-format texts (copied from a Linux 6.18 host unless noted)
// ---------------------------------------------------------------------------------

const MEMINFO: &str = "\
MemTotal:       24684096 kB
MemFree:        23623688 kB
MemAvailable:   24352300 kB
Buffers:            5688 kB
Cached:           914032 kB
SwapCached:            0 kB
Active:           366068 kB
Inactive:         551080 kB
Active(anon):       1528 kB
Inactive(anon):     4688 kB
Unevictable:       13560 kB
SwapTotal:             0 kB
Dirty:               168 kB
AnonPages:         11024 kB
Shmem:              8788 kB
KReclaimable:      51700 kB
Slab:              74676 kB
SReclaimable:      51700 kB
SUnreclaim:        22976 kB
VmallocTotal:   34359738367 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap1G:    25165824 kB
";

const STATUS: &str = "\
Name:\tcat
Umask:\t0022
State:\tR (running)
Tgid:\t5494
Ngid:\t0
Pid:\t5494
PPid:\t5490
TracerPid:\t0
Uid:\t0\t0\t0\t0
Gid:\t0\t0\t0\t0
FDSize:\t256
Groups:\t 
NStgid:\t5494
NSpid:\t5494
Kthread:\t0
VmPeak:\t    3060 kB
VmSize:\t    3060 kB
VmLck:\t       0 kB
VmHWM:\t    1732 kB
VmRSS:\t    1712 kB
RssAnon:\t     112 kB
VmData:\t     360 kB
VmSwap:\t       0 kB
HugetlbPages:\t       0 kB
CoreDumping:\t0
THP_enabled:\t1
Threads:\t3
SigQ:\t0/96365
Cpus_allowed_list:\t0-1
voluntary_ctxt_switches:\t0
nonvoluntary_ctxt_switches:\t0
";

const SMAPS_ROLLUP: &str = "\
55c8ab217000-7ffff3c0c000 ---p 00000000 00:00 0                          [rollup]
Rss:                1760 kB
Pss:                 481 kB
Pss_Dirty:           116 kB
Pss_Anon:            116 kB
Pss_File:            365 kB
Pss_Shmem:             0 kB
Shared_Clean:       1576 kB
Shared_Dirty:          0 kB
Private_Clean:        68 kB
Private_Dirty:       116 kB
Referenced:         1760 kB
Anonymous:           116 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:    4096 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
";

const PROC_IO: &str = "\
rchar: 6976
wchar: 12
syscr: 10
syscw: 3
read_bytes: 409600
write_bytes: 8192
cancelled_write_bytes: 4096
";

const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 79678452    3638    7    1    0     0          0         0   241409    2332    5    0    0     0       0          0
br-1a2b.100:      10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
  wg_ü0:       5       6    7    8    9    10         11        12       13      14   15   16   17    18      19         20
  eth1:12345678901 4   0    0    0     0          0         0        9       1    0    0    0     0       0          0
";

const PRESSURE_CPU: &str = "\
some avg10=2.35 avg60=1.91 avg300=1.38 total=6620164
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
";

/// This machine's cgroup lines of `/proc/self/mountinfo`, with neighbours.
const MOUNTINFO_HYBRID: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

/// A systemd pure-v2 host (optional fields before the separator).
const MOUNTINFO_V2: &str = "\
24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

// ---------------------------------------------------------------------------------
// meminfo
// ---------------------------------------------------------------------------------

#[test]
fn meminfo_parses_real_format_in_bytes() {
    let info = parse_meminfo(MEMINFO).expect("parse");
    assert_eq!(
        info,
        MemInfo {
            total_bytes: 24_684_096 * KIB,
            free_bytes: 23_623_688 * KIB,
            available_bytes: Some(24_352_300 * KIB),
            buffers_bytes: Some(5_688 * KIB),
            cached_bytes: Some(914_032 * KIB),
            sreclaimable_bytes: Some(51_700 * KIB),
            shmem_bytes: Some(8_788 * KIB),
        }
    );
    assert_eq!(info.system_used_bytes(), Some(331_796 * KIB));
}

#[test]
fn meminfo_without_memavailable_has_no_used() {
    let info = parse_meminfo("MemTotal: 1000 kB\nMemFree: 400 kB\n").expect("parse");
    assert_eq!(info.total_bytes, 1_024_000);
    assert_eq!(info.free_bytes, 409_600);
    assert_eq!(info.available_bytes, None);
    assert_eq!(info.cached_bytes, None);
    assert_eq!(info.system_used_bytes(), None);
}

#[test]
fn meminfo_used_saturates_when_available_exceeds_total() {
    let info = parse_meminfo("MemTotal: 10 kB\nMemFree: 1 kB\nMemAvailable: 11 kB\n").unwrap();
    assert_eq!(info.system_used_bytes(), Some(0));
}

#[test]
fn meminfo_rejects_missing_keys_and_garbage() {
    assert_eq!(
        parse_meminfo("MemFree: 1 kB\nMemAvailable: 2 kB\n"),
        Err(ParseError::MissingField("MemTotal"))
    );
    assert_eq!(
        parse_meminfo("MemTotal: 1 kB\n"),
        Err(ParseError::MissingField("MemFree"))
    );
    assert_eq!(
        parse_meminfo("hello world\n"),
        Err(ParseError::MalformedLine {
            line: 1,
            text: "hello world".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 12x kB\nMemFree: 1 kB\n"),
        Err(ParseError::InvalidValue {
            field: "MemTotal",
            value: "12x".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 12 MB\nMemFree: 1 kB\n"),
        Err(ParseError::InvalidValue {
            field: "MemTotal",
            value: "12 MB".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 18446744073709551615 kB\nMemFree: 1 kB\n"),
        Err(ParseError::Overflow("MemTotal"))
    );
    assert_eq!(parse_meminfo(""), Err(ParseError::MissingField("MemTotal")));
}

#[test]
fn meminfo_reader_handles_absent_file_and_binary_garbage() {
    let fx = Fixture::new();
    assert!(
        read_meminfo(fx.root())
            .expect("absent is not an error")
            .is_none()
    );

    fx.file(
        "proc/meminfo",
        [0xff_u8, 0x00, 0xfe, b'\n', 0x80, b':', 0xc3],
    );
    let err = read_meminfo(fx.root()).expect_err("garbage must fail");
    assert_eq!(err.class(), ReadErrorClass::Invalid);
    assert_eq!(err.path(), fx.path("proc/meminfo"));

    fx.file("proc/meminfo", MEMINFO);
    let info = read_meminfo(fx.root()).expect("read").expect("present");
    assert_eq!(info.total_bytes, 24_684_096 * KIB);
}

#[test]
#[allow(clippy::unnecessary_cast)] // `totalram` is `c_ulong`: u64 here, u32 on 32-bit targets.
fn real_meminfo_total_matches_sysinfo() {
    let info = read_meminfo(Path::new("/"))
        .expect("read")
        .expect("/proc/meminfo exists");
    let mut si = std::mem::MaybeUninit::<libc::sysinfo>::uninit();
    // SAFETY: `si` is a writable `sysinfo` buffer; sysinfo(2) fills it on success.
    let rc = unsafe { libc::sysinfo(si.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: rc == 0, so the kernel initialised the struct.
    let si = unsafe { si.assume_init() };
    // sysinfo and meminfo both derive MemTotal from totalram_pages.
    assert_eq!(
        info.total_bytes,
        si.totalram as u64 * u64::from(si.mem_unit)
    );
    let available = info
        .available_bytes
        .expect("MemAvailable on any kernel >= 3.14");
    assert!(available <= info.total_bytes);
    assert_eq!(info.system_used_bytes(), Some(info.total_bytes - available));
}

// ---------------------------------------------------------------------------------
// /proc/PID/status
// ---------------------------------------------------------------------------------

#[test]
fn status_parses_real_format() {
    assert_eq!(
        parse_process_status(STATUS).expect("parse"),
        ProcessStatus {
            vm_size_bytes: Some(3060 * KIB),
            vm_hwm_bytes: Some(1732 * KIB),
            vm_rss_bytes: Some(1712 * KIB),
            threads: 3,
        }
    );
}

#[test]
fn status_of_kernel_thread_has_no_vm_fields() {
    let kthread = "Name:\tkworker/0:1-events\nUmask:\t0000\nState:\tI (idle)\nKthread:\t1\nThreads:\t1\nSigQ:\t0/96365\n";
    assert_eq!(
        parse_process_status(kthread).expect("parse"),
        ProcessStatus {
            vm_size_bytes: None,
            vm_hwm_bytes: None,
            vm_rss_bytes: None,
            threads: 1,
        }
    );
}

#[test]
fn status_name_cannot_spoof_fields() {
    // A process may call itself anything; the Name line must not be read as VmRSS.
    let text = "Name:\tVmRSS: 999999 kB\nVmRSS:\t    8 kB\nThreads:\t2\n";
    let status = parse_process_status(text).expect("parse");
    assert_eq!(status.vm_rss_bytes, Some(8 * KIB));
    assert_eq!(status.threads, 2);
}

#[test]
fn status_rejects_missing_threads_and_garbage() {
    assert_eq!(
        parse_process_status("Name:\tx\nVmRSS:\t 1 kB\n"),
        Err(ParseError::MissingField("Threads"))
    );
    assert_eq!(
        parse_process_status("VmRSS:\t lots kB\nThreads:\t1\n"),
        Err(ParseError::InvalidValue {
            field: "VmRSS",
            value: "lots".into()
        })
    );
    assert_eq!(
        parse_process_status("Threads:\t-1\n"),
        Err(ParseError::InvalidValue {
            field: "Threads",
            value: "-1".into()
        })
    );
    assert!(matches!(
        parse_process_status("\u{0}\u{1}garbage"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn status_reader_tolerates_non_utf8_name_and_reports_gone() {
    let fx = Fixture::new();
    let mut status = b"Name:\t\xffbad\xfe\n".to_vec();
    status.extend_from_slice(STATUS.as_bytes());
    fx.file("proc/42/status", status).dir("proc/43");
    let mut buf = Vec::new();
    let got = read_process_status(fx.root(), 42, &mut buf)
        .expect("read")
        .expect("present");
    assert_eq!(got.threads, 3);
    assert_eq!(got.vm_rss_bytes, Some(1712 * KIB));

    // /proc/43 exists without a status file: absent, not an error.
    assert_eq!(
        read_process_status(fx.root(), 43, &mut buf).expect("ok"),
        None
    );

    // /proc/44 does not exist: the process is gone.
    let err = read_process_status(fx.root(), 44, &mut buf).expect_err("gone");
    assert!(matches!(err, ReadError::Gone { .. }));
    assert_eq!(err.class(), ReadErrorClass::TargetGone);
    assert_eq!(err.path(), fx.path("proc/44/status"));
}

// ---------------------------------------------------------------------------------
// /proc/PID/smaps_rollup
// ---------------------------------------------------------------------------------

#[test]
fn smaps_rollup_parses_real_format() {
    let rollup = parse_smaps_rollup(SMAPS_ROLLUP).expect("parse");
    assert_eq!(
        rollup,
        SmapsRollup {
            rss_bytes: 1760 * KIB,
            private_clean_bytes: 68 * KIB,
            private_dirty_bytes: 116 * KIB,
            private_hugetlb_bytes: Some(4096 * KIB),
        }
    );
    assert_eq!(rollup.private_bytes(), (68 + 116 + 4096) * KIB);
}

#[test]
fn smaps_rollup_without_hugetlb_and_with_errors() {
    let text = "Rss: 10 kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 2 kB\n";
    let rollup = parse_smaps_rollup(text).expect("parse");
    assert_eq!(rollup.private_hugetlb_bytes, None);
    assert_eq!(rollup.private_bytes(), 3 * KIB);

    assert_eq!(
        parse_smaps_rollup("Private_Clean: 1 kB\nPrivate_Dirty: 2 kB\n"),
        Err(ParseError::MissingField("Rss"))
    );
    assert_eq!(
        parse_smaps_rollup("Rss: 1 kB\nPrivate_Dirty: 2 kB\n"),
        Err(ParseError::MissingField("Private_Clean"))
    );
    assert!(matches!(
        parse_smaps_rollup("this is not smaps"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn smaps_rollup_reader_empty_file_is_none() {
    let fx = Fixture::new();
    fx.file("proc/7/smaps_rollup", "")
        .file("proc/8/smaps_rollup", SMAPS_ROLLUP);
    let mut buf = Vec::new();
    assert_eq!(read_smaps_rollup(fx.root(), 7, &mut buf).expect("ok"), None);
    let rollup = read_smaps_rollup(fx.root(), 8, &mut buf)
        .expect("ok")
        .expect("some");
    assert_eq!(rollup.rss_bytes, 1760 * KIB);
    assert!(matches!(
        read_smaps_rollup(fx.root(), 9, &mut buf),
        Err(ReadError::Gone { .. })
    ));
}

#[test]
fn real_self_smaps_rollup_private_within_rss() {
    let mut buf = Vec::new();
    let rollup = read_smaps_rollup(Path::new("/"), std::process::id(), &mut buf)
        .expect("read own smaps_rollup")
        .expect("kernel >= 4.14");
    assert!(rollup.rss_bytes > 0);
    assert!(rollup.private_clean_bytes + rollup.private_dirty_bytes <= rollup.rss_bytes);
}

// ---------------------------------------------------------------------------------
// /proc/PID/io
// ---------------------------------------------------------------------------------

#[test]
fn io_parses_real_format() {
    assert_eq!(
        parse_process_io(PROC_IO).expect("parse"),
        ProcessIo {
            read_bytes: 409_600,
            write_bytes: 8192,
            syscr: 10,
            syscw: 3,
        }
    );
}

#[test]
fn io_rejects_missing_fields_and_garbage() {
    assert_eq!(
        parse_process_io("syscr: 1\nread_bytes: 2\nwrite_bytes: 3\n"),
        Err(ParseError::MissingField("syscw"))
    );
    assert_eq!(
        parse_process_io("syscr: 1\nsyscw: 1\nread_bytes: 0x10\nwrite_bytes: 3\n"),
        Err(ParseError::InvalidValue {
            field: "read_bytes",
            value: "0x10".into()
        })
    );
    assert!(matches!(
        parse_process_io("\n\nnonsense"),
        Err(ParseError::MalformedLine { line: 3, .. })
    ));
}

/// `/proc/1/io` needs ptrace access to pid 1. In this project's sandbox that is refused
/// even to uid 0 (the caller lacks capabilities pid 1 holds), so the real kernel path
/// exercises `PermissionDenied`. On a host where this test process may read it, the
/// reader must agree with a plain read instead.
#[test]
fn real_proc_1_io_permission_matches_kernel() {
    let plain = fs::read_to_string("/proc/1/io");
    let mut buf = Vec::new();
    let ours = read_process_io(Path::new("/"), 1, &mut buf);
    match plain {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let err = ours.expect_err("kernel refused, reader must too");
            assert!(matches!(err, ReadError::PermissionDenied { .. }), "{err:?}");
            assert_eq!(err.class(), ReadErrorClass::PermissionDenied);
            assert_eq!(err.path(), Path::new("/proc/1/io"));
        }
        Ok(text) => {
            let expected = parse_process_io(&text).expect("parse");
            let got = ours.expect("readable").expect("present");
            // Counters only grow; the reader ran after the plain read.
            assert!(got.syscr >= expected.syscr && got.read_bytes >= expected.read_bytes);
        }
        Err(e) => panic!("unexpected error reading /proc/1/io: {e}"),
    }
}

/// A fixture `io` file with mode 000. Root bypasses file permission bits (DAC), so as
/// uid 0 this covers "mode bits do not stop root" (values read exactly); as any other
/// user it covers the EACCES → `PermissionDenied` mapping on a real open(2).
#[test]
fn fixture_io_mode_000() {
    let fx = Fixture::new();
    fx.file("proc/77/io", PROC_IO);
    let path = fx.path("proc/77/io");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).expect("chmod");
    let mut buf = Vec::new();
    let result = read_process_io(fx.root(), 77, &mut buf);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(
            result.expect("root reads").expect("present").write_bytes,
            8192
        );
    } else {
        let err = result.expect_err("denied");
        assert!(matches!(err, ReadError::PermissionDenied { .. }));
        assert_eq!(err.path(), path);
    }
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod back");
}

#[test]
fn io_error_mapping_and_classes() {
    let p = Path::new("/proc/5/io");
    let cases = [
        (libc::EACCES, ReadErrorClass::PermissionDenied),
        (libc::EPERM, ReadErrorClass::PermissionDenied),
        (libc::ESRCH, ReadErrorClass::TargetGone),
        (libc::EIO, ReadErrorClass::Unavailable),
    ];
    for (errno, class) in cases {
        let err = ReadError::from_io(p, std::io::Error::from_raw_os_error(errno));
        assert_eq!(err.class(), class, "errno {errno}");
        assert_eq!(err.path(), p);
    }
    let parse = ReadError::parse(p, ParseError::MissingField("syscr"));
    assert_eq!(parse.class(), ReadErrorClass::Invalid);
    assert_eq!(
        parse.to_string(),
        "cannot parse /proc/5/io: missing required field `syscr`"
    );
}

#[test]
fn real_self_io_counts_write_syscalls() {
    let root = Path::new("/");
    let pid = std::process::id();
    let mut buf = Vec::new();
    let before = read_process_io(root, pid, &mut buf)
        .expect("read")
        .expect("present");
    let mut file = tempfile::tempfile().expect("temp file");
    for _ in 0..5 {
        file.write_all(b"x").expect("write");
    }
    let after = read_process_io(root, pid, &mut buf)
        .expect("read")
        .expect("present");
    // Other test threads may also write, so at least our five write(2) calls.
    assert!(after.syscw >= before.syscw + 5, "{before:?} -> {after:?}");
}

// ---------------------------------------------------------------------------------
// /proc/PID/fd
// ---------------------------------------------------------------------------------

#[test]
fn fd_count_counts_entries_without_following_links() {
    let fx = Fixture::new();
    fx.dir("proc/10/fd").dir("proc/11");
    for (name, target) in [
        ("0", "/dev/null"),
        ("1", "/nonexistent/a"),
        ("2", "pipe:[1]"),
    ] {
        std::os::unix::fs::symlink(target, fx.path(&format!("proc/10/fd/{name}"))).unwrap();
    }
    fx.file("proc/10/fd/255", "");
    assert_eq!(read_fd_count(fx.root(), 10).expect("ok"), Some(4));
    assert_eq!(read_fd_count(fx.root(), 11).expect("ok"), None);
    let err = read_fd_count(fx.root(), 12).expect_err("gone");
    assert!(matches!(err, ReadError::Gone { .. }));
    assert_eq!(err.path(), fx.path("proc/12/fd"));
}

/// Descriptors above 2 that this process would pass to a child (no `FD_CLOEXEC`).
/// Rust opens everything close-on-exec, but a test runner may inherit open fds.
fn inheritable_fds_above_2() -> u64 {
    let mut count = 0;
    for entry in fs::read_dir("/proc/self/fd").expect("list own fds") {
        let name = entry.expect("entry").file_name();
        let fd: i32 = name.to_string_lossy().parse().expect("numeric fd");
        // SAFETY: F_GETFD only queries flags; a closed fd (the listing's own) gives -1.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fd > 2 && flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            count += 1;
        }
    }
    count
}

/// Spawns `sleep` with null stdio: it holds fds 0, 1, 2 plus whatever non-close-on-exec
/// fds it inherits from this process, and one thread.
#[test]
fn real_child_fd_count_and_status() {
    let inherited = inheritable_fds_above_2();
    let mut child = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    let root = Path::new("/");
    // Wait until the child has exec'd sleep (the forked Rust child may still hold a pipe fd).
    let deadline = Instant::now() + Duration::from_secs(5);
    while fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default() != "sleep\n" {
        assert!(Instant::now() < deadline, "child never exec'd");
        std::thread::sleep(Duration::from_millis(10));
    }
    let fds = read_fd_count(root, pid);
    let mut buf = Vec::new();
    let status = read_process_status(root, pid, &mut buf);
    child.kill().expect("kill our child");
    child.wait().expect("reap our child");
    assert_eq!(fds.expect("read").expect("present"), 3 + inherited);
    let status = status.expect("read").expect("present");
    assert_eq!(status.threads, 1);
    let rss = status.vm_rss_bytes.expect("live process has VmRSS");
    assert!(rss > 0);
    assert!(status.vm_hwm_bytes.expect("VmHWM") >= rss);
    assert!(status.vm_size_bytes.expect("VmSize") >= rss);
}

#[test]
fn real_self_status_and_fd() {
    let pid = std::process::id();
    let mut buf = Vec::new();
    let status = read_process_status(Path::new("/"), pid, &mut buf)
        .expect("read")
        .expect("present");
    assert!(status.threads >= 1);
    assert!(status.vm_size_bytes.expect("VmSize") >= status.vm_rss_bytes.expect("VmRSS"));
    // stdin/stdout/stderr at least.
    assert!(
        read_fd_count(Path::new("/"), pid)
            .expect("ok")
            .expect("present")
            >= 3
    );
}

/// A reaped child has no `/proc/PID`: every per-process reader says `Gone`.
#[test]
fn real_vanished_process_is_gone() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap");
    let root = Path::new("/");
    let mut buf = Vec::new();
    assert!(matches!(
        read_process_status(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_process_io(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_smaps_rollup(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_fd_count(root, pid),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_proc_cgroup(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
}

/// A zombie keeps `/proc/PID` but has no memory map: status has no `Vm*` lines,
/// smaps_rollup answers ESRCH (→ `Gone`), the fd table is empty.
#[test]
fn real_zombie_process() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
        {
            break;
        }
        assert!(Instant::now() < deadline, "child never became a zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    let root = Path::new("/");
    let mut buf = Vec::new();
    let status = read_process_status(root, pid, &mut buf);
    let rollup = read_smaps_rollup(root, pid, &mut buf);
    let fds = read_fd_count(root, pid);
    child.wait().expect("reap");
    assert_eq!(
        status.expect("read").expect("present"),
        ProcessStatus {
            vm_size_bytes: None,
            vm_hwm_bytes: None,
            vm_rss_bytes: None,
            threads: 1
        }
    );
    assert!(matches!(rollup, Err(ReadError::Gone { .. })), "{rollup:?}");
    assert_eq!(fds.expect("read").expect("present"), 0);
}

// ---------------------------------------------------------------------------------
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
    assert_eq!(
        read_system_pressure(fx.root(), PressureResource::Io).expect("ok"),
        None
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
    let bad_num = format!("{header}\n  eth0: {}1x\n", "1 ".repeat(15));
    assert_eq!(
        parse_net_dev(&bad_num),
        Err(ParseError::InvalidValue {
            field: "interface counter",
            value: "1x".into()
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
    let Some(layout) = read_cgroup_layout(root).expect("read mountinfo") else {
        return;
    };
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
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
    let group = find_exclusive_group(fx.root(), &layout, &[101, 100])
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
        find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101]).expect("ok"),
        None
    );
}

#[test]
fn v2_child_group_with_foreign_pid_is_not_exclusive() {
    let fx = v2_fixture();
    fx.file(&format!("{JOB}/worker/cgroup.procs"), "555\n");
    assert_eq!(
        find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101]).expect("ok"),
        None
    );
}

#[test]
fn v2_pids_in_different_groups_or_missing_from_group_are_not_exclusive() {
    let fx = v2_fixture();
    let layout = layout_of(&fx);
    // pid 1 lives in init.scope: the measured pids do not share one group.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100, 1]).expect("ok"),
        None
    );
    // Measuring only 100 while 101 shares the group.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100]).expect("ok"),
        None
    );
    // A pid that claims the group but is not in cgroup.procs.
    fx.file("proc/102/cgroup", "0::/wattline.slice/job.scope\n");
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[100, 101, 102]).expect("ok"),
        None
    );
    assert_eq!(
        find_exclusive_group(fx.root(), &layout, &[]).expect("ok"),
        None
    );
}

#[test]
fn v2_vanished_measured_pid_is_skipped() {
    let fx = v2_fixture();
    // pid 103 has no /proc directory any more: it exited after being listed.
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101, 103])
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
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101])
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
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101])
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
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100])
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
    let group = find_exclusive_group(fx.root(), &layout, &[200, 201])
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
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[200, 201])
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
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[200, 201])
        .expect("ok")
        .expect("exclusive");
    let (readings, errors) = read_cgroup_readings(&group);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(readings.memory_limit_bytes, None);
    assert_eq!(readings.cpu_quota_limit, None);
    assert_eq!(readings.effective_cpu_limit, None);
}

// ---------------------------------------------------------------------------------
// Arbitrary bytes never panic
// ---------------------------------------------------------------------------------

/// Feeds 2,000 deterministic pseudo-random byte strings (biased towards the
/// characters the formats use) through every parser. None may panic, and none of the
/// parsers with required keys may accept noise.
#[test]
fn parsers_never_panic_on_arbitrary_bytes() {
    const ALPHABET: &[u8] = b"0123456789 -:=,/\\\n\tkBmaxsomefulltotal\xff\xc3";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut accepted_required = 0;
    for _ in 0..2000 {
        let len = (next() % 200) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        let required = [
            parse_meminfo(&text).is_ok(),
            parse_process_status(&text).is_ok(),
            parse_smaps_rollup(&text).is_ok(),
            parse_process_io(&text).is_ok(),
        ];
        accepted_required += required.iter().filter(|ok| **ok).count();
        let _ = parse_pressure(&text);
        let _ = parse_net_dev(&text);
        let _ = parse_cgroup_mounts(&text);
        let _ = parse_proc_cgroup(&text);
        let _ = parse_cpuset_count(&text);
        let _ = parse_pids_events(&text);
        let _ = cgroup_v2::parse_cpu_stat(&text);
        let _ = cgroup_v2::parse_cpu_max(&text);
        let _ = cgroup_v2::parse_memory_events(&text);
        let _ = cgroup_v2::parse_memory_max(&text);
        let _ = cgroup_v1::parse_cpu_stat(&text);
        let _ = cgroup_v1::parse_oom_control(&text);
        let _ = cgroup_v1::parse_limit_in_bytes(&text);
        let _ = cgroup_v1::parse_cfs_quota(&text);
        let _ = unescape_octal(&text);
    }
    assert_eq!(accepted_required, 0);
}

#[test]
fn v2_a_tree_spread_over_sub_groups_of_its_group_is_exclusive() {
    let fx = v2_fixture();
    // The root stays in job.scope; its child moved to a sub-group of it.
    fx.file(&format!("{JOB}/cgroup.procs"), "100\n")
        .file(&format!("{JOB}/worker/cgroup.procs"), "101\n")
        .file("proc/101/cgroup", "0::/wattline.slice/job.scope/worker\n");
    let group = find_exclusive_group(fx.root(), &layout_of(&fx), &[100, 101])
        .expect("ok")
        .expect("the group holds exactly the tree");
    assert_eq!(group.unified.map(|g| g.dir), Some(fx.path(JOB)));
    // Measured from the child's side, its sub-group misses the root: not exclusive.
    assert_eq!(
        find_exclusive_group(fx.root(), &layout_of(&fx), &[101, 100]).expect("ok"),
        None
    );
}

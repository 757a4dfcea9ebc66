//! What the Linux reader tests share: a fixture tree under a temp root, and real-format
//! texts copied from a Linux 6.18 host unless noted.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use wattline_actors::platform::linux::ParseError;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * 1024 * 1024;

// ---------------------------------------------------------------------------------
// Fixture builder
// ---------------------------------------------------------------------------------

/// A temp directory standing in for `/`; files are written relative to it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().expect("create temp dir"),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Writes `contents` at `rel`, creating parent directories.
    pub fn file(&self, rel: &str, contents: impl AsRef<[u8]>) -> &Self {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("fixture path has a parent")).expect("mkdir");
        fs::write(&path, contents).expect("write fixture file");
        self
    }

    /// Creates the directory `rel` (and parents).
    pub fn dir(&self, rel: &str) -> &Self {
        fs::create_dir_all(self.path(rel)).expect("mkdir");
        self
    }
}

// ---------------------------------------------------------------------------------
// Real-format texts (copied from a Linux 6.18 host unless noted)
// ---------------------------------------------------------------------------------

pub const MEMINFO: &str = "\
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

pub const STATUS: &str = "\
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

pub const SMAPS_ROLLUP: &str = "\
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

pub const PROC_IO: &str = "\
rchar: 6976
wchar: 12
syscr: 10
syscw: 3
read_bytes: 409600
write_bytes: 8192
cancelled_write_bytes: 4096
";

pub const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
  ifb0:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0
  eth0: 79678452    3638    7    1    0     0          0         0   241409    2332    5    0    0     0       0          0
br-1a2b.100:      10       1    0    0    0     0          0         0       20       2    0    0    0     0       0          0
  wg_ü0:       5       6    7    8    9    10         11        12       13      14   15   16   17    18      19         20
  eth1:12345678901 4   0    0    0     0          0         0        9       1    0    0    0     0       0          0
";

pub const PRESSURE_CPU: &str = "\
some avg10=2.35 avg60=1.91 avg300=1.38 total=6620164
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
";

/// This machine's cgroup lines of `/proc/self/mountinfo`, with neighbours.
pub const MOUNTINFO_HYBRID: &str = "\
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
pub const MOUNTINFO_V2: &str = "\
24 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

// ---------------------------------------------------------------------------------
// Error checks
// ---------------------------------------------------------------------------------

/// Asserts that a parser's error on `text` names the field it is about, or a line that
/// exists in `text`.
pub fn assert_names_place(text: &str, error: Option<ParseError>) {
    let Some(error) = error else {
        return;
    };
    let shown = error.to_string();
    match &error {
        ParseError::MissingField(field)
        | ParseError::Overflow(field)
        | ParseError::InvalidValue { field, .. } => {
            assert!(shown.contains(&format!("`{field}`")), "{shown}");
        }
        ParseError::MalformedLine { line, .. } | ParseError::OnLine { line, .. } => {
            assert!(
                shown.starts_with(&format!("malformed line {line}:"))
                    || shown.starts_with(&format!("line {line}:")),
                "{shown}"
            );
            assert!(
                (1..=text.lines().count()).contains(line),
                "{shown} in {text:?}"
            );
        }
        ParseError::NulInPath => panic!("a text parser reported a path error"),
    }
}

/// Asserts that `error` names the field `key`.
pub fn assert_names_field(error: ParseError, key: &str) {
    let shown = error.to_string();
    assert!(
        shown.contains(&format!("`{key}`")),
        "{shown:?} does not name `{key}`"
    );
}

//! Finds the measured pids' cgroup: detects the v1/hybrid/v2 layout, decides whether a
//! group holds exactly the measured pids, and gathers that group's counters and limits.
//!
//! Flow: [`read_cgroup_layout`] parses `root/proc/self/mountinfo` once;
//! [`find_exclusive_group`] reads `/proc/PID/cgroup` of the first measured pid (the
//! root of the scope) and walks that group's `cgroup.procs` recursively;
//! [`read_cgroup_readings`] reads the files of every exclusive hierarchy into one
//! [`CgroupReadings`] (file formats live in [`super::cgroup_v2`] and
//! [`super::cgroup_v1`]).
//!
//! A hierarchy's group G (the root's group) is *exclusive* when the pids found in G
//! and all its descendant groups are exactly the measured pids, so a tree spread over
//! sub-groups of G counts. Each hierarchy is judged on its own: on a hybrid host the
//! v1 memory group can be exclusive while the unified group is not. Measured pids that
//! exit during the check are ignored.
//!
//! # Fields each layout can fill
//!
//! | [`CgroupReadings`] field | v2 (pure unified) | hybrid (v1 controllers + unified) | v1 |
//! | --- | --- | --- | --- |
//! | `cpu_usage_us` | `cpu.stat usage_usec` | unified `cpu.stat usage_usec`, else v1 `cpuacct.usage` ÷ 1000 | `cpuacct.usage` ÷ 1000 |
//! | `cpu_nr_throttled` | `cpu.stat nr_throttled` | v1 `cpu.stat nr_throttled` | same |
//! | `cpu_throttled_us` | `cpu.stat throttled_usec` | v1 `cpu.stat throttled_time` (ns) ÷ 1000 | same |
//! | `cpu_quota_limit` | min `cpu.max` quota/period over ancestors | min `cpu.cfs_quota_us`/`cpu.cfs_period_us` over ancestors | same |
//! | `cpuset_cpu_count` | min `cpuset.cpus.effective` count over ancestors | v1 `cpuset.effective_cpus` | same |
//! | `effective_cpu_limit` | min(quota limit, cpuset count) | same | same |
//! | `cpu_pressure_*_us` | `cpu.pressure` | unified `cpu.pressure` (needs the unified group exclusive) | — |
//! | `memory_current_bytes` | `memory.current` | v1 `memory.usage_in_bytes` | same |
//! | `memory_limit_bytes` | min `memory.max` over ancestors | min `memory.limit_in_bytes` (< 2^62) over ancestors | same |
//! | `memory_high_events`, `memory_max_events`, `memory_oom_events` | `memory.events` | — | — |
//! | `memory_oom_kill_events` | `memory.events oom_kill` | v1 `memory.oom_control oom_kill` (Linux ≥ 4.13) | same |
//! | `memory_failcnt` | — | v1 `memory.failcnt` | same |
//! | `memory_under_oom` | — | v1 `memory.oom_control under_oom` | same |
//! | `memory_pressure_*_us` | `memory.pressure` | unified `memory.pressure` (needs the unified group exclusive) | — |
//! | `pids_max_events` | `pids.events max` | v1 `pids.events max` | same |
//!
//! On a hybrid host a controller is attached to exactly one hierarchy, so a field comes
//! from the v1 controller when it is mounted there and from the unified group when the
//! unified hierarchy holds that controller. Limits are upper bounds read up to the
//! visible mount; restrictions above the mount cannot be seen.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::cgroup_files::{CgroupReadings, GroupDir};
use super::{ParseError, ReadError, is_absent, parse_u64, proc_pid_dir, read_file, read_pid_file};
use super::{cgroup_v1, cgroup_v2};

/// v1 controllers whose files [`read_cgroup_readings`] uses.
pub const V1_CONTROLLERS: [&str; 5] = ["memory", "cpu", "cpuacct", "cpuset", "pids"];

/// One cgroup hierarchy mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The mount point joined under the root (e.g. `<root>/sys/fs/cgroup/memory`).
    pub dir: PathBuf,
    /// The cgroup path mounted there (mountinfo field 4; `/` unless a container bind
    /// mounts a sub-group), used to turn `/proc/PID/cgroup` paths into directories.
    pub cgroup_root: String,
}

impl CgroupMount {
    /// Directory of the group at `cgroup_path` (as written in `/proc/PID/cgroup`).
    ///
    /// `None` when the path lies outside this mount's `cgroup_root`, or contains `.` or
    /// `..` components (other cgroup namespaces show such paths).
    pub fn group(&self, cgroup_path: &str) -> Option<GroupDir> {
        let base = self.cgroup_root.trim_end_matches('/');
        let rest = cgroup_path.strip_prefix(base)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let mut dir = self.dir.clone();
        for component in rest.split('/').filter(|c| !c.is_empty()) {
            if component == "." || component == ".." {
                return None;
            }
            dir.push(component);
        }
        Some(GroupDir {
            dir,
            mount: self.dir.clone(),
        })
    }
}

/// How cgroups are mounted, from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Only a cgroup2 (unified) hierarchy.
    V2 {
        /// The unified mount.
        mount: CgroupMount,
    },
    /// v1 controller hierarchies plus a cgroup2 mount (often `/sys/fs/cgroup/unified`
    /// with no controllers).
    Hybrid {
        /// v1 controller (or `name=...` hierarchy) → its mount.
        controllers: BTreeMap<String, CgroupMount>,
        /// The cgroup2 mount.
        unified: CgroupMount,
    },
    /// Only v1 hierarchies.
    V1 {
        /// v1 controller (or `name=...` hierarchy) → its mount.
        controllers: BTreeMap<String, CgroupMount>,
    },
    /// No cgroup filesystem is mounted.
    None,
}

impl CgroupLayout {
    /// The cgroup2 mount, for [`CgroupLayout::V2`] and [`CgroupLayout::Hybrid`].
    pub fn unified(&self) -> Option<&CgroupMount> {
        match self {
            CgroupLayout::V2 { mount } => Some(mount),
            CgroupLayout::Hybrid { unified, .. } => Some(unified),
            CgroupLayout::V1 { .. } | CgroupLayout::None => None,
        }
    }

    /// The mount of v1 `controller`, for [`CgroupLayout::V1`] and [`CgroupLayout::Hybrid`].
    pub fn v1_controller(&self, controller: &str) -> Option<&CgroupMount> {
        match self {
            CgroupLayout::Hybrid { controllers, .. } | CgroupLayout::V1 { controllers } => {
                controllers.get(controller)
            }
            CgroupLayout::V2 { .. } | CgroupLayout::None => None,
        }
    }

    /// Builds the layout from parsed mount entries; paths are joined under `root`.
    /// The first mount of each controller (and the first cgroup2 mount) wins.
    pub fn from_mounts(root: &Path, mounts: &[CgroupMountEntry]) -> CgroupLayout {
        let mut unified = None;
        let mut controllers = BTreeMap::new();
        for entry in mounts {
            let mount = CgroupMount {
                dir: root.join(entry.mount_point.trim_start_matches('/')),
                cgroup_root: entry.cgroup_root.clone(),
            };
            match &entry.kind {
                CgroupMountKind::V2 => {
                    if unified.is_none() {
                        unified = Some(mount);
                    }
                }
                CgroupMountKind::V1 { controllers: names } => {
                    for name in names {
                        controllers
                            .entry(name.clone())
                            .or_insert_with(|| mount.clone());
                    }
                }
            }
        }
        match (unified, controllers.is_empty()) {
            (Some(mount), true) => CgroupLayout::V2 { mount },
            (Some(unified), false) => CgroupLayout::Hybrid {
                controllers,
                unified,
            },
            (None, false) => CgroupLayout::V1 { controllers },
            (None, true) => CgroupLayout::None,
        }
    }
}

/// Which cgroup filesystem a mountinfo line mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupMountKind {
    /// `cgroup2`.
    V2,
    /// `cgroup` with these controllers (from the super options; named hierarchies
    /// appear as `name=...`, as in `/proc/PID/cgroup`).
    V1 {
        /// Controller names.
        controllers: Vec<String>,
    },
}

/// One cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMountEntry {
    /// Mount point (field 5), `\040`-style escapes decoded.
    pub mount_point: String,
    /// Root of the mount inside the hierarchy (field 4), escapes decoded.
    pub cgroup_root: String,
    /// Filesystem kind.
    pub kind: CgroupMountKind,
}

/// Super options of a v1 mount that are not controllers.
const NOT_CONTROLLERS: [&str; 7] = [
    "rw",
    "ro",
    "noprefix",
    "clone_children",
    "xattr",
    "cpuset_v2_mode",
    "favordynmods",
];

/// Parses `/proc/self/mountinfo`, keeping only `cgroup` and `cgroup2` mounts.
///
/// Line shape: `id parent major:minor root mount_point options [optional...] - fstype
/// source super_options`. Fails on a non-empty line without the ` - ` separator or with
/// too few fields.
pub fn parse_cgroup_mounts(text: &str) -> Result<Vec<CgroupMountEntry>, ParseError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Some((left, right)) = line.split_once(" - ") else {
            return Err(ParseError::malformed(index, line));
        };
        let mut left_fields = left.split(' ');
        let (Some(_id), Some(_parent), Some(_dev), Some(root), Some(mount_point)) = (
            left_fields.next(),
            left_fields.next(),
            left_fields.next(),
            left_fields.next(),
            left_fields.next(),
        ) else {
            return Err(ParseError::malformed(index, line));
        };
        let mut right_fields = right.split(' ');
        let Some(fs_type) = right_fields.next() else {
            return Err(ParseError::malformed(index, line));
        };
        let kind = match fs_type {
            "cgroup2" => CgroupMountKind::V2,
            "cgroup" => {
                let options = right_fields.nth(1).unwrap_or("");
                let controllers = options
                    .split(',')
                    .filter(|o| !o.is_empty() && !NOT_CONTROLLERS.contains(o))
                    .filter(|o| !o.contains('=') || o.starts_with("name="))
                    .map(str::to_owned)
                    .collect();
                CgroupMountKind::V1 { controllers }
            }
            _ => continue,
        };
        out.push(CgroupMountEntry {
            mount_point: unescape_octal(mount_point),
            cgroup_root: unescape_octal(root),
            kind,
        });
    }
    Ok(out)
}

/// Decodes mountinfo's `\NNN` octal escapes (space is `\040`, tab `\011`, newline
/// `\012`, backslash `\134`). Anything else is copied as is.
pub fn unescape_octal(field: &str) -> String {
    if !field.contains('\\') {
        return field.to_owned();
    }
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'\\'
            && let Some(code) = bytes.get(i + 1..i + 4).and_then(octal_byte)
        {
            out.push(code);
            i += 4;
            continue;
        }
        out.push(byte);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The byte value of three octal digits, if they are three octal digits below 0o400.
fn octal_byte(digits: &[u8]) -> Option<u8> {
    let mut value: u32 = 0;
    for &d in digits {
        if !(b'0'..=b'7').contains(&d) {
            return None;
        }
        value = value * 8 + u32::from(d - b'0');
    }
    u8::try_from(value).ok()
}

/// Reads `root/proc/self/mountinfo` and builds the layout; `Ok(None)` when the file
/// is absent. Mount paths in the layout are joined under `root`.
pub fn read_cgroup_layout(root: &Path) -> Result<Option<CgroupLayout>, ReadError> {
    let path = root.join("proc/self/mountinfo");
    let mut buf = Vec::with_capacity(8192);
    if !read_file(&path, &mut buf)? {
        return Ok(None);
    }
    let mounts = parse_cgroup_mounts(&String::from_utf8_lossy(&buf))
        .map_err(|e| ReadError::parse(&path, e))?;
    Ok(Some(CgroupLayout::from_mounts(root, &mounts)))
}

/// One v1 line of `/proc/PID/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Membership {
    /// Controllers of the hierarchy (`cpu,cpuacct` gives two; `name=systemd` one).
    pub controllers: Vec<String>,
    /// The group path inside that hierarchy.
    pub path: String,
}

/// A process's groups from `/proc/PID/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcCgroup {
    /// Path from the `0::/path` line (cgroup v2), if present.
    pub unified: Option<String>,
    /// The `N:controller[,controller]:/path` lines (cgroup v1).
    pub v1: Vec<V1Membership>,
}

impl ProcCgroup {
    /// The group path in the v1 hierarchy that holds `controller`.
    pub fn v1_path(&self, controller: &str) -> Option<&str> {
        self.v1
            .iter()
            .find(|m| m.controllers.iter().any(|c| c == controller))
            .map(|m| m.path.as_str())
    }
}

/// Parses `/proc/PID/cgroup` text: `hierarchy-id:controllers:path` per line; the path
/// keeps any further `:`. Fails on a line with fewer than three fields, a non-numeric
/// id, or an empty path.
pub fn parse_proc_cgroup(text: &str) -> Result<ProcCgroup, ParseError> {
    let mut out = ProcCgroup::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            return Err(ParseError::malformed(index, line));
        };
        let id = parse_u64("hierarchy-id", id)?;
        if path.is_empty() {
            return Err(ParseError::malformed(index, line));
        }
        if id == 0 && controllers.is_empty() {
            out.unified = Some(path.to_owned());
        } else {
            out.v1.push(V1Membership {
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned)
                    .collect(),
                path: path.to_owned(),
            });
        }
    }
    Ok(out)
}

/// Reads `root/proc/PID/cgroup` using `buf` as scratch space; `Ok(None)` when absent
/// (kernel without cgroups), [`ReadError::Gone`] when the process has exited.
pub fn read_proc_cgroup(
    root: &Path,
    pid: u32,
    buf: &mut Vec<u8>,
) -> Result<Option<ProcCgroup>, ReadError> {
    if !read_pid_file(root, pid, "cgroup", buf)? {
        return Ok(None);
    }
    parse_proc_cgroup(&String::from_utf8_lossy(buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&proc_pid_dir(root, pid).join("cgroup"), e))
}

/// The groups that hold exactly the measured pids, per hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExclusiveGroup {
    /// The cgroup2 group (pure v2, or the unified hierarchy of a hybrid), when exclusive.
    pub unified: Option<GroupDir>,
    /// v1 controller (from [`V1_CONTROLLERS`]) → its group, for each exclusive one.
    /// Co-mounted controllers (`cpu,cpuacct`) share a directory.
    pub v1: BTreeMap<String, GroupDir>,
}

/// Finds the exclusive group(s) of the measured `pids` under `layout`: per hierarchy,
/// the group of the first live measured pid, when that group and its descendants hold
/// exactly the measured pids (a tree spread over sub-groups of one group counts).
///
/// Only one `/proc/PID/cgroup` is read; the group's `cgroup.procs` files prove the
/// rest. Returns `Ok(None)` when `pids` is empty, the layout has no cgroups, no
/// measured pid is alive, or no hierarchy is exclusive. Measured pids that exited
/// during the check are skipped. Errors reading `/proc/PID/cgroup` or `cgroup.procs`
/// (other than absence) are returned.
///
/// `foreign_witness` is a process likely foreign to `pids` and sharing their groups
/// (the parent of a tree's root, say): where it lives, alive, in a hierarchy's group
/// or under it, that group is not exclusive, and its `cgroup.procs` files are not
/// read. The kernel builds and sorts the whole list of such a file when it is opened,
/// about 50 µs for a hierarchy's root group, against two small reads for the witness.
/// The answer is the same as without it: `cgroup.procs` would have listed the witness.
pub fn find_exclusive_group(
    root: &Path,
    layout: &CgroupLayout,
    pids: &[u32],
    foreign_witness: Option<u32>,
) -> Result<Option<ExclusiveGroup>, ReadError> {
    if pids.is_empty() || *layout == CgroupLayout::None {
        return Ok(None);
    }
    let measured: HashSet<u32> = pids.iter().copied().collect();
    let mut buf = Vec::with_capacity(512);
    let witness = foreign_witness
        .filter(|pid| !measured.contains(pid))
        .and_then(|pid| read_live_groups(root, pid, &mut buf));
    let mut first = None;
    for &pid in pids {
        match read_proc_cgroup(root, pid, &mut buf) {
            Ok(Some(groups)) => {
                first = Some(groups);
                break;
            }
            Ok(None) => return Ok(None),
            Err(ReadError::Gone { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    let Some(groups) = first else {
        return Ok(None);
    };
    let mut verdicts: HashMap<PathBuf, bool> = HashMap::new();
    // `witness_path`: the witness's group in the same hierarchy, when there is one.
    let mut judge = |mount: &CgroupMount,
                     group: GroupDir,
                     witness_path: Option<&str>|
     -> Result<Option<GroupDir>, ReadError> {
        let exclusive = match verdicts.get(&group.dir) {
            Some(v) => *v,
            None => {
                let holds_witness = witness_path
                    .and_then(|path| mount.group(path))
                    .is_some_and(|witness| witness.dir.starts_with(&group.dir));
                let v = !holds_witness && holds_exactly(root, &group.dir, &measured)?;
                verdicts.insert(group.dir.clone(), v);
                v
            }
        };
        Ok(exclusive.then_some(group))
    };

    let mut found = ExclusiveGroup::default();
    if let Some(mount) = layout.unified()
        && let Some(path) = groups.unified.as_deref()
        && let Some(group) = mount.group(path)
    {
        let witness_path = witness.as_ref().and_then(|w| w.unified.as_deref());
        found.unified = judge(mount, group, witness_path)?;
    }
    for controller in V1_CONTROLLERS {
        if let Some(mount) = layout.v1_controller(controller)
            && let Some(path) = groups.v1_path(controller)
            && let Some(group) = mount.group(path)
            && let Some(group) = judge(
                mount,
                group,
                witness.as_ref().and_then(|w| w.v1_path(controller)),
            )?
        {
            found.v1.insert(controller.to_owned(), group);
        }
    }
    if found.unified.is_none() && found.v1.is_empty() {
        return Ok(None);
    }
    Ok(Some(found))
}

/// The groups of `pid` when it is alive and not a zombie. Read before its `stat`, so
/// that it was in them while alive (a zombie has left its groups' `cgroup.procs`).
fn read_live_groups(root: &Path, pid: u32, buf: &mut Vec<u8>) -> Option<ProcCgroup> {
    let groups = read_proc_cgroup(root, pid, buf).ok().flatten()?;
    let stat = super::process_stat::read_process_stat(root, pid, buf).ok()?;
    (!stat.is_zombie()).then_some(groups)
}

/// Whether the pids in `dir` and its descendants (from `cgroup.procs`) are all in
/// `measured` and include every measured pid that is still alive. Stops at the first
/// foreign pid.
fn holds_exactly(root: &Path, dir: &Path, measured: &HashSet<u32>) -> Result<bool, ReadError> {
    if !dir.is_dir() {
        return Ok(false);
    }
    let mut found: HashSet<u32> = HashSet::with_capacity(measured.len());
    let mut stack = vec![dir.to_path_buf()];
    let mut line = Vec::with_capacity(16);
    while let Some(current) = stack.pop() {
        let procs = current.join("cgroup.procs");
        // Read line by line through a small buffer and stop at the first foreign pid:
        // the kernel builds this list as it is read, so a busy group (the hierarchy
        // root, say) costs one small read instead of its whole list.
        let file = match fs::File::open(&procs) {
            Ok(file) => Some(file),
            Err(err) if is_absent(&err) => None,
            Err(err) => return Err(ReadError::from_io(&procs, err)),
        };
        if let Some(file) = file {
            let mut reader = std::io::BufReader::with_capacity(512, file);
            let mut index = 0;
            loop {
                line.clear();
                match std::io::BufRead::read_until(&mut reader, b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(err) => return Err(ReadError::from_io(&procs, err)),
                }
                let text = String::from_utf8_lossy(&line);
                let text = text.trim();
                index += 1;
                if text.is_empty() {
                    continue;
                }
                let pid = parse_u64("cgroup.procs", text)
                    .ok()
                    .and_then(|p| u32::try_from(p).ok())
                    .ok_or_else(|| {
                        ReadError::parse(&procs, ParseError::malformed(index - 1, text))
                    })?;
                if !measured.contains(&pid) {
                    return Ok(false);
                }
                found.insert(pid);
            }
        }
        let entries = match fs::read_dir(&current) {
            Ok(entries) => entries,
            // A child group removed while walking.
            Err(err) if is_absent(&err) => continue,
            Err(err) => return Err(ReadError::from_io(&current, err)),
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) if is_absent(&err) => continue,
                Err(err) => return Err(ReadError::from_io(&current, err)),
            };
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    // A measured pid not found in the group is either elsewhere (not exclusive) or gone.
    Ok(measured
        .iter()
        .filter(|pid| !found.contains(pid))
        .all(|pid| !matches!(proc_pid_dir(root, *pid).try_exists(), Ok(true))))
}

/// Reads every exclusive hierarchy of `group` into one [`CgroupReadings`].
///
/// Never fails: a missing file leaves its field `None`; any other failure also leaves
/// the field `None` and is returned in the error list for diagnostics.
pub fn read_cgroup_readings(group: &ExclusiveGroup) -> (CgroupReadings, Vec<ReadError>) {
    let mut readings = CgroupReadings::default();
    let mut errors = Vec::new();
    if let Some(unified) = &group.unified {
        cgroup_v2::read_group(unified, &mut readings, &mut errors);
    }
    cgroup_v1::read_groups(&group.v1, &mut readings, &mut errors);
    readings.finish();
    (readings, errors)
}

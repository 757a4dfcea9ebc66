//! `wattline doctor`: what this machine lets wattline measure and, for each thing it
//! cannot, the cause and the fix in one line. Each check reads through the same
//! readers the samplers use, over a root path (`/`, or a fixture tree in tests), so
//! what the doctor says is what a run will find.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::platform::ReadErrorClass;
use crate::platform::os::cgroup::{CgroupLayout, read_cgroup_layout};
use crate::platform::os::pressure::{PressureResource, read_system_pressure};
use crate::platform::os::process_io::read_process_io;
use crate::platform::os::rapl::read_rapl_zones;
use wattline_gpu::drm::read_drm_devices;
use wattline_gpu::nvml::NvmlConfig;
use wattline_gpu::nvml_survey::{NvmlSurvey, NvmlSurveyError, survey_nvml};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    /// Measurable.
    Ok,
    /// Measurable in part; the finding says what is missing.
    Partial,
    /// Not measurable here.
    Unavailable,
}

/// One check: what was looked at, what was found, and the fix when something is
/// missing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `nvml`, `nvidia_smi`, `drm`, `rapl`, `cgroup`, `psi`, `process_io`.
    pub area: &'static str,
    /// The outcome.
    pub status: CheckStatus,
    /// What was found, in one line.
    pub finding: String,
    /// How to make it measurable, in one line; `None` when there is nothing to fix.
    pub fix: Option<String>,
}

/// Where to look.
#[derive(Debug, Clone)]
pub struct DoctorSetting {
    /// The filesystem root (`/` in production).
    pub root: PathBuf,
    /// The search path for `nvidia-smi` (the `PATH` variable).
    pub search_path: Option<std::ffi::OsString>,
    /// How long `nvidia-smi -L` may take.
    pub smi_timeout: Duration,
}

impl Default for DoctorSetting {
    fn default() -> Self {
        DoctorSetting {
            root: PathBuf::from("/"),
            search_path: std::env::var_os("PATH"),
            smi_timeout: Duration::from_secs(5),
        }
    }
}

/// Every check, in a stable order.
pub fn inspect(setting: &DoctorSetting) -> Vec<Check> {
    vec![
        nvml(),
        nvidia_smi(setting),
        drm(&setting.root),
        rapl(&setting.root),
        cgroup(&setting.root),
        psi(&setting.root),
        process_io(&setting.root),
    ]
}

fn check(area: &'static str, status: CheckStatus, finding: String, fix: Option<&str>) -> Check {
    Check {
        area,
        status,
        finding,
        fix: fix.map(str::to_owned),
    }
}

fn nvml() -> Check {
    let survey = match survey_nvml(&NvmlConfig::default()) {
        Ok(survey) => survey,
        Err(NvmlSurveyError::LibraryNotFound(_)) => {
            return check(
                "nvml",
                CheckStatus::Unavailable,
                "NVML library not found (libnvidia-ml.so.1)".into(),
                Some(
                    "install the NVIDIA driver, which ships libnvidia-ml.so.1, or add its directory to LD_LIBRARY_PATH",
                ),
            );
        }
        Err(NvmlSurveyError::NotStarted(detail)) => {
            return check(
                "nvml",
                CheckStatus::Unavailable,
                format!("NVML did not start: {detail}"),
                Some("check that the NVIDIA kernel module is loaded (nvidia-smi should answer)"),
            );
        }
    };
    let NvmlSurvey {
        driver,
        devices: count,
        with_energy_counter: with_counter,
    } = survey;
    let driver = driver.unwrap_or_else(|| "unknown".into());
    let finding =
        format!("driver {driver}, {count} device(s), energy counter on {with_counter} of them");
    if count > 0 && with_counter < count {
        check(
            "nvml",
            CheckStatus::Partial,
            finding,
            Some(
                "devices without the energy counter (pre-Volta) are integrated from power samples instead",
            ),
        )
    } else {
        check("nvml", CheckStatus::Ok, finding, None)
    }
}

/// The first executable `name` in `search_path`.
fn find_program(search_path: Option<&std::ffi::OsStr>, name: &str) -> Option<PathBuf> {
    std::env::split_paths(search_path?)
        .map(|directory| directory.join(name))
        .find(|candidate| candidate.metadata().is_ok_and(|meta| is_executable(&meta)))
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    meta.is_file()
}

fn nvidia_smi(setting: &DoctorSetting) -> Check {
    let Some(program) = find_program(setting.search_path.as_deref(), "nvidia-smi") else {
        return check(
            "nvidia_smi",
            CheckStatus::Unavailable,
            "nvidia-smi is not on the search path".into(),
            Some(
                "install the NVIDIA driver utilities, or add the directory holding nvidia-smi to PATH",
            ),
        );
    };
    let started = Instant::now();
    match run_with_timeout(&program, &["-L"], setting.smi_timeout) {
        Ok((true, output)) => {
            let devices = output
                .lines()
                .filter(|line| line.starts_with("GPU "))
                .count();
            check(
                "nvidia_smi",
                CheckStatus::Ok,
                format!(
                    "{}: {devices} device(s), answered in {} ms",
                    program.display(),
                    started.elapsed().as_millis()
                ),
                None,
            )
        }
        Ok((false, output)) => check(
            "nvidia_smi",
            CheckStatus::Unavailable,
            format!(
                "{} failed: {}",
                program.display(),
                output.lines().next().unwrap_or("no output").trim()
            ),
            Some(
                "run nvidia-smi yourself: a driver/library version mismatch needs a reboot or a driver reinstall",
            ),
        ),
        Err(reason) => check(
            "nvidia_smi",
            CheckStatus::Unavailable,
            format!("{}: {reason}", program.display()),
            Some("a hung nvidia-smi usually means a wedged driver: check dmesg for NVRM errors"),
        ),
    }
}

/// Runs `program` with `arguments`, killing it past `timeout`: whether it succeeded
/// and what it printed.
fn run_with_timeout(
    program: &Path,
    arguments: &[&str],
    timeout: Duration,
) -> Result<(bool, String), String> {
    use std::io::Read;
    let mut child = std::process::Command::new(program)
        .args(arguments)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot be started: {error}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s", timeout.as_secs()));
            }
            Err(error) => return Err(format!("cannot be waited for: {error}")),
        }
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut output);
    }
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_string(&mut output);
    }
    Ok((status.success(), output))
}

fn drm(root: &Path) -> Check {
    let devices = read_drm_devices(root);
    if devices.is_empty() {
        return check(
            "drm",
            CheckStatus::Unavailable,
            "no DRM GPU under /sys/class/drm".into(),
            Some(
                "none needed without an AMD or Intel GPU; with one, load its kernel driver (amdgpu, i915, xe)",
            ),
        );
    }
    let listed: Vec<String> = devices
        .iter()
        .map(|device| format!("{} {}", device.card, device.vendor().as_str()))
        .collect();
    check("drm", CheckStatus::Ok, listed.join(", "), None)
}

fn rapl(root: &Path) -> Check {
    let (zones, errors) = read_rapl_zones(root);
    let present = root.join("sys/class/powercap").is_dir();
    match crate::samplers::rapl::rapl_unavailable(&zones, &errors, present) {
        None => check(
            "rapl",
            CheckStatus::Ok,
            format!(
                "zones {}",
                zones
                    .iter()
                    .map(|zone| format!("{} ({})", zone.name, zone.zone))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
        Some(reason) => {
            let denied = errors
                .iter()
                .any(|error| error.class() == ReadErrorClass::PermissionDenied);
            let fix = if denied {
                "sudo chmod a+r /sys/class/powercap/intel-rapl:*/energy_uj (until reboot); to keep it, a udev rule: SUBSYSTEM==\"powercap\", ACTION==\"add\", RUN+=\"/bin/chmod a+r /sys%p/energy_uj\""
            } else if present {
                "the package zone is missing: load the intel_rapl_common (Intel) or amd_energy/rapl (AMD) kernel module"
            } else {
                "none on a VM or a CPU without RAPL: CPU energy is not measurable here"
            };
            check("rapl", CheckStatus::Unavailable, reason, Some(fix))
        }
    }
}

fn cgroup(root: &Path) -> Check {
    let controllers_of = |mount: &Path| {
        std::fs::read_to_string(mount.join("cgroup.controllers"))
            .map(|text| text.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    match read_cgroup_layout(root) {
        Ok(Some(CgroupLayout::V2 { mount })) => {
            let controllers = controllers_of(&mount.dir);
            check(
                "cgroup",
                CheckStatus::Ok,
                format!(
                    "cgroup v2 at {}, controllers: {controllers}",
                    mount.dir.display()
                ),
                None,
            )
        }
        Ok(Some(CgroupLayout::Hybrid {
            controllers,
            unified,
        })) => check(
            "cgroup",
            CheckStatus::Partial,
            format!(
                "hybrid: v1 controllers {}; cgroup2 at {} with controllers [{}]",
                controllers.keys().cloned().collect::<Vec<_>>().join(" "),
                unified.dir.display(),
                controllers_of(&unified.dir)
            ),
            Some(
                "limits and throttling are read from v1; boot with systemd.unified_cgroup_hierarchy=1 for pure v2",
            ),
        ),
        Ok(Some(CgroupLayout::V1 { controllers })) => check(
            "cgroup",
            CheckStatus::Partial,
            format!(
                "cgroup v1 only: {}",
                controllers.keys().cloned().collect::<Vec<_>>().join(" ")
            ),
            Some(
                "pressure per group needs cgroup v2: boot with systemd.unified_cgroup_hierarchy=1",
            ),
        ),
        Ok(Some(CgroupLayout::None)) | Ok(None) => check(
            "cgroup",
            CheckStatus::Unavailable,
            "no cgroup filesystem is mounted".into(),
            Some("mount cgroup2 at /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)"),
        ),
        Err(error) => check(
            "cgroup",
            CheckStatus::Unavailable,
            format!("the mount table could not be read: {error}"),
            None,
        ),
    }
}

fn psi(root: &Path) -> Check {
    match read_system_pressure(root, PressureResource::Cpu) {
        Ok(Some(_)) => check(
            "psi",
            CheckStatus::Ok,
            "pressure stall information readable (/proc/pressure)".into(),
            None,
        ),
        Ok(None) => check(
            "psi",
            CheckStatus::Unavailable,
            "no /proc/pressure: the kernel has PSI off".into(),
            Some(
                "boot with psi=1 (kernels built with CONFIG_PSI_DEFAULT_DISABLED), or use a kernel with CONFIG_PSI",
            ),
        ),
        Err(error) => check(
            "psi",
            CheckStatus::Unavailable,
            format!("/proc/pressure could not be read: {error}"),
            None,
        ),
    }
}

fn process_io(root: &Path) -> Check {
    let mut buffer = Vec::with_capacity(512);
    let own = read_process_io(root, std::process::id(), &mut buffer);
    let init = read_process_io(root, 1, &mut buffer);
    match (own, init) {
        (Ok(Some(_)), Ok(Some(_))) => check(
            "process_io",
            CheckStatus::Ok,
            "/proc/PID/io readable, other users' processes included".into(),
            None,
        ),
        (Ok(Some(_)), Err(error)) if error.class() == ReadErrorClass::PermissionDenied => check(
            "process_io",
            CheckStatus::Partial,
            "/proc/PID/io of other users' processes is not readable: global disk figures leave them out".into(),
            Some("run as root, or grant CAP_SYS_PTRACE (setcap cap_sys_ptrace+ep on the binary)"),
        ),
        (Ok(Some(_)), _) => check(
            "process_io",
            CheckStatus::Ok,
            "/proc/PID/io readable".into(),
            None,
        ),
        (Ok(None), _) | (Err(_), _) => check(
            "process_io",
            CheckStatus::Unavailable,
            "/proc/PID/io is not readable: the kernel lacks CONFIG_TASK_IO_ACCOUNTING, or /proc is restricted".into(),
            Some("use a kernel with task I/O accounting, or mount /proc without hidepid"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    #[test]
    fn rapl_zones_are_listed_and_a_machine_without_them_says_why() {
        let root = fixture(&[
            ("sys/class/powercap/intel-rapl:0/name", "package-0\n"),
            ("sys/class/powercap/intel-rapl:0/energy_uj", "123\n"),
        ]);
        let found = rapl(root.path());
        assert_eq!(found.status, CheckStatus::Ok, "{found:?}");
        assert!(
            found.finding.contains("package-0 (intel-rapl:0)"),
            "{found:?}"
        );
        let bare = fixture(&[]);
        let missing = rapl(bare.path());
        assert_eq!(missing.status, CheckStatus::Unavailable);
        assert!(missing.finding.contains("no RAPL powercap interface"));
        assert!(missing.fix.unwrap().contains("not measurable here"));
    }

    #[test]
    fn a_v2_layout_lists_its_controllers_and_no_psi_names_the_boot_flag() {
        let root = fixture(&[("proc/self/mountinfo", "")]);
        let mount_point = root.path().join("sys/fs/cgroup");
        std::fs::create_dir_all(&mount_point).unwrap();
        std::fs::write(mount_point.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        std::fs::write(
            root.path().join("proc/self/mountinfo"),
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n",
        )
        .unwrap();
        let layout = cgroup(root.path());
        assert_eq!(layout.status, CheckStatus::Ok, "{layout:?}");
        assert!(
            layout.finding.contains("controllers: cpu memory pids"),
            "{layout:?}"
        );
        let no_psi = psi(root.path());
        assert_eq!(no_psi.status, CheckStatus::Unavailable);
        assert!(no_psi.fix.unwrap().contains("psi=1"));
    }

    #[test]
    fn nvidia_smi_missing_from_the_path_is_said_with_the_fix() {
        let empty = tempfile::tempdir().unwrap();
        let setting = DoctorSetting {
            root: PathBuf::from("/"),
            search_path: Some(empty.path().as_os_str().to_owned()),
            smi_timeout: Duration::from_secs(1),
        };
        let found = nvidia_smi(&setting);
        assert_eq!(found.status, CheckStatus::Unavailable);
        assert_eq!(found.finding, "nvidia-smi is not on the search path");
        assert!(found.fix.unwrap().contains("PATH"));
    }
}

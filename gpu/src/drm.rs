//! Linux AMD and Intel readings from DRM sysfs files and `/proc/PID/fdinfo`.
//!
//! Everything is read under a root path (`/` in production, a fixture tree in
//! tests). Devices come from `root/sys/class/drm/card<N>/device/`: `vendor`
//! (0x1002 AMD, 0x8086 Intel), `mem_info_vram_used`, `mem_info_vram_total` and, for
//! AMD only, `gpu_busy_percent`. The identifier is the PCI address (the target of
//! the `device` link, or `PCI_SLOT_NAME` in `uevent`); DRM has no index. A device
//! with neither memory nor busy figure gives no record.
//!
//! Processes come from the DRM keys of `fdinfo` files: one client per
//! (`drm-pdev`, `drm-client-id`), counted once even when several descriptors or
//! processes share it (the lowest PID keeps it). Memory is the resident VRAM
//! (`drm-resident-vram*`/`local*`, else the older `drm-memory-vram`, else every
//! `drm-resident-*` region for integrated GPUs). Compute use is the engines' busy
//! time (`drm-engine-<e>` ns, divided by `drm-engine-capacity-<e>`, or
//! `drm-cycles-<e>` over `drm-total-cycles-<e>`) since the previous sample of the same
//! series, summed over engines and clients and capped to 0..=100 percent. Clients of
//! the proprietary NVIDIA driver are skipped: NVML reads those.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};

use crate::{GpuSampleRequest, GpuSource, ProcessScope};

/// PCI vendor ID of AMD.
pub const PCI_VENDOR_AMD: u32 = 0x1002;
/// PCI vendor ID of Intel.
pub const PCI_VENDOR_INTEL: u32 = 0x8086;
/// PCI vendor ID of NVIDIA.
pub const PCI_VENDOR_NVIDIA: u32 = 0x10de;

/// One DRM card as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmDevice {
    /// `cardN`.
    pub card: String,
    /// PCI vendor ID.
    pub pci_vendor: u32,
    /// PCI address, `0000:03:00.0`.
    pub pci_address: String,
    /// `mem_info_vram_used`, bytes.
    pub vram_used_bytes: Option<u64>,
    /// `mem_info_vram_total`, bytes.
    pub vram_total_bytes: Option<u64>,
    /// `gpu_busy_percent` (read for AMD only).
    pub busy_percent: Option<u8>,
}

impl DrmDevice {
    /// The vendor for a PCI vendor ID.
    pub fn vendor(&self) -> GpuVendor {
        vendor_from_pci(self.pci_vendor)
    }

    /// The device record, or `None` for a vendor DRM does not report devices for
    /// (only AMD and Intel) or a device with neither memory nor busy figure.
    pub fn reading(&self) -> Option<GpuDeviceReading> {
        let vendor = self.vendor();
        if !matches!(vendor, GpuVendor::Amd | GpuVendor::Intel) {
            return None;
        }
        if self.vram_used_bytes.is_none() && self.busy_percent.is_none() {
            return None;
        }
        let mut reading = GpuDeviceReading::new(vendor, self.pci_address.clone());
        reading.memory_used_bytes = self.vram_used_bytes;
        reading.memory_total_bytes = self.vram_total_bytes;
        reading.compute_utilization_percent = self.busy_percent.map(f64::from);
        Some(reading)
    }
}

fn vendor_from_pci(id: u32) -> GpuVendor {
    match id {
        PCI_VENDOR_AMD => GpuVendor::Amd,
        PCI_VENDOR_INTEL => GpuVendor::Intel,
        PCI_VENDOR_NVIDIA => GpuVendor::Nvidia,
        _ => GpuVendor::Other,
    }
}

fn vendor_from_driver(driver: &str) -> GpuVendor {
    match driver {
        "amdgpu" | "radeon" => GpuVendor::Amd,
        "i915" | "xe" => GpuVendor::Intel,
        "nouveau" | "nova" => GpuVendor::Nvidia,
        _ => GpuVendor::Other,
    }
}

/// Every `card<N>` under `root/sys/class/drm` with a readable vendor and PCI address,
/// in card order, one per PCI address.
pub fn read_drm_devices(root: &Path) -> Vec<DrmDevice> {
    let class = root.join("sys/class/drm");
    let Ok(entries) = std::fs::read_dir(&class) else {
        return Vec::new();
    };
    let mut cards: Vec<(u32, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let number = name.strip_prefix("card")?.parse::<u32>().ok()?;
            Some((number, name))
        })
        .collect();
    cards.sort();
    let mut seen = BTreeSet::new();
    let mut devices = Vec::new();
    for (_, card) in cards {
        let device_dir = class.join(&card).join("device");
        let Some(pci_vendor) = read_trimmed(&device_dir.join("vendor")).and_then(|v| parse_hex(&v))
        else {
            continue;
        };
        let Some(pci_address) = pci_address(&device_dir) else {
            continue;
        };
        if !seen.insert(pci_address.clone()) {
            continue;
        }
        let busy_percent = if pci_vendor == PCI_VENDOR_AMD {
            read_trimmed(&device_dir.join("gpu_busy_percent"))
                .and_then(|v| v.parse::<u8>().ok())
                .filter(|v| *v <= 100)
        } else {
            None
        };
        devices.push(DrmDevice {
            card,
            pci_vendor,
            pci_address,
            vram_used_bytes: read_u64(&device_dir.join("mem_info_vram_used")),
            vram_total_bytes: read_u64(&device_dir.join("mem_info_vram_total")),
            busy_percent,
        });
    }
    devices
}

/// PCI address from the `device` link's target, else `PCI_SLOT_NAME` in `uevent`.
fn pci_address(device_dir: &Path) -> Option<String> {
    if let Ok(target) = std::fs::read_link(device_dir)
        && let Some(name) = target.file_name().and_then(|n| n.to_str())
        && looks_like_pci_address(name)
    {
        return Some(name.to_owned());
    }
    let uevent = std::fs::read_to_string(device_dir.join("uevent")).ok()?;
    uevent
        .lines()
        .find_map(|line| line.trim().strip_prefix("PCI_SLOT_NAME="))
        .map(str::trim)
        .filter(|name| looks_like_pci_address(name))
        .map(str::to_owned)
}

/// `dddd:bb:dd.f` in hexadecimal.
fn looks_like_pci_address(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() == 12
        && bytes[4] == b':'
        && bytes[7] == b':'
        && bytes[10] == b'.'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| matches!(i, 4 | 7 | 10) || b.is_ascii_hexdigit())
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

fn parse_hex(text: &str) -> Option<u32> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    u32::from_str_radix(digits, 16).ok()
}

/// Busy counters of one engine class in one `fdinfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineCounters {
    /// `drm-engine-<e>`: busy nanoseconds.
    pub busy_ns: Option<u64>,
    /// `drm-cycles-<e>`: busy GPU cycles.
    pub cycles: Option<u64>,
    /// `drm-total-cycles-<e>`: elapsed GPU cycles.
    pub total_cycles: Option<u64>,
    /// `drm-engine-capacity-<e>`: engines of this class (1 when absent).
    pub capacity: u64,
}

impl Default for EngineCounters {
    fn default() -> Self {
        Self {
            busy_ns: None,
            cycles: None,
            total_cycles: None,
            capacity: 1,
        }
    }
}

/// The DRM keys of one `fdinfo` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmFdinfo {
    /// `drm-driver`.
    pub driver: String,
    /// `drm-pdev`, the PCI address.
    pub pdev: Option<String>,
    /// `drm-client-id`.
    pub client_id: u64,
    /// `drm-resident-<region>`, bytes.
    pub resident: BTreeMap<String, u64>,
    /// `drm-memory-<region>` (older amdgpu), bytes.
    pub legacy_memory: BTreeMap<String, u64>,
    /// Engine counters by engine name.
    pub engines: BTreeMap<String, EngineCounters>,
}

impl DrmFdinfo {
    /// Resident device memory in bytes (see the module docs for the order of keys).
    pub fn memory_bytes(&self) -> Option<u64> {
        let is_vram = |region: &str| region.starts_with("vram") || region.starts_with("local");
        let vram: Vec<u64> = self
            .resident
            .iter()
            .filter(|(region, _)| is_vram(region))
            .map(|(_, bytes)| *bytes)
            .collect();
        if !vram.is_empty() {
            return Some(vram.iter().fold(0_u64, |a, b| a.saturating_add(*b)));
        }
        if let Some(bytes) = self.legacy_memory.get("vram") {
            return Some(*bytes);
        }
        if !self.resident.is_empty() {
            return Some(
                self.resident
                    .values()
                    .fold(0_u64, |a, b| a.saturating_add(*b)),
            );
        }
        None
    }
}

/// Parse the DRM keys of an `fdinfo` file; `None` when it is not a DRM client
/// (no `drm-driver` or no `drm-client-id`).
pub fn parse_fdinfo(text: &str) -> Option<DrmFdinfo> {
    let mut driver = None;
    let mut pdev = None;
    let mut client_id = None;
    let mut resident = BTreeMap::new();
    let mut legacy_memory = BTreeMap::new();
    let mut engines: BTreeMap<String, EngineCounters> = BTreeMap::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        if !key.starts_with("drm-") {
            continue;
        }
        if key == "drm-driver" {
            driver = Some(value.to_owned());
        } else if key == "drm-pdev" {
            pdev = Some(value.to_owned());
        } else if key == "drm-client-id" {
            client_id = value.parse::<u64>().ok();
        } else if let Some(engine) = key.strip_prefix("drm-engine-capacity-") {
            if let Some(capacity) = value.parse::<u64>().ok().filter(|c| *c > 0) {
                engines.entry(engine.to_owned()).or_default().capacity = capacity;
            }
        } else if let Some(engine) = key.strip_prefix("drm-engine-") {
            if let Some(ns) = value.strip_suffix("ns").map(str::trim)
                && let Ok(ns) = ns.parse::<u64>()
            {
                engines.entry(engine.to_owned()).or_default().busy_ns = Some(ns);
            }
        } else if let Some(engine) = key.strip_prefix("drm-total-cycles-") {
            if let Ok(cycles) = value.parse::<u64>() {
                engines.entry(engine.to_owned()).or_default().total_cycles = Some(cycles);
            }
        } else if let Some(engine) = key.strip_prefix("drm-cycles-") {
            if let Ok(cycles) = value.parse::<u64>() {
                engines.entry(engine.to_owned()).or_default().cycles = Some(cycles);
            }
        } else if let Some(region) = key.strip_prefix("drm-resident-") {
            if let Some(bytes) = parse_memory(value) {
                resident.insert(region.to_owned(), bytes);
            }
        } else if let Some(region) = key.strip_prefix("drm-memory-")
            && let Some(bytes) = parse_memory(value)
        {
            legacy_memory.insert(region.to_owned(), bytes);
        }
    }
    Some(DrmFdinfo {
        driver: driver?,
        pdev,
        client_id: client_id?,
        resident,
        legacy_memory,
        engines,
    })
}

/// `<n>` bytes, `<n> KiB`, `<n> MiB` or `<n> GiB`.
fn parse_memory(value: &str) -> Option<u64> {
    let mut parts = value.split_whitespace();
    let number = parts.next()?.parse::<u64>().ok()?;
    let factor: u64 = match parts.next() {
        None => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    number.checked_mul(factor)
}

/// One DRM client found in a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmClient {
    /// The process that holds it (the lowest PID when shared).
    pub pid: u32,
    /// Its `fdinfo` keys.
    pub info: DrmFdinfo,
}

/// Every DRM client of the processes in `scope` under `root/proc`, once per
/// (`drm-pdev`, `drm-client-id`). Clients without `drm-pdev` and clients of the
/// proprietary NVIDIA driver are left out.
pub fn read_drm_clients(root: &Path, scope: &ProcessScope) -> Vec<DrmClient> {
    let proc_dir = root.join("proc");
    let pids: Vec<u32> = match scope {
        ProcessScope::Pids(pids) => pids.iter().copied().collect(),
        ProcessScope::All => {
            let Ok(entries) = std::fs::read_dir(&proc_dir) else {
                return Vec::new();
            };
            let mut pids: Vec<u32> = entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .collect();
            pids.sort_unstable();
            pids
        }
    };
    let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut clients = Vec::new();
    for pid in pids {
        let pid_dir = proc_dir.join(pid.to_string());
        let Ok(entries) = std::fs::read_dir(pid_dir.join("fdinfo")) else {
            continue;
        };
        let mut fds: Vec<(u64, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let fd = entry.file_name().to_str()?.parse::<u64>().ok()?;
                Some((fd, entry.path()))
            })
            .collect();
        fds.sort();
        for (fd, path) in fds {
            // Skip descriptors that clearly are not DRM devices without reading them.
            if let Ok(target) = std::fs::read_link(pid_dir.join("fd").join(fd.to_string()))
                && !target.starts_with("/dev/dri")
            {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Some(info) = parse_fdinfo(&text) else {
                continue;
            };
            if info.driver.starts_with("nvidia") {
                continue;
            }
            let Some(pdev) = info.pdev.clone() else {
                continue;
            };
            if seen.insert((pdev, info.client_id)) {
                clients.push(DrmClient { pid, info });
            }
        }
    }
    clients
}

/// Counters of one client at one time.
#[derive(Debug, Clone)]
struct ClientSnapshot {
    at: Duration,
    engines: BTreeMap<String, EngineCounters>,
}

/// Fraction of one engine class's capacity used between two snapshots, summed over
/// engine classes; `None` when a counter went backwards or nothing is comparable.
fn busy_fraction(previous: &ClientSnapshot, current: &ClientSnapshot) -> Option<f64> {
    let wall_ns = current.at.checked_sub(previous.at)?.as_nanos();
    if wall_ns == 0 {
        return None;
    }
    let wall_ns = wall_ns as f64;
    let mut total = 0.0;
    let mut comparable = false;
    for (engine, now) in &current.engines {
        let Some(before) = previous.engines.get(engine) else {
            continue;
        };
        let capacity = now.capacity.max(1) as f64;
        if let (Some(busy_now), Some(busy_before)) = (now.busy_ns, before.busy_ns) {
            let delta = busy_now.checked_sub(busy_before)?;
            total += delta as f64 / wall_ns / capacity;
            comparable = true;
        } else if let (Some(c_now), Some(t_now), Some(c_before), Some(t_before)) = (
            now.cycles,
            now.total_cycles,
            before.cycles,
            before.total_cycles,
        ) {
            let busy = c_now.checked_sub(c_before)?;
            let elapsed = t_now.checked_sub(t_before)?;
            if elapsed > 0 {
                total += busy as f64 / elapsed as f64 / capacity;
                comparable = true;
            }
        }
    }
    comparable.then_some(total)
}

/// One process's clients on one device, added up.
struct ProcessTotals {
    vendor: GpuVendor,
    memory: Option<u64>,
    /// Busy fraction summed over clients; `None` once any client is not comparable.
    fraction: Option<f64>,
}

fn monotonic_now() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// [`GpuSource`] over DRM sysfs and `fdinfo` under a root path.
pub struct DrmSource {
    root: PathBuf,
    clock: Box<dyn Fn() -> Duration + Send>,
    baselines: HashMap<SamplingSeries, HashMap<(String, u64), ClientSnapshot>>,
}

impl std::fmt::Debug for DrmSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrmSource")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl DrmSource {
    /// A source reading under `root` (`/` in production).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_clock(root, monotonic_now)
    }

    /// Same, with the monotonic clock used for utilization intervals (tests).
    pub fn with_clock(
        root: impl Into<PathBuf>,
        clock: impl Fn() -> Duration + Send + 'static,
    ) -> Self {
        Self {
            root: root.into(),
            clock: Box::new(clock),
            baselines: HashMap::new(),
        }
    }

    fn processes(
        &mut self,
        request: &GpuSampleRequest,
        devices: &[DrmDevice],
    ) -> Vec<GpuProcessReading> {
        let clients = read_drm_clients(&self.root, &request.processes);
        let now = (self.clock)();
        let previous = self.baselines.remove(&request.series).unwrap_or_default();
        let mut current = HashMap::new();
        let mut grouped: BTreeMap<(u32, String), ProcessTotals> = BTreeMap::new();
        for client in clients {
            let Some(pdev) = client.info.pdev.clone() else {
                continue;
            };
            let key = (pdev.clone(), client.info.client_id);
            let snapshot = ClientSnapshot {
                at: now,
                engines: client.info.engines.clone(),
            };
            let fraction = previous
                .get(&key)
                .and_then(|before| busy_fraction(before, &snapshot));
            current.insert(key, snapshot);
            if !request.selects_device(&pdev, None) {
                continue;
            }
            let vendor = devices
                .iter()
                .find(|device| device.pci_address == pdev)
                .map(DrmDevice::vendor)
                .unwrap_or_else(|| vendor_from_driver(&client.info.driver));
            let memory = client.info.memory_bytes();
            let entry = grouped.entry((client.pid, pdev)).or_insert(ProcessTotals {
                vendor,
                memory: None,
                fraction: Some(0.0),
            });
            entry.memory = match (entry.memory, memory) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
            entry.fraction = match (entry.fraction, fraction) {
                (Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
        }
        self.baselines.insert(request.series, current);
        grouped
            .into_iter()
            .map(|((pid, pdev), totals)| GpuProcessReading {
                vendor: totals.vendor,
                device_identifier: pdev,
                device_index: None,
                process_id: pid,
                memory_used_bytes: totals.memory,
                compute_utilization_percent: totals.fraction.map(|f| (f * 100.0).clamp(0.0, 100.0)),
            })
            .collect()
    }
}

impl GpuSource for DrmSource {
    fn name(&self) -> &str {
        "drm"
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        let taken_at = Instant::now();
        let devices = read_drm_devices(&self.root);
        let device_records = if request.device_metrics {
            devices
                .iter()
                .filter_map(DrmDevice::reading)
                .filter(|reading| request.selects_device(&reading.device_identifier, None))
                .collect()
        } else {
            Vec::new()
        };
        let processes = if request.process_metrics {
            self.processes(request, &devices)
        } else {
            Vec::new()
        };
        Some(GpuSample {
            devices: device_records,
            processes,
            taken_at,
        })
    }
}

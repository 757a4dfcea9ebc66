//! DRM readers on fixture trees: an AMD card laid out like real sysfs (links), Intel
//! cards found through `uevent`, and `fdinfo` files in the formats amdgpu, xe and
//! i915 write, read over two samples with an injected clock.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use support::fixture_text;
use wattline_gpu::drm::{
    DrmSource, PCI_VENDOR_AMD, PCI_VENDOR_INTEL, parse_fdinfo, read_drm_clients, read_drm_devices,
};
use wattline_gpu::{GpuSampleRequest, GpuSource, ProcessScope};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::{GpuProcessReading, GpuVendor};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const AMD_PCI: &str = "0000:03:00.0";
const ARC_PCI: &str = "0000:07:00.0";
const IGPU_PCI: &str = "0000:00:02.0";

struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, relative: &str, content: &str) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn link(&self, relative: &str, target: &str) {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// An AMD card the way sysfs shows it: `class/drm/card0` links into the PCI
    /// device tree and `card0/device` links back to the PCI function.
    fn amd_card(&self) {
        let function = "sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0";
        self.write(&format!("{function}/vendor"), "0x1002\n");
        self.write(&format!("{function}/mem_info_vram_used"), "1073741824\n");
        self.write(&format!("{function}/mem_info_vram_total"), "17163091968\n");
        self.write(&format!("{function}/gpu_busy_percent"), "42\n");
        std::fs::create_dir_all(self.root().join(format!("{function}/drm/card0"))).unwrap();
        self.link(
            &format!("{function}/drm/card0/device"),
            "../../../0000:03:00.0",
        );
        self.link(
            "sys/class/drm/card0",
            "../../devices/pci0000:00/0000:00:01.0/0000:03:00.0/drm/card0",
        );
        // Connectors and render nodes are not cards.
        self.write("sys/class/drm/card0-DP-1/status", "connected\n");
        self.write("sys/class/drm/renderD128/dev", "226:128\n");
    }

    /// A card found through `uevent` (plain folders, no links).
    fn uevent_card(&self, card: &str, vendor: u32, pci: &str, vram: Option<(u64, u64)>) {
        let device = format!("sys/class/drm/{card}/device");
        self.write(&format!("{device}/vendor"), &format!("0x{vendor:04x}\n"));
        self.write(
            &format!("{device}/uevent"),
            &format!("DRIVER=xe\nPCI_CLASS=30000\nPCI_ID=8086:56A0\nPCI_SLOT_NAME={pci}\n"),
        );
        // A busy file that must be ignored for anything but AMD.
        self.write(&format!("{device}/gpu_busy_percent"), "99\n");
        if let Some((used, total)) = vram {
            self.write(
                &format!("{device}/mem_info_vram_used"),
                &format!("{used}\n"),
            );
            self.write(
                &format!("{device}/mem_info_vram_total"),
                &format!("{total}\n"),
            );
        }
    }

    fn fdinfo(&self, pid: u32, fd: u32, text: &str, target: &str) {
        self.write(&format!("proc/{pid}/fdinfo/{fd}"), text);
        self.link(&format!("proc/{pid}/fd/{fd}"), target);
    }
}

fn host() -> Tree {
    let tree = Tree::new();
    tree.amd_card();
    tree.uevent_card(
        "card1",
        PCI_VENDOR_INTEL,
        ARC_PCI,
        Some((512 * MIB, 16 * 1024 * MIB)),
    );
    tree.uevent_card("card2", PCI_VENDOR_INTEL, IGPU_PCI, None);
    tree.uevent_card("card3", 0x10de, "0000:01:00.0", Some((MIB, 8 * 1024 * MIB)));
    tree
}

fn amd_fdinfo(gfx: u64, compute: u64) -> String {
    fixture_text("drm/fdinfo_amdgpu_legacy.txt")
        .replace("{GFX}", &gfx.to_string())
        .replace("{COMPUTE}", &compute.to_string())
}

fn xe_fdinfo(rcs: u64, vcs: u64, total: u64) -> String {
    fixture_text("drm/fdinfo_xe.txt")
        .replace("{RCS}", &rcs.to_string())
        .replace("{VCS}", &vcs.to_string())
        .replace("{TOTAL}", &total.to_string())
}

fn i915_fdinfo(render: u64) -> String {
    fixture_text("drm/fdinfo_i915.txt").replace("{RENDER}", &render.to_string())
}

/// Writes every process's descriptors with the given counters.
fn processes(tree: &Tree, amd: (u64, u64), xe: (u64, u64, u64), render: u64) {
    let amd = amd_fdinfo(amd.0, amd.1);
    // pid 100: the AMD client twice (a dup) and a plain file.
    tree.fdinfo(100, 0, &fixture_text("drm/fdinfo_not_drm.txt"), "/dev/null");
    tree.fdinfo(100, 5, &amd, "/dev/dri/renderD128");
    tree.fdinfo(100, 6, &amd, "/dev/dri/renderD128");
    // pid 300 inherited the same client across fork: counted for pid 100 only.
    tree.fdinfo(300, 4, &amd, "/dev/dri/renderD128");
    tree.fdinfo(200, 3, &xe_fdinfo(xe.0, xe.1, xe.2), "/dev/dri/renderD129");
    tree.fdinfo(400, 9, &i915_fdinfo(render), "/dev/dri/renderD130");
    // The proprietary NVIDIA driver's clients are NVML's business.
    tree.fdinfo(
        500,
        7,
        "drm-driver:\tnvidia-drm\ndrm-client-id:\t3\ndrm-pdev:\t0000:01:00.0\n",
        "/dev/dri/card3",
    );
}

fn clocked_source(root: &Path) -> (DrmSource, Arc<AtomicU64>) {
    let nanos = Arc::new(AtomicU64::new(10_000_000_000));
    let clock = Arc::clone(&nanos);
    let source = DrmSource::with_clock(PathBuf::from(root), move || {
        Duration::from_nanos(clock.load(Ordering::SeqCst))
    });
    (source, nanos)
}

/// (pid, device, vendor, memory bytes, utilization rounded to 0.001 %).
type Row<'a> = (u32, &'a str, GpuVendor, Option<u64>, Option<f64>);

fn summary(processes: &[GpuProcessReading]) -> Vec<Row<'_>> {
    processes
        .iter()
        .map(|p| {
            (
                p.process_id,
                p.device_identifier.as_str(),
                p.vendor,
                p.memory_used_bytes,
                p.compute_utilization_percent
                    .map(|u| (u * 1000.0).round() / 1000.0),
            )
        })
        .collect()
}

#[test]
fn device_records_for_amd_and_intel_cards() {
    let tree = host();
    let devices = read_drm_devices(tree.root());
    let cards: Vec<_> = devices
        .iter()
        .map(|d| (d.card.as_str(), d.pci_address.as_str()))
        .collect();
    assert_eq!(
        cards,
        vec![
            ("card0", AMD_PCI),
            ("card1", ARC_PCI),
            ("card2", IGPU_PCI),
            ("card3", "0000:01:00.0")
        ]
    );
    assert_eq!(devices[0].pci_vendor, PCI_VENDOR_AMD);
    assert_eq!(devices[0].busy_percent, Some(42));
    assert_eq!(devices[1].busy_percent, None, "busy is read for AMD only");

    let mut source = DrmSource::new(tree.root());
    assert_eq!(source.name(), "drm");
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.process_metrics = false;
    let sample = source.sample(&request).expect("DRM always answers");
    assert_eq!(
        sample.devices.len(),
        2,
        "integrated Intel and NVIDIA give no record"
    );
    let amd = &sample.devices[0];
    assert_eq!(amd.vendor, GpuVendor::Amd);
    assert_eq!(amd.device_identifier, AMD_PCI);
    assert_eq!(amd.device_index, None);
    assert_eq!(amd.memory_used_bytes, Some(1_073_741_824));
    assert_eq!(amd.memory_total_bytes, Some(17_163_091_968));
    assert_eq!(amd.compute_utilization_percent, Some(42.0));
    assert_eq!(amd.power_draw_watts, None);
    let arc = &sample.devices[1];
    assert_eq!(arc.vendor, GpuVendor::Intel);
    assert_eq!(arc.device_identifier, ARC_PCI);
    assert_eq!(arc.memory_used_bytes, Some(512 * MIB));
    assert_eq!(arc.compute_utilization_percent, None);
    assert!(sample.processes.is_empty());

    request.device_selectors = vec![ARC_PCI.into()];
    let sample = source.sample(&request).expect("sample");
    assert_eq!(sample.devices.len(), 1);
    assert_eq!(sample.devices[0].device_identifier, ARC_PCI);
    // DRM has no index: an index selector matches nothing.
    request.device_selectors = vec!["0".into()];
    assert!(source.sample(&request).expect("sample").devices.is_empty());
}

#[test]
fn fdinfo_keys_in_each_driver_format() {
    let legacy = parse_fdinfo(&amd_fdinfo(1_000, 2_000)).expect("amdgpu client");
    assert_eq!(legacy.driver, "amdgpu");
    assert_eq!(legacy.client_id, 7);
    assert_eq!(legacy.pdev.as_deref(), Some(AMD_PCI));
    assert_eq!(legacy.memory_bytes(), Some(16204 * KIB), "drm-memory-vram");
    assert_eq!(legacy.engines["gfx"].busy_ns, Some(1_000));
    assert_eq!(legacy.engines["compute"].busy_ns, Some(2_000));
    assert_eq!(legacy.engines["enc_1"].busy_ns, Some(0));

    let current = parse_fdinfo(
        &fixture_text("drm/fdinfo_amdgpu.txt")
            .replace("{GFX}", "5")
            .replace("{COMPUTE}", "6"),
    )
    .expect("amdgpu client");
    assert_eq!(current.client_id, 12);
    assert_eq!(
        current.memory_bytes(),
        Some(262_144 * KIB),
        "drm-resident-vram, not gtt"
    );

    let xe = parse_fdinfo(&xe_fdinfo(28_257_900, 0, 7_655_183_225)).expect("xe client");
    assert_eq!(xe.memory_bytes(), Some(23992 * KIB), "drm-resident-vram0");
    assert_eq!(xe.engines["rcs"].cycles, Some(28_257_900));
    assert_eq!(xe.engines["rcs"].total_cycles, Some(7_655_183_225));
    assert_eq!(xe.engines["rcs"].capacity, 1);
    assert_eq!(xe.engines["vcs"].capacity, 2);
    assert_eq!(xe.engines["ccs"].capacity, 4);

    let i915 = parse_fdinfo(&i915_fdinfo(25_662_044_495)).expect("i915 client");
    assert_eq!(
        i915.memory_bytes(),
        Some(14 * MIB),
        "integrated: resident system memory"
    );
    assert_eq!(i915.engines["render"].busy_ns, Some(25_662_044_495));
    assert_eq!(i915.engines["video"].capacity, 2);
    assert_eq!(i915.engines["video-enhance"].busy_ns, Some(0));

    assert_eq!(parse_fdinfo(&fixture_text("drm/fdinfo_not_drm.txt")), None);
    assert_eq!(parse_fdinfo("drm-driver: amdgpu\n"), None, "no client id");
    assert_eq!(parse_fdinfo("\u{0}\u{ff}::::\ndrm-client-id: x\n"), None);
}

#[test]
fn clients_are_deduplicated_by_device_and_client_id() {
    let tree = host();
    processes(&tree, (0, 0), (0, 0, 1), 0);
    let clients = read_drm_clients(tree.root(), &ProcessScope::All);
    let keys: Vec<_> = clients
        .iter()
        .map(|c| {
            (
                c.pid,
                c.info.pdev.clone().unwrap_or_default(),
                c.info.client_id,
            )
        })
        .collect();
    assert_eq!(
        keys,
        vec![
            (100, AMD_PCI.to_owned(), 7),
            (200, ARC_PCI.to_owned(), 39),
            (400, IGPU_PCI.to_owned(), 10)
        ]
    );
}

#[test]
fn process_utilization_over_two_samples_of_the_same_series() {
    let tree = host();
    let (mut source, clock) = clocked_source(tree.root());
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.device_metrics = false;

    processes(&tree, (1_000_000_000, 0), (1_000, 0, 10_000), 5_000_000_000);
    let first = source.sample(&request).expect("sample");
    assert_eq!(
        summary(&first.processes),
        vec![
            (100, AMD_PCI, GpuVendor::Amd, Some(16204 * KIB), None),
            (200, ARC_PCI, GpuVendor::Intel, Some(23992 * KIB), None),
            (400, IGPU_PCI, GpuVendor::Intel, Some(14 * MIB), None),
        ],
        "first sample of the series: no utilization"
    );

    // One second later: AMD gfx +0.5 s and compute +0.25 s; xe rcs 600 of 2000
    // cycles plus vcs 1000 of 2000 cycles over 2 engines; i915 render +2 s (capped).
    clock.fetch_add(1_000_000_000, Ordering::SeqCst);
    tree_rewrite(
        &tree,
        (1_500_000_000, 250_000_000),
        (1_600, 1_000, 12_000),
        7_000_000_000,
    );
    let second = source.sample(&request).expect("sample");
    assert_eq!(
        summary(&second.processes),
        vec![
            (100, AMD_PCI, GpuVendor::Amd, Some(16204 * KIB), Some(75.0)),
            (
                200,
                ARC_PCI,
                GpuVendor::Intel,
                Some(23992 * KIB),
                Some(55.0)
            ),
            (400, IGPU_PCI, GpuVendor::Intel, Some(14 * MIB), Some(100.0)),
        ]
    );

    // The on-demand series keeps its own baseline: its first sample has none.
    let mut on_demand = request.clone();
    on_demand.series = SamplingSeries::OnDemand;
    let first_on_demand = source.sample(&on_demand).expect("sample");
    assert!(
        first_on_demand
            .processes
            .iter()
            .all(|p| p.compute_utilization_percent.is_none())
    );

    // A counter that goes backwards (a recreated client) gives no utilization.
    clock.fetch_add(1_000_000_000, Ordering::SeqCst);
    tree_rewrite(
        &tree,
        (10, 250_000_000),
        (1_600, 1_000, 14_000),
        7_000_000_000,
    );
    let third = source.sample(&request).expect("sample");
    let utilization: Vec<_> = third
        .processes
        .iter()
        .map(|p| (p.process_id, p.compute_utilization_percent))
        .collect();
    assert_eq!(
        utilization,
        vec![(100, None), (200, Some(0.0)), (400, Some(0.0))]
    );
}

fn tree_rewrite(tree: &Tree, amd: (u64, u64), xe: (u64, u64, u64), render: u64) {
    std::fs::remove_dir_all(tree.root().join("proc")).unwrap();
    processes(tree, amd, xe, render);
}

#[test]
fn process_scope_and_device_selectors_filter_process_records() {
    let tree = host();
    processes(&tree, (0, 0), (0, 0, 1), 0);
    let (mut source, _clock) = clocked_source(tree.root());
    let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
    request.processes = ProcessScope::Pids(BTreeSet::from([200, 999]));
    let sample = source.sample(&request).expect("sample");
    let pids: Vec<_> = sample.processes.iter().map(|p| p.process_id).collect();
    assert_eq!(pids, vec![200]);
    assert_eq!(
        sample.devices.len(),
        2,
        "device records describe the whole GPU"
    );

    // Deduplication happens among the processes in scope: with pid 300 alone in
    // scope, the client it shares with pid 100 is counted for it.
    request.processes = ProcessScope::Pids(BTreeSet::from([300]));
    let sample = source.sample(&request).expect("sample");
    let pids: Vec<_> = sample.processes.iter().map(|p| p.process_id).collect();
    assert_eq!(pids, vec![300]);

    request.processes = ProcessScope::All;
    request.device_selectors = vec![AMD_PCI.to_uppercase()];
    let sample = source.sample(&request).expect("sample");
    assert_eq!(sample.devices.len(), 1);
    let pids: Vec<_> = sample.processes.iter().map(|p| p.process_id).collect();
    assert_eq!(pids, vec![100]);
}

#[test]
fn an_empty_or_missing_root_is_an_empty_answer() {
    let empty = tempfile::tempdir().unwrap();
    let mut source = DrmSource::new(empty.path());
    let sample = source
        .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("sample");
    assert!(sample.devices.is_empty() && sample.processes.is_empty());
    let mut missing = DrmSource::new(empty.path().join("nowhere"));
    assert!(
        missing
            .sample(&GpuSampleRequest::all(SamplingSeries::OnDemand))
            .is_some()
    );
}

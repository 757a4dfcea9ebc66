//! Property tests of the GPU parsers: `nvidia-smi` answers (device query, power stream
//! lines, compute apps), DRM `fdinfo` and sysfs files, and the device lists of
//! `CUDA_VISIBLE_DEVICES`, `NVIDIA_VISIBLE_DEVICES` and `--gpus`. No input makes them
//! panic, every error names its line and field, and generated valid answers parse to
//! the values they were generated from.
//!
//! `PROPTEST_CASES=200000 cargo test -p wattline-gpu --test fuzz_gpu_parsers` for a
//! longer run.

#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;

use fuzz_support::{edge_u64, hostile_token, lossy, mutated, noise, runner_config, with_files};
use wattline_gpu::drm::{DrmFdinfo, DrmSource, EngineCounters, parse_fdinfo, read_drm_devices};
use wattline_gpu::nvidia_smi::{
    FieldList, QueryFieldSet, SmiAnswer, SmiParseError, interpret_answer,
};
use wattline_gpu::nvidia_smi_collector::parse_compute_apps;
use wattline_gpu::nvidia_smi_stream::POWER_FIELDS;
use wattline_gpu::visible_devices::{
    DeviceIdentity, selectors_from_cuda_visible_devices, selectors_from_gpus_flag,
    selectors_from_nvidia_visible_devices, selectors_select_device,
};
use wattline_gpu::{GpuSampleRequest, GpuSource, ProcessScope};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::{GpuDeviceReading, GpuVendor};

/// Cases per test in CI; the parsers are pure, so this stays fast in debug builds.
const CI_CASES: u32 = 2000;
/// Cases per test that writes a fixture tree.
const CI_TREE_CASES: u32 = 300;

const MIB: u64 = 1024 * 1024;

const SMI_SAMPLES: &[&str] = &[
    include_str!("fixtures/smi/eight_h100.csv"),
    include_str!("fixtures/smi/na_fields.csv"),
    include_str!("fixtures/smi/one_device.csv"),
    include_str!("fixtures/smi/core_fields.csv"),
    include_str!("fixtures/smi/no_devices.txt"),
    include_str!("fixtures/smi/unknown_field.txt"),
    "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 16.85\n1, GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d, [N/A]\n",
];
const COMPUTE_APPS_SAMPLES: &[&str] = &[
    "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 4242, 1377\nGPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d, 77, [N/A]\n",
    "No running processes found\n",
];
const FDINFO_SAMPLES: &[&str] = &[
    "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t12\ndrm-pdev:\t0000:03:00.0\ndrm-resident-vram:\t262144 KiB\ndrm-resident-gtt:\t4 MiB\ndrm-memory-vram:\t262144 KiB\ndrm-engine-gfx:\t1000 ns\ndrm-engine-compute:\t2000 ns\n",
    "drm-driver:\txe\ndrm-client-id:\t7\ndrm-pdev:\t0000:07:00.0\ndrm-resident-vram0:\t512 MiB\ndrm-cycles-rcs:\t100\ndrm-total-cycles-rcs:\t1000\ndrm-engine-capacity-vcs:\t2\ndrm-cycles-vcs:\t5\ndrm-total-cycles-vcs:\t1000\n",
    "drm-driver:\ti915\ndrm-client-id:\t3\ndrm-pdev:\t0000:00:02.0\ndrm-resident-system0:\t1 GiB\ndrm-engine-render:\t123456789 ns\n",
];
const DEVICE_LIST_SAMPLES: &[&str] = &[
    "0,1,GPU-8932f937,MIG-0a1b2c3d",
    "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c,0000:03:00.0",
    "all",
    "none",
    "MIG-GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c/1/0",
];

/// The field lists the collector and the power stream ask for.
fn query_fields() -> Vec<Vec<&'static str>> {
    let mut lists = Vec::new();
    for list in [
        FieldList::Full,
        FieldList::FullEventReasons,
        FieldList::Core,
    ] {
        for instant_power in [true, false] {
            lists.push(
                QueryFieldSet {
                    list,
                    instant_power,
                }
                .fields(),
            );
        }
    }
    lists.extend(
        POWER_FIELDS
            .iter()
            .map(|field| vec!["index", "uuid", *field]),
    );
    lists
}

/// The first query's fields (the full list and the instant power), which the rows
/// generated here answer.
fn first_fields() -> Vec<&'static str> {
    QueryFieldSet::FIRST.fields()
}

/// Interprets `text` for every field list; each error must name a line of it (and the
/// field, for a bad value).
fn interpret_all(text: &str) {
    for fields in query_fields() {
        match interpret_answer(text, &fields) {
            Ok(SmiAnswer::Devices(devices)) => {
                assert!(devices.iter().all(|d| !d.device_identifier.is_empty()));
            }
            Ok(_) => {}
            Err(error) => check_smi_error(text, &fields, &error),
        }
    }
}

fn check_smi_error(text: &str, fields: &[&str], error: &SmiParseError) {
    let shown = error.to_string();
    let line = match error {
        SmiParseError::FieldCount { line, .. } | SmiParseError::MissingIdentifier { line } => *line,
        SmiParseError::InvalidValue { line, field, .. } => {
            assert!(fields.contains(&field.as_str()), "{shown}");
            assert!(shown.contains(field.as_str()), "{shown}");
            *line
        }
        SmiParseError::NoUuidInQuery | SmiParseError::UnsupportedField(_) => {
            panic!("the collector's own query was refused: {shown}")
        }
    };
    assert!(shown.starts_with(&format!("line {line}:")), "{shown}");
    assert!(
        (1..=text.lines().count()).contains(&line),
        "{shown} in {text:?}"
    );
}

/// One `--query-gpu` row of the full query, as values and as the reading they mean.
#[derive(Debug, Clone)]
struct SmiRow {
    index: u32,
    uuid: String,
    name: String,
    utilization: [Option<u8>; 2],
    memory_mib: [Option<u64>; 2],
    temperature: Option<i16>,
    power_centiwatts: [Option<u32>; 2],
    clocks: [Option<u32>; 2],
    fan: Option<u8>,
    pstate: Option<u8>,
    throttle: [Option<bool>; 4],
    ecc: [Option<u64>; 2],
    instant_centiwatts: Option<u32>,
}

/// Names as drivers report them (a name is taken as written, so few are enough).
const PRODUCT_NAMES: &[&str] = &[
    "NVIDIA H100 80GB HBM3",
    "Tesla V100-SXM2-16GB",
    "NVIDIA GeForce RTX 5090 Laptop GPU",
    "NVIDIA A100-SXM4-40GB",
    "Quadro RTX 8000",
];

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` from 128 bits.
fn uuid(bits: u128) -> String {
    let hex = format!("{bits:032x}");
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

fn smi_row() -> impl Strategy<Value = SmiRow> {
    (
        (
            any::<u32>(),
            any::<u128>().prop_map(uuid),
            select(PRODUCT_NAMES).prop_map(str::to_owned),
        ),
        (
            any::<[Option<u8>; 2]>(),
            [
                option::of(0..=u64::MAX / MIB),
                option::of(0..=u64::MAX / MIB),
            ],
            any::<Option<i16>>(),
        ),
        (
            any::<[Option<u32>; 2]>(),
            any::<[Option<u32>; 2]>(),
            option::of(0..=100u8),
            option::of(0..=15u8),
        ),
        (
            any::<[Option<bool>; 4]>(),
            any::<[Option<u64>; 2]>(),
            any::<Option<u32>>(),
        ),
    )
        .prop_map(
            |(
                (index, uuid, name),
                (utilization, memory_mib, temperature),
                (power_centiwatts, clocks, fan, pstate),
                (throttle, ecc, instant_centiwatts),
            )| SmiRow {
                index,
                uuid,
                name,
                utilization,
                memory_mib,
                temperature,
                power_centiwatts,
                clocks,
                fan,
                pstate,
                throttle,
                ecc,
                instant_centiwatts,
            },
        )
}

fn or_na<T>(value: Option<T>, show: impl FnOnce(T) -> String) -> String {
    value.map_or_else(|| "[N/A]".to_owned(), show)
}

fn watts(centiwatts: u32) -> String {
    format!("{}.{:02}", centiwatts / 100, centiwatts % 100)
}

impl SmiRow {
    fn values(&self) -> Vec<String> {
        let active = |flag: Option<bool>| {
            or_na(flag, |on| {
                if on {
                    "Active".into()
                } else {
                    "Not Active".into()
                }
            })
        };
        let mut values = vec![self.index.to_string(), self.uuid.clone(), self.name.clone()];
        values.extend(self.utilization.map(|v| or_na(v, |v| v.to_string())));
        values.extend(self.memory_mib.map(|v| or_na(v, |v| v.to_string())));
        values.push(or_na(self.temperature, |v| v.to_string()));
        values.extend(self.power_centiwatts.map(|v| or_na(v, watts)));
        values.extend(self.clocks.map(|v| or_na(v, |v| v.to_string())));
        values.push(or_na(self.fan, |v| v.to_string()));
        values.push(or_na(self.pstate, |v| format!("P{v}")));
        values.extend(self.throttle.map(active));
        values.extend(self.ecc.map(|v| or_na(v, |v| v.to_string())));
        values.push(or_na(self.instant_centiwatts, watts));
        values
    }

    fn reading(&self) -> GpuDeviceReading {
        let mut reading = GpuDeviceReading::new(GpuVendor::Nvidia, self.uuid.clone());
        let float = |v: Option<u8>| v.map(f64::from);
        reading.device_index = Some(self.index);
        reading.name = Some(self.name.clone());
        reading.compute_utilization_percent = float(self.utilization[0]);
        reading.memory_utilization_percent = float(self.utilization[1]);
        reading.memory_used_bytes = self.memory_mib[0].map(|mib| mib * MIB);
        reading.memory_total_bytes = self.memory_mib[1].map(|mib| mib * MIB);
        reading.temperature_celsius = self.temperature.map(f64::from);
        reading.power_draw_watts =
            self.power_centiwatts[0].map(|c| watts(c).parse().unwrap_or(f64::NAN));
        reading.power_limit_watts =
            self.power_centiwatts[1].map(|c| watts(c).parse().unwrap_or(f64::NAN));
        reading.sm_clock_mhz = self.clocks[0].map(f64::from);
        reading.memory_clock_mhz = self.clocks[1].map(f64::from);
        reading.fan_speed_percent = float(self.fan);
        reading.performance_state = self.pstate;
        [
            reading.throttle_thermal,
            reading.throttle_hw_thermal,
            reading.throttle_power,
            reading.throttle_hw_slowdown,
        ] = self.throttle;
        [reading.ecc_corrected, reading.ecc_uncorrected] = self.ecc;
        reading.instant_power_watts = self
            .instant_centiwatts
            .map(|c| watts(c).parse().unwrap_or(f64::NAN));
        // The integral's figure: the instantaneous one where given, else the mean.
        reading.power_field = match (self.instant_centiwatts, self.power_centiwatts[0]) {
            (Some(_), _) => Some("power.draw.instant"),
            (None, Some(_)) => Some("power.draw"),
            (None, None) => None,
        };
        reading
    }
}

/// A client's `fdinfo` keys, as generated.
#[derive(Debug, Clone)]
struct Client {
    driver: String,
    pdev: Option<String>,
    client_id: u64,
    resident: BTreeMap<String, (u64, &'static str)>,
    legacy: BTreeMap<String, (u64, &'static str)>,
    busy_ns: BTreeMap<String, u64>,
    cycles: BTreeMap<String, (u64, u64, u64)>,
}

fn memory_amount() -> impl Strategy<Value = (u64, &'static str)> {
    (edge_u64(), select(&["", "KiB", "MiB", "GiB"][..]))
}

/// A PCI address, `dddd:bb:dd.f`.
fn pci_address() -> impl Strategy<Value = String> {
    (any::<u16>(), any::<u8>(), 0..32u8, 0..8u8).prop_map(|(domain, bus, device, function)| {
        format!("{domain:04x}:{bus:02x}:{device:02x}.{function}")
    })
}

fn client() -> impl Strategy<Value = Client> {
    let regions = || {
        let names = select(&["vram", "vram0", "gtt", "cpu", "system0", "local0", "stolen"][..])
            .prop_map(str::to_owned);
        proptest::collection::btree_map(names, memory_amount(), 0..4)
    };
    let engine = || {
        select(
            &[
                "gfx", "compute", "rcs", "bcs", "vcs", "vecs", "ccs", "render", "capacity",
            ][..],
        )
        .prop_map(str::to_owned)
    };
    (
        select(&["amdgpu", "xe", "i915", "nouveau", "nvidia-drm", "panfrost"][..])
            .prop_map(str::to_owned),
        proptest::option::of(pci_address()),
        edge_u64(),
        regions(),
        regions(),
        proptest::collection::btree_map(engine(), edge_u64(), 0..4),
        proptest::collection::btree_map(engine(), (edge_u64(), edge_u64(), 0..4u64), 0..3),
    )
        .prop_map(
            |(driver, pdev, client_id, resident, legacy, busy_ns, cycles)| Client {
                driver,
                pdev,
                client_id,
                resident,
                legacy,
                busy_ns,
                cycles,
            },
        )
}

impl Client {
    fn text(&self) -> String {
        let mut text = format!(
            "pos:\t0\nflags:\t02100002\ndrm-driver:\t{}\ndrm-client-id:\t{}\n",
            self.driver, self.client_id
        );
        if let Some(pdev) = &self.pdev {
            let _ = writeln!(text, "drm-pdev:\t{pdev}");
        }
        for (prefix, regions) in [
            ("drm-resident-", &self.resident),
            ("drm-memory-", &self.legacy),
        ] {
            for (region, (amount, unit)) in regions {
                let _ = writeln!(text, "{prefix}{region}:\t{amount} {unit}");
            }
        }
        for (engine, ns) in &self.busy_ns {
            let _ = writeln!(text, "drm-engine-{engine}:\t{ns} ns");
        }
        for (engine, (cycles, total, capacity)) in &self.cycles {
            let _ = writeln!(
                text,
                "drm-cycles-{engine}:\t{cycles}\ndrm-total-cycles-{engine}:\t{total}\ndrm-engine-capacity-{engine}:\t{capacity}"
            );
        }
        text
    }

    fn parsed(&self) -> DrmFdinfo {
        let bytes = |regions: &BTreeMap<String, (u64, &str)>| -> BTreeMap<String, u64> {
            regions
                .iter()
                .filter_map(|(region, (amount, unit))| {
                    let factor = match *unit {
                        "KiB" => 1 << 10,
                        "MiB" => 1 << 20,
                        "GiB" => 1 << 30,
                        _ => 1,
                    };
                    // A size past 64 bits is left out, not wrapped.
                    Some((region.clone(), amount.checked_mul(factor)?))
                })
                .collect()
        };
        let mut engines: BTreeMap<String, EngineCounters> = BTreeMap::new();
        for (engine, ns) in &self.busy_ns {
            engines.entry(engine.clone()).or_default().busy_ns = Some(*ns);
        }
        for (engine, (cycles, total, capacity)) in &self.cycles {
            let counters = engines.entry(engine.clone()).or_default();
            counters.cycles = Some(*cycles);
            counters.total_cycles = Some(*total);
            // A capacity of 0 is no capacity: the default of 1 stays.
            counters.capacity = (*capacity).max(1);
        }
        DrmFdinfo {
            driver: self.driver.clone(),
            pdev: self.pdev.clone(),
            client_id: self.client_id,
            resident: bytes(&self.resident),
            legacy_memory: bytes(&self.legacy),
            engines,
        }
    }
}

/// A DRM card's sysfs files, each valid, hostile or absent.
#[derive(Debug, Clone)]
struct Card {
    vendor: Option<Vec<u8>>,
    uevent: Option<Vec<u8>>,
    vram_used: Option<Vec<u8>>,
    vram_total: Option<Vec<u8>>,
    busy: Option<Vec<u8>>,
}

fn card_file(valid: impl Strategy<Value = String>) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        3 => valid.prop_map(|text| Some(text.into_bytes())),
        1 => hostile_token().prop_map(Some),
        1 => Just(None),
    ]
}

fn card() -> impl Strategy<Value = Card> {
    (
        card_file(
            select(&["0x1002\n", "0x8086\n", "0x10de\n", "0x1af4\n", "1002\n"][..])
                .prop_map(str::to_owned),
        ),
        card_file(pci_address().prop_map(|pci| format!("DRIVER=amdgpu\nPCI_SLOT_NAME={pci}\n"))),
        card_file(any::<u64>().prop_map(|n| format!("{n}\n"))),
        card_file(any::<u64>().prop_map(|n| format!("{n}\n"))),
        card_file((0..=120u8).prop_map(|n| format!("{n}\n"))),
    )
        .prop_map(|(vendor, uevent, vram_used, vram_total, busy)| Card {
            vendor,
            uevent,
            vram_used,
            vram_total,
            busy,
        })
}

/// What the reader takes a sysfs text for: UTF-8, trimmed.
fn sysfs_text(content: &Option<Vec<u8>>) -> Option<&str> {
    content
        .as_deref()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
        .map(str::trim)
}

/// `dddd:bb:dd.f` in hexadecimal.
fn is_pci_address(text: &str) -> bool {
    text.len() == 12
        && text.char_indices().all(|(i, c)| match i {
            4 | 7 => c == ':',
            10 => c == '.',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Most cards or processes one case writes.
const MAX_TREE_ENTRIES: usize = 4;

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn smi_answers_never_panic_on_noise(bytes in noise()) {
        interpret_all(&lossy(&bytes));
    }

    #[test]
    fn smi_answers_never_panic_on_mutated_samples(bytes in mutated(SMI_SAMPLES)) {
        interpret_all(&lossy(&bytes));
    }

    #[test]
    fn smi_rows_parse_to_the_generated_readings(rows in proptest::collection::vec(smi_row(), 1..5)) {
        let text: String = rows.iter().map(|row| format!("{}\n", row.values().join(", "))).collect();
        let expected: Vec<GpuDeviceReading> = rows.iter().map(SmiRow::reading).collect();
        prop_assert_eq!(interpret_answer(&text, &first_fields()), Ok(SmiAnswer::Devices(expected)));
    }

    #[test]
    fn a_bad_smi_value_names_its_line_and_field(
        rows in proptest::collection::vec(smi_row(), 1..5),
        row in any::<proptest::sample::Index>(),
        // Every field but uuid (anything identifies) and name (anything is a name).
        field in (0..first_fields().len()).prop_filter("uuid and name take any text", |f| *f != 1 && *f != 2),
        bad in select(&["x1", "1e400", "-", "P16", "NaN", "Maybe"][..]),
    ) {
        let row = row.index(rows.len());
        let mut lines: Vec<Vec<String>> = rows.iter().map(SmiRow::values).collect();
        lines[row][field] = bad.to_owned();
        let text: String = lines.iter().map(|values| format!("{}\n", values.join(", "))).collect();
        let error = interpret_answer(&text, &first_fields());
        let expected = SmiParseError::InvalidValue {
            line: row + 1,
            field: first_fields()[field].to_owned(),
            value: bad.to_owned(),
        };
        prop_assert_eq!(&error, &Err(expected));
        check_smi_error(&text, &first_fields(), &error.unwrap_err());
    }

    #[test]
    fn a_short_smi_row_names_its_line(rows in proptest::collection::vec(smi_row(), 1..5), row in any::<proptest::sample::Index>(), keep in 1..first_fields().len()) {
        let row = row.index(rows.len());
        let mut lines: Vec<Vec<String>> = rows.iter().map(SmiRow::values).collect();
        lines[row].truncate(keep);
        let text: String = lines.iter().map(|values| format!("{}\n", values.join(", "))).collect();
        prop_assert_eq!(interpret_answer(&text, &first_fields()), Err(SmiParseError::FieldCount {
            line: row + 1,
            expected: first_fields().len(),
            found: keep,
        }));
    }

    #[test]
    fn stream_lines_parse_to_their_power(index in any::<u32>(), centiwatts in proptest::option::of(any::<u32>()), field in select(&POWER_FIELDS[..])) {
        let uuid = "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c";
        let line = format!("{index}, {uuid}, {}", or_na(centiwatts, watts));
        let Ok(SmiAnswer::Devices(devices)) = interpret_answer(&line, &["index", "uuid", field]) else {
            return Err(TestCaseError::fail(format!("{line:?} is not a device line")));
        };
        prop_assert_eq!(devices.len(), 1);
        prop_assert_eq!(devices[0].device_index, Some(index));
        let expected = centiwatts.map(|c| f64::from(c) / 100.0);
        // Each figure lands where its name says: the instantaneous one beside the mean.
        let (read, other) = if field == "power.draw.instant" {
            (devices[0].instant_power_watts, devices[0].power_draw_watts)
        } else {
            (devices[0].power_draw_watts, devices[0].instant_power_watts)
        };
        prop_assert_eq!(other, None);
        let close = match (read, expected) {
            (Some(read), Some(expected)) => (read - expected).abs() <= expected * 1e-12,
            (read, expected) => read == expected,
        };
        prop_assert!(close, "{line:?} read as {:?}", read);
    }

    #[test]
    fn compute_apps_never_panic(bytes in prop_oneof![noise(), mutated(COMPUTE_APPS_SAMPLES), mutated(SMI_SAMPLES)]) {
        let devices = [
            GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"),
            GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
        ];
        let _ = parse_compute_apps(&lossy(&bytes), &devices);
    }

    #[test]
    fn compute_apps_parse_to_the_generated_processes(
        apps in proptest::collection::vec((0..2usize, any::<u32>(), proptest::option::of(edge_u64())), 0..8),
    ) {
        let mut devices = vec![
            GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"),
            GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"),
        ];
        devices[1].device_index = Some(1);
        let text: String = apps.iter().map(|(device, pid, mib)| {
            format!("{}, {pid}, {}\n", devices[*device].device_identifier, or_na(*mib, |m| m.to_string()))
        }).collect();
        let processes = parse_compute_apps(&text, &devices);
        let processes = processes.ok_or_else(|| TestCaseError::fail(format!("{text:?} refused")))?;
        prop_assert_eq!(processes.len(), apps.len());
        for (process, (device, pid, mib)) in processes.iter().zip(&apps) {
            prop_assert_eq!(&process.device_identifier, &devices[*device].device_identifier);
            prop_assert_eq!(process.device_index, devices[*device].device_index);
            prop_assert_eq!(process.process_id, *pid);
            // Memory past 64 bits in bytes is unknown, not wrapped.
            prop_assert_eq!(process.memory_used_bytes, mib.and_then(|m| m.checked_mul(MIB)));
        }
    }

    #[test]
    fn fdinfo_never_panics(bytes in prop_oneof![noise(), mutated(FDINFO_SAMPLES)]) {
        if let Some(info) = parse_fdinfo(&lossy(&bytes)) {
            let _ = info.memory_bytes();
        }
    }

    #[test]
    fn fdinfo_parses_to_the_generated_client(client in client()) {
        let parsed = parse_fdinfo(&client.text());
        prop_assert_eq!(&parsed, &Some(client.parsed()));
        let _ = parsed.and_then(|info| info.memory_bytes());
    }

    #[test]
    fn device_lists_never_panic(bytes in prop_oneof![noise(), mutated(DEVICE_LIST_SAMPLES)], index in proptest::option::of(any::<u32>())) {
        let text = lossy(&bytes);
        let mut selectors = selectors_from_cuda_visible_devices(&text);
        selectors.extend(selectors_from_nvidia_visible_devices(&text));
        match selectors_from_gpus_flag(&text) {
            Ok(listed) => selectors.extend(listed),
            Err(error) => {
                let shown = error.to_string();
                prop_assert!(shown.starts_with(&format!("--gpus: entry {} ", error.position)), "{shown}");
                let entry = text.trim().split(',').nth(error.position - 1).map(str::trim);
                prop_assert_eq!(entry, Some(error.entry.as_str()));
            }
        }
        let instances = vec![text.to_string()];
        let device = DeviceIdentity { identifier: text.as_ref(), index, mig_instances: &instances };
        let _ = selectors_select_device(&selectors, &device);
    }
}

proptest! {
    #![proptest_config(runner_config(CI_TREE_CASES))]

    #[test]
    fn drm_cards_read_back_what_sysfs_holds(cards in proptest::collection::vec(card(), 0..=MAX_TREE_ENTRIES)) {
        let files = (0..MAX_TREE_ENTRIES).flat_map(|number| {
            let card = cards.get(number);
            [
                ("vendor", card.and_then(|c| c.vendor.as_deref())),
                ("uevent", card.and_then(|c| c.uevent.as_deref())),
                ("mem_info_vram_used", card.and_then(|c| c.vram_used.as_deref())),
                ("mem_info_vram_total", card.and_then(|c| c.vram_total.as_deref())),
                ("gpu_busy_percent", card.and_then(|c| c.busy.as_deref())),
            ]
            .map(|(file, content)| (format!("sys/class/drm/card{number}/device/{file}"), content))
        });
        let devices = with_files(files, read_drm_devices)?;
        let mut seen = Vec::new();
        let mut expected = Vec::new();
        for (number, card) in cards.iter().enumerate() {
            let vendor = sysfs_text(&card.vendor).and_then(|v| {
                let digits = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")).unwrap_or(v);
                u32::from_str_radix(digits, 16).ok()
            });
            let pci = sysfs_text(&card.uevent)
                .and_then(|text| text.lines().find_map(|line| line.trim().strip_prefix("PCI_SLOT_NAME=")))
                .map(str::trim)
                .filter(|pci| is_pci_address(pci));
            let (Some(vendor), Some(pci)) = (vendor, pci) else { continue };
            if seen.contains(&pci) {
                continue;
            }
            seen.push(pci);
            let number_in = |content: &Option<Vec<u8>>| sysfs_text(content).and_then(|t| t.parse::<u64>().ok());
            let busy = (vendor == 0x1002)
                .then(|| sysfs_text(&card.busy).and_then(|t| t.parse::<u8>().ok()).filter(|b| *b <= 100))
                .flatten();
            expected.push((format!("card{number}"), vendor, pci.to_owned(), number_in(&card.vram_used), number_in(&card.vram_total), busy));
        }
        let read: Vec<_> = devices.into_iter().map(|d| (d.card, d.pci_vendor, d.pci_address, d.vram_used_bytes, d.vram_total_bytes, d.busy_percent)).collect();
        prop_assert_eq!(read, expected);
    }

    #[test]
    fn drm_clients_over_two_samples_stay_within_0_and_100_percent(
        first in proptest::collection::vec(prop_oneof![client().prop_map(|c| c.text().into_bytes()), mutated(FDINFO_SAMPLES)], 0..=MAX_TREE_ENTRIES),
        second in proptest::collection::vec(prop_oneof![client().prop_map(|c| c.text().into_bytes()), mutated(FDINFO_SAMPLES)], 0..=MAX_TREE_ENTRIES),
        elapsed_ns in edge_u64(),
    ) {
        let clock = Arc::new(AtomicU64::new(0));
        let mut source: Option<DrmSource> = None;
        let mut request = GpuSampleRequest::all(SamplingSeries::Polling);
        request.processes = ProcessScope::Pids((1..=MAX_TREE_ENTRIES as u32).collect());
        let mut samples = Vec::new();
        for clients in [&first, &second] {
            let files = (1..=MAX_TREE_ENTRIES)
                .map(|pid| (format!("proc/{pid}/fdinfo/3"), clients.get(pid - 1).map(Vec::as_slice)));
            let sample = with_files(files, |root| {
                let now = Arc::clone(&clock);
                source
                    .get_or_insert_with(|| DrmSource::with_clock(root, move || Duration::from_nanos(now.load(Ordering::SeqCst))))
                    .sample(&request)
            })?;
            samples.push(sample);
            clock.fetch_add(elapsed_ns, Ordering::SeqCst);
        }
        for sample in samples.into_iter().flatten() {
            for process in sample.processes {
                if let Some(percent) = process.compute_utilization_percent {
                    prop_assert!((0.0..=100.0).contains(&percent), "{percent}");
                }
            }
        }
    }
}

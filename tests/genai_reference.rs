//! The `gen_ai.*` metrics as the GPU spec's reference exports them: a differential
//! test. The reference (`genai-otel-instrument` 1.42.0, reading NVML through pynvml)
//! and `wattline run` read the same fake NVML (two devices) and export OTLP/HTTP to a
//! bare receiver that decodes the requests with the official opentelemetry-proto
//! types. Every GPU/energy metric is compared by name, and on every request and
//! point by data type, unit, temporality, monotonicity, integer or double, and
//! attribute keys; every `gen_ai.gpu.*` gauge (a constant of the fake: power,
//! temperature, memory, utilisation, clocks, fan, throttle) also by its values per
//! device. What differs on purpose is listed below with its reason; anything else
//! fails.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The reference's metrics the spec says are never reported, with why.
const NEVER_REPORTED: &[(&str, &str)] = &[
    (
        "gen_ai.gpu.pcie.tx",
        "PCIe throughput is not a cost of the program (gpu-energy-co2.md)",
    ),
    (
        "gen_ai.gpu.pcie.rx",
        "PCIe throughput is not a cost of the program (gpu-energy-co2.md)",
    ),
    (
        "gen_ai.codecarbon.task.duration",
        "codecarbon's own task bookkeeping (gpu-energy-co2.md)",
    ),
];

/// Attribute keys the reference takes from codecarbon's description of the host (its
/// country, region, Python version, CPU model...): wattline measures the GPU and uses
/// a configured carbon intensity, so it has none of them.
const CODECARBON_KEYS: &[&str] = &[
    "source",
    "country",
    "region",
    "os",
    "python_version",
    "cpu_count",
    "cpu_model",
    "gpu_count",
    "gpu_model",
    "on_cloud",
    "cloud_provider",
    "cloud_region",
];

/// The metrics whose reference values come from codecarbon (the others from NVML).
const FROM_CODECARBON: &[&str] = &[
    "gen_ai.energy.consumed",
    "gen_ai.energy.total",
    "gen_ai.power.consumption",
    "gen_ai.co2.emissions_rate",
];

/// What one receiver saw of one metric, over every request and every point.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    /// Data type, unit, temporality and monotonicity of each request's metric: one
    /// signature when every request agreed.
    signatures: BTreeSet<String>,
    /// `as_int` / `as_double` over every point.
    value_kinds: BTreeSet<String>,
    attribute_keys: BTreeSet<String>,
    /// A gauge's distinct values per `gpu_id` attribute value, over every point.
    values_by_gpu_id: BTreeMap<String, BTreeSet<String>>,
}

/// The receiver script, started on a free port, writing its summaries to `out`.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Receiver {
    fn start(python: &str, out: PathBuf) -> Self {
        let mut child = Command::new(python)
            .arg(script("otlp_summary_receiver.py"))
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .expect("the receiver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Receiver { child, port, out }
    }

    /// Every metric seen, by name; the union of the attribute keys of its points.
    fn seen(mut self) -> BTreeMap<String, Seen> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
        for line in text.lines() {
            let summary: Value = serde_json::from_str(line).unwrap();
            let keys: BTreeSet<String> = summary["attribute_keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|key| key.as_str().unwrap().to_owned())
                .collect();
            let values: BTreeMap<String, BTreeSet<String>> = summary["values_by_gpu_id"]
                .as_object()
                .map(|values| {
                    values
                        .iter()
                        .map(|(id, points)| {
                            let distinct = points
                                .as_array()
                                .unwrap()
                                .iter()
                                // Nine significant figures: a unit conversion's last
                                // bit is not a difference.
                                .map(|value| format!("{:.9e}", value.as_f64().unwrap()))
                                .collect();
                            (id.clone(), distinct)
                        })
                        .collect()
                })
                .unwrap_or_default();
            let signature = format!(
                "{} unit={:?} temporality={} monotonic={}",
                summary["type"].as_str().unwrap(),
                summary["unit"].as_str().unwrap(),
                summary["temporality"],
                summary["monotonic"]
            );
            let kinds: BTreeSet<String> = summary["value_kinds"]
                .as_array()
                .map(|kinds| {
                    kinds
                        .iter()
                        .map(|kind| kind.as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let name = summary["name"].as_str().unwrap().to_owned();
            let known = seen.entry(name).or_insert_with(|| Seen {
                signatures: BTreeSet::new(),
                value_kinds: BTreeSet::new(),
                attribute_keys: BTreeSet::new(),
                values_by_gpu_id: BTreeMap::new(),
            });
            known.signatures.insert(signature);
            known.value_kinds.extend(kinds);
            known.attribute_keys.extend(keys);
            for (id, values) in values {
                known.values_by_gpu_id.entry(id).or_default().extend(values);
            }
        }
        seen
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference")
        .join(name)
}

/// A `PATH` folder whose `nvidia-smi --help` succeeds: codecarbon looks for a GPU only
/// then (it reads the GPU itself through pynvml).
fn smi_for_codecarbon() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("nvidia-smi");
    std::fs::write(&program, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// The reference for three seconds, with CO2 from codecarbon (`manual = false`) or
/// from the configured carbon intensity, the spec's formula (`manual = true`).
fn reference(python: &str, nvml: &Path, manual: bool) -> BTreeMap<String, Seen> {
    let home = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(python, home.path().join("reference.jsonl"));
    let smi = smi_for_codecarbon();
    let status = Command::new(python)
        .arg(script("genai_reference.py"))
        .arg(format!("http://127.0.0.1:{}", receiver.port))
        .arg("3")
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("LD_LIBRARY_PATH", nvml)
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", smi.path().display()),
        )
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "1000")
        .env("GENAI_ENABLE_GPU_METRICS", "true")
        .env("GENAI_GPU_COLLECTION_INTERVAL", "1")
        .env("GENAI_ENABLE_CO2_TRACKING", "true")
        .env(
            "GENAI_CO2_USE_MANUAL",
            if manual { "true" } else { "false" },
        )
        .env("GENAI_CARBON_INTENSITY", "475")
        .env("GENAI_CO2_COUNTRY_ISO_CODE", "USA")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the reference runs");
    assert!(status.success(), "the reference failed");
    receiver.seen()
}

/// `wattline run` for three seconds against the same fake, CO2 on.
fn wattline(python: &str, nvml: &Path) -> BTreeMap<String, Seen> {
    let home = tempfile::tempdir().unwrap();
    let receiver = Receiver::start(python, home.path().join("wattline.jsonl"));
    let output = support::wattline(home.path())
        .args(["run", "--quiet", "--otlp"])
        .arg(format!("http://127.0.0.1:{}/v1/metrics", receiver.port))
        .args(["--", "sleep", "3"])
        .env("LD_LIBRARY_PATH", nvml)
        .env("GENAI_ENABLE_CO2_TRACKING", "true")
        .env("GENAI_GPU_COLLECTION_INTERVAL", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    receiver.seen()
}

fn gpu_and_energy(name: &str) -> bool {
    [
        "gen_ai.gpu.",
        "gen_ai.power.",
        "gen_ai.energy.",
        "gen_ai.co2.",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
        || name == "gen_ai.codecarbon.task.duration"
}

#[test]
fn every_gen_ai_metric_has_the_references_type_unit_temporality_and_attributes() {
    let Some(python) = support::genai_reference_python() else {
        return;
    };
    let nvml = support::fake_nvml(&["-DFAKE_ENERGY_ADVANCES"]);
    let from_codecarbon = reference(&python, nvml.path(), false);
    let manual = reference(&python, nvml.path(), true);
    let ours = wattline(&python, nvml.path());

    let mut problems = Vec::new();
    let mut compared_values = Vec::new();
    let reference_names: BTreeSet<&String> = from_codecarbon
        .keys()
        .chain(manual.keys())
        .filter(|name| gpu_and_energy(name))
        .collect();
    assert!(
        reference_names.len() >= 29,
        "the reference exported only {reference_names:?}"
    );
    for name in &reference_names {
        if NEVER_REPORTED.iter().any(|(never, _)| never == name) {
            assert!(!ours.contains_key(*name), "{name} is never reported");
            continue;
        }
        // CO2 by the configured intensity is the spec's formula: the manual mode's.
        let theirs = if name.as_str() == "gen_ai.co2.emissions" {
            manual.get(*name)
        } else {
            from_codecarbon.get(*name).or_else(|| manual.get(*name))
        };
        let Some(theirs) = theirs else { continue };
        let Some(mine) = ours.get(*name) else {
            problems.push(format!("{name}: not exported by wattline"));
            continue;
        };
        let mut expected = theirs.clone();
        if FROM_CODECARBON.contains(&name.as_str()) {
            expected
                .attribute_keys
                .retain(|key| !CODECARBON_KEYS.contains(&key.as_str()));
        }
        // Every gen_ai.gpu.* gauge is a constant the fake NVML serves (power, temperature,
        // memory, utilisation, clocks, fan, throttle flags): its values, every point,
        // per device, are compared. The others (energy, CO2, codecarbon's power) grow
        // with time and with when each side started: their devices are compared.
        let mut mine = mine.clone();
        let constant = name.starts_with("gen_ai.gpu.")
            && expected.signatures.iter().all(|s| s.starts_with("gauge"));
        if !constant {
            let ids = |seen: &Seen| seen.values_by_gpu_id.keys().cloned().collect::<Vec<_>>();
            if ids(&mine) != ids(&expected) {
                problems.push(format!(
                    "{name}: gpu_id {:?} in the reference, {:?} in wattline",
                    ids(&expected),
                    ids(&mine)
                ));
            }
            mine.values_by_gpu_id.clone_from(&expected.values_by_gpu_id);
        } else {
            compared_values.push(name.to_string());
        }
        if mine.signatures.len() != 1 {
            problems.push(format!(
                "{name}: wattline's requests disagree: {:?}",
                mine.signatures
            ));
        }
        if mine != expected {
            problems.push(format!("{name}: reference {expected:?}, wattline {mine:?}"));
        }
    }
    for name in ours.keys().filter(|name| name.starts_with("gen_ai.")) {
        if !reference_names.contains(name) {
            problems.push(format!(
                "{name}: wattline exports it, the reference does not"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    eprintln!("values compared point by point: {compared_values:?}");
    for constant in [
        "gen_ai.gpu.utilization",
        "gen_ai.gpu.memory.used",
        "gen_ai.gpu.temperature",
        "gen_ai.gpu.power",
    ] {
        assert!(
            compared_values.iter().any(|name| name == constant),
            "{constant} was not compared by value: {compared_values:?}"
        );
    }
    // What wattline knows beyond the reference goes under its own names.
    for name in [
        "wattline.energy.consumed",
        "wattline.energy.total",
        "wattline.gpu.throttle.hw_thermal",
    ] {
        assert!(ours.contains_key(name), "{name} missing: {:?}", ours.keys());
    }
    assert!(
        ours["wattline.energy.consumed"]
            .attribute_keys
            .contains("gpu_uuid")
    );
}

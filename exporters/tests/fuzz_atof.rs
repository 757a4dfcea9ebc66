//! Property tests of the ATOF reader and of the energy replay behind `wattline report
//! FILE`: no file makes them panic, every error names the file and the line, marks and
//! energy records the writer wrote read back equal, and replaying them gives the same
//! report as replaying the records themselves.
//!
//! `PROPTEST_CASES=200000 cargo test -p wattline-exporters --test fuzz_atof` for a
//! longer run.

#[path = "../../tests/fuzz_support/energy_records.rs"]
mod energy_records;
#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use chrono::DateTime;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::json;
use uuid::Uuid;

use energy_records::{any_wall, file_of, finite, run_records, timestamp};
use fuzz_support::{mutated, noise, runner_config, with_files};
use wattline_energy::replay::report_from_records;
use wattline_exporters::atof::{render_energy_record, render_mark, render_scope};
use wattline_exporters::{AtofReadError, RecordedMark, parse_metric_measurements, read_atof_marks};
use wattline_model::energy::EnergyRecord;
use wattline_model::energy::{DevicePower, PowerRecord};
use wattline_model::events::{Mark, ScopeCategory, ScopeEvent, ScopeKind};
use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
};

/// Cases per test that reads a file (one file written per case).
const CI_FILE_CASES: u32 = 1000;
/// Cases per test that replays records without a file.
const CI_CASES: u32 = 2000;

const GOLDEN: &str = include_str!("golden/agent_run.jsonl");

/// The golden run and a run's energy records, as the writer writes them.
static SAMPLES: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    let wall = DateTime::from_timestamp(1_787_313_600, 0).unwrap_or_default();
    let records = [
        EnergyRecord::Started {
            at: 0,
            wall,
            settings: Box::default(),
        },
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: 1_000_000_000,
            devices: Some(vec![DevicePower {
                power_field: None,
                id: "GPU-a".into(),
                name: Some("NVIDIA H100".into()),
                watts: Some(312.5),
                counter_millijoules: Some(5_000),
                shares: None,
                mig_enabled: Some(false),
                at: None,
            }]),
            power_field: Some("power.draw".into()),
        }),
        EnergyRecord::Report {
            at: 2_000_000_000,
            wall,
        },
    ];
    let energy: String = records
        .iter()
        .filter_map(|record| render_energy_record(wall, None, record).ok())
        .map(|line| line + "\n")
        .collect();
    vec![
        GOLDEN,
        Box::leak(format!("{GOLDEN}{energy}").into_boxed_str()),
    ]
});

/// Writes `bytes` as this test's ATOF file and reads it back.
fn read_back(
    bytes: &[u8],
) -> Result<(PathBuf, Result<Vec<RecordedMark>, AtofReadError>), TestCaseError> {
    with_files([("run.jsonl".to_owned(), Some(bytes))], |root| {
        let path = root.join("run.jsonl");
        let read = read_atof_marks(&path);
        (path, read)
    })
}

/// A read of a file that exists fails only with a line of it named.
fn check_error(path: &Path, bytes: &[u8], error: &AtofReadError) -> Result<(), TestCaseError> {
    let shown = error.to_string();
    match error {
        AtofReadError::Invalid { line, .. } => {
            prop_assert!(
                shown.starts_with(&format!("{}:{line}: ", path.display())),
                "{shown}"
            );
            let lines = bytes.split(|b| *b == b'\n').count();
            prop_assert!(
                (1..=lines).contains(line),
                "{shown}: the file has {lines} lines"
            );
        }
        AtofReadError::Io { .. } => {
            prop_assert!(
                false,
                "reading a file that exists failed without naming a line: {shown}"
            );
        }
    }
    Ok(())
}

/// Reads `bytes` as a file, replays what it holds, and renders the report.
fn read_and_replay(bytes: &[u8]) -> Result<(), TestCaseError> {
    let (path, read) = read_back(bytes)?;
    match read {
        Ok(marks) => {
            let records = marks.into_iter().filter_map(|mark| mark.energy);
            if let Some(report) = report_from_records(records) {
                // The table, CSV and HTML renderers are the root crate's: its
                // tests/fuzz_report.rs renders the same reports.
                let _ = report.to_json();
            }
        }
        Err(error) => check_error(&path, bytes, &error)?,
    }
    Ok(())
}

fn metric_value() -> impl Strategy<Value = (MetricValueType, MetricValue)> {
    prop_oneof![
        (0..=i64::MAX as u64).prop_map(|v| (MetricValueType::U64, MetricValue::U64(v))),
        any::<i64>().prop_map(|v| (MetricValueType::I64, MetricValue::I64(v))),
        finite().prop_map(|v| (MetricValueType::F64, MetricValue::F64(v))),
    ]
}

fn attribute() -> impl Strategy<Value = AttributeValue> {
    prop_oneof![
        any::<bool>().prop_map(AttributeValue::Bool),
        any::<i64>().prop_map(AttributeValue::Int),
        finite().prop_map(AttributeValue::Float),
        ".{0,12}".prop_map(AttributeValue::String),
        proptest::collection::vec(".{0,6}", 1..3).prop_map(AttributeValue::StringArray),
    ]
}

fn measurement(index: usize) -> impl Strategy<Value = MetricMeasurement> {
    (
        select(
            &[
                "gen_ai.gpu.power",
                "nemo.relay.resource.memory.resident",
                "wattline.energy/consumed",
                "x-1",
            ][..],
        ),
        select(
            &[
                MetricKind::Counter,
                MetricKind::UpDownCounter,
                MetricKind::Gauge,
                MetricKind::Histogram,
            ][..],
        ),
        metric_value(),
        option::of("[ -~]{0,63}"),
        option::of(".{0,20}"),
        option::of(proptest::collection::btree_map(
            "[a-z_.]{1,12}",
            attribute(),
            0..3,
        )),
        option::of(proptest::collection::btree_set(
            -1_000_000i32..1_000_000,
            0..6,
        )),
    )
        .prop_map(
            move |(name, kind, (value_type, value), unit, description, attributes, boundaries)| {
                MetricMeasurement {
                    // One name per measurement: the same name twice must agree on kind and unit.
                    name: format!("{name}.{index}"),
                    kind,
                    value_type,
                    value,
                    unit,
                    description,
                    attributes,
                    boundaries: boundaries
                        .map(|set| set.into_iter().map(|b| f64::from(b) / 8.0).collect()),
                }
            },
        )
}

fn mark() -> impl Strategy<Value = Mark> {
    (
        any::<u128>(),
        option::of(any::<u128>()),
        timestamp(),
        select(
            &[
                "nemo.relay.resource_metrics",
                "wattline.metrics",
                "gen_ai.step",
            ][..],
        ),
        (0..4usize).prop_flat_map(|count| (0..count).map(measurement).collect::<Vec<_>>()),
    )
        .prop_map(|(uuid, parent, timestamp, name, measurements)| Mark {
            uuid: Uuid::from_u128(uuid),
            parent_uuid: parent.map(Uuid::from_u128),
            timestamp,
            name: name.to_owned(),
            data: MetricMeasurements { measurements },
        })
}

proptest! {
    #![proptest_config(runner_config(CI_FILE_CASES))]

    #[test]
    fn mutated_files_read_or_name_the_line(bytes in mutated(SAMPLES.as_slice())) {
        read_and_replay(&bytes)?;
    }

    #[test]
    fn noise_reads_or_names_the_line(bytes in noise()) {
        read_and_replay(&bytes)?;
    }

    #[test]
    fn marks_the_writer_wrote_read_back_equal(marks in proptest::collection::vec(mark(), 0..5)) {
        let root = Uuid::from_u128(1);
        let start = ScopeEvent {
            uuid: root,
            parent_uuid: None,
            timestamp: DateTime::UNIX_EPOCH,
            name: "wattline".into(),
            scope_category: ScopeCategory::Start,
            kind: ScopeKind::Custom,
            attributes: Vec::new(),
        };
        let mut lines = vec![render_scope(&start, Some(root)).map_err(|e| TestCaseError::fail(e.to_string()))?];
        for mark in &marks {
            lines.push(render_mark(mark, Some(root)).map_err(|e| TestCaseError::fail(e.to_string()))?);
        }
        let (_, read) = read_back(&file_of(&lines))?;
        let read = read.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(read.len(), marks.len());
        for (read, mark) in read.iter().zip(&marks) {
            prop_assert_eq!(&read.name, &mark.name);
            prop_assert_eq!(read.timestamp, mark.timestamp);
            prop_assert_eq!(&read.measurements, &mark.data.measurements);
            prop_assert_eq!(&read.energy, &None);
        }
    }

    #[test]
    fn energy_records_the_writer_wrote_read_back_and_replay_the_same(
        records in run_records(finite(), timestamp()),
        parent in option::of(any::<u128>()),
    ) {
        let wall = DateTime::UNIX_EPOCH;
        let lines = records
            .iter()
            .map(|record| render_energy_record(wall, parent.map(Uuid::from_u128), record))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let (_, read) = read_back(&file_of(&lines))?;
        let read: Vec<EnergyRecord> = read
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .into_iter()
            .filter_map(|mark| mark.energy)
            .collect();
        prop_assert_eq!(&read, &records);
        let replayed = report_from_records(read).map(|report| serde_json::to_value(&report).ok());
        let direct = report_from_records(records).map(|report| serde_json::to_value(&report).ok());
        prop_assert_eq!(replayed, direct);
    }
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn any_records_replay_without_panicking(records in run_records(any::<f64>(), any_wall())) {
        if let Some(report) = report_from_records(records) {
            let _ = report.to_json();
        }
    }

    #[test]
    fn measurement_data_from_any_json_parses_or_says_why(data in prop_oneof![
        Just(json!(null)),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,8}".prop_map(|s| json!(s)),
        (select(&["name", "kind", "value_type", "value", "unit", "boundaries", "attributes", "extra"][..]), prop_oneof![Just(json!(null)), Just(json!(-1)), Just(json!(1e300)), Just(json!("")), Just(json!([])), Just(json!({})), Just(json!(u64::MAX))])
            .prop_map(|(field, value)| {
                let mut measurement = json!({"name": "gen_ai.gpu.power", "kind": "gauge", "value_type": "f64", "value": 1.5, "unit": "W", "description": null, "attributes": null, "boundaries": null});
                measurement[field] = value;
                json!({"measurements": [measurement]})
            }),
    ]) {
        if let Err(reason) = parse_metric_measurements(&data) {
            prop_assert!(!reason.is_empty());
        }
    }
}

/// The per-line checks of a mark the reader makes, on the golden file's own mark.
#[test]
fn golden_marks_read_back() {
    let (_, read) = read_back(GOLDEN.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let marks = read.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(marks.len(), 1);
    assert_eq!(marks[0].measurements.len(), 2);
    let attributes: Option<&BTreeMap<String, AttributeValue>> =
        marks[0].measurements[0].attributes.as_ref();
    assert!(attributes.is_some_and(|a| a.len() == 2));
}

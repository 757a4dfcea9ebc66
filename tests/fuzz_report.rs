//! Property tests of `wattline report FILE` on hostile ATOF files: from any file the
//! reader accepts (energy records with any values, resource marks with any figures and
//! units), the report, its time series, the table's sparklines, the CSV row and the
//! HTML page are built without panicking; a file it refuses is named. Any energy
//! records, even ones no file could hold, render as a table.
//!
//! `PROPTEST_CASES=20000 cargo test -p wattline --test fuzz_report` for a longer run.

#[path = "fuzz_support/energy_records.rs"]
mod energy_records;
#[path = "fuzz_support/mod.rs"]
mod fuzz_support;

use proptest::prelude::*;
use proptest::sample::select;
use uuid::Uuid;

use energy_records::{any_wall, file_of, run_records, timestamp};
use fuzz_support::{runner_config, with_files};
use wattline::events::{Mark, RESOURCE_MARK_NAME};
use wattline::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
};
use wattline::report::csv::csv_row;
use wattline::report::html::render_html;
use wattline::report::render_table;
use wattline::report::series::power_sparklines;
use wattline::report_and_series_from_atof;
use wattline_energy::replay::report_from_records;
use wattline_exporters::atof::{render_energy_record, render_mark};

/// Cases in CI: each writes a file and renders a page.
const CI_CASES: u32 = 300;

/// A resource gauge the series reads, with any value and a unit it may not know.
fn resource_measurement() -> impl Strategy<Value = MetricMeasurement> {
    (
        select(
            &[
                "nemo.relay.resource.cpu.consumption_rate",
                "nemo.relay.resource.memory.resident",
                "nemo.relay.resource.memory.system.used",
            ][..],
        ),
        select(
            &[
                "logical_processors",
                "millicores",
                "kibibytes",
                "tebibytes",
                "bytes",
                "W",
            ][..],
        ),
        prop_oneof![
            any::<f64>().prop_filter("JSON holds finite numbers", |v| v.is_finite()),
            select(&[0.0, -1.0, f64::MAX, -f64::MAX, f64::MIN_POSITIVE][..]),
        ],
        select(&["global", "process_tree", ""][..]),
    )
        .prop_map(|(name, unit, value, scope)| MetricMeasurement {
            name: name.into(),
            kind: MetricKind::Gauge,
            value_type: MetricValueType::F64,
            value: MetricValue::F64(value),
            unit: Some(unit.into()),
            description: None,
            attributes: Some(
                [(
                    "nemo_relay.resource.measurement_scope".to_owned(),
                    AttributeValue::String(scope.into()),
                )]
                .into(),
            ),
            boundaries: None,
        })
}

/// A resource mark: one poll's gauges (one per name, as a poll writes them).
fn resource_mark() -> impl Strategy<Value = Mark> {
    (
        timestamp(),
        proptest::collection::vec(resource_measurement(), 0..3),
    )
        .prop_map(|(timestamp, mut measurements)| {
            measurements.sort_by(|a, b| a.name.cmp(&b.name));
            measurements.dedup_by(|a, b| a.name == b.name);
            Mark {
                uuid: Uuid::from_u128(7),
                parent_uuid: None,
                timestamp,
                name: RESOURCE_MARK_NAME.into(),
                data: MetricMeasurements { measurements },
            }
        })
}

/// A run's ATOF lines: its energy records with resource marks between them.
fn run_lines() -> impl Strategy<Value = Vec<String>> {
    (
        run_records(any::<f64>(), any_wall()),
        proptest::collection::vec((any::<proptest::sample::Index>(), resource_mark()), 0..6),
        any_wall(),
    )
        .prop_map(|(records, marks, stamped)| {
            let mut lines: Vec<String> = records
                .iter()
                .filter_map(|record| render_energy_record(stamped, None, record).ok())
                .collect();
            for (position, mark) in marks {
                if let Ok(line) = render_mark(&mark, None) {
                    let at = position.index(lines.len() + 1);
                    lines.insert(at, line);
                }
            }
            lines
        })
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn any_run_file_reports_in_every_format_without_panicking(lines in run_lines()) {
        let bytes = file_of(&lines);
        let (path, read) = with_files([("run.jsonl".to_owned(), Some(bytes.as_slice()))], |root| {
            let path = root.join("run.jsonl");
            let read = report_and_series_from_atof(&path);
            (path, read)
        })?;
        match read {
            Ok((report, series)) => {
                let _ = render_table(&report);
                let _ = report.to_json();
                let _ = power_sparklines(&report, &series);
                let _ = csv_row(&report, Default::default());
                let page = render_html(&report, &series, Default::default());
                prop_assert!(page.contains("</html>"));
            }
            Err(error) => {
                let shown = error.to_string();
                prop_assert!(shown.starts_with(&path.display().to_string()), "{shown}");
            }
        }
    }
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    /// Any records, even ones no file could hold (non-finite figures), replay into a
    /// report the table renders without panicking.
    #[test]
    fn any_records_replay_into_a_table_without_panicking(
        records in run_records(any::<f64>(), any_wall()),
    ) {
        if let Some(report) = report_from_records(records) {
            let _ = render_table(&report);
        }
    }
}

/// Found by this file: a run whose clock sits at chrono's last instant (which chrono
/// writes and reads back) overflowed `DateTime + TimeDelta` in the series' wall time
/// and in the sparkline's slots, a panic of `wattline report FILE`.
#[test]
fn a_run_at_the_end_of_time_reports_in_every_format() {
    use chrono::{DateTime, Utc};
    use wattline_model::energy::EnergyRecord;
    use wattline_model::energy::{DevicePower, PowerRecord};

    let power = |at| {
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at,
            devices: Some(vec![DevicePower {
                power_field: None,
                id: "GPU-a".into(),
                name: None,
                watts: Some(100.0),
                counter_millijoules: None,
                shares: None,
                mig_enabled: None,
                at: None,
            }]),
            power_field: None,
        })
    };
    let end = DateTime::<Utc>::MAX_UTC;
    let runs = [
        // The shrunk input: the measured window opens at the last instant.
        vec![
            EnergyRecord::Started {
                at: 0,
                wall: DateTime::UNIX_EPOCH,
                settings: Box::default(),
            },
            power(0),
            EnergyRecord::MeasuringFrom { at: 0, wall: end },
        ],
        // The clock itself at the last instant, readings after it.
        vec![
            EnergyRecord::Started {
                at: 0,
                wall: end,
                settings: Box::default(),
            },
            power(1_000_000_000),
            power(2_000_000_000),
        ],
    ];
    for records in runs {
        let lines: Vec<String> = records
            .iter()
            .map(|record| render_energy_record(DateTime::UNIX_EPOCH, None, record).unwrap())
            .collect();
        let bytes = file_of(&lines);
        let read = with_files([("run.jsonl".to_owned(), Some(bytes.as_slice()))], |root| {
            report_and_series_from_atof(&root.join("run.jsonl"))
        });
        let (report, series) = read.unwrap().unwrap();
        let _ = render_table(&report);
        let _ = power_sparklines(&report, &series);
        assert!(render_html(&report, &series, Default::default()).contains("</html>"));
    }
}

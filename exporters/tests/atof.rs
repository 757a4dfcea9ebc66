//! The ATOF file exporter: golden lines, schema validation of every line read back,
//! append and overwrite, file mode, build errors naming the path, metric batches, and
//! floats that read back exactly.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::{at, gpu_batch, resource_mark, scope, uuid};
use wattline_config::{AtofConfig, AtofWriteMode};
use wattline_exporters::atof::{
    ATOF_VERSION, FILE_MODE, METRICS_MARK_NAME, render_mark, render_mark_copies,
};
use wattline_exporters::{
    AtofExporter, BuildError, ExportError, Exporter, parse_metric_measurements, read_atof_marks,
};
use wattline_model::events::{Mark, MarkCopies, MarkCopy, PipelineEvent, ScopeCategory, ScopeKind};
use wattline_model::metric_measurements::{MetricMeasurements, MetricValue};

fn config(directory: &Path, mode: AtofWriteMode) -> AtofConfig {
    AtofConfig {
        output_directory: directory.display().to_string(),
        filename: "run-%Y%m%dT%H%M%S.jsonl".into(),
        mode,
        ..AtofConfig::default()
    }
}

/// Root scope start, agent start, a resource mark under the agent, agent end.
fn agent_run() -> Vec<PipelineEvent> {
    let root = uuid(1);
    let agent = uuid(2);
    vec![
        scope(
            root,
            None,
            at(0, 0),
            "wattline",
            ScopeCategory::Start,
            ScopeKind::Custom,
        ),
        scope(
            agent,
            Some(root),
            at(1, 5),
            "planner",
            ScopeCategory::Start,
            ScopeKind::Agent,
        ),
        resource_mark(uuid(3), Some(agent), at(2, 123_456_789), 1),
        scope(
            agent,
            Some(root),
            at(3, 0),
            "planner",
            ScopeCategory::End,
            ScopeKind::Agent,
        ),
    ]
}

fn export_all(exporter: &mut AtofExporter, events: &[PipelineEvent]) {
    for event in events {
        exporter.export(event).expect("export");
    }
}

/// The top-level keys of a JSON object line, in the order written.
struct KeyOrder(Vec<String>);

impl<'de> serde::Deserialize<'de> for KeyOrder {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = KeyOrder;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<KeyOrder, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                    keys.push(key);
                }
                Ok(KeyOrder(keys))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

const ENVELOPE: [&str; 10] = [
    "kind",
    "atof_version",
    "uuid",
    "parent_uuid",
    "propagation_root_uuid",
    "timestamp",
    "name",
    "data",
    "data_schema",
    "metadata",
];

/// Reads the file back: every line parses, has the envelope in order then the kind's
/// own fields, and every mark's data passes the v1 validator.
fn read_back(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("read back");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "file must end with a newline"
    );
    text.lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let KeyOrder(keys) = serde_json::from_str(line).expect("an object");
            let tail: &[&str] = if value["kind"] == "scope" {
                &[
                    "scope_category",
                    "attributes",
                    "category",
                    "category_profile",
                ]
            } else {
                &["category", "category_profile"]
            };
            let expected: Vec<&str> = ENVELOPE.iter().chain(tail).copied().collect();
            assert_eq!(keys, expected, "{line}");
            assert_eq!(value["atof_version"], ATOF_VERSION);
            if value["kind"] == "mark" {
                assert_eq!(
                    value["data_schema"]["name"],
                    "nemo.relay.metric_measurements"
                );
                assert_eq!(value["data_schema"]["version"], "1");
                parse_metric_measurements(&value["data"]).expect("mark data validates");
            } else {
                assert_eq!(value["kind"], "scope");
                assert_eq!(value["data"], serde_json::Value::Null);
            }
            value
        })
        .collect()
}

#[test]
fn golden_lines_match_byte_for_byte() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    export_all(&mut exporter, &agent_run());
    exporter.shutdown().unwrap();
    let written = std::fs::read_to_string(exporter.path()).unwrap();
    let golden = include_str!("golden/agent_run.jsonl");
    for (index, (line, expected)) in written.lines().zip(golden.lines()).enumerate() {
        assert_eq!(line, expected, "line {index} differs");
    }
    assert_eq!(written, golden);
    assert_eq!(read_back(exporter.path()).len(), 4);
}

#[test]
fn file_name_is_rendered_from_the_opening_time_and_directory_is_created() {
    let directory = tempfile::tempdir().unwrap();
    let nested = directory.path().join("a/b");
    let exporter =
        AtofExporter::build_at(&config(&nested, AtofWriteMode::Append), at(0, 0)).unwrap();
    assert_eq!(exporter.path(), nested.join("run-20260821T120000.jsonl"));
    assert!(exporter.path().is_file());
}

#[test]
fn file_is_created_with_mode_0600() {
    let directory = tempfile::tempdir().unwrap();
    let exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    let mode = std::fs::metadata(exporter.path())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, FILE_MODE);
    assert_eq!(mode, 0o600);
}

#[test]
fn append_keeps_earlier_lines_and_overwrite_replaces_them() {
    let directory = tempfile::tempdir().unwrap();
    let events = agent_run();
    for _ in 0..2 {
        let mut exporter =
            AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0))
                .unwrap();
        export_all(&mut exporter, &events[..2]);
        exporter.shutdown().unwrap();
    }
    let path = directory.path().join("run-20260821T120000.jsonl");
    assert_eq!(read_back(&path).len(), 4, "append: two runs of two lines");

    let mut exporter = AtofExporter::build_at(
        &config(directory.path(), AtofWriteMode::Overwrite),
        at(0, 0),
    )
    .unwrap();
    export_all(&mut exporter, &events[2..3]);
    exporter.shutdown().unwrap();
    let lines = read_back(&path);
    assert_eq!(lines.len(), 1, "overwrite: only this run's line");
    assert_eq!(lines[0]["kind"], "mark");
}

#[test]
fn output_directory_under_a_regular_file_is_a_build_error_naming_the_path() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("not_a_directory");
    std::fs::write(&file, b"x").unwrap();
    let blocked = file.join("sub");
    let error =
        AtofExporter::build_at(&config(&blocked, AtofWriteMode::Append), at(0, 0)).unwrap_err();
    assert!(
        matches!(error, BuildError::OutputDirectory { ref path, .. } if path == &blocked),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&blocked.display().to_string()),
        "{message}"
    );
    assert!(
        message.starts_with("cannot create the ATOF output directory"),
        "{message}"
    );
}

#[test]
fn a_directory_where_the_file_should_be_is_a_build_error_naming_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let occupied = directory.path().join("run-20260821T120000.jsonl");
    std::fs::create_dir(&occupied).unwrap();
    let error = AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0))
        .unwrap_err();
    assert!(
        matches!(error, BuildError::OpenFile { ref path, .. } if path == &occupied),
        "{error:?}"
    );
    assert!(error.to_string().contains(&occupied.display().to_string()));
}

#[test]
fn invalid_configuration_is_a_build_error_naming_the_field() {
    let directory = tempfile::tempdir().unwrap();
    let mut bad = config(directory.path(), AtofWriteMode::Append);
    bad.filename = "a/b.jsonl".into();
    let error = AtofExporter::build_at(&bad, at(0, 0)).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("filename: must be a file name without `/`"),
        "{error}"
    );
}

#[test]
fn metric_batches_are_marks_named_wattline_metrics_under_the_root_scope() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    let events = agent_run();
    exporter
        .export(&gpu_batch(at(5, 0), &[("GPU-0", 10.0)], 0.5, 150.0))
        .unwrap();
    exporter.export(&events[0]).unwrap();
    exporter
        .export(&gpu_batch(at(6, 0), &[("GPU-0", 20.0)], 0.5, 150.0))
        .unwrap();
    exporter.shutdown().unwrap();
    let lines = read_back(exporter.path());
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["name"], METRICS_MARK_NAME);
    assert_eq!(
        lines[0]["parent_uuid"],
        serde_json::Value::Null,
        "no root scope yet"
    );
    assert_eq!(lines[2]["name"], METRICS_MARK_NAME);
    assert_eq!(lines[2]["parent_uuid"], uuid(1).to_string());
    assert_eq!(lines[2]["timestamp"], "2026-08-21T12:00:06.000000000+00:00");
    assert_eq!(lines[2]["category"], serde_json::Value::Null);
    let uuid = lines[2]["uuid"]
        .as_str()
        .unwrap()
        .parse::<uuid::Uuid>()
        .unwrap();
    assert_eq!(uuid.get_version_num(), 7);
    let data = parse_metric_measurements(&lines[2]["data"]).unwrap();
    assert_eq!(data.measurements.len(), 3);
}

#[test]
fn an_invalid_mark_is_an_error_and_the_next_event_is_still_written() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    let mut data: MetricMeasurements = support::resource_measurements(1, 1.0);
    data.measurements[0].name = "9starts.with.a.digit".into();
    let invalid = PipelineEvent::Mark(Mark {
        uuid: uuid(9),
        parent_uuid: None,
        timestamp: at(0, 0),
        name: "bad".into(),
        data,
    });
    let error = exporter.export(&invalid).unwrap_err();
    assert!(
        matches!(error, ExportError::InvalidMark { ref name, .. } if name == "bad"),
        "{error:?}"
    );
    assert!(error.to_string().contains("measurements[0]"), "{error}");
    exporter.export(&agent_run()[2]).unwrap();
    exporter.shutdown().unwrap();
    let lines = read_back(exporter.path());
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["uuid"], uuid(3).to_string());
}

#[test]
fn export_and_flush_after_shutdown_are_errors() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    exporter.flush().unwrap();
    exporter.shutdown().unwrap();
    exporter.shutdown().unwrap();
    assert!(matches!(
        exporter.export(&agent_run()[0]),
        Err(ExportError::ShutDown("atof"))
    ));
    assert!(matches!(
        exporter.flush(),
        Err(ExportError::ShutDown("atof"))
    ));
    assert!(read_back(exporter.path()).is_empty());
}

/// A writer killed mid-line leaves an unfinished last line; appending after it would
/// glue the next line onto it. It is cut off first and counted as lost.
#[test]
fn appending_after_a_killed_writer_cuts_its_unfinished_line_first() {
    let directory = tempfile::tempdir().unwrap();
    let events = agent_run();
    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    export_all(&mut exporter, &events[..2]);
    exporter.shutdown().unwrap();
    let path = exporter.path().to_path_buf();
    let whole = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{whole}{{\"kind\":\"mark\",\"atof_ver")).unwrap();

    let mut exporter =
        AtofExporter::build_at(&config(directory.path(), AtofWriteMode::Append), at(0, 0)).unwrap();
    assert_eq!(exporter.lines_lost(), 1);
    export_all(&mut exporter, &events[2..]);
    exporter.shutdown().unwrap();
    assert_eq!(
        read_back(&path).len(),
        4,
        "two whole runs, the cut line gone"
    );
    assert!(std::fs::read_to_string(&path).unwrap().starts_with(&whole));
}

#[test]
fn a_float_reads_back_bit_for_bit() {
    // Found by fuzz_atof: serde_json's default float parser read 2.5593072037958785e128
    // back as 2.559307203795878e128 (one unit in the last place).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut data = support::resource_measurements(1, 0.0);
    data.measurements[1].value = MetricValue::F64(2.559_307_203_795_878_5e128);
    let mark = Mark {
        uuid: uuid(3),
        parent_uuid: None,
        timestamp: at(0, 0),
        name: "nemo.relay.resource_metrics".into(),
        data,
    };
    let line = wattline_exporters::atof::render_mark(&mark, None).unwrap();
    std::fs::write(&path, format!("{line}\n")).unwrap();
    let marks = read_atof_marks(&path).unwrap();
    assert_eq!(marks[0].measurements, mark.data.measurements);
}

#[test]
fn the_copies_of_a_mark_are_the_lines_each_copy_renders_alone() {
    let PipelineEvent::Mark(mark) = resource_mark(uuid(9), None, at(5, 123_456_789), 3) else {
        unreachable!()
    };
    // Under a scope whose root is another, one that is its own root, none at all.
    let copies = MarkCopies {
        timestamp: mark.timestamp,
        name: mark.name.clone(),
        data: std::sync::Arc::new(mark.data.clone()),
        copies: vec![
            MarkCopy {
                uuid: uuid(10),
                parent_uuid: Some(uuid(2)),
            },
            MarkCopy {
                uuid: uuid(11),
                parent_uuid: Some(uuid(3)),
            },
            MarkCopy {
                uuid: uuid(12),
                parent_uuid: None,
            },
        ],
    };
    let root_of =
        |parent: Option<uuid::Uuid>| parent.map(|p| if p == uuid(2) { uuid(1) } else { p });
    let lines = render_mark_copies(&copies, root_of).unwrap();
    let alone: Vec<String> = copies
        .marks()
        .map(|mark| render_mark(&mark, root_of(mark.parent_uuid)).unwrap())
        .collect();
    assert_eq!(lines, alone);
    assert_eq!(lines.len(), 3);
}

#[test]
fn a_poll_copied_under_more_scopes_than_the_backlog_holds_writes_every_copy() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = AtofExporter::build_at(
        &config(directory.path(), AtofWriteMode::Overwrite),
        at(0, 0),
    )
    .unwrap();
    let PipelineEvent::Mark(mark) = resource_mark(uuid(9), None, at(5, 0), 3) else {
        unreachable!()
    };
    let count = wattline_exporters::atof::MAX_PENDING_LINES as u128 * 4 + 3;
    let copies = MarkCopies {
        timestamp: mark.timestamp,
        name: mark.name.clone(),
        data: std::sync::Arc::new(mark.data.clone()),
        copies: (0..count)
            .map(|n| MarkCopy {
                uuid: uuid(1000 + n),
                parent_uuid: Some(uuid(2)),
            })
            .collect(),
    };
    exporter.export(&PipelineEvent::MarkCopies(copies)).unwrap();
    exporter.flush().unwrap();
    assert_eq!(exporter.lost(), 0);
    let text = std::fs::read_to_string(exporter.path()).unwrap();
    assert_eq!(text.lines().count() as u128, count);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains(&uuid(1000 + count - 1).to_string())
    );
}

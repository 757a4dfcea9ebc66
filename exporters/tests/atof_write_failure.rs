//! A real write error and the recovery after it. The error is made by lowering this
//! process's file-size limit (RLIMIT_FSIZE: writes past it fail with EFBIG, root
//! included), so this binary holds this one test and nothing runs beside it.

mod support;

use support::{at, resource_mark, set_file_size_limit, uuid};
use wattline_config::{AtofConfig, AtofWriteMode};
use wattline_exporters::{AtofExporter, ExportError, Exporter, parse_metric_measurements};

#[test]
fn a_write_error_is_returned_and_the_next_event_writes_the_backlog_first() {
    // Past the limit the kernel also sends SIGXFSZ, which would end the process.
    // SAFETY: ignoring a signal installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let directory = tempfile::tempdir().unwrap();
    let config = AtofConfig {
        output_directory: directory.path().display().to_string(),
        filename: "run.jsonl".into(),
        mode: AtofWriteMode::Append,
        ..AtofConfig::default()
    };
    let mut exporter = AtofExporter::build_at(&config, at(0, 0)).unwrap();
    let event = |n: u128| resource_mark(uuid(n), None, at(n as i64, 0), n as u64);

    exporter.export(&event(1)).unwrap();
    let one_line = std::fs::metadata(exporter.path()).unwrap().len();

    // Room for half of the next line: the write fails part-way.
    set_file_size_limit(one_line + one_line / 2);
    let error = exporter.export(&event(2)).unwrap_err();
    assert!(
        matches!(&error, ExportError::Io { operation: "write", pending: 1, source, .. }
            if source.raw_os_error() == Some(libc::EFBIG)),
        "{error:?}"
    );
    assert!(error.to_string().contains("run.jsonl"), "{error}");
    assert_eq!(exporter.pending_lines(), 1);
    // The partial line was cut off: the file still holds exactly the first line.
    assert_eq!(std::fs::metadata(exporter.path()).unwrap().len(), one_line);

    // Still failing: the event joins the backlog, nothing is lost yet.
    assert!(exporter.export(&event(3)).is_err());
    assert_eq!(exporter.pending_lines(), 2);

    // The disk "has room" again: the next event writes the backlog, then itself.
    set_file_size_limit(libc::RLIM_INFINITY);
    exporter.export(&event(4)).unwrap();
    assert_eq!(exporter.pending_lines(), 0);
    assert_eq!(exporter.lines_lost(), 0);
    exporter.shutdown().unwrap();

    let text = std::fs::read_to_string(exporter.path()).unwrap();
    let counts: Vec<u64> = text
        .lines()
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).expect("whole JSON lines only");
            let data = parse_metric_measurements(&value["data"]).expect("valid mark");
            match data.measurements[0].value {
                wattline_model::metric_measurements::MetricValue::U64(count) => count,
                other => panic!("unexpected {other:?}"),
            }
        })
        .collect();
    assert_eq!(counts, [1, 2, 3, 4], "every event, in order, once");
    assert_eq!(exporter.lines_written(), 4);
}

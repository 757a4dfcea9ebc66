//! A real write error with `compression = "zstd"`: the partial frame is cut off, the
//! frame waits in the backlog and is written when the disk has room, and past
//! `MAX_PENDING_FRAMES` the oldest frame is dropped with its lines counted lost. The
//! error is made by lowering this process's file-size limit (RLIMIT_FSIZE), so this
//! binary holds this one test and nothing runs beside it.

mod support;

use support::{at, resource_mark, set_file_size_limit, uuid};
use wattline_config::{AtofCompression, AtofConfig};
use wattline_exporters::atof::MAX_PENDING_FRAMES;
use wattline_exporters::{AtofExporter, ExportError, Exporter, read_atof_marks};
use wattline_model::metric_measurements::MetricValue;

#[test]
fn a_failed_frame_waits_in_a_bounded_backlog_and_the_oldest_is_counted_lost() {
    // Past the limit the kernel also sends SIGXFSZ, which would end the process.
    // SAFETY: ignoring a signal installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let directory = tempfile::tempdir().unwrap();
    let config = AtofConfig {
        output_directory: directory.path().display().to_string(),
        filename: "run.jsonl".into(),
        compression: AtofCompression::Zstd,
        ..AtofConfig::default()
    };
    let mut exporter = AtofExporter::build_at(&config, at(0, 0)).unwrap();
    let poll = |n: u64| resource_mark(uuid(u128::from(n)), None, at(n as i64, 0), n);

    for n in 1..=3 {
        exporter.export(&poll(n)).unwrap();
    }
    exporter.flush().unwrap();
    let one_frame = std::fs::metadata(exporter.path()).unwrap().len();

    // Room for a few bytes of the next frame: its write fails part-way.
    set_file_size_limit(one_frame + 10);
    for n in 4..=5 {
        exporter.export(&poll(n)).unwrap();
    }
    let error = exporter.flush().unwrap_err();
    assert!(
        matches!(&error, ExportError::Io { operation: "write", pending: 2, source, .. }
            if source.raw_os_error() == Some(libc::EFBIG)),
        "{error:?}"
    );
    assert_eq!(exporter.pending_lines(), 2);
    // The partial frame was cut off: the file still holds exactly the first frame.
    assert_eq!(std::fs::metadata(exporter.path()).unwrap().len(), one_frame);

    // One frame of one line per flush, all failing: the backlog keeps the newest
    // MAX_PENDING_FRAMES, so the 2-line frame, the oldest, is dropped.
    let more = MAX_PENDING_FRAMES as u64;
    for n in 6..6 + more {
        // The event joins the open frame; retrying the backlog fails.
        assert!(exporter.export(&poll(n)).is_err());
        assert!(exporter.flush().is_err());
    }
    assert_eq!(exporter.lines_lost(), 2);
    assert_eq!(exporter.pending_lines(), MAX_PENDING_FRAMES);

    set_file_size_limit(libc::RLIM_INFINITY);
    exporter.flush().unwrap();
    assert_eq!(exporter.pending_lines(), 0);
    exporter.shutdown().unwrap();
    assert_eq!(exporter.lost(), 2);
    let counts: Vec<u64> = read_atof_marks(exporter.path())
        .unwrap()
        .iter()
        .map(|mark| match mark.measurements[0].value {
            MetricValue::U64(count) => count,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    let mut expected = vec![1, 2, 3];
    expected.extend(6..6 + more);
    assert_eq!(counts, expected, "every frame kept, in order, once");
    assert_eq!(exporter.lines_written(), expected.len() as u64);
}

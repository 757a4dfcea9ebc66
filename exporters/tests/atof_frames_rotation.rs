//! The ATOF file compressed (independent zstd frames of whole lines) and rotated
//! (`max_file_bytes`): frames closed at flush and at their bound, a frame cut by a kill
//! named and left out on reading and cut off before appending, rotation that never
//! splits a line or a frame, a set read back from any of its parts, and the removed-file
//! fault in both modes.

mod support;

use std::path::{Path, PathBuf};

use support::{at, resource_mark, uuid};
use wattline_config::{AtofCompression, AtofConfig, AtofWriteMode};
use wattline_exporters::atof_frames::{FrameOutcome, FrameReader};
use wattline_exporters::{AtofExporter, AtofMarkStream, Exporter, read_atof_file, read_atof_marks};
use wattline_model::events::{MarkCopies, MarkCopy, PipelineEvent};
use wattline_model::metric_measurements::MetricValue;

fn config(
    directory: &Path,
    compression: AtofCompression,
    max_file_bytes: Option<u64>,
    mode: AtofWriteMode,
) -> AtofConfig {
    AtofConfig {
        output_directory: directory.display().to_string(),
        filename: "run.jsonl".into(),
        mode,
        compression,
        max_file_bytes,
    }
}

/// An exporter opened at 0 s for `config(directory, compression, max_file_bytes, mode)`.
fn open(
    directory: &Path,
    compression: AtofCompression,
    max_file_bytes: Option<u64>,
    mode: AtofWriteMode,
) -> AtofExporter {
    AtofExporter::build_at(
        &config(directory, compression, max_file_bytes, mode),
        at(0, 0),
    )
    .unwrap()
}

/// A resource mark whose `sample_count` is `n`, one second apart.
fn poll(n: u64) -> PipelineEvent {
    resource_mark(uuid(u128::from(n) + 100), None, at(n as i64, 0), n)
}

/// The `sample_count` of every mark read back, in order.
fn sample_counts(path: &Path) -> Vec<u64> {
    read_atof_marks(path)
        .unwrap()
        .iter()
        .map(|mark| match mark.measurements[0].value {
            MetricValue::U64(count) => count,
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

/// The frames of a compressed file: each frame's byte range, and how the file ends.
fn frames(path: &Path) -> (Vec<(u64, u64)>, FrameOutcome) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = FrameReader::new(file).unwrap();
    let mut frame = Vec::new();
    let mut ranges = Vec::new();
    loop {
        match reader.next_frame(&mut frame).unwrap() {
            FrameOutcome::Frame { start, end } => {
                assert_eq!(frame.last(), Some(&b'\n'), "a frame holds whole lines");
                ranges.push((start, end));
            }
            ended => return (ranges, ended),
        }
    }
}

fn files_in(directory: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn a_zstd_file_is_one_frame_per_flush_and_reads_back_every_line() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    assert_eq!(exporter.path(), directory.path().join("run.jsonl.zst"));
    for n in 1..=3 {
        exporter.export(&poll(n)).unwrap();
    }
    // Lines wait in the open frame until a flush.
    assert_eq!(exporter.lines_in_open_frame(), 3);
    assert_eq!(std::fs::metadata(exporter.path()).unwrap().len(), 0);
    exporter.flush().unwrap();
    assert_eq!(exporter.lines_in_open_frame(), 0);
    assert_eq!(exporter.lines_written(), 3);
    for n in 4..=5 {
        exporter.export(&poll(n)).unwrap();
    }
    exporter.shutdown().unwrap();
    assert_eq!(exporter.lines_written(), 5);
    assert_eq!(exporter.lost(), 0);

    let (ranges, ended) = frames(exporter.path());
    assert_eq!(ranges.len(), 2, "one frame per flush: {ranges:?}");
    assert_eq!(ended, FrameOutcome::End);
    assert_eq!(sample_counts(exporter.path()), [1, 2, 3, 4, 5]);
}

#[test]
fn a_frame_is_closed_and_written_when_its_lines_reach_the_bound() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    // The frame closes after the line that takes it to FRAME_BYTES.
    let mut per_frame = 0;
    let mut frame_bytes = 0;
    while frame_bytes < wattline_exporters::atof::FRAME_BYTES {
        per_frame += 1;
        let PipelineEvent::Mark(mark) = poll(per_frame) else {
            unreachable!()
        };
        frame_bytes += wattline_exporters::atof::render_mark(&mark, None)
            .unwrap()
            .len()
            + 1;
    }
    for n in 1..=per_frame + 2 {
        exporter.export(&poll(n)).unwrap();
    }
    // The bound closed one frame without a flush; two lines wait in the next.
    assert_eq!(exporter.lines_written(), per_frame);
    assert_eq!(exporter.lines_in_open_frame(), 2);
    assert!(std::fs::metadata(exporter.path()).unwrap().len() > 0);
    exporter.shutdown().unwrap();
    assert_eq!(frames(exporter.path()).0.len(), 2);
    assert_eq!(
        sample_counts(exporter.path()),
        (1..=per_frame + 2).collect::<Vec<_>>()
    );
}

/// Writes two frames (polls 1-3, then 4-6) and cuts the second in half, as a kill in
/// the middle of its write leaves it. Returns the file and where the first frame ends.
fn file_with_a_cut_frame(directory: &Path) -> (PathBuf, u64) {
    let mut exporter = open(
        directory,
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    for n in 1..=6 {
        exporter.export(&poll(n)).unwrap();
        if n == 3 {
            exporter.flush().unwrap();
        }
    }
    exporter.shutdown().unwrap();
    let path = exporter.path().to_path_buf();
    let (ranges, _) = frames(&path);
    assert_eq!(ranges.len(), 2);
    let (second_start, second_end) = ranges[1];
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(second_start + (second_end - second_start) / 2)
        .unwrap();
    (path, second_start)
}

#[test]
fn a_frame_cut_by_a_kill_is_named_and_every_whole_frame_before_it_kept() {
    let directory = tempfile::tempdir().unwrap();
    let (path, cut_at) = file_with_a_cut_frame(directory.path());
    let length = std::fs::metadata(&path).unwrap().len();
    let read = read_atof_file(&path).unwrap();
    let counts: Vec<u64> = read
        .marks
        .iter()
        .map(|mark| match mark.measurements[0].value {
            MetricValue::U64(count) => count,
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        counts,
        [1, 2, 3],
        "the whole first frame, nothing of the cut one"
    );
    assert_eq!(
        read.left_out,
        [format!(
            "{}: the last zstd frame (bytes {cut_at}..{length}) is cut short: a write that did \
             not finish; its lines are left out, the 1 whole frame(s) before it kept",
            path.display()
        )]
    );
}

#[test]
fn appending_to_a_zstd_file_cuts_a_cut_frame_off_first_and_keeps_the_rest() {
    let directory = tempfile::tempdir().unwrap();
    let (path, cut_at) = file_with_a_cut_frame(directory.path());
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), cut_at);
    for n in 7..=8 {
        exporter.export(&poll(n)).unwrap();
    }
    exporter.shutdown().unwrap();
    let (ranges, ended) = frames(&path);
    assert_eq!((ranges.len(), ended), (2, FrameOutcome::End));
    assert_eq!(sample_counts(&path), [1, 2, 3, 7, 8]);
}

#[test]
fn appending_to_a_whole_zstd_file_adds_frames_after_its_own() {
    let directory = tempfile::tempdir().unwrap();
    let settings = config(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    for run in 0..2u64 {
        let mut exporter = AtofExporter::build_at(&settings, at(0, 0)).unwrap();
        for n in 1..=2 {
            exporter.export(&poll(run * 10 + n)).unwrap();
        }
        exporter.shutdown().unwrap();
    }
    let path = directory.path().join("run.jsonl.zst");
    assert_eq!(frames(&path).0.len(), 2);
    assert_eq!(sample_counts(&path), [1, 2, 11, 12]);
    // Overwriting starts the file again.
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Overwrite,
    );
    exporter.export(&poll(21)).unwrap();
    exporter.shutdown().unwrap();
    assert_eq!(sample_counts(&path), [21]);
}

const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Writes `polls` marks to a rotated set, flushing every 10 (the flush closes a frame).
fn write_rotated(directory: &Path, compression: AtofCompression, polls: u64) -> AtofExporter {
    let mut exporter = open(
        directory,
        compression,
        Some(MAX_FILE_BYTES),
        AtofWriteMode::Append,
    );
    for n in 1..=polls {
        exporter.export(&poll(n)).unwrap();
        if n % 10 == 0 {
            exporter.flush().unwrap();
        }
    }
    exporter.shutdown().unwrap();
    exporter
}

#[test]
fn rotation_never_splits_a_line_and_the_set_reads_back_from_any_part() {
    let directory = tempfile::tempdir().unwrap();
    let polls = 400;
    let exporter = write_rotated(directory.path(), AtofCompression::None, polls);
    let files = files_in(directory.path());
    let names: Vec<String> = files
        .iter()
        .map(|file| file.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() >= 3, "{names:?}");
    for (index, name) in names.iter().enumerate() {
        assert_eq!(name, &format!("run-{:04}.jsonl", index + 1));
    }
    assert_eq!(exporter.path(), files.last().unwrap());
    let mut lines = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        assert!(
            text.ends_with('\n'),
            "{} ends inside a line",
            file.display()
        );
        assert!(text.len() as u64 <= MAX_FILE_BYTES, "{}", file.display());
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("a whole line");
            lines += 1;
        }
    }
    assert_eq!(lines, polls);
    assert_eq!(exporter.lines_written(), polls);
    let every: Vec<u64> = (1..=polls).collect();
    assert_eq!(sample_counts(&files[0]), every);
    assert_eq!(sample_counts(files.last().unwrap()), every);
    assert_eq!(sample_counts(&directory.path().join("run.jsonl")), every);
}

#[test]
fn a_compressed_set_rotates_between_whole_frames() {
    let directory = tempfile::tempdir().unwrap();
    let polls = 1500;
    let exporter = write_rotated(directory.path(), AtofCompression::Zstd, polls);
    let files = files_in(directory.path());
    assert!(files.len() >= 2, "{files:?}");
    for (index, file) in files.iter().enumerate() {
        assert_eq!(
            file.file_name().unwrap().to_string_lossy(),
            format!("run-{:04}.jsonl.zst", index + 1)
        );
        let (ranges, ended) = frames(file);
        assert!(!ranges.is_empty());
        assert_eq!(
            ended,
            FrameOutcome::End,
            "{} ends inside a frame",
            file.display()
        );
        assert!(std::fs::metadata(file).unwrap().len() <= MAX_FILE_BYTES);
    }
    assert_eq!(exporter.lines_written(), polls);
    assert_eq!(sample_counts(&files[1]), (1..=polls).collect::<Vec<_>>());
}

#[test]
fn appending_to_a_set_goes_on_in_its_last_part_and_overwriting_removes_every_part() {
    let directory = tempfile::tempdir().unwrap();
    write_rotated(directory.path(), AtofCompression::None, 250);
    let parts = files_in(directory.path());
    let mut exporter = open(
        directory.path(),
        AtofCompression::None,
        Some(MAX_FILE_BYTES),
        AtofWriteMode::Append,
    );
    assert_eq!(exporter.path(), parts.last().unwrap());
    exporter.export(&poll(1000)).unwrap();
    exporter.shutdown().unwrap();
    let mut expected: Vec<u64> = (1..=250).collect();
    expected.push(1000);
    assert_eq!(sample_counts(&parts[0]), expected);

    let mut exporter = open(
        directory.path(),
        AtofCompression::None,
        Some(MAX_FILE_BYTES),
        AtofWriteMode::Overwrite,
    );
    exporter.export(&poll(7)).unwrap();
    exporter.shutdown().unwrap();
    assert_eq!(
        files_in(directory.path()),
        [directory.path().join("run-0001.jsonl")]
    );
    assert_eq!(sample_counts(&parts[0]), [7]);
}

#[test]
fn a_removed_zstd_file_counts_its_lines_lost_and_the_rest_goes_to_a_new_file() {
    let directory = tempfile::tempdir().unwrap();
    let folder = directory.path().join("atof");
    let mut exporter = open(&folder, AtofCompression::Zstd, None, AtofWriteMode::Append);
    for n in 1..=3 {
        exporter.export(&poll(n)).unwrap();
    }
    exporter.flush().unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    exporter.export(&poll(4)).unwrap();
    // The frame closed at flush finds the file gone: the 3 lines it held are lost.
    let error = exporter.flush().unwrap_err();
    assert!(error.to_string().contains("removed"), "{error}");
    assert_eq!(exporter.lines_lost(), 3);
    exporter.export(&poll(5)).unwrap();
    exporter.shutdown().unwrap();
    assert_eq!(exporter.lost(), 3);
    assert_eq!(sample_counts(&folder.join("run.jsonl.zst")), [4, 5]);
}

#[test]
fn the_copies_of_a_poll_are_read_once_when_skipping_copies() {
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Append,
    );
    for n in 1..=2 {
        let PipelineEvent::Mark(mark) = poll(n) else {
            unreachable!()
        };
        exporter
            .export(&PipelineEvent::MarkCopies(MarkCopies {
                timestamp: mark.timestamp,
                name: mark.name.clone(),
                data: std::sync::Arc::new(mark.data.clone()),
                copies: (0..3)
                    .map(|copy| MarkCopy {
                        uuid: uuid(u128::from(n) * 10 + copy),
                        parent_uuid: Some(uuid(1000 + copy)),
                    })
                    .collect(),
            }))
            .unwrap();
    }
    exporter.shutdown().unwrap();
    assert_eq!(sample_counts(exporter.path()), [1, 1, 1, 2, 2, 2]);
    let mut stream = AtofMarkStream::open(exporter.path())
        .unwrap()
        .skipping_copies();
    let mut once = Vec::new();
    while let Some(mark) = stream.next_mark().unwrap() {
        once.push((mark.timestamp, mark.measurements[0].value));
    }
    assert_eq!(
        once,
        [
            (at(1, 0), MetricValue::U64(1)),
            (at(2, 0), MetricValue::U64(2))
        ]
    );
}

#[test]
fn two_alike_energy_records_are_both_read_when_skipping_copies() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("energy.jsonl");
    let record = wattline_model::energy::EnergyRecord::MeasuringFrom {
        at: 5,
        wall: at(5, 0),
    };
    let render = || {
        wattline_exporters::atof::render_energy_record(at(5, 0), Some(uuid(1)), &record).unwrap()
    };
    let (line, other) = (render(), render());
    assert_ne!(line, other, "each record has its own UUID");
    std::fs::write(&path, format!("{line}\n{other}\n")).unwrap();
    let mut stream = AtofMarkStream::open(&path).unwrap().skipping_copies();
    let mut records = 0;
    while let Some(mark) = stream.next_mark().unwrap() {
        assert_eq!(mark.energy.as_ref(), Some(&record));
        records += 1;
    }
    assert_eq!(records, 2);
}

#[test]
fn a_corrupt_frame_mid_file_is_an_error_naming_the_file_and_the_frame() {
    let directory = tempfile::tempdir().unwrap();
    let (path, _) = file_with_a_cut_frame(directory.path());
    // Damage the first frame's compressed bytes (past its 4-byte magic and header).
    let mut bytes = std::fs::read(&path).unwrap();
    for byte in &mut bytes[12..20] {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let message = read_atof_file(&path).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!("{}: ", path.display()))
            && message.contains("the zstd frame at byte 0 is corrupt"),
        "{message}"
    );
}

#[test]
fn a_poll_copied_into_more_frames_than_the_backlog_holds_loses_no_copy() {
    // Frames close at 64 KiB (the smallest max_file_bytes), so one poll's copies make
    // more frames than the 8 the backlog keeps: they are written as they close.
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        Some(65_536),
        AtofWriteMode::Overwrite,
    );
    let PipelineEvent::Mark(mark) = poll(7) else {
        unreachable!()
    };
    let count = 3_000u128;
    let copies = MarkCopies {
        timestamp: mark.timestamp,
        name: mark.name.clone(),
        data: std::sync::Arc::new(mark.data.clone()),
        copies: (0..count)
            .map(|n| MarkCopy {
                uuid: uuid(10_000 + n),
                parent_uuid: Some(uuid(2)),
            })
            .collect(),
    };
    exporter.export(&PipelineEvent::MarkCopies(copies)).unwrap();
    exporter.flush().unwrap();
    assert_eq!(exporter.lost(), 0);
    let first = files_in(directory.path()).remove(0);
    assert_eq!(sample_counts(&first).len() as u128, count);
}

#[test]
fn an_open_frame_past_its_age_is_closed_at_the_next_line_without_a_flush() {
    // A run killed before any flush: with no age bound every line would still sit in
    // the open frame. Age zero closes the frame at each line, so each poll is on disk.
    let directory = tempfile::tempdir().unwrap();
    let mut exporter = open(
        directory.path(),
        AtofCompression::Zstd,
        None,
        AtofWriteMode::Overwrite,
    );
    exporter.set_frame_max_age(std::time::Duration::ZERO);
    for n in 1..=3 {
        exporter.export(&poll(n)).unwrap();
    }
    let file = files_in(directory.path()).remove(0);
    let (frames, _) = frames(&file);
    assert_eq!(frames.len(), 3, "one frame a line, written without a flush");
    assert_eq!(sample_counts(&file), vec![1, 2, 3]);
}

//! What an ATOF file costs on disk and to read back, plain against zstd: bytes per poll
//! and per extra live Agent scope per poll, then `wattline report` on a large generated
//! set (wall time and peak RSS of the child process). Prints figures, asserts nothing:
//! the machine is shared.
//!
//! The marks are real: a 2 s run of the pipeline (100 ms polls, this process's tree)
//! gives the resource marks and energy records, and the rows write them again, polls
//! one second apart, each poll copied under every live scope as the pipeline copies it.
//!
//! Run: `cargo bench --bench atof_size`. `WATTLINE_ATOF_POLLS` (polls per size row,
//! default 300), `WATTLINE_ATOF_SCOPES` (size rows, default `1,2,5,20,50`),
//! `WATTLINE_ATOF_LARGE_MB` (plain bytes of the large set, default 1024; 0 skips it),
//! `WATTLINE_ATOF_LARGE_SCOPES` (live scopes, one set each, default `1,20`: with one
//! every line is parsed, with many most are copies),
//! `WATTLINE_ATOF_ROTATE_MB` (its `max_file_bytes`, default 256).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use wattline::config::{AtofCompression, AtofConfig, AtofWriteMode};
use wattline::events::{MarkCopies, MarkCopy, PipelineEvent, RESOURCE_MARK_NAME, new_uuid};
use wattline::metric_measurements::MetricMeasurements;
use wattline_exporters::{AtofExporter, Exporter, RecordedMark, read_atof_marks};

use common::env_number;

/// What a real run wrote: its resource marks and its energy records.
struct RealRun {
    polls: Vec<MetricMeasurements>,
    energy: Vec<RecordedMark>,
}

async fn real_run() -> RealRun {
    let directory = tempfile::tempdir().expect("a temp dir");
    let config = common::pipeline_config(100, Some(directory.path()), None);
    let pipeline = wattline::Pipeline::builder()
        .config(config)
        .spawn()
        .await
        .expect("the pipeline");
    tokio::time::sleep(Duration::from_secs(2)).await;
    pipeline.shutdown().await.expect("shutdown");
    let marks = read_atof_marks(&common::atof_file(directory.path())).expect("the run's file");
    let (energy, resource): (Vec<RecordedMark>, Vec<RecordedMark>) =
        marks.into_iter().partition(|mark| mark.energy.is_some());
    let polls: Vec<MetricMeasurements> = resource
        .into_iter()
        .filter(|mark| mark.name == RESOURCE_MARK_NAME)
        .map(|mark| MetricMeasurements {
            measurements: mark.measurements,
        })
        .collect();
    assert!(!polls.is_empty(), "the run wrote no resource marks");
    RealRun { polls, energy }
}

fn config(
    directory: &Path,
    compression: AtofCompression,
    max_file_bytes: Option<u64>,
) -> AtofConfig {
    AtofConfig {
        output_directory: directory.display().to_string(),
        filename: "run.jsonl".into(),
        mode: AtofWriteMode::Overwrite,
        compression,
        max_file_bytes,
    }
}

/// Writes the real run's energy records, then polls (one second apart, each copied
/// under `scopes` scopes) until `polls` are written or their lines reach
/// `until_lines_bytes` uncompressed; flushes every 10 polls (the pipeline flushes at least that often).
/// Returns the exporter, shut down, and the polls written.
fn write_set(
    run: &RealRun,
    settings: &AtofConfig,
    scopes: usize,
    polls: u64,
    until_lines_bytes: u64,
) -> (AtofExporter, u64) {
    let mut exporter = AtofExporter::build(settings).expect("the exporter");
    for mark in &run.energy {
        if let Some(record) = &mark.energy {
            exporter
                .export(&PipelineEvent::Energy {
                    timestamp: mark.timestamp,
                    record: record.clone(),
                })
                .expect("an energy record");
        }
    }
    let parents: Vec<_> = (0..scopes.max(1)).map(|_| Some(new_uuid())).collect();
    let start: DateTime<Utc> = Utc::now();
    let mut written = 0;
    let mut lines_bytes = 0u64;
    // Each real poll's lines, sized once (the first poll has no rates, so fewer figures).
    let mut poll_bytes: Vec<Option<u64>> = vec![None; run.polls.len()];
    while written < polls && lines_bytes < until_lines_bytes {
        let template = written as usize % run.polls.len();
        let copies = MarkCopies {
            timestamp: start + chrono::Duration::seconds(written as i64),
            name: RESOURCE_MARK_NAME.into(),
            data: std::sync::Arc::new(run.polls[template].clone()),
            copies: parents
                .iter()
                .map(|parent| MarkCopy {
                    uuid: new_uuid(),
                    parent_uuid: *parent,
                })
                .collect(),
        };
        lines_bytes += *poll_bytes[template].get_or_insert_with(|| {
            wattline_exporters::atof::render_mark_copies(&copies, |parent| parent)
                .expect("a valid mark")
                .iter()
                .map(|line| line.len() as u64 + 1)
                .sum::<u64>()
        });
        exporter
            .export(&PipelineEvent::MarkCopies(copies))
            .expect("a poll");
        written += 1;
        if written % 10 == 0 {
            exporter.flush().expect("flush");
        }
    }
    exporter.shutdown().expect("shutdown");
    (exporter, written)
}

/// Bytes on disk of every file in `directory`.
fn bytes_on_disk(directory: &Path) -> u64 {
    std::fs::read_dir(directory)
        .expect("the directory")
        .flatten()
        .map(|entry| common::file_size(&entry.path()))
        .sum()
}

fn size_rows(run: &RealRun) {
    let polls = env_number("WATTLINE_ATOF_POLLS", 300);
    let scopes: Vec<usize> = std::env::var("WATTLINE_ATOF_SCOPES")
        .unwrap_or_else(|_| "1,2,5,20,50".into())
        .split(',')
        .map(|count| count.trim().parse().expect("a scope count"))
        .collect();
    println!("\n## Bytes on disk per poll ({polls} polls per row)\n");
    println!("| live scopes | plain B/poll | zstd B/poll | ratio |");
    println!("| --- | --- | --- | --- |");
    let mut first: Option<(usize, f64, f64)> = None;
    let mut last = None;
    for count in scopes {
        let mut per_poll = [0.0; 2];
        for (index, compression) in [AtofCompression::None, AtofCompression::Zstd]
            .into_iter()
            .enumerate()
        {
            let directory = tempfile::tempdir().expect("a temp dir");
            let (_, written) = write_set(
                run,
                &config(directory.path(), compression, None),
                count,
                polls,
                u64::MAX,
            );
            // Less the energy records, written once whatever the scope count.
            let energy_only = {
                let empty = tempfile::tempdir().expect("a temp dir");
                write_set(
                    run,
                    &config(empty.path(), compression, None),
                    count,
                    0,
                    u64::MAX,
                );
                bytes_on_disk(empty.path())
            };
            per_poll[index] =
                (bytes_on_disk(directory.path()) - energy_only) as f64 / written as f64;
        }
        println!(
            "| {count} | {:.0} | {:.0} | {:.1}x |",
            per_poll[0],
            per_poll[1],
            per_poll[0] / per_poll[1]
        );
        if first.is_none() {
            first = Some((count, per_poll[0], per_poll[1]));
        }
        last = Some((count, per_poll[0], per_poll[1]));
    }
    if let (Some((low, plain_low, zstd_low)), Some((high, plain_high, zstd_high))) = (first, last)
        && high > low
    {
        let extra = (high - low) as f64;
        println!(
            "\nPer extra live scope per poll ({low} → {high} scopes): plain {:.0} B, zstd {:.0} B ({:.0}x less)",
            (plain_high - plain_low) / extra,
            (zstd_high - zstd_low) / extra,
            (plain_high - plain_low) / (zstd_high - zstd_low)
        );
    }
}

/// Runs `wattline report --report json` on `path`; its wall time and peak RSS (bytes).
fn time_report(path: &Path) -> (Duration, u64) {
    let started = Instant::now();
    #[allow(clippy::zombie_processes)] // reaped by wait4 below, which also gives its rusage
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_wattline"))
        .args(["report", "--report", "json"])
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("wattline report");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child this function started, writing into values it owns.
    let waited = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, child.id() as libc::pid_t, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "wattline report failed on {}",
        path.display()
    );
    (elapsed, usage.ru_maxrss as u64 * 1024)
}

fn first_file(directory: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(directory)
        .expect("the directory")
        .flatten()
        .map(|entry| entry.path())
        .collect();
    files.sort();
    files.into_iter().next().expect("a file")
}

fn large_rows(run: &RealRun) {
    let megabytes = env_number("WATTLINE_ATOF_LARGE_MB", 1024);
    if megabytes == 0 {
        return;
    }
    let scope_counts: Vec<usize> = std::env::var("WATTLINE_ATOF_LARGE_SCOPES")
        .unwrap_or_else(|_| "1,20".into())
        .split(',')
        .map(|count| count.trim().parse().expect("a scope count"))
        .collect();
    let rotate = env_number("WATTLINE_ATOF_ROTATE_MB", 256) * 1024 * 1024;
    println!(
        "\n## `wattline report` on a large set ({megabytes} MB of lines, rotated at {} MiB)\n",
        rotate / 1024 / 1024
    );
    println!("| live scopes | file | files | MB on disk | polls | report s | peak RSS MiB |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (scopes, (label, compression)) in scope_counts.iter().flat_map(|scopes| {
        [
            ("plain", AtofCompression::None),
            ("zstd", AtofCompression::Zstd),
        ]
        .map(|row| (*scopes, row))
    }) {
        let directory = tempfile::tempdir().expect("a temp dir");
        let (_, written) = write_set(
            run,
            &config(directory.path(), compression, Some(rotate)),
            scopes,
            u64::MAX,
            megabytes * 1_000_000,
        );
        let files = std::fs::read_dir(directory.path())
            .expect("the set")
            .count();
        let (elapsed, peak) = time_report(&first_file(directory.path()));
        println!(
            "| {scopes} | {label} | {files} | {:.1} | {written} | {:.2} | {:.0} |",
            bytes_on_disk(directory.path()) as f64 / 1e6,
            elapsed.as_secs_f64(),
            peak as f64 / 1024.0 / 1024.0
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let run = real_run().await;
    println!(
        "# ATOF size and read-back: {} real polls, {} energy records",
        run.polls.len(),
        run.energy.len()
    );
    size_rows(&run);
    large_rows(&run);
}

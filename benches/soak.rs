//! The real pipeline left running: 100 ms polling, ATOF and OTLP on, Agent scopes
//! opening and closing all along. Every minute it prints the elapsed time, the CPU
//! seconds used, RSS and ATOF bytes; at the end, RSS growth (first minute against last)
//! and CPU per poll. Asserts nothing: it is read by a person.
//!
//! Run: `cargo bench --bench soak -- 1h` (the default; also `25m`, `90s`, `3600`).
//! `cargo bench --bench soak -- scopes 1000000` instead churns that many Agent scopes
//! as fast as the pipeline takes them and prints RSS growth after a warm-up and the
//! process's CPU per scope (`WATTLINE_SOAK_CHURN_ATOF=1`: with an ATOF file written).
//! `WATTLINE_ROTEL_AGENT` as for the scale benchmark. `WATTLINE_SOAK_SCOPES` (live
//! scopes, default 10), `WATTLINE_SOAK_CHURN_MS` (one scope ends and a new one starts
//! this often, default 200), `WATTLINE_SOAK_INTERVAL_MS` (100),
//! `WATTLINE_SOAK_EXPORT_MS` (OTLP export interval, default 1000),
//! `WATTLINE_SOAK_REPORT_S` (60), `WATTLINE_SOAK_DIR` (where the ATOF file goes,
//! default a temp dir removed at the end). A mark is about 27 KB of ATOF, so the
//! defaults write about 10 GB an hour: the file is cut to zero after each report (the
//! writer appends, so it carries on at the new end) unless `WATTLINE_SOAK_KEEP_ATOF=1`.

mod common;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Collector, env_number, mib};

/// One line of the running log.
struct Reading {
    elapsed: Duration,
    cpu_seconds: f64,
    rss: u64,
    atof_bytes: u64,
    polls: u64,
}

fn parse_duration(text: &str) -> Duration {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, "s"), |at| text.split_at(at));
    let number: u64 = number
        .parse()
        .unwrap_or_else(|_| panic!("{text:?}: a duration like 3600, 90s, 25m or 1h"));
    let seconds = match unit {
        "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        other => panic!("{text:?}: unknown unit {other:?} (s, m or h)"),
    };
    Duration::from_secs(seconds)
}

#[tokio::main]
async fn main() {
    // `cargo bench` adds `--bench`; the first other argument is the duration, or
    // `scopes` and a count.
    let arguments: Vec<String> = std::env::args()
        .skip(1)
        .filter(|argument| !argument.starts_with("--"))
        .collect();
    if arguments.first().is_some_and(|first| first == "scopes") {
        let count = arguments
            .get(1)
            .map_or(1_000_000, |text| text.parse().expect("a count of scopes"));
        churn_scopes(count).await;
        return;
    }
    let duration = arguments
        .first()
        .map_or(Duration::from_secs(3600), |text| parse_duration(text));
    soak(SoakSettings::from_env(duration)).await;
}

/// What a soak runs: its length and the `WATTLINE_SOAK_*` settings.
struct SoakSettings {
    duration: Duration,
    live: usize,
    churn: Duration,
    interval_millis: u64,
    export_millis: u64,
    report_every: Duration,
    keep_atof: bool,
}

impl SoakSettings {
    fn from_env(duration: Duration) -> Self {
        SoakSettings {
            duration,
            live: env_number("WATTLINE_SOAK_SCOPES", 10) as usize,
            churn: Duration::from_millis(env_number("WATTLINE_SOAK_CHURN_MS", 200)),
            interval_millis: env_number("WATTLINE_SOAK_INTERVAL_MS", 100),
            export_millis: env_number("WATTLINE_SOAK_EXPORT_MS", 1000),
            report_every: Duration::from_secs(env_number("WATTLINE_SOAK_REPORT_S", 60)),
            keep_atof: env_number("WATTLINE_SOAK_KEEP_ATOF", 0) == 1,
        }
    }
}

/// The soak: a pipeline polling, exporting and churning scopes for `settings.duration`,
/// its CPU, RSS and ATOF bytes printed every `report_every`, then summarised.
async fn soak(settings: SoakSettings) {
    let collector = Collector::start();
    let temporary = tempfile::tempdir().expect("a temp dir");
    let directory = std::env::var_os("WATTLINE_SOAK_DIR")
        .map_or_else(|| temporary.path().to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&directory).expect("the ATOF directory");
    println!(
        "soak: {} s, polling every {} ms, {} live Agent scopes (one replaced every {} ms), OTLP export every {} ms",
        settings.duration.as_secs(),
        settings.interval_millis,
        settings.live,
        settings.churn.as_millis(),
        settings.export_millis,
    );
    println!(
        "      ATOF in {}; {}",
        directory.display(),
        collector.label()
    );
    if !settings.keep_atof {
        println!("      the ATOF file is cut to zero after each report; its bytes are summed");
    }

    let url = collector.url();
    let config = common::pipeline_config(
        settings.interval_millis,
        Some(&directory),
        Some((&url, settings.export_millis)),
    );
    let started = Instant::now();
    let cpu_at_start = common::cpu_seconds();
    let pipeline = wattline::Pipeline::builder()
        .config(config)
        .spawn()
        .await
        .expect("the pipeline");
    let file = common::atof_file(&directory);
    let (readings, opened) = soak_loop(&pipeline, &settings, &file, started, cpu_at_start).await;
    let report = pipeline
        .shutdown()
        .await
        .expect("shutdown")
        .expect("a report");
    summarise(&readings, &report, opened);
}

/// Churns scopes and prints a reading every `report_every` until the soak's length is
/// reached; returns the readings and the number of scopes opened.
async fn soak_loop(
    pipeline: &wattline::Pipeline,
    settings: &SoakSettings,
    file: &std::path::Path,
    started: Instant,
    cpu_at_start: f64,
) -> (Vec<Reading>, u64) {
    let mut scopes = VecDeque::new();
    let mut opened = 0u64;
    let mut churn_clock = tokio::time::interval(settings.churn);
    let report_every = settings.report_every;
    let mut report_clock =
        tokio::time::interval_at(tokio::time::Instant::now() + report_every, report_every);
    let interval = Duration::from_millis(settings.interval_millis);
    // Polls on the fixed-rate grid so far, less the ticks the pipeline missed.
    let polls = |elapsed: Duration, missed: u64| {
        (elapsed.as_millis() / interval.as_millis()) as u64 + 1 - missed
    };
    let mut readings: Vec<Reading> = Vec::new();
    // ATOF bytes in the file's earlier lives (before each cut).
    let mut atof_cut = 0;
    println!(
        "{:>8} {:>9} {:>8} {:>11} {:>8} {:>12} {:>8}",
        "elapsed", "CPU s", "RSS MiB", "ATOF MiB", "polls", "scopes", "missed"
    );
    loop {
        tokio::select! {
            _ = churn_clock.tick() => {
                if scopes.len() >= settings.live {
                    scopes.pop_front();
                }
                scopes.push_back(
                    pipeline
                        .agent_scope(&format!("agent-{opened}"))
                        .expect("an Agent scope"),
                );
                opened += 1;
            }
            _ = report_clock.tick() => {
                let elapsed = started.elapsed();
                let size = common::file_size(file);
                if !settings.keep_atof {
                    cut(file);
                }
                let reading = Reading {
                    elapsed,
                    cpu_seconds: common::cpu_seconds() - cpu_at_start,
                    rss: common::rss_bytes(),
                    atof_bytes: atof_cut + size,
                    polls: polls(elapsed, pipeline.missed_ticks()),
                };
                if !settings.keep_atof {
                    atof_cut += size;
                }
                println!(
                    "{:>7}s {:>9.2} {:>8.1} {:>11.1} {:>8} {:>12} {:>8}",
                    reading.elapsed.as_secs(),
                    reading.cpu_seconds,
                    mib(reading.rss),
                    mib(reading.atof_bytes),
                    reading.polls,
                    opened,
                    pipeline.missed_ticks(),
                );
                readings.push(reading);
                if elapsed >= settings.duration {
                    break;
                }
            }
        }
    }
    drop(scopes);
    (readings, opened)
}

/// `scopes N`: opens and ends `count` Agent scopes one after another, as fast as the
/// pipeline takes them (polling every 100 ms, no exporter unless
/// `WATTLINE_SOAK_CHURN_ATOF=1` adds an ATOF file), and prints RSS after a warm-up of
/// a tenth of them (at least the 10,000 kept in detail) and then every tenth, and the
/// process's CPU per scope at the end, with a flush every 10,000 scopes (it waits until
/// the pipeline has taken every scope asked so far): past the warm-up the energy
/// account folds finished scopes into per-name aggregates, so RSS should stay flat.
async fn churn_scopes(count: u64) {
    let warm_up = (count / 10).max(20_000);
    println!(
        "soak: {count} Agent scopes opened and ended back to back, 10 names, RSS after {warm_up}"
    );
    // With `WATTLINE_SOAK_CHURN_ATOF=1` every scope's events also go to an ATOF file.
    let atof = std::env::var_os("WATTLINE_SOAK_CHURN_ATOF")
        .is_some_and(|value| value == "1")
        .then(|| tempfile::tempdir().expect("a temp dir"));
    let pipeline = wattline::Pipeline::builder()
        .config(common::pipeline_config(
            100,
            atof.as_ref().map(|directory| directory.path()),
            None,
        ))
        .spawn()
        .await
        .expect("the pipeline");
    let (started, cpu_at_start) = (Instant::now(), common::cpu_seconds());
    let mut at_warm_up = None;
    println!(
        "{:>12} {:>9} {:>8} {:>10}",
        "scopes", "elapsed", "RSS MiB", "µs/scope"
    );
    for opened in 1..=count {
        let scope = pipeline
            .agent_scope(&format!("step-{}", opened % 10))
            .expect("an Agent scope");
        scope.end().expect("the end");
        // The scopes are messages, and this loop outruns the actors that take them: a
        // flush every 10,000 waits until they have (a host doing work between steps
        // never gets so far ahead), so RSS is what the pipeline keeps, not a backlog.
        if opened % 10_000 == 0 {
            pipeline.flush().await.expect("a flush");
        }
        if opened % (count / 10).max(1) == 0 || opened == warm_up {
            let rss = common::rss_bytes();
            if opened == warm_up {
                at_warm_up = Some(rss);
            }
            let elapsed = started.elapsed();
            println!(
                "{opened:>12} {:>8.1}s {:>8.1} {:>10.1}",
                elapsed.as_secs_f64(),
                mib(rss),
                elapsed.as_secs_f64() * 1e6 / opened as f64
            );
        }
    }
    let report = pipeline
        .shutdown()
        .await
        .expect("shutdown")
        .expect("a report");
    println!(
        "process CPU per scope, shutdown included: {:.2} µs",
        (common::cpu_seconds() - cpu_at_start) * 1e6 / count as f64
    );
    for exporter in &report.exporters {
        println!("exporter: {exporter:?}");
    }
    let folded: u64 = report.folded_scopes.iter().map(|f| f.count).sum();
    println!(
        "report: {} scopes in detail, {folded} folded into {} names",
        report.agent_scopes.len(),
        report.folded_scopes.len()
    );
    if let Some(start) = at_warm_up {
        let growth = common::rss_bytes() as f64 - start as f64;
        println!(
            "RSS growth after the warm-up: {:.2} MiB",
            growth / (1024.0 * 1024.0)
        );
    }
}

/// Cuts the file to zero bytes (lines written between the size read and the cut are
/// not counted: at most a few of the minute's thousands).
fn cut(file: &std::path::Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|opened| opened.set_len(0))
        .expect("cut the ATOF file");
}

/// RSS trend over the readings after the first, by least squares, in MiB per hour.
fn rss_trend(readings: &[Reading]) -> Option<f64> {
    let points: Vec<(f64, f64)> = readings
        .iter()
        .skip(1)
        .map(|r| (r.elapsed.as_secs_f64() / 3600.0, mib(r.rss)))
        .collect();
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mean_x, mean_y) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (covariance, variance) = points.iter().fold((0.0, 0.0), |(c, v), p| {
        (
            c + (p.0 - mean_x) * (p.1 - mean_y),
            v + (p.0 - mean_x).powi(2),
        )
    });
    Some(covariance / variance)
}

fn summarise(readings: &[Reading], report: &wattline::EnergyReport, opened: u64) {
    let (Some(first), Some(last)) = (readings.first(), readings.last()) else {
        println!("soak: too short for a reading");
        return;
    };
    println!();
    println!(
        "duration {} s, {} polls, {opened} Agent scopes opened and closed",
        last.elapsed.as_secs(),
        last.polls
    );
    println!(
        "RSS: {:.1} MiB after the first report, {:.1} MiB at the last: {:+.1} MiB ({:+.1}%)",
        mib(first.rss),
        mib(last.rss),
        mib(last.rss) - mib(first.rss),
        (last.rss as f64 / first.rss as f64 - 1.0) * 100.0
    );
    if let Some(trend) = rss_trend(readings) {
        println!("RSS trend after the first report: {trend:+.2} MiB per hour (least squares)");
    }
    println!(
        "CPU: {:.2} s in all, {:.2} ms per poll ({:.2} ms per poll after the first report)",
        last.cpu_seconds,
        last.cpu_seconds / last.polls as f64 * 1e3,
        (last.cpu_seconds - first.cpu_seconds) / (last.polls - first.polls).max(1) as f64 * 1e3,
    );
    println!(
        "ATOF: {:.1} MiB, {:.0} bytes per poll",
        mib(last.atof_bytes),
        last.atof_bytes as f64 / last.polls as f64
    );
    for name in ["atof", "opentelemetry"] {
        let (exported, dropped, failed) = common::exporter_counts(report, name);
        println!("{name}: {exported} events exported, {dropped} dropped, {failed} failed calls");
    }
    println!(
        "energy report: {} Agent scopes listed",
        report.agent_scopes.len()
    );
}

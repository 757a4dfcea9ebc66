//! What the real pipeline costs per poll as live Agent scopes grow: 1, 100 and 1000
//! scopes (10 000 when asked) at 1 s polling, ATOF (plain, or zstd when asked) and
//! OTLP on; then the largest count again with ATOF only, OTLP only and no exporter, to
//! show where the per-scope cost goes. Each row runs in a fresh child process (so its
//! RSS is its own) against one shared collector; the table compares the rows side by
//! side from one run, as ratios to the first, and each row's event file is read back
//! after shutdown (whole lines only) for the events written per kind. Asserts nothing:
//! the machine is shared.
//!
//! Run: `cargo bench --bench scale` (the real collector: set `WATTLINE_ROTEL_AGENT` to
//! a `rotel-agent` binary; without it OTLP goes to a labelled discarding TCP sink).
//! `WATTLINE_SCALE_SCOPES` (default `1,100,1000`; e.g. `1000,10000`),
//! `WATTLINE_SCALE_COMPRESSION` (`plain`, `zstd` or `plain,zstd`; default `plain`),
//! `WATTLINE_SCALE_POLLS` (20), `WATTLINE_SCALE_WARMUP` (3 polls),
//! `WATTLINE_SCALE_INTERVAL_MS` (1000), `WATTLINE_SCALE_EXPORT_MS` (OTLP export
//! interval, default the poll interval), `WATTLINE_SCALE_BREAKDOWN=0` (skip the
//! exporter breakdown rows).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use wattline::config::AtofCompression;
use wattline::events::{EventKind, RESOURCE_MARK_NAME};

use common::{Collector, env_number, mib};

/// Set in a child: the number of live Agent scopes its row measures.
const ROW_VARIABLE: &str = "WATTLINE_SCALE_ROW";
/// Set in a child: which exporters its row runs (`atof+otlp`, `atof`, `otlp`, `none`).
const EXPORTERS_VARIABLE: &str = "WATTLINE_SCALE_ROW_EXPORTERS";
/// Set in a child: the collector's URL.
const URL_VARIABLE: &str = "WATTLINE_SCALE_OTLP_URL";
/// Set in a child: `plain` or `zstd`, the ATOF file's compression.
const COMPRESSION_VARIABLE: &str = "WATTLINE_SCALE_ROW_COMPRESSION";
/// The mark each settled scope gets.
const SCOPE_ENERGY_MARK: &str = "wattline.scope_energy";
/// The mark of each energy-account input.
const ENERGY_MARK: &str = "wattline.energy";
/// Prefixes the child's one result line.
const RESULT_PREFIX: &str = "scale-row ";
/// Both exporters: the rows the scope counts are compared on.
const BOTH: &str = "atof+otlp";

struct Settings {
    interval_millis: u64,
    export_millis: u64,
    polls: u64,
    warmup: u64,
}

impl Settings {
    fn from_environment() -> Settings {
        let interval_millis = env_number("WATTLINE_SCALE_INTERVAL_MS", 1000);
        Settings {
            interval_millis,
            export_millis: env_number("WATTLINE_SCALE_EXPORT_MS", interval_millis),
            polls: env_number("WATTLINE_SCALE_POLLS", 20),
            warmup: env_number("WATTLINE_SCALE_WARMUP", 3),
        }
    }
}

fn main() {
    let settings = Settings::from_environment();
    match std::env::var(ROW_VARIABLE) {
        Ok(scopes) => {
            let scopes = scopes.parse().expect("a scope count");
            let exporters = std::env::var(EXPORTERS_VARIABLE).unwrap_or_else(|_| BOTH.into());
            let url = std::env::var(URL_VARIABLE).expect("the collector URL");
            let compression =
                std::env::var(COMPRESSION_VARIABLE).unwrap_or_else(|_| "plain".into());
            let row = Row {
                scopes,
                exporters: &exporters,
                zstd: compression == "zstd",
            };
            let runtime = tokio::runtime::Runtime::new().expect("a runtime");
            let row = runtime.block_on(measure_row(&settings, &row, &url));
            println!("{RESULT_PREFIX}{row}");
        }
        Err(_) => compare_rows(&settings),
    }
}

/// The parent: one collector, one child per row, one table.
fn compare_rows(settings: &Settings) {
    let counts: Vec<u64> = std::env::var("WATTLINE_SCALE_SCOPES")
        .unwrap_or_else(|_| "1,100,1000".into())
        .split(',')
        .map(|count| count.trim().parse().expect("scope counts like 1,100,1000"))
        .collect();
    let compressions: Vec<String> = std::env::var("WATTLINE_SCALE_COMPRESSION")
        .unwrap_or_else(|_| "plain".into())
        .split(',')
        .map(|name| name.trim().to_owned())
        .collect();
    assert!(
        compressions
            .iter()
            .all(|name| name == "plain" || name == "zstd"),
        "WATTLINE_SCALE_COMPRESSION is plain, zstd or plain,zstd"
    );
    let mut plan: Vec<(u64, &str, &str)> = counts
        .iter()
        .flat_map(|&count| {
            compressions
                .iter()
                .map(move |compression| (count, BOTH, compression.as_str()))
        })
        .collect();
    if let (Some(&largest), true) = (
        counts.iter().max(),
        env_number("WATTLINE_SCALE_BREAKDOWN", 1) == 1,
    ) {
        plan.extend(["atof", "otlp", "none"].map(|exporters| (largest, exporters, "plain")));
    }
    let collector = Collector::start();
    println!(
        "scale: {} polls per row after {} warm-up polls, polling every {} ms, OTLP export every {} ms",
        settings.polls, settings.warmup, settings.interval_millis, settings.export_millis
    );
    println!("       ATOF into a temp dir; {}", collector.label());
    println!(
        "       {} CPUs, load average {} at start; each row in its own process",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let executable = std::env::current_exe().expect("this benchmark's path");
    let mut rows = Vec::new();
    for (scopes, exporters, compression) in plan {
        let output = Command::new(&executable)
            .env(ROW_VARIABLE, scopes.to_string())
            .env(EXPORTERS_VARIABLE, exporters)
            .env(COMPRESSION_VARIABLE, compression)
            .env(URL_VARIABLE, collector.url())
            .stderr(Stdio::inherit())
            .output()
            .expect("the row's child process");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .find_map(|line| line.strip_prefix(RESULT_PREFIX))
            .unwrap_or_else(|| panic!("row {scopes} failed ({}):\n{stdout}", output.status));
        rows.push(serde_json::from_str::<Value>(line).expect("the row's JSON"));
    }
    print_table(&rows);
}

/// What one child measures.
struct Row<'a> {
    /// Live Agent scopes.
    scopes: u64,
    /// Which exporters run.
    exporters: &'a str,
    /// The ATOF file is zstd-compressed.
    zstd: bool,
}

/// A child: the pipeline with `row.scopes` live Agent scopes, measured between two
/// flushes placed half an interval off the poll grid, so the window holds whole polls.
async fn measure_row(settings: &Settings, row: &Row<'_>, url: &str) -> Value {
    let (scopes, exporters) = (row.scopes, row.exporters);
    let directory = tempfile::tempdir().expect("a temp dir");
    let atof = exporters.contains("atof").then(|| directory.path());
    let otlp = exporters
        .contains("otlp")
        .then_some((url, settings.export_millis));
    let mut config = common::pipeline_config(settings.interval_millis, atof, otlp);
    if let (Some(atof), true) = (&mut config.atof, row.zstd) {
        atof.compression = AtofCompression::Zstd;
    }
    let interval = Duration::from_millis(settings.interval_millis);
    let prepared = wattline::Pipeline::builder()
        .config(config)
        .prepare()
        .await
        .expect("the pipeline's configuration and exporters");
    // The first poll runs as the pipeline starts; the rest follow on a fixed-rate grid.
    let first_poll = tokio::time::Instant::now();
    let pipeline = prepared.spawn().await.expect("the pipeline");
    let mut agents = Vec::new();
    for index in 0..scopes {
        agents.push(
            pipeline
                .agent_scope(&format!("agent-{index}"))
                .expect("an Agent scope"),
        );
    }
    let window_start = first_poll + interval * settings.warmup as u32 + interval / 2;
    tokio::time::sleep_until(window_start).await;
    let file = atof.map(common::atof_file);
    let size = |file: &Option<std::path::PathBuf>| file.as_deref().map_or(0, common::file_size);

    let before = pipeline.flush().await.expect("flush");
    let (cpu_start, size_start) = (common::cpu_seconds(), size(&file));
    let (rss_warm, missed_start) = (common::rss_bytes(), pipeline.missed_ticks());
    let (measured_from, wall_from) = (tokio::time::Instant::now(), Utc::now());
    tokio::time::sleep_until(window_start + interval * settings.polls as u32).await;
    let after = pipeline.flush().await.expect("flush");
    let (cpu_end, size_end) = (common::cpu_seconds(), size(&file));
    let (rss_end, missed_end) = (common::rss_bytes(), pipeline.missed_ticks());
    let (measured_to, wall_to) = (tokio::time::Instant::now(), Utc::now());

    // Polls in the window: those with marks in the file's new part when ATOF is on,
    // else the ticks on the grid between the two readings.
    let missed = missed_end - missed_start;
    let ticks =
        |at: tokio::time::Instant| ((at - first_poll).as_nanos() / interval.as_nanos()) as u64;
    let change = |name| {
        let (first, last) = (
            common::exporter_counts(&before, name),
            common::exporter_counts(&after, name),
        );
        json!([last.0 - first.0, last.1 - first.1, last.2 - first.2])
    };
    drop(agents);
    pipeline.shutdown().await.expect("shutdown");
    // Read once the file is whole: the window's resource marks by their timestamps,
    // and every event written, by kind.
    let (marks, polls, written) = match &file {
        Some(file) => {
            let read = read_event_file(file, wall_from, wall_to);
            (json!(read.marks), read.polls, json!(read.by_kind))
        }
        None => (
            Value::Null,
            (ticks(measured_to) - ticks(measured_from)).saturating_sub(missed),
            Value::Null,
        ),
    };
    json!({
        "scopes": scopes,
        "exporters": exporters,
        "compression": if row.zstd { "zstd" } else { "plain" },
        "written": written,
        "polls": polls,
        "cpu_seconds": cpu_end - cpu_start,
        "atof_bytes": size_end - size_start,
        "marks": marks,
        "rss_warm": rss_warm,
        "rss_end": rss_end,
        "missed_ticks": missed,
        "atof": change("atof"),
        "otlp": change("opentelemetry"),
    })
}

/// What an event file holds.
struct EventFile {
    /// Resource marks stamped inside the window.
    marks: u64,
    /// The polls they came from (copies of one poll share its timestamp).
    polls: u64,
    /// Lines written, by kind (`scope`, `mark_copy`, `scope_energy`, `energy_record`,
    /// or the mark's name for the rest).
    by_kind: BTreeMap<String, u64>,
}

/// Reads the whole lines of `file` (plain or zstd): a trailing line with no newline
/// (a write under way or cut short) is not parsed.
fn read_event_file(file: &Path, from: DateTime<Utc>, to: DateTime<Utc>) -> EventFile {
    let reader = std::fs::File::open(file).expect("the ATOF file");
    let mut lines: Box<dyn BufRead> = if file.extension().is_some_and(|ext| ext == "zst") {
        Box::new(wattline_exporters::atof_frames::FrameLines::new(reader).expect("zstd frames"))
    } else {
        Box::new(std::io::BufReader::new(reader))
    };
    let mut read = EventFile {
        marks: 0,
        polls: 0,
        by_kind: BTreeMap::new(),
    };
    let mut timestamps = BTreeSet::new();
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).expect("a line") == 0 || !line.ends_with('\n') {
            break;
        }
        let kind = field(&line, "kind").unwrap_or_default();
        let name = field(&line, "name").unwrap_or_default();
        let key = match (kind, name) {
            ("scope", _) => EventKind::Scope.name(),
            (_, RESOURCE_MARK_NAME) => EventKind::MarkCopy.name(),
            (_, SCOPE_ENERGY_MARK) => EventKind::ScopeEnergy.name(),
            (_, ENERGY_MARK) => EventKind::EnergyRecord.name(),
            (_, name) => name,
        };
        *read.by_kind.entry(key.to_owned()).or_default() += 1;
        if name == RESOURCE_MARK_NAME
            && let Some(at) = field(&line, "timestamp")
                .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
                .map(|at| at.with_timezone(&Utc))
                .filter(|at| (from..to).contains(at))
        {
            read.marks += 1;
            timestamps.insert(at);
        }
    }
    read.polls = timestamps.len() as u64;
    read
}

/// The envelope's string field `name` of an ATOF line: its first occurrence (the
/// envelope's fields come before its data).
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\":\"");
    let start = line.find(&key)? + key.len();
    let length = line[start..].find('"')?;
    Some(&line[start..start + length])
}

fn print_table(rows: &[Value]) {
    let number = |row: &Value, key: &str| row[key].as_f64().unwrap_or(f64::NAN);
    let per_poll = |row: &Value, key: &str| number(row, key) / number(row, "polls").max(1.0);
    let Some(base) = rows.first() else { return };
    let base_cpu = per_poll(base, "cpu_seconds");
    let base_bytes = per_poll(base, "atof_bytes");
    let counters = |row: &Value, name: &str| {
        let at = |index: usize| row[name][index].as_u64().unwrap_or(0);
        format!("{}/{}/{}", at(0), at(1), at(2))
    };
    println!();
    println!(
        "| live scopes | exporters | ATOF | CPU ms/poll | ratio | ATOF KiB/poll | ratio | marks/poll | polls | RSS warm MiB | RSS end MiB | ATOF events ok/dropped/failed | OTLP events ok/dropped/failed | missed ticks |"
    );
    println!(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for row in rows {
        let cpu = per_poll(row, "cpu_seconds");
        let bytes = per_poll(row, "atof_bytes");
        let marks = row["marks"]
            .as_f64()
            .map_or("-".into(), |_| format!("{:.1}", per_poll(row, "marks")));
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {marks} | {} | {:.1} | {:.1} | {} | {} | {} |",
            row["scopes"],
            row["exporters"].as_str().unwrap_or_default(),
            row["compression"].as_str().unwrap_or_default(),
            cpu * 1e3,
            cpu / base_cpu,
            bytes / 1024.0,
            bytes / base_bytes,
            row["polls"],
            mib(row["rss_warm"].as_u64().unwrap_or(0)),
            mib(row["rss_end"].as_u64().unwrap_or(0)),
            counters(row, "atof"),
            counters(row, "otlp"),
            row["missed_ticks"],
        );
    }
    println!();
    for row in rows.iter().filter(|row| row["written"].is_object()) {
        let written: Vec<String> = row["written"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        println!(
            "{} scopes, {}, ATOF {}: {:.2} ms CPU per poll; events written per kind: {}",
            row["scopes"],
            row["exporters"].as_str().unwrap_or_default(),
            row["compression"].as_str().unwrap_or_default(),
            per_poll(row, "cpu_seconds") * 1e3,
            written.join(", "),
        );
    }
    // What one more live scope adds to a poll, between the first and the largest row
    // with the same exporters and compression.
    let same = rows
        .iter()
        .filter(|row| {
            row["exporters"] == base["exporters"] && row["compression"] == base["compression"]
        })
        .max_by_key(|row| row["scopes"].as_u64());
    if let Some(last) = same.filter(|last| number(last, "scopes") > number(base, "scopes")) {
        let extra_scopes = number(last, "scopes") - number(base, "scopes");
        println!();
        println!(
            "each extra live scope adds per poll: {:.1} µs CPU and {:.0} bytes of ATOF",
            (per_poll(last, "cpu_seconds") - base_cpu) / extra_scopes * 1e6,
            (per_poll(last, "atof_bytes") - base_bytes) / extra_scopes,
        );
    }
}

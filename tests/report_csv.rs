//! `--report csv` and `--csv-file`: one row per run under a stable header, appended to
//! a file that carries the same header and never to one that does not.

mod support;

use support::wattline;
use wattline::report::csv::CSV_COLUMNS;

fn fields(line: &str) -> Vec<String> {
    // The rows these tests write quote nothing but the command.
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    for character in line.chars() {
        match (character, quoted) {
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            (other, _) => field.push(other),
        }
    }
    out.push(field);
    out
}

fn column<'a>(row: &'a [String], name: &str) -> &'a str {
    let index = CSV_COLUMNS.iter().position(|c| *c == name).unwrap();
    &row[index]
}

#[test]
fn run_prints_the_header_and_a_row_with_the_gpu_energy() {
    let home = tempfile::tempdir().unwrap();
    let (_bin, path) = support::path_with_stand_in_nvidia_smi();
    let output = wattline(home.path())
        .env("PATH", path)
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
        .env("GENAI_POWER_COST_PER_KWH", "0.30")
        .args(["run", "--quiet", "--report", "csv", "--", "sleep", "0.6"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    let row = fields(lines[1]);
    assert_eq!(row.len(), CSV_COLUMNS.len());
    assert_eq!(column(&row, "command"), "sleep 0.6");
    assert_eq!(column(&row, "scope"), "global");
    assert_eq!(column(&row, "gpu_models"), "NVIDIA H200");
    assert_eq!(column(&row, "gpu_source"), "nvidia-smi");
    assert!(column(&row, "gpu_energy_kwh").parse::<f64>().unwrap() > 0.0);
    assert_eq!(
        column(&row, "cpu_energy_kwh"),
        "",
        "not measured is empty, never 0"
    );
    assert_eq!(column(&row, "cost_per_kwh"), "0.3");
    assert_eq!(
        column(&row, "cost_per_kwh_source"),
        "env:GENAI_POWER_COST_PER_KWH"
    );
    assert_eq!(column(&row, "currency"), "USD");
    let seconds: f64 = column(&row, "duration_seconds").parse().unwrap();
    assert!((0.5..5.0).contains(&seconds), "{seconds}");
    // No step was marked: what steps held, and what none did, is not a figure here.
    assert_eq!(column(&row, "scope_attributed_energy_kwh"), "");
    assert_eq!(column(&row, "unattributed_energy_kwh"), "");
}

#[test]
fn rows_append_under_one_header_and_a_foreign_file_is_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("runs.csv");
    for _ in 0..2 {
        let output = wattline(home.path())
            .args(["run", "--quiet", "--report", "json", "--csv-file"])
            .arg(&file)
            .args(["--", "sh", "-c", "exit 0"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "one header, two rows: {text}");
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    assert_eq!(column(&fields(lines[2]), "command"), "sh -c exit 0");

    let foreign = home.path().join("other.csv");
    std::fs::write(&foreign, "date,kwh\n2026-01-01,1\n").unwrap();
    let output = wattline(home.path())
        .args(["run", "--quiet", "--csv-file"])
        .arg(&foreign)
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(3),
        "the command's exit code stands"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "other.csv: its header is not this wattline's CSV header (they differ at column 1)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("wattline energy report"),
        "the report was still printed: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&foreign).unwrap(),
        "date,kwh\n2026-01-01,1\n"
    );
}

#[test]
fn report_from_an_atof_file_gives_the_same_columns() {
    let home = tempfile::tempdir().unwrap();
    let file = support::atof_file_of_a_short_run(home.path());
    let output = wattline(home.path())
        .args(["report", "--report", "csv"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    let row = fields(lines[1]);
    assert_eq!(row.len(), CSV_COLUMNS.len());
    assert_eq!(column(&row, "command"), "", "the file does not say");
    assert_eq!(column(&row, "currency"), "USD");
}

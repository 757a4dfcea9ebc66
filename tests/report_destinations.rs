//! What `run` prints stays apart: a worker plugin's own output goes to wattline's
//! stderr (or its `log_file`), each line prefixed with its plugin id, so `--report
//! json` on stdout stays JSON; `--output FILE` puts the report in a file, apart from
//! the measured command's own stdout, for `run` and `report` alike.

mod support;

use support::wattline;

#[test]
fn a_worker_that_prints_never_breaks_the_json_report_on_stdout() {
    let home = tempfile::tempdir().unwrap();
    let log = home.path().join("quiet.log");
    let config = home.path().join("plugins.toml");
    // Both print and exit before registering: their lines are all they leave.
    std::fs::write(
        &config,
        format!(
            r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.loud"
command = ["sh", "-c", "echo loud-out; echo loud-err >&2; exit 3"]

[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.quiet"
command = ["sh", "-c", "echo quiet-out; printf quiet-err-no-newline >&2; exit 3"]
log_file = "{}"
"#,
            log.display()
        ),
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["run", "--quiet", "--report", "json", "--config"])
        .arg(&config)
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
            panic!(
                "stdout is not the JSON report ({error}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        });
    assert_eq!(report["currency"], "USD");
    let stderr_lines: Vec<&str> = stderr.lines().collect();
    assert!(stderr_lines.contains(&"[acme.loud] loud-out"), "{stderr}");
    assert!(stderr_lines.contains(&"[acme.loud] loud-err"), "{stderr}");
    assert!(!stderr.contains("quiet-"), "{stderr}");
    let mut logged: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    logged.sort_unstable();
    assert_eq!(
        logged,
        [
            "[acme.quiet] quiet-err-no-newline",
            "[acme.quiet] quiet-out"
        ]
    );
}

#[test]
fn run_output_writes_the_report_apart_from_the_commands_stdout() {
    let home = tempfile::tempdir().unwrap();
    let report_file = home.path().join("report.json");
    let output = support::succeeded(
        wattline(home.path())
            .args(["run", "--quiet", "--report", "json", "--output"])
            .arg(&report_file)
            .args(["--", "sh", "-c", "echo hello-from-child"]),
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "hello-from-child\n"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_file).unwrap()).unwrap();
    assert_eq!(report["currency"], "USD");
    assert!(report["diagnostics"]["components"].is_array());
}

#[test]
fn run_output_to_a_path_that_cannot_be_made_never_starts_the_command() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started");
    let output = wattline(home.path())
        .args(["run", "--quiet", "--output"])
        .arg(home.path().join("no-such-folder").join("report.txt"))
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("wattline: --output "), "{stderr}");
    assert!(stderr.contains("no-such-folder"), "{stderr}");
    assert!(!marker.exists());
}

#[test]
fn report_output_writes_the_table_to_a_file_and_nothing_to_stdout() {
    let home = tempfile::tempdir().unwrap();
    let file = support::atof_file_of_a_short_run(home.path());
    let table = home.path().join("report.txt");
    let output = support::succeeded(
        wattline(home.path())
            .args(["report", "-o"])
            .arg(&table)
            .arg(&file),
    );
    assert!(output.stdout.is_empty());
    let written = std::fs::read_to_string(&table).unwrap();
    assert!(written.contains("wattline energy report"), "{written}");
    assert!(written.contains("Total:"), "{written}");
}

//! `wattline run -- CMD`: exit codes, signal forwarding, the report, process-tree scope.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wattline(home: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wattline"));
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env_remove("GENAI_ENABLE_CO2_TRACKING");
    command
}

#[test]
fn run_exits_with_the_commands_exit_code_and_prints_the_report() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["run", "--interval", "200", "--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("wattline energy report"), "{stderr}");
    assert!(stderr.contains("GPU total:"), "{stderr}");
}

#[test]
fn run_report_json_goes_to_stdout_and_the_commands_output_passes_through() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args([
            "run",
            "--report",
            "json",
            "--interval",
            "100",
            "--",
            "sh",
            "-c",
            "echo hello-from-child; sleep 0.3",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let (child_line, report) = stdout.split_once('\n').unwrap();
    assert_eq!(child_line, "hello-from-child");
    let report: serde_json::Value = serde_json::from_str(report).unwrap();
    assert_eq!(report["currency"], "USD");
    assert!(report["total"]["gpu_energy_kwh"].as_f64().unwrap() >= 0.0);
    assert!(report["total"]["co2_grams"].is_null());
    assert!(report["diagnostics"]["components"].is_array());
}

#[test]
fn a_signal_to_wattline_reaches_the_child() {
    let home = tempfile::tempdir().unwrap();
    let mut wattline = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--",
            "sh",
            "-c",
            "trap 'echo child-got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = wattline.stdout.take().unwrap();
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buffer = [0u8; 64];
    while !seen.contains("ready") {
        let read = stdout.read(&mut buffer).unwrap();
        assert!(
            read > 0 && Instant::now() < deadline,
            "no ready line: {seen:?}"
        );
        seen.push_str(&String::from_utf8_lossy(&buffer[..read]));
    }
    let pid = wattline.id() as libc::pid_t;
    // SAFETY: signalling the wattline process this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    // A watchdog so a signal that is not forwarded fails the test instead of hanging it.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        // SAFETY: as above; a no-op when the process has already been reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let status = wattline.wait().unwrap();
    // The child holds the pipe too: read only what is there once wattline is done.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !seen.contains("child-got-int") && Instant::now() < deadline {
        match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => seen.push_str(&String::from_utf8_lossy(&buffer[..read])),
        }
    }
    assert!(seen.contains("child-got-int"), "{seen}");
    assert_eq!(status.code(), Some(7));
    let mut stderr = String::new();
    wattline
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("wattline energy report"),
        "the report is printed after a signal: {stderr}"
    );
}

#[test]
fn a_command_killed_by_a_signal_gives_128_plus_the_signal() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["run", "--quiet", "--", "sh", "-c", "kill -TERM $$"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(128 + 15));
}

#[test]
fn a_missing_command_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["run", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("wattline: cannot run \"/nonexistent/program\""),
        "{stderr}"
    );
}

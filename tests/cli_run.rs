//! `wattline run -- CMD`: exit codes, signal forwarding, the report, process-tree scope.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

mod support;

use support::wattline;

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
    assert!(stderr.contains("Total:"), "{stderr}");
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
    // No GPU here: not measured is null, with the reason, never 0.
    assert!(report["total"]["gpu_energy_kwh"].is_null());
    assert!(report["gpu_unavailable"].is_string());
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

#[test]
fn run_measures_gpu_energy_through_nvidia_smi() {
    let home = tempfile::tempdir().unwrap();
    let (_bin, path) = support::path_with_stand_in_nvidia_smi();
    let report = support::json_stdout(
        wattline(home.path())
            .env("PATH", path)
            .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
            .args(["run", "--quiet", "--report", "json", "--", "sleep", "1.2"]),
    );
    assert_eq!(report["gpu_source"], "nvidia-smi");
    let device = &report["devices"][0];
    assert_eq!(
        device["device_identifier"],
        "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
    );
    assert_eq!(device["name"], "NVIDIA H200");
    assert_eq!(device["energy_source"], "dense_trapezoid");
    // Constant 250 W: the mean is exact, and the energy is 250 W over the covered time.
    assert!(
        (device["mean_watts"].as_f64().unwrap() - 250.0).abs() < 1e-9,
        "{device}"
    );
    let covered = device["covered_seconds"].as_f64().unwrap();
    assert!(covered > 0.4, "{device}");
    let expected = 250.0 * covered / 3_600_000.0;
    assert!(
        (device["energy_kwh"].as_f64().unwrap() - expected).abs() < 1e-12,
        "{device}"
    );
    assert_eq!(report["total"]["gpu_energy_kwh"], device["energy_kwh"]);
}

#[test]
fn nvidia_smi_runs_no_more_often_than_every_half_second_whatever_the_polls() {
    let home = tempfile::tempdir().unwrap();
    // The stand-in logs every run but its power loop.
    let script = support::FAKE_NVIDIA_SMI.replacen(
        "case \"$*\" in",
        "case \"$*\" in *--loop-ms=*) ;; *) echo \"$*\" >> \"$(dirname \"$0\")/runs\";; esac\ncase \"$*\" in",
        1,
    );
    let (bin, path) = support::path_with_nvidia_smi(&script);
    let report = support::json_stdout(
        wattline(home.path())
            .env("PATH", path)
            .env("GENAI_GPU_COLLECTION_INTERVAL", "0.1")
            .args(["run", "--quiet", "--report", "json", "--", "sleep", "3"]),
    );
    assert_eq!(report["gpu_source"], "nvidia-smi");
    let runs = std::fs::read_to_string(bin.path().join("runs")).unwrap();
    let full = runs
        .lines()
        .filter(|line| line.starts_with("--query-gpu="))
        .count();
    // 3 s at one full query per 500 ms is 6; add the first answer, the window's two
    // edges and a second of start and stop. At the polls' 100 ms it would be 30 or more.
    assert!((5..=12).contains(&full), "{full} full queries:\n{runs}");
    // The energy still comes from the power loop, at its own 100 ms.
    let device = &report["devices"][0];
    assert_eq!(device["energy_source"], "dense_trapezoid", "{device}");
    assert!(device["readings"].as_u64().unwrap() >= 20, "{device}");
}

#[test]
fn on_a_terminal_run_shows_a_live_status_line() {
    // `script` (util-linux) gives the command a pseudo-terminal and records it.
    let home = tempfile::tempdir().unwrap();
    let binary = env!("CARGO_BIN_EXE_wattline");
    let transcript = home.path().join("typescript");
    let output = std::process::Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{binary} run --interval 200 -- sleep 1.6"))
        .arg(&transcript)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let screen = std::fs::read_to_string(&transcript).unwrap();
    let status_lines: Vec<&str> = screen
        .split('\r')
        .filter(|l| l.contains("wattline ") && l.contains(" energy "))
        .collect();
    assert!(status_lines.len() >= 2, "{screen:?}");
    assert!(
        status_lines
            .iter()
            .any(|l| l.contains("cpu ") && l.contains("mem ")),
        "{status_lines:?}"
    );

    // --quiet: no status line.
    let output = std::process::Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!("{binary} run --quiet --interval 200 -- sleep 0.6"))
        .arg(&transcript)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("xdg"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success());
    let screen = std::fs::read_to_string(&transcript).unwrap();
    assert!(!screen.contains(" energy 0."), "{screen:?}");
    assert!(screen.contains("wattline energy report"), "{screen:?}");
}

#[test]
fn metrics_stdout_prints_the_opentelemetry_metrics() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--metrics-stdout",
            "--interval",
            "200",
            "--",
            "sleep",
            "0.5",
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("nemo.relay.resource.cpu.total_time"),
        "{stdout}"
    );
    assert!(stdout.contains("milliseconds"), "{stdout}");
}

#[test]
fn run_with_process_tree_scope_measures_the_command_and_its_children() {
    let home = tempfile::tempdir().unwrap();
    let events = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--scope",
            "process-tree",
            "--interval",
            "150",
            "--atof",
        ])
        .arg(events.path())
        .args(["--", "sh", "-c", "sleep 0.8 & sleep 0.8 & wait"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = std::fs::read_dir(events.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(file).unwrap();
    let marks: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|event| event["name"] == "nemo.relay.resource_metrics")
        .collect();
    assert!(marks.len() >= 3, "{} polls", marks.len());
    let value = |mark: &serde_json::Value, name: &str| {
        mark["data"]["measurements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| {
                (
                    m["value"].as_f64().unwrap(),
                    m["attributes"]["nemo_relay.resource.measurement_scope"].clone(),
                )
            })
    };
    // In the middle of the run the tree is the shell and its two sleeps.
    let middle = &marks[marks.len() / 2];
    let (descendants, scope) =
        value(middle, "nemo.relay.resource.process.descendant_count").unwrap();
    assert_eq!(scope, "process_tree");
    assert_eq!(descendants, 2.0, "{middle}");
    let (active, _) = value(middle, "nemo.relay.resource.process.active_count").unwrap();
    assert_eq!(active, 3.0);
    // Above the report, a summary of what the polls saw.
    let stderr = String::from_utf8(output.stderr).unwrap();
    let summary = stderr.lines().next().unwrap_or_default();
    assert!(
        summary.starts_with("measured process_tree scope for "),
        "{stderr}"
    );
    assert!(
        summary.contains("average CPU use ") && summary.contains("peak resident memory "),
        "{summary}"
    );
}

#[test]
fn a_bad_exporter_setting_never_starts_the_command() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started");
    let blocker = home.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let output = wattline(home.path())
        .args(["run", "--quiet", "--atof"])
        .arg(blocker.join("events")) // a directory below a regular file cannot exist
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("wattline: exporter atof: "), "{stderr}");
    assert!(
        !marker.exists(),
        "the command ran although wattline could not measure it"
    );
}

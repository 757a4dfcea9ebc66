//! `wattline run` starts the command in a cgroup of its own (where wattline may make
//! one: root here, on the VM's v1 hierarchies): the spec's cgroup fields are filled
//! for the command, a child that daemonises is still counted, and the group is removed
//! at exit. With `--no-cgroup` the command stays in wattline's group: those fields are
//! null, and the daemonised child is lost from the tree.

mod support;

use std::path::Path;

use serde_json::Value;
use support::wattline;

/// The values of resource gauge `name` in every mark of the ATOF file in `dir`.
fn gauge_values(dir: &Path, name: &str) -> Vec<f64> {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("an ATOF file");
    let full = format!("nemo.relay.resource.{name}");
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["kind"] == "mark" && event["name"] != "wattline.energy")
        .flat_map(|mark| {
            mark["data"]["measurements"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|measurement| measurement["name"] == full.as_str())
        .filter_map(|measurement| measurement["value"].as_f64())
        .collect()
}

/// A run of `wattline run`: its ATOF folder, its stderr and its pid (which names the
/// group it makes, `wattline-run-PID`).
struct Run {
    atof: tempfile::TempDir,
    stderr: String,
    pid: u32,
}

/// Runs `script` under `wattline run` in process-tree scope, polling every 100 ms,
/// with `extra` flags.
fn run(script: &str, extra: &[&str]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let atof = tempfile::tempdir().unwrap();
    let child = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--scope",
            "process-tree",
        ])
        .args(extra)
        .arg("--atof")
        .arg(atof.path())
        .args(["--", "sh", "-c", script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    Run { atof, stderr, pid }
}

/// A grandchild that daemonises: its parent exits at once, so it is re-parented away
/// from the command's tree, and runs 0.5 s of a 0.9 s command.
const DAEMONISING: &str = "( sleep 0.5 & ) ; sleep 0.9";

#[test]
fn the_command_gets_its_own_group_its_fields_and_its_daemonised_child() {
    let Run { atof, stderr, pid } = run(DAEMONISING, &[]);
    assert!(!stderr.contains("left in place"), "{stderr}");
    // The group's counters describe the command: non-null under run.
    assert!(
        !gauge_values(atof.path(), "cpu.throttled_time").is_empty(),
        "cgroup CPU throttling null"
    );
    assert!(
        !gauge_values(atof.path(), "memory.environment_accounted").is_empty(),
        "cgroup memory null"
    );
    // sh, its sleep 0.9 and the daemonised sleep 0.5: three while the daemon lives.
    let counts = gauge_values(atof.path(), "process.active_count");
    assert_eq!(
        counts.iter().copied().fold(0.0, f64::max),
        3.0,
        "{counts:?}"
    );
    // Removed at exit: this run's group is left under wattline's own in no hierarchy
    // (v1 controllers, the unified one), whichever this machine mounts. Only this
    // run's name is looked for: another wattline on the machine may hold its own.
    let folders = support::own_cgroup_folders();
    assert!(
        !folders.is_empty(),
        "no cgroup hierarchy found for this test"
    );
    for dir in folders {
        assert!(dir.is_dir(), "{}", dir.display());
        let group = dir.join(format!("wattline-run-{pid}"));
        assert!(!group.exists(), "{} left behind", group.display());
    }
}

#[test]
fn without_its_own_group_the_fields_are_null_and_the_daemon_is_lost() {
    let Run { atof, .. } = run(DAEMONISING, &["--no-cgroup"]);
    assert!(gauge_values(atof.path(), "cpu.throttled_time").is_empty());
    let counts = gauge_values(atof.path(), "process.active_count");
    assert_eq!(
        counts.iter().copied().fold(0.0, f64::max),
        2.0,
        "{counts:?}"
    );
}

#[test]
fn a_daemon_that_outlives_the_command_keeps_its_group_and_it_is_said() {
    let Run { stderr, .. } = run("( sleep 1.5 & ) ; sleep 0.3", &[]);
    assert!(stderr.contains("left in place"), "{stderr}");
    // Tidy up once the daemon is gone: the groups named are empty then.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let listed = stderr.split("left in place: ").nth(1).unwrap_or_default();
    for path in listed.split(", ") {
        let path = path.split(" (").next().unwrap_or_default().trim();
        let _ = std::fs::remove_dir(path);
    }
}

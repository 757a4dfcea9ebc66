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

/// One run at a time: a test looks for groups left behind under the same parent.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `script` under `wattline run` in process-tree scope, polling every 100 ms,
/// with `extra` flags; returns the ATOF folder and stderr.
fn run(script: &str, extra: &[&str]) -> (tempfile::TempDir, String) {
    let home = tempfile::tempdir().unwrap();
    let atof = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
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
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    (atof, stderr)
}

/// A grandchild that daemonises: its parent exits at once, so it is re-parented away
/// from the command's tree, and runs 0.5 s of a 0.9 s command.
const DAEMONISING: &str = "( sleep 0.5 & ) ; sleep 0.9";

#[test]
fn the_command_gets_its_own_group_its_fields_and_its_daemonised_child() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (atof, stderr) = run(DAEMONISING, &[]);
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
    // Removed at exit: no group of this run is left under wattline's own, in any
    // hierarchy (v1 controllers, the unified one), whichever this machine mounts.
    let folders = support::own_cgroup_folders();
    assert!(
        !folders.is_empty(),
        "no cgroup hierarchy found for this test"
    );
    for dir in folders {
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("wattline-run-"))
            .map(|e| e.path())
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}

#[test]
fn without_its_own_group_the_fields_are_null_and_the_daemon_is_lost() {
    let (atof, _) = run(DAEMONISING, &["--no-cgroup"]);
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
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_, stderr) = run("( sleep 1.5 & ) ; sleep 0.3", &[]);
    assert!(stderr.contains("left in place"), "{stderr}");
    // Tidy up once the daemon is gone: the groups named are empty then.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let listed = stderr.split("left in place: ").nth(1).unwrap_or_default();
    for path in listed.split(", ") {
        let path = path.split(" (").next().unwrap_or_default().trim();
        let _ = std::fs::remove_dir(path);
    }
}

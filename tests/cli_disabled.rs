//! Disabled means disabled: what `collect` and `run` do when a `plugins.toml` switches
//! `resource_metrics` or its polling off, through the real binary.

mod support;

use std::path::{Path, PathBuf};

use support::wattline;

fn plugins_toml(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    path
}

const RESOURCE_OFF: &str = r#"
version = 1
[[components]]
kind = "resource_metrics"
enabled = false
"#;

const POLLING_OFF: &str = r#"
version = 1
[[components]]
kind = "resource_metrics"
[components.config.polling]
enabled = false
interval_millis = 100
"#;

/// The names of every mark measurement in the ATOF files under `dir`.
fn mark_names(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(measurements) = event["data"]["measurements"].as_array() {
                names.extend(
                    measurements
                        .iter()
                        .filter_map(|measurement| measurement["name"].as_str())
                        .map(str::to_owned),
                );
            }
        }
    }
    names
}

fn resource_marks(dir: &Path) -> usize {
    mark_names(dir)
        .iter()
        .filter(|name| *name == "nemo.relay.resource.sample_count")
        .count()
}

#[test]
fn collect_refuses_a_component_a_file_switched_off_and_names_the_file() {
    let home = tempfile::tempdir().unwrap();
    let config = plugins_toml(home.path(), RESOURCE_OFF);
    let output = wattline(home.path())
        .args(["collect", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "no snapshot printed");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("resource_metrics is disabled in"),
        "{stderr}"
    );
    assert!(stderr.contains(&config.display().to_string()), "{stderr}");
}

#[test]
fn run_with_resource_metrics_off_writes_no_resource_mark_and_says_so() {
    let home = tempfile::tempdir().unwrap();
    let config = plugins_toml(home.path(), RESOURCE_OFF);
    let atof = home.path().join("events");
    let output = wattline(home.path())
        .args(["run", "--quiet", "--config"])
        .arg(&config)
        .arg("--atof")
        .arg(&atof)
        .args(["--", "sh", "-c", "sleep 0.5; exit 4"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(4), "the command's exit code");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("resource_metrics is disabled in") && stderr.contains("energy only"),
        "{stderr}"
    );
    assert!(stderr.contains("wattline energy report"), "{stderr}");
    assert_eq!(resource_marks(&atof), 0);
    assert!(
        mark_names(&atof).is_empty(),
        "no resource measurement of any name"
    );
}

#[test]
fn run_with_polling_off_polls_nothing_unless_interval_asks() {
    let home = tempfile::tempdir().unwrap();
    let config = plugins_toml(home.path(), POLLING_OFF);
    let run = |atof: &Path, interval: Option<&str>| {
        let mut command = wattline(home.path());
        command.args(["run", "--quiet", "--config"]).arg(&config);
        command.arg("--atof").arg(atof);
        if let Some(interval) = interval {
            command.args(["--interval", interval]);
        }
        let output = command.args(["--", "sleep", "0.6"]).output().unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stderr).unwrap()
    };
    let quiet = home.path().join("polling-off");
    let stderr = run(&quiet, None);
    assert!(stderr.contains("polling is off in"), "{stderr}");
    assert_eq!(resource_marks(&quiet), 0, "polling off: no mark");

    let asked = home.path().join("interval-given");
    let stderr = run(&asked, Some("100"));
    assert!(!stderr.contains("polling is off"), "{stderr}");
    assert!(resource_marks(&asked) >= 2, "--interval polls");
}

#[test]
fn with_no_file_run_polls_with_the_default_component() {
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("events");
    let output = wattline(home.path())
        .args(["run", "--quiet", "--interval", "100", "--atof"])
        .arg(&atof)
        .args(["--", "sleep", "0.5"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains("wattline: "), "no notice: {stderr}");
    assert!(resource_marks(&atof) >= 2);
}

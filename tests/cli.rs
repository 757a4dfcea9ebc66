//! The `wattline` binary: `collect`, `config check`, `config show`.

mod support;

use support::wattline;
use wattline::snapshot::{MeasurementScope, Snapshot};

#[test]
fn collect_prints_a_snapshot() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path()).arg("collect").output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.lines().count() > 10, "pretty JSON spans lines");
    let snapshot: Snapshot = serde_json::from_str(&text).unwrap();
    // The CLI's runtime_default is global.
    assert_eq!(snapshot.measurement_scope, MeasurementScope::Global);
    assert!(snapshot.cpu.unwrap().total_time.is_some());
}

#[test]
fn collect_compact_is_one_line_and_honours_scope_and_pid() {
    let home = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let output = wattline(home.path())
        .args([
            "collect",
            "--compact",
            "--scope",
            "application-process",
            "--pid",
        ])
        .arg(child.id().to_string())
        .output()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1);
    let snapshot: Snapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(
        snapshot.measurement_scope,
        MeasurementScope::ApplicationProcess
    );
    assert_eq!(snapshot.process_sampling.unwrap().visible_processes, 1);
}

#[test]
fn collect_uses_units_from_the_config() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config.units.cpu]\ntotal_time = \"microseconds\"\n",
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["collect", "--compact", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(output.status.success());
    let snapshot: Snapshot = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        snapshot.cpu.unwrap().total_time.unwrap().unit.name(),
        "microseconds"
    );
}

#[test]
fn a_bad_config_exits_2_with_the_message_on_stderr() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config.polling]\ninterval_millis = 0\n",
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["collect", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        format!(
            "wattline: {}: components[0].config.polling.interval_millis: must be greater than zero (got 0)",
            config.display()
        )
    );
}

#[test]
fn config_check_says_ok_or_exits_2() {
    let home = tempfile::tempdir().unwrap();
    let good = home.path().join("good.toml");
    std::fs::write(
        &good,
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n",
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["config", "check"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "ok\n");

    let bad = home.path().join("bad.toml");
    std::fs::write(
        &bad,
        "version = 1\n[[components]]\nkind = \"resource_metric\"\n",
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["config", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("components[0].kind: unknown component kind `resource_metric`"),
        "{stderr}"
    );

    let output = wattline(home.path())
        .args(["config", "check", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn config_show_prints_the_merged_configuration_with_defaults() {
    let home = tempfile::tempdir().unwrap();
    let user = home.path().join("xdg/wattline/plugins.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config.polling]\nenabled = true\n",
    )
    .unwrap();
    let output = wattline(home.path())
        .args(["config", "show"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let shown: toml::Table = String::from_utf8(output.stdout).unwrap().parse().unwrap();
    let component = &shown["components"].as_array().unwrap()[0];
    assert_eq!(component["kind"].as_str(), Some("resource_metrics"));
    let polling = &component["config"]["polling"];
    assert_eq!(polling["enabled"].as_bool(), Some(true));
    assert_eq!(polling["interval_millis"].as_integer(), Some(5000));
    assert_eq!(
        component["config"]["units"]["memory"]["resident"].as_str(),
        Some("kibibytes")
    );
}

#[test]
fn diagnostics_shows_what_the_collection_recorded() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["diagnostics", "--compact"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let diagnostics: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let components: Vec<&str> = diagnostics["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for expected in ["sampler", "gpu", "exporter", "pipeline"] {
        assert!(components.contains(&expected), "{components:?}");
    }
    let occurrences = |code: &str| {
        diagnostics["components"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["codes"].as_array().unwrap())
            .find(|c| c["code"] == code)
            .map(|c| c["occurrences"].as_u64().unwrap())
            .unwrap()
    };
    // Global scope reads /proc/1/io; where that is denied (this VM, even as root),
    // the denial is counted rather than failing the snapshot.
    if std::fs::read("/proc/1/io").is_err() {
        assert!(occurrences("sampler.disk.permission_denied") >= 1);
    }
    assert_eq!(occurrences("pipeline.tick_missed"), 0);
}

#[test]
fn a_reader_that_closed_the_pipe_ends_collect_quietly() {
    // `wattline collect | head -c 1`: the reader is gone before the snapshot is written.
    let home = tempfile::tempdir().unwrap();
    for command in [vec!["collect"], vec!["config", "show"]] {
        let mut child = wattline(home.path())
            .args(&command)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{command:?}: {stderr}");
        assert!(output.status.success(), "{command:?}: {stderr}");
    }
}

#[test]
fn limits_config_check_accepts_are_limits_the_pipeline_starts_with() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        "version = 1\n[[components]]\nkind = \"diagnostics\"\n\
         [components.config]\nmax_live_components = 1\nmax_codes_per_component = 1\n",
    )
    .unwrap();
    let check = wattline(home.path())
        .args(["config", "check"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(check.status.success());
    assert_eq!(String::from_utf8_lossy(&check.stdout), "ok\n");
    let collect = wattline(home.path())
        .args(["diagnostics", "--compact", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        collect.status.success(),
        "{}",
        String::from_utf8_lossy(&collect.stderr)
    );
    let diagnostics: serde_json::Value = serde_json::from_slice(&collect.stdout).unwrap();
    assert_eq!(diagnostics["components"].as_array().unwrap().len(), 4);
}

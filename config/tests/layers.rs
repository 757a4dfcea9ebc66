//! Discovery and merge: one temporary directory per layer.

use std::fs;
use std::path::{Path, PathBuf};

use wattline_config::{Discovery, EffectiveConfig, PluginsDocument};

fn write(dir: &Path, relative: &str, text: &str) -> PathBuf {
    let path = dir.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, text).unwrap();
    path
}

fn component(config: &str) -> String {
    format!(
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config]\n{config}\n"
    )
}

struct Layers {
    _root: tempfile::TempDir,
    discovery: Discovery,
    user: PathBuf,
    system: PathBuf,
}

fn layers() -> Layers {
    let root = tempfile::tempdir().unwrap();
    let xdg = root.path().join("xdg");
    let home = root.path().join("home");
    let etc = root.path().join("etc");
    let discovery = Discovery {
        explicit: None,
        xdg_config_home: Some(xdg.clone()),
        home: Some(home),
        system_config_dir: Some(etc.clone()),
    };
    Layers {
        user: xdg.join("wattline/plugins.toml"),
        system: etc.join("wattline/plugins.toml"),
        _root: root,
        discovery,
    }
}

fn effective(discovery: &Discovery) -> EffectiveConfig {
    EffectiveConfig::merge(&discovery.load().unwrap()).unwrap()
}

#[test]
fn no_files_means_no_component() {
    let layers = layers();
    assert_eq!(effective(&layers.discovery), EffectiveConfig::default());
}

#[test]
fn system_layer_overrides_user_layer_and_tables_merge() {
    let layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        &component(
            "polling = { enabled = true, interval_millis = 1000 }\nnetwork = { interfaces = [\"lo\"] }",
        ),
    );
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        &component("polling = { interval_millis = 250 }"),
    );
    let config = effective(&layers.discovery).resource_metrics.unwrap();
    // The later layer replaced only the field it set; the rest came from below.
    assert_eq!(config.polling.interval_millis, 250);
    assert!(config.polling.enabled);
    assert_eq!(config.network.interfaces, vec!["lo".to_string()]);
}

#[test]
fn home_config_is_the_fallback_without_xdg() {
    let mut layers = layers();
    let home = layers.discovery.home.clone().unwrap();
    write(
        &home,
        ".config/wattline/plugins.toml",
        &component("polling = { interval_millis = 42 }"),
    );
    layers.discovery.xdg_config_home = None;
    let config = effective(&layers.discovery).resource_metrics.unwrap();
    assert_eq!(config.polling.interval_millis, 42);
}

#[test]
fn explicit_file_replaces_the_user_layer() {
    let mut layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        &component("polling = { interval_millis = 1 }"),
    );
    let explicit_dir = tempfile::tempdir().unwrap();
    let explicit = write(
        explicit_dir.path(),
        "mine.toml",
        &component("polling = { interval_millis = 7 }"),
    );
    layers.discovery.explicit = Some(explicit);
    let config = effective(&layers.discovery).resource_metrics.unwrap();
    assert_eq!(config.polling.interval_millis, 7);
}

#[test]
fn explicit_directory_means_its_plugins_toml() {
    let mut layers = layers();
    let explicit_dir = tempfile::tempdir().unwrap();
    write(
        explicit_dir.path(),
        "plugins.toml",
        &component("polling = { interval_millis = 9 }"),
    );
    layers.discovery.explicit = Some(explicit_dir.path().to_path_buf());
    assert_eq!(
        effective(&layers.discovery)
            .resource_metrics
            .unwrap()
            .polling
            .interval_millis,
        9
    );
}

#[test]
fn missing_explicit_file_is_an_error_naming_it() {
    let mut layers = layers();
    layers.discovery.explicit = Some(PathBuf::from("/nonexistent/wattline.toml"));
    let message = layers.discovery.load().unwrap_err().to_string();
    assert!(
        message.starts_with("/nonexistent/wattline.toml: cannot be read: "),
        "{message}"
    );
}

#[test]
fn an_invalid_layer_names_its_own_file() {
    let layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        &component(""),
    );
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        &component("polling = { interval_millis = 0 }"),
    );
    let message = layers.discovery.load().unwrap_err().to_string();
    assert_eq!(
        message,
        format!(
            "{}: components[0].config.polling.interval_millis: must be greater than zero (got 0)",
            layers.system.display()
        )
    );
}

#[test]
fn disabled_entry_contributes_nothing() {
    let layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        &component("polling = { interval_millis = 300 }"),
    );
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\nenabled = false\n[components.config]\npolling = { interval_millis = 900 }\n",
    );
    let config = effective(&layers.discovery).resource_metrics.unwrap();
    assert_eq!(config.polling.interval_millis, 300);
}

#[test]
fn only_disabled_entries_leave_the_component_off() {
    let layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\nenabled = false\n",
    );
    assert_eq!(effective(&layers.discovery).resource_metrics, None);
}

#[test]
fn code_layer_goes_on_top() {
    let layers = layers();
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        &component("polling = { interval_millis = 300, enabled = true }"),
    );
    let mut documents = layers.discovery.load().unwrap();
    let code: toml::Table = component("polling = { interval_millis = 5 }")
        .parse()
        .unwrap();
    documents.push(PluginsDocument::from_table("<code>", &code).unwrap());
    let config = EffectiveConfig::merge(&documents)
        .unwrap()
        .resource_metrics
        .unwrap();
    assert_eq!(config.polling.interval_millis, 5);
    assert!(config.polling.enabled);
}

#[test]
fn arrays_are_replaced_not_appended() {
    let layers = layers();
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        &component("disk = { filesystem_paths = [\"/\", \"/tmp\"] }"),
    );
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        &component("disk = { filesystem_paths = [\"/var\"] }"),
    );
    let config = effective(&layers.discovery).resource_metrics.unwrap();
    assert_eq!(config.disk.filesystem_paths, vec!["/var".to_string()]);
}

#[test]
fn non_utf8_file_is_a_clear_error() {
    let layers = layers();
    fs::create_dir_all(layers.user.parent().unwrap()).unwrap();
    fs::write(&layers.user, b"version = 1\n\xff\xfe").unwrap();
    let message = layers.discovery.load().unwrap_err().to_string();
    assert_eq!(
        message,
        format!("{}: not valid UTF-8 (at byte 12)", layers.user.display())
    );
}

#[test]
fn diagnostics_are_on_by_default_and_a_layer_can_switch_them_off() {
    let layers = layers();
    assert!(effective(&layers.discovery).diagnostics.is_some());
    write(
        layers.user.parent().unwrap(),
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"diagnostics\"\nenabled = false\n",
    );
    assert_eq!(effective(&layers.discovery).diagnostics, None);
    write(
        layers.system.parent().unwrap(),
        "plugins.toml",
        "version = 1\n[[components]]\nkind = \"diagnostics\"\n[components.config]\nhistory_capacity = 8\n",
    );
    let limits = effective(&layers.discovery).diagnostics.unwrap();
    assert_eq!(limits.history_capacity, 8);
}

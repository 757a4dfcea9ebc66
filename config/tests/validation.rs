//! One test per validation rule: each asserts the message names the file, the field
//! path and the rule.

use wattline_config::{EffectiveConfig, PluginsDocument};

fn rejection(text: &str) -> String {
    match PluginsDocument::parse("plugins.toml", text) {
        Ok(document) => panic!("expected a rejection, got {document:?}"),
        Err(error) => error.to_string(),
    }
}

fn resource_metrics(config: &str) -> String {
    format!(
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[components.config]\n{config}\n"
    )
}

#[test]
fn zero_interval_is_rejected_even_when_polling_is_off() {
    let message = rejection(&resource_metrics(
        "[components.config.polling]\nenabled = false\ninterval_millis = 0",
    ));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.polling.interval_millis: must be greater than zero (got 0)"
    );
}

#[test]
fn private_cpu_share_outside_zero_to_one_is_rejected() {
    for (value, shown) in [
        ("0", "0"),
        ("1.5", "1.5"),
        ("-0.25", "-0.25"),
        ("nan", "NaN"),
    ] {
        let message = rejection(&resource_metrics(&format!(
            "memory = {{ private_max_cpu_share = {value} }}"
        )));
        assert_eq!(
            message,
            format!(
                "plugins.toml: components[0].config.memory.private_max_cpu_share: must be greater than 0 and at most 1 (got {shown})"
            )
        );
    }
}

#[test]
fn private_cpu_share_takes_an_integer_one_and_a_fraction() {
    for (value, expected) in [("1", 1.0), ("0.25", 0.25)] {
        let text = resource_metrics(&format!("memory = {{ private_max_cpu_share = {value} }}"));
        let document = PluginsDocument::parse("plugins.toml", &text).unwrap();
        let effective = EffectiveConfig::merge(&[document]).unwrap();
        let config = effective.resource_metrics.unwrap();
        assert_eq!(config.memory.private_max_cpu_share, expected);
        assert!(config.memory.enabled);
    }
}

#[test]
fn negative_interval_is_a_type_error_at_its_path() {
    let message = rejection(&resource_metrics("polling = { interval_millis = -1 }"));
    assert!(
        message.starts_with("plugins.toml: components[0].config.polling.interval_millis: "),
        "{message}"
    );
    assert!(message.contains("-1"), "{message}");
}

#[test]
fn unknown_config_field_names_the_known_ones() {
    let message = rejection(&resource_metrics("bogus = 1"));
    assert!(
        message.starts_with("plugins.toml: components[0].config"),
        "{message}"
    );
    assert!(message.contains("unknown field `bogus`"), "{message}");
    for known in ["measurement_scope", "polling", "cpu", "network", "units"] {
        assert!(message.contains(&format!("`{known}`")), "{message}");
    }
}

#[test]
fn unknown_nested_unit_field_names_the_known_ones() {
    let message = rejection(&resource_metrics(
        "[components.config.units.cpu]\nbogus = \"seconds\"",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.units.cpu"),
        "{message}"
    );
    assert!(message.contains("`consumption_rate`"), "{message}");
}

#[test]
fn a_duration_field_cannot_take_a_capacity_unit() {
    let message = rejection(&resource_metrics(
        "[components.config.units.cpu]\nuser_time = \"bytes\"",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.units.cpu.user_time: "),
        "{message}"
    );
    assert!(message.contains("unknown variant `bytes`"), "{message}");
    assert!(message.contains("`milliseconds`"), "{message}");
}

#[test]
fn unknown_scope_names_the_known_scopes() {
    let message = rejection(&resource_metrics("measurement_scope = \"galaxy\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config.measurement_scope: "),
        "{message}"
    );
    for known in [
        "runtime_default",
        "global",
        "application_process",
        "process_tree",
    ] {
        assert!(message.contains(known), "{message}");
    }
}

#[test]
fn relative_filesystem_path_is_rejected() {
    let message = rejection(&resource_metrics(
        "disk = { filesystem_paths = [\"/\", \"data\"] }",
    ));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.disk.filesystem_paths[1]: must be an absolute path (got \"data\")"
    );
}

#[test]
fn empty_filesystem_path_is_rejected() {
    let message = rejection(&resource_metrics("disk = { filesystem_paths = [\"\"] }"));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.disk.filesystem_paths[0]: must not be empty"
    );
}

#[test]
fn blank_gpu_selector_is_rejected() {
    let message = rejection(&resource_metrics("gpu = { devices = [\"0\", \"  \"] }"));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.gpu.devices[1]: must not be blank (got \"  \")"
    );
}

#[test]
fn blank_interface_name_is_rejected() {
    let message = rejection(&resource_metrics("network = { interfaces = [\"\"] }"));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.network.interfaces[0]: must not be blank (got \"\")"
    );
}

#[test]
fn unknown_component_kind_names_the_known_kinds() {
    let message = rejection("version = 1\n[[components]]\nkind = \"telepathy\"\n");
    assert_eq!(
        message,
        "plugins.toml: components[0].kind: unknown component kind `telepathy`, expected one of `resource_metrics`, `energy`, `diagnostics`, `atof`, `opentelemetry`, `worker`"
    );
}

#[test]
fn a_kind_appears_at_most_once_per_file() {
    let message = rejection(
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\n[[components]]\nkind = \"resource_metrics\"\nenabled = false\n",
    );
    assert_eq!(
        message,
        "plugins.toml: components[1].kind: kind `resource_metrics` appears more than once in this file (first at components[0])"
    );
}

#[test]
fn missing_and_wrong_versions_are_rejected() {
    assert_eq!(
        rejection("components = []"),
        "plugins.toml: version: missing; write `version = 1`"
    );
    assert_eq!(
        rejection("version = 2"),
        "plugins.toml: version: unsupported version 2 (expected 1)"
    );
}

#[test]
fn unknown_top_level_and_entry_fields_are_rejected() {
    assert_eq!(
        rejection("version = 1\nextra = true"),
        "plugins.toml: extra: unknown field `extra`, expected `version` or `components`"
    );
    assert_eq!(
        rejection("version = 1\n[[components]]\nkind = \"resource_metrics\"\nenable = true\n"),
        "plugins.toml: components[0].enable: unknown field `enable`, expected one of `kind`, `enabled`, `config`"
    );
}

#[test]
fn wrong_types_are_rejected_at_their_path() {
    assert_eq!(
        rejection("version = 1\n[[components]]\nkind = \"resource_metrics\"\nenabled = \"yes\"\n"),
        "plugins.toml: components[0].enabled: must be true or false (got string)"
    );
    assert_eq!(
        rejection("version = 1\ncomponents = 3"),
        "plugins.toml: components: must be an array of tables (got integer)"
    );
    assert_eq!(
        rejection("version = 1\n[[components]]\nkind = 7\n"),
        "plugins.toml: components[0].kind: must be a string (got integer)"
    );
    assert_eq!(
        rejection("version = 1\n[[components]]\nenabled = true\n"),
        "plugins.toml: components[0].kind: missing"
    );
}

#[test]
fn invalid_toml_is_a_clear_error() {
    let message = rejection("version = = 1");
    assert!(
        message.starts_with("plugins.toml: not valid TOML: "),
        "{message}"
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A small deterministic fuzz: every prefix of a valid document and some noise.
    let valid = resource_metrics(
        "polling = { enabled = true, interval_millis = 10 }\ndisk = { filesystem_paths = [\"/\"] }",
    );
    for end in 0..=valid.len() {
        if let Some(prefix) = valid.get(..end) {
            let _ = PluginsDocument::parse("plugins.toml", prefix);
        }
    }
    let mut state: u32 = 12345;
    for _ in 0..2000 {
        let bytes: Vec<u8> = (0..40)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                let alphabet = b"[]=\"'{},.\n 0123abcxyz_#\\";
                alphabet[(state >> 16) as usize % alphabet.len()]
            })
            .collect();
        let _ = PluginsDocument::parse("plugins.toml", &String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn defaults_fill_every_field() {
    let document = PluginsDocument::parse("plugins.toml", &resource_metrics("")).unwrap();
    let effective = EffectiveConfig::merge(&[document]).unwrap();
    let config = effective.resource_metrics.unwrap();
    assert!(!config.polling.enabled);
    assert_eq!(config.polling.interval_millis, 5000);
    assert!(config.cpu.enabled && config.memory.enabled && config.process.enabled);
    assert_eq!(config.memory.private_max_cpu_share, 0.01);
    assert!(config.disk.enabled && config.disk.process_io);
    assert!(config.disk.filesystem_paths.is_empty());
    assert!(config.gpu.enabled && config.gpu.device_metrics && config.gpu.process_metrics);
    assert!(config.network.enabled && config.network.interfaces.is_empty());
    assert_eq!(config.units.memory.resident.name(), "kibibytes");
    assert_eq!(config.units.disk.filesystem_total_capacity.name(), "bytes");
    assert_eq!(
        config.units.network.interface.receive_throughput.name(),
        "bytes_per_second"
    );
}

#[test]
fn effective_configuration_round_trips_through_toml() {
    let document = PluginsDocument::parse(
        "plugins.toml",
        &resource_metrics("[components.config.units.cpu]\nuser_time = \"seconds\"\n[components.config.units.network.system]\nreceive_throughput = \"megabits_per_second\""),
    )
    .unwrap();
    let effective = EffectiveConfig::merge(&[document]).unwrap();
    let shown = effective.to_toml().unwrap();
    let reparsed =
        EffectiveConfig::merge(&[PluginsDocument::parse("shown", &shown).unwrap()]).unwrap();
    assert_eq!(reparsed.resource_metrics, effective.resource_metrics);
    assert_eq!(reparsed.diagnostics, effective.diagnostics);
    assert_eq!(
        reparsed.energy.map(|settings| settings.config),
        effective.energy.map(|settings| settings.config)
    );
    assert!(shown.contains("user_time = \"seconds\""), "{shown}");
    assert!(shown.contains("interval_millis = 5000"), "{shown}");
}

#[test]
fn diagnostics_limits_out_of_range_name_the_field_and_range() {
    let message = rejection(
        "version = 1\n[[components]]\nkind = \"diagnostics\"\n[components.config]\nhistory_capacity = 100000\n",
    );
    assert_eq!(
        message,
        "plugins.toml: components[0].config.history_capacity: must be within 0..=4096 (got 100000)"
    );
    let message = rejection(
        "version = 1\n[[components]]\nkind = \"diagnostics\"\n[components.config]\nhistory = 1\n",
    );
    assert!(
        message.starts_with("plugins.toml: components[0].config"),
        "{message}"
    );
    assert!(message.contains("unknown field `history`"), "{message}");
}

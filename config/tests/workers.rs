//! `kind = "worker"`: several per file (one per `plugin_id`), merged across layers by
//! `plugin_id`, each field checked with its path named.

use wattline_config::{EffectiveConfig, PluginsDocument};

fn document(source: &str, text: &str) -> PluginsDocument {
    PluginsDocument::parse(source, text).unwrap_or_else(|error| panic!("{error}"))
}

fn rejection(text: &str) -> String {
    match PluginsDocument::parse("plugins.toml", text)
        .and_then(|document| EffectiveConfig::merge(&[document]))
    {
        Ok(_) => panic!("accepted: {text}"),
        Err(error) => error.to_string(),
    }
}

const TWO: &str = r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.lookup"
command = ["python3", "lookup.py"]
env = { LOOKUP_MODE = "fast" }
[components.config.config]
backend = "primary"
retries = 2

[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.audit"
command = ["./audit"]
"#;

#[test]
fn a_file_holds_several_workers_in_order_with_their_fields() {
    let effective = EffectiveConfig::merge(&[document("plugins.toml", TWO)]).unwrap();
    let ids: Vec<&str> = effective
        .workers
        .iter()
        .map(|worker| worker.plugin_id.as_str())
        .collect();
    assert_eq!(ids, ["acme.lookup", "acme.audit"]);
    let lookup = &effective.workers[0];
    assert_eq!(lookup.command, ["python3", "lookup.py"]);
    assert_eq!(lookup.env["LOOKUP_MODE"], "fast");
    assert_eq!(lookup.config["retries"].as_integer(), Some(2));
    assert!(effective.workers[1].env.is_empty());
    // `config show` writes them back, and what it writes reads the same.
    let shown = effective.to_toml().unwrap();
    let again = EffectiveConfig::merge(&[document("shown", &shown)]).unwrap();
    assert_eq!(again.workers, effective.workers);
}

#[test]
fn layers_merge_a_worker_by_plugin_id_and_a_disabled_entry_adds_nothing() {
    let system = document("system", TWO);
    let user = document(
        "user",
        r#"version = 1
[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.lookup"
[components.config.config]
backend = "secondary"

[[components]]
kind = "worker"
enabled = false
[components.config]
plugin_id = "acme.ignored"
command = ["never"]
"#,
    );
    let effective = EffectiveConfig::merge(&[system, user]).unwrap();
    assert_eq!(effective.workers.len(), 2);
    let lookup = &effective.workers[0];
    assert_eq!(lookup.config["backend"].as_str(), Some("secondary"));
    assert_eq!(
        lookup.config["retries"].as_integer(),
        Some(2),
        "tables merge"
    );
    assert_eq!(lookup.command, ["python3", "lookup.py"]);
}

#[test]
fn bad_worker_fields_are_rejected_naming_the_field() {
    let cases = [
        (
            "plugin_id = \"a\"\ncommand = []",
            "command: must name a program",
        ),
        ("plugin_id = \"a\"", "missing field `command`"),
        (
            "plugin_id = \"  \"\ncommand = [\"x\"]",
            "plugin_id: must not be blank",
        ),
        ("command = [\"x\"]", "missing field `plugin_id`"),
        (
            "plugin_id = \"a\"\ncommand = [\"x\"]\nshell = true",
            "unknown field `shell`",
        ),
        (
            "plugin_id = \"a\"\ncommand = [\"x\"]\nenv = { \"A=B\" = \"1\" }",
            "env.A=B",
        ),
    ];
    for (config, expected) in cases {
        let text = format!(
            "version = 1\n[[components]]\nkind = \"worker\"\n[components.config]\n{config}\n"
        );
        let message = rejection(&text);
        // A field one file sets wrongly names that file; a worker no layer completes
        // names the merged worker.
        let located = message.starts_with("plugins.toml: components[0]")
            || message.starts_with(
                "merged configuration: components[kind = \"worker\", plugin_id = \"a\"].config",
            );
        assert!(located && message.contains(expected), "{config}: {message}");
    }
    let twice = format!(
        "{TWO}\n[[components]]\nkind = \"worker\"\n[components.config]\nplugin_id = \"acme.audit\"\ncommand = [\"x\"]\n"
    );
    let message = rejection(&twice);
    assert!(
        message.contains("components[2].config.plugin_id")
            && message.contains("appears more than once"),
        "{message}"
    );
}

//! Helpers the `energy` component's tests share.

// Each test file compiles this module on its own and uses only some of it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use wattline_config::PluginsDocument;

/// A `plugins.toml` from `source` whose one component is `energy` with `config` (TOML
/// lines) as its `[components.config]`.
pub fn energy_document(source: &str, config: &str) -> PluginsDocument {
    PluginsDocument::parse(source, &energy_toml(config)).unwrap()
}

/// The text of such a document, for tests that expect it to be refused.
pub fn energy_toml(config: &str) -> String {
    format!("version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\n{config}\n")
}

/// An environment of `pairs`.
pub fn environment(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

//! The configuration error: which file, which field path, which rule.

use std::fmt;

/// A rejected configuration. Its message names the file, the field path and the rule,
/// e.g. `plugins.toml: components[0].config.polling.interval_millis: must be greater
/// than zero (got 0)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Where the configuration came from: a file path, or a label such as `<code>`.
    pub source_name: String,
    /// The dotted field path inside that source; empty when the whole document failed.
    pub field_path: String,
    /// What was wrong, in words.
    pub rule: String,
}

impl ConfigError {
    /// A rejection of one field.
    pub fn new(
        source_name: impl Into<String>,
        field_path: impl Into<String>,
        rule: impl Into<String>,
    ) -> Self {
        ConfigError {
            source_name: source_name.into(),
            field_path: field_path.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field_path.is_empty() {
            write!(formatter, "{}: {}", self.source_name, self.rule)
        } else {
            write!(
                formatter,
                "{}: {}: {}",
                self.source_name, self.field_path, self.rule
            )
        }
    }
}

/// A field-level problem found by a component's validation, before the file and the
/// component's position are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path relative to the component's `config` table, e.g. `polling.interval_millis`.
    pub path: String,
    /// The rule that was broken.
    pub rule: String,
}

impl FieldError {
    /// A problem with one field.
    pub fn new(path: impl Into<String>, rule: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            rule: rule.into(),
        }
    }
}

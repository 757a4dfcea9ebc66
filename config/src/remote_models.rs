//! The energy factors of hosted models (`config/data/remote_model_energy.toml`,
//! provenance in `config/data/README.md`): energy per 1,000 input and output tokens, a
//! low and a high figure, each row naming its source. A model call served by another
//! machine gets its estimate from the row of its model.
//!
//! The shipped table is compiled in and parsed once. Rows configured in
//! `plugins.toml` (`remote_models` of the `energy` component) come first: a configured
//! row for a model wins over the shipped one.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// The shipped table's text, compiled in.
const BUILTIN_TABLE: &str = include_str!("../data/remote_model_energy.toml");

/// One row: the models it covers and their energy per 1,000 tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteModelFactor {
    /// Whose models these are (`openai`, `anthropic`, `google`): for the reader; rows
    /// are found by model name, whoever serves the model.
    pub provider: String,
    /// The model names the row covers, as APIs report them (`gpt-4o`). A dated
    /// snapshot (`gpt-4o-2024-08-06`, `claude-3-5-haiku-20241022`, `…@20240620`), a
    /// `-latest` alias and a path prefix (`openai/gpt-4o`, `models/gemini-2.0-flash`)
    /// find the row of the name they extend.
    pub models: Vec<String>,
    /// Wh per 1,000 output (generated) tokens: low, high.
    pub output_wh_per_1k_tokens: [f64; 2],
    /// Wh per 1,000 input (prompt) tokens: low, high.
    pub input_wh_per_1k_tokens: [f64; 2],
    /// Where the figures come from, with enough to find it (a citation, a URL).
    pub source: String,
}

impl RemoteModelFactor {
    /// Checks the row: names present, each range finite, `0 <= low <= high`, a source.
    /// The error names the field within the row.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.models.is_empty() || self.models.iter().any(|name| name.trim().is_empty()) {
            return Err(FieldError::new(
                "models",
                "must list at least one model name, none blank",
            ));
        }
        for (field, [low, high]) in [
            ("output_wh_per_1k_tokens", self.output_wh_per_1k_tokens),
            ("input_wh_per_1k_tokens", self.input_wh_per_1k_tokens),
        ] {
            if !(low.is_finite() && high.is_finite() && 0.0 <= low && low <= high) {
                return Err(FieldError::new(
                    field,
                    format!("must be [low, high] with 0 <= low <= high (got [{low}, {high}])"),
                ));
            }
        }
        if self.source.trim().is_empty() {
            return Err(FieldError::new(
                "source",
                "must name where the figures come from",
            ));
        }
        Ok(())
    }

    /// Whether the row covers `model` (as an API reported it), by the rule of
    /// [`Self::models`].
    pub fn covers(&self, model: &str) -> bool {
        let model = model.rsplit('/').next().unwrap_or(model).trim();
        self.models.iter().any(|name| names_model(name, model))
    }
}

/// Whether `model` is `name` itself (any case), or `name` and a snapshot suffix.
fn names_model(name: &str, model: &str) -> bool {
    let (name, model) = (name.to_ascii_lowercase(), model.to_ascii_lowercase());
    match model.strip_prefix(&name) {
        Some("") => true,
        Some(suffix) => is_snapshot_suffix(suffix),
        None => false,
    }
}

/// `-2024-08-06`, `-20241022`, `-0125`, `@20240620`, `-latest`, `-001`, and a
/// Bedrock version (`-v1:0`) after any of them.
fn is_snapshot_suffix(suffix: &str) -> bool {
    let suffix = match suffix.rfind("-v") {
        Some(at)
            if suffix[at + 2..]
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':') =>
        {
            &suffix[..at]
        }
        _ => suffix,
    };
    if suffix.is_empty() {
        return true;
    }
    let Some(rest) = suffix
        .strip_prefix('-')
        .or_else(|| suffix.strip_prefix('@'))
    else {
        return false;
    };
    if rest == "latest" {
        return true;
    }
    let digits_only = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit());
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        [date] => digits_only(date) && matches!(date.len(), 3 | 4 | 8),
        [year, month, day] => {
            year.len() == 4
                && month.len() == 2
                && day.len() == 2
                && parts.iter().all(|p| digits_only(p))
        }
        _ => false,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    model: Vec<RemoteModelFactor>,
}

/// A table that cannot be used: which row and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("remote model energy table: {problem}")]
pub struct RemoteTableError {
    /// What is wrong, naming the row.
    pub problem: String,
}

/// Parses a table in the shipped file's form (`[[model]]` rows), checking each row.
pub fn parse_remote_model_table(text: &str) -> Result<Vec<RemoteModelFactor>, RemoteTableError> {
    let file: TableFile = toml::from_str(text).map_err(|error| RemoteTableError {
        problem: error.to_string(),
    })?;
    for (index, row) in file.model.iter().enumerate() {
        row.validate().map_err(|error| RemoteTableError {
            problem: format!("model[{index}].{}: {}", error.path, error.rule),
        })?;
    }
    Ok(file.model)
}

/// The shipped rows (none if the compiled-in table were broken: a test keeps it
/// whole).
pub fn builtin_remote_models() -> &'static [RemoteModelFactor] {
    static TABLE: OnceLock<Vec<RemoteModelFactor>> = OnceLock::new();
    TABLE.get_or_init(|| parse_remote_model_table(BUILTIN_TABLE).unwrap_or_default())
}

/// The row for `model`: the first configured row covering it, else the shipped one.
pub fn remote_model_factor<'a>(
    configured: &'a [RemoteModelFactor],
    model: &str,
) -> Option<&'a RemoteModelFactor> {
    configured
        .iter()
        .chain(builtin_remote_models())
        .find(|row| row.covers(model))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(models: &[&str]) -> RemoteModelFactor {
        RemoteModelFactor {
            provider: "openai".into(),
            models: models.iter().map(|&name| name.into()).collect(),
            output_wh_per_1k_tokens: [1.0, 2.0],
            input_wh_per_1k_tokens: [0.1, 0.2],
            source: "test".into(),
        }
    }

    #[test]
    fn the_shipped_table_parses_and_every_row_is_valid() {
        let rows = parse_remote_model_table(BUILTIN_TABLE).unwrap();
        assert!(!rows.is_empty());
        assert_eq!(builtin_remote_models(), rows.as_slice());
    }

    #[test]
    fn a_row_covers_its_names_their_snapshots_and_path_prefixes_but_not_other_models() {
        let gpt = row(&["gpt-4o"]);
        for model in [
            "gpt-4o",
            "GPT-4o",
            "gpt-4o-2024-08-06",
            "gpt-4o-latest",
            "openai/gpt-4o",
            "gpt-4o-v1:0",
        ] {
            assert!(gpt.covers(model), "{model}");
        }
        for model in [
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
            "gpt-4",
            "gpt-4o-audio-preview",
        ] {
            assert!(!gpt.covers(model), "{model}");
        }
        let claude = row(&["claude-3-5-haiku"]);
        assert!(claude.covers("claude-3-5-haiku-20241022"));
        assert!(claude.covers("claude-3-5-haiku@20241022"));
        assert!(
            claude.covers(
                "anthropic.claude-3-5-haiku-20241022-v1:0"
                    .rsplit('.')
                    .next()
                    .unwrap()
            )
        );
        assert!(row(&["gpt-3.5-turbo"]).covers("gpt-3.5-turbo-0125"));
        assert!(row(&["gemini-2.0-flash"]).covers("models/gemini-2.0-flash-001"));
    }

    #[test]
    fn a_configured_row_wins_over_the_shipped_one() {
        let shipped = builtin_remote_models()[0].clone();
        let model = shipped.models[0].clone();
        let mut mine = row(&[&model]);
        mine.source = "my own measurement".into();
        assert_eq!(remote_model_factor(&[], &model), Some(&shipped));
        assert_eq!(
            remote_model_factor(std::slice::from_ref(&mine), &model).map(|r| r.source.as_str()),
            Some("my own measurement")
        );
        assert_eq!(remote_model_factor(&[], "no-such-model-anywhere"), None);
    }

    #[test]
    fn bad_rows_are_refused_naming_the_row_and_field() {
        let text = r#"
            [[model]]
            provider = "a"
            models = ["x"]
            output_wh_per_1k_tokens = [1.0, 2.0]
            input_wh_per_1k_tokens = [0.1, 0.2]
            source = "s"

            [[model]]
            provider = "a"
            models = ["y"]
            output_wh_per_1k_tokens = [3.0, 2.0]
            input_wh_per_1k_tokens = [0.1, 0.2]
            source = "s"
        "#;
        let error = parse_remote_model_table(text).unwrap_err();
        assert!(
            error
                .problem
                .starts_with("model[1].output_wh_per_1k_tokens"),
            "{error}"
        );
        let error = row(&[" "]).validate().unwrap_err();
        assert_eq!(error.path, "models");
    }
}

//! The `atof` component: where the ATOF JSON-lines file goes, its name pattern and
//! whether an existing file is appended to or replaced.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// The default file name pattern (strftime, rendered in UTC when the file is opened).
pub const DEFAULT_ATOF_FILENAME: &str = "wattline-%Y-%m-%d-%H.%M.%S.jsonl";

/// What happens to a file that already exists under the rendered name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtofWriteMode {
    /// Keep what is there and add lines at the end (the default).
    #[default]
    Append,
    /// Empty the file when it is opened.
    Overwrite,
}

/// Configuration of the `atof` component (`[components.config]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AtofConfig {
    /// Directory the file is written in; created if missing. Default `"."` (the working
    /// directory).
    pub output_directory: String,
    /// File name, a strftime pattern rendered in UTC when the file is opened. Default
    /// `wattline-%Y-%m-%d-%H.%M.%S.jsonl`; non-empty, no `/` (before or after rendering).
    pub filename: String,
    /// `append` (default) or `overwrite`.
    pub mode: AtofWriteMode,
}

impl Default for AtofConfig {
    fn default() -> Self {
        AtofConfig {
            output_directory: ".".into(),
            filename: DEFAULT_ATOF_FILENAME.into(),
            mode: AtofWriteMode::Append,
        }
    }
}

impl AtofConfig {
    /// Checks the rules serde cannot express; the first broken rule is returned with its
    /// path relative to the component's `config` table.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.output_directory.is_empty() {
            return Err(FieldError::new(
                "output_directory",
                "must not be empty (write \".\" for the working directory)",
            ));
        }
        if self.output_directory.contains('\0') {
            return Err(FieldError::new(
                "output_directory",
                "must not contain a NUL character",
            ));
        }
        self.render_filename(sample_instant()).map(|_| ())
    }

    /// The file name for a file opened at `at`: the `filename` pattern rendered in UTC.
    /// Fails, naming the `filename` field, when the pattern is empty, holds a `/` or a NUL,
    /// is not a valid strftime pattern, or renders to something with a `/` or nothing.
    pub fn render_filename(&self, at: DateTime<Utc>) -> Result<String, FieldError> {
        let pattern = &self.filename;
        let error = |rule: String| FieldError::new("filename", rule);
        if pattern.is_empty() {
            return Err(error("must not be empty".into()));
        }
        if pattern.contains('/') {
            return Err(error(format!(
                "must be a file name without `/` (got {pattern:?}); put directories in `output_directory`"
            )));
        }
        if pattern.contains('\0') {
            return Err(error("must not contain a NUL character".into()));
        }
        let items = chrono::format::StrftimeItems::new(pattern)
            .parse()
            .map_err(|_| error(format!("not a valid strftime pattern (got {pattern:?})")))?;
        let rendered = at.format_with_items(items.iter()).to_string();
        if rendered.contains('/') {
            return Err(error(format!(
                "renders to a name with `/` (got {rendered:?} from {pattern:?})"
            )));
        }
        if rendered.is_empty() || rendered == "." || rendered == ".." {
            return Err(error(format!(
                "renders to {rendered:?}, which is not a file name"
            )));
        }
        Ok(rendered)
    }
}

/// A fixed instant used to check that the pattern renders to a usable name.
fn sample_instant() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 31, 23, 59, 58)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

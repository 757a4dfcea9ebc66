//! The `atof` component: where the ATOF JSON-lines file goes, its name pattern,
//! whether an existing file is appended to or replaced, whether it is compressed and
//! when it is rotated.

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

/// The file ending a compressed file's name gets when its pattern lacks it.
pub const ZSTD_FILE_SUFFIX: &str = ".zst";

/// The smallest `max_file_bytes` accepted: below it a file would hold a handful of
/// lines and a run would scatter over thousands of files.
pub const MIN_ATOF_FILE_BYTES: u64 = 64 * 1024;

/// How the lines are stored in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtofCompression {
    /// Plain JSON lines (the default).
    #[default]
    None,
    /// A sequence of independent zstd frames, each holding whole lines; the file name
    /// ends in `.zst`.
    Zstd,
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
    /// `none` (default, plain JSON lines) or `zstd` (independent frames of whole lines,
    /// `.zst` appended to the name when the pattern does not end in it).
    pub compression: AtofCompression,
    /// Bytes on disk after which the file is closed and the run goes on in the next
    /// file of its set (`-0001`, `-0002`, ... before `.jsonl`); `None` (default) never
    /// rotates. At least [`MIN_ATOF_FILE_BYTES`].
    pub max_file_bytes: Option<u64>,
}

impl Default for AtofConfig {
    fn default() -> Self {
        AtofConfig {
            output_directory: ".".into(),
            filename: DEFAULT_ATOF_FILENAME.into(),
            mode: AtofWriteMode::Append,
            compression: AtofCompression::None,
            max_file_bytes: None,
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
        if let Some(bytes) = self.max_file_bytes
            && bytes < MIN_ATOF_FILE_BYTES
        {
            return Err(FieldError::new(
                "max_file_bytes",
                format!("must be at least {MIN_ATOF_FILE_BYTES} (64 KiB); got {bytes}"),
            ));
        }
        self.render_filename(sample_instant()).map(|_| ())
    }

    /// The name of the file (of the first file of a rotated set, before its sequence
    /// suffix) opened at `at`: [`Self::render_filename`], with [`ZSTD_FILE_SUFFIX`]
    /// appended when compressed and the name does not already end in it.
    pub fn file_name(&self, at: DateTime<Utc>) -> Result<String, FieldError> {
        let rendered = self.render_filename(at)?;
        Ok(match self.compression {
            AtofCompression::Zstd if !rendered.ends_with(ZSTD_FILE_SUFFIX) => {
                format!("{rendered}{ZSTD_FILE_SUFFIX}")
            }
            _ => rendered,
        })
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

//! Reads an ATOF JSON-lines file back: every mark's timestamp and measurements, each
//! line checked against the envelope and the `nemo.relay.metric_measurements` rules.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use wattline_model::energy::EnergyRecord;
use wattline_model::events::MetricMeasurement;

use crate::atof::ENERGY_RECORD_SCHEMA;

use crate::metric_schema::{parse_metric_measurements, validate_metric_measurements};

/// One mark read back.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedMark {
    /// The mark's name (`nemo.relay.resource_metrics`, `wattline.metrics`, ...).
    pub name: String,
    /// Its timestamp.
    pub timestamp: DateTime<Utc>,
    /// Its measurements.
    pub measurements: Vec<MetricMeasurement>,
    /// The energy record it carries (a `wattline.energy` mark).
    pub energy: Option<EnergyRecord>,
}

/// Why a file could not be read back; names the file and the line.
#[derive(Debug, thiserror::Error)]
pub enum AtofReadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a valid ATOF event.
    #[error("{path}:{line}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
}

/// A file read back: its marks, and what was left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AtofFile {
    /// Every mark, in file order.
    pub marks: Vec<RecordedMark>,
    /// The last line, when it was cut short (no newline, not a whole event: a write
    /// a crash interrupted, or a copy taken mid-write) and so left out, in words with
    /// the file and line.
    pub cut_short_last_line: Option<String>,
}

/// Reads every mark of `path`, in file order. Scope events are checked and skipped.
pub fn read_atof_marks(path: &Path) -> Result<Vec<RecordedMark>, AtofReadError> {
    read_atof_file(path).map(|file| file.marks)
}

/// Reads `path` as [`read_atof_marks`] does, except that a last line cut short is
/// named in [`AtofFile::cut_short_last_line`] instead of failing the read: everything
/// before it is whole. A bad line anywhere else is an error naming it.
pub fn read_atof_file(path: &Path) -> Result<AtofFile, AtofReadError> {
    let io = |source| AtofReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut reader = std::io::BufReader::new(file);
    let mut read = AtofFile::default();
    let mut buf = Vec::with_capacity(4096);
    let mut number = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        number += 1;
        let complete = buf.last() == Some(&b'\n');
        match parse_line(path, number, &String::from_utf8_lossy(&buf)) {
            Ok(Some(mark)) => read.marks.push(mark),
            Ok(None) => {}
            Err(AtofReadError::Invalid { reason, .. }) if !complete => {
                read.cut_short_last_line = Some(format!(
                    "{}:{number}: the last line is cut short ({reason}): a write that did not \
                     finish; left out",
                    path.display()
                ));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(read)
}

/// One line: `None` for a blank line or a scope event (checked), else its mark.
fn parse_line(
    path: &Path,
    number: usize,
    line: &str,
) -> Result<Option<RecordedMark>, AtofReadError> {
    if line.trim().is_empty() {
        return Ok(None);
    }
    let invalid = |reason: String| AtofReadError::Invalid {
        path: path.to_path_buf(),
        line: number,
        reason,
    };
    let event: serde_json::Value =
        serde_json::from_str(line).map_err(|error| invalid(format!("not JSON: {error}")))?;
    if event.get("atof_version").and_then(|v| v.as_str()) != Some("0.1") {
        return Err(invalid(
            "missing or unsupported atof_version (expected \"0.1\")".into(),
        ));
    }
    match event.get("kind").and_then(|v| v.as_str()) {
        Some("scope") => return Ok(None),
        Some("mark") => {}
        other => return Err(invalid(format!("unknown kind {other:?}"))),
    }
    let name = event
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or_else(|| invalid("a mark without a name".into()))?
        .to_string();
    let timestamp = event
        .get("timestamp")
        .and_then(|v| v.as_str())
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .ok_or_else(|| invalid("a mark without an RFC 3339 timestamp".into()))?
        .with_timezone(&Utc);
    let schema = event
        .get("data_schema")
        .and_then(|schema| schema.get("name"))
        .and_then(|name| name.as_str());
    if schema == Some(ENERGY_RECORD_SCHEMA) {
        let data = event.get("data").cloned().unwrap_or_default();
        let record: EnergyRecord = serde_json::from_value(data)
            .map_err(|error| invalid(format!("unreadable energy record: {error}")))?;
        return Ok(Some(RecordedMark {
            name,
            timestamp,
            measurements: Vec::new(),
            energy: Some(record),
        }));
    }
    let measurements = match event.get("data") {
        Some(serde_json::Value::Null) | None => Vec::new(),
        Some(data) => {
            let parsed = parse_metric_measurements(data).map_err(&invalid)?;
            validate_metric_measurements(&parsed).map_err(invalid)?;
            parsed.measurements
        }
    };
    Ok(Some(RecordedMark {
        name,
        timestamp,
        measurements,
        energy: None,
    }))
}

//! Reads an ATOF JSON-lines file back (plain, zstd-compressed, or a rotated set): every
//! mark's timestamp and measurements, each line checked against the envelope and the
//! `nemo.relay.metric_measurements` rules.

use std::io::{BufRead, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use wattline_model::energy::EnergyRecord;
use wattline_model::metric_measurements::MetricMeasurement;

use crate::atof::ENERGY_RECORD_SCHEMA;
use crate::atof_files::files_of_set;
use crate::atof_frames::{FrameLines, FrameOutcome, is_zstd};

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

/// A file (or set) read back: its marks, and what was left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AtofFile {
    /// Every mark, in file order.
    pub marks: Vec<RecordedMark>,
    /// What was cut short and left out, in words with the file and line or byte: a
    /// last line with no newline that is not a whole event, or a last zstd frame that
    /// ends early (a write a crash interrupted, or a copy taken mid-write).
    pub left_out: Vec<String>,
}

/// Reads every mark of `path` (and of the rest of its set, when rotated), in file
/// order. Scope events are checked and skipped.
pub fn read_atof_marks(path: &Path) -> Result<Vec<RecordedMark>, AtofReadError> {
    read_atof_file(path).map(|file| file.marks)
}

/// Reads `path` as [`read_atof_marks`] does, except that a last line or frame cut
/// short is named in [`AtofFile::left_out`] instead of failing the read: everything
/// before it is whole. A bad line anywhere else is an error naming it. Holds every
/// mark in memory: [`AtofMarkStream`] reads one at a time.
pub fn read_atof_file(path: &Path) -> Result<AtofFile, AtofReadError> {
    let mut stream = AtofMarkStream::open(path)?;
    let mut read = AtofFile::default();
    while let Some(mark) = stream.next_mark()? {
        read.marks.push(mark);
    }
    read.left_out = stream.left_out().to_vec();
    Ok(read)
}

/// The marks of an ATOF file, plain or zstd-compressed (told by its first bytes), or
/// of every file of its rotated set in order, read one line at a time: memory holds one
/// line (one frame, compressed), whatever the file's size.
pub struct AtofMarkStream {
    files: std::vec::IntoIter<PathBuf>,
    current: Option<OpenSource>,
    skip_copies: bool,
    /// The previous mark's line from its timestamp on (empty after an energy record),
    /// for [`Self::skipping_copies`].
    previous_tail: Vec<u8>,
    line: Vec<u8>,
    left_out: Vec<String>,
}

/// The file being read.
struct OpenSource {
    path: PathBuf,
    lines: LineSource,
    number: usize,
}

enum LineSource {
    Plain(std::io::BufReader<std::fs::File>),
    Zstd(FrameLines<std::fs::File>),
}

impl LineSource {
    fn reader(&mut self) -> &mut dyn BufRead {
        match self {
            LineSource::Plain(reader) => reader,
            LineSource::Zstd(reader) => reader,
        }
    }
}

/// Where the head of a mark line ends and the part every copy shares begins.
const SHARED_TAIL: &[u8] = b",\"timestamp\":";

impl AtofMarkStream {
    /// The marks of `path`, and of the other files of its set when it is a part of a
    /// rotated set (or names one): see [`crate::atof_files::files_of_set`].
    pub fn open(path: &Path) -> Result<Self, AtofReadError> {
        let files = files_of_set(path).map_err(|source| AtofReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(AtofMarkStream {
            files: files.into_iter(),
            current: None,
            skip_copies: false,
            previous_tail: Vec::new(),
            line: Vec::with_capacity(4096),
            left_out: Vec::new(),
        })
    }

    /// Leaves out the copies of a mark: a mark line whose bytes from its timestamp on
    /// are those of the mark just before it (one poll copied under many scopes shares
    /// its timestamp and data) is checked as an envelope and not given. Energy records
    /// are always given.
    pub fn skipping_copies(mut self) -> Self {
        self.skip_copies = true;
        self
    }

    /// What was cut short and left out so far (see [`AtofFile::left_out`]).
    pub fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// The next mark, `None` after the last file's last.
    pub fn next_mark(&mut self) -> Result<Option<RecordedMark>, AtofReadError> {
        loop {
            let source = match self.current.as_mut() {
                Some(source) => source,
                None => match self.files.next() {
                    Some(path) => self.current.insert(open_source(path)?),
                    None => return Ok(None),
                },
            };
            self.line.clear();
            let read = source
                .lines
                .reader()
                .read_until(b'\n', &mut self.line)
                .map_err(|source_error| AtofReadError::Io {
                    path: source.path.clone(),
                    source: source_error,
                })?;
            if read == 0 {
                if let LineSource::Zstd(frames) = &source.lines
                    && let Some(FrameOutcome::CutShort { start, end }) = frames.ended()
                {
                    self.left_out.push(format!(
                        "{}: the last zstd frame (bytes {start}..{end}) is cut short: a write \
                         that did not finish; its lines are left out, the {} whole frame(s) \
                         before it kept",
                        source.path.display(),
                        frames.whole_frames()
                    ));
                }
                self.current = None;
                continue;
            }
            source.number += 1;
            let number = source.number;
            let complete = self.line.last() == Some(&b'\n');
            let tail_at = find(&self.line, SHARED_TAIL);
            if self.skip_copies
                && let Some(at) = tail_at
                && self.line[at..] == self.previous_tail[..]
                && is_mark_head(&self.line[..at])
            {
                continue;
            }
            match parse_line(&source.path, number, &String::from_utf8_lossy(&self.line)) {
                Ok(Some(mark)) => {
                    self.previous_tail.clear();
                    // An energy record is never a copy: two alike are two records.
                    if let Some(at) = tail_at
                        && mark.energy.is_none()
                    {
                        self.previous_tail.extend_from_slice(&self.line[at..]);
                    }
                    return Ok(Some(mark));
                }
                Ok(None) => {}
                Err(AtofReadError::Invalid { reason, .. }) if !complete => {
                    self.left_out.push(format!(
                        "{}:{number}: the last line is cut short ({reason}): a write that did not \
                         finish; left out",
                        source.path.display()
                    ));
                }
                Err(error) => return Err(error),
            }
        }
    }
}

/// Opens `path`, plain or zstd as its first bytes say.
fn open_source(path: PathBuf) -> Result<OpenSource, AtofReadError> {
    let io = |source| AtofReadError::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::File::open(&path).map_err(io)?;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let compressed = is_zstd(reader.fill_buf().map_err(io)?);
    let lines = if compressed {
        // The frame reader buffers its own input: hand it the file, from the start.
        let mut file = reader.into_inner();
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        LineSource::Zstd(FrameLines::new(file).map_err(io)?)
    } else {
        LineSource::Plain(reader)
    };
    Ok(OpenSource {
        path,
        lines,
        number: 0,
    })
}

/// Whether `head` (a line up to its timestamp) is a whole ATOF mark head.
fn is_mark_head(head: &[u8]) -> bool {
    let mut object = head.to_vec();
    object.push(b'}');
    serde_json::from_slice::<serde_json::Value>(&object).is_ok_and(|head| {
        head.get("kind").and_then(|kind| kind.as_str()) == Some("mark")
            && head.get("atof_version").and_then(|v| v.as_str()) == Some("0.1")
            && head.get("uuid").and_then(|uuid| uuid.as_str()).is_some()
    })
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
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

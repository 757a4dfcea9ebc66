//! Error types shared by every OS reader: what went wrong, on which path, and its
//! class. OS-neutral, so no caller outside `platform/` names an OS.

use std::io;
use std::path::{Path, PathBuf};

/// Longest slice of offending input kept inside a [`ParseError`].
const SNIPPET_MAX: usize = 64;

/// Why a text could not be parsed. Only the error path allocates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A field the format always carries is not there.
    #[error("missing required field `{0}`")]
    MissingField(&'static str),
    /// A known field holds something other than the expected number or keyword.
    #[error("field `{field}` has invalid value `{value}`")]
    InvalidValue {
        /// The field name as written in the file.
        field: &'static str,
        /// The offending text, cut to 64 bytes.
        value: String,
    },
    /// A value does not fit in 64 bits once scaled to its base unit.
    #[error("field `{0}` overflows 64 bits")]
    Overflow(&'static str),
    /// A line does not have the shape the format requires.
    #[error("malformed line {line}: `{text}`")]
    MalformedLine {
        /// 1-based line number.
        line: usize,
        /// The offending line, cut to 64 bytes.
        text: String,
    },
    /// A field of one line of a file whose field names repeat on every line (one line
    /// per interface, say) is bad; the line number says which.
    #[error("line {line}: {detail}")]
    OnLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong on that line.
        detail: Box<ParseError>,
    },
    /// A path handed to a system call contains a NUL byte.
    #[error("path contains a NUL byte")]
    NulInPath,
}

impl ParseError {
    /// Builds [`ParseError::InvalidValue`], keeping at most 64 bytes of `value`.
    pub fn invalid(field: &'static str, value: &str) -> Self {
        ParseError::InvalidValue {
            field,
            value: snippet(value),
        }
    }

    /// Builds [`ParseError::MalformedLine`] for 0-based line `index`, keeping at most 64 bytes.
    pub fn malformed(index: usize, text: &str) -> Self {
        ParseError::MalformedLine {
            line: index.saturating_add(1),
            text: snippet(text),
        }
    }

    /// Wraps `detail` in [`ParseError::OnLine`] for 0-based line `index`.
    pub fn on_line(index: usize, detail: ParseError) -> Self {
        ParseError::OnLine {
            line: index.saturating_add(1),
            detail: Box::new(detail),
        }
    }
}

/// Copies at most [`SNIPPET_MAX`] bytes of `text`, cut on a character boundary.
fn snippet(text: &str) -> String {
    let mut end = text.len().min(SNIPPET_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Coarse failure class of a [`ReadError`], for typed diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadErrorClass {
    /// The OS refused access (EACCES/EPERM).
    PermissionDenied,
    /// The process being read exited (its `/proc/PID` vanished, or ESRCH).
    TargetGone,
    /// The source could not be read for another I/O reason.
    Unavailable,
    /// The source was read but its content is not what the format promises.
    Invalid,
}

/// A failed read of one OS file or query. Every variant names the path involved.
///
/// An absent file is never an error: readers return `Ok(None)` for it.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The OS refused access to `path`.
    #[error("permission denied reading {}", path.display())]
    PermissionDenied {
        /// The file or directory that was refused.
        path: PathBuf,
    },
    /// The process owning `path` exited while it was being read.
    #[error("process vanished while reading {}", path.display())]
    Gone {
        /// The file under `/proc/PID` that could not be read.
        path: PathBuf,
    },
    /// Any other I/O failure on `path`.
    #[error("I/O error reading {}: {source}", path.display())]
    Io {
        /// The file or directory being read.
        path: PathBuf,
        /// The underlying OS error.
        #[source]
        source: io::Error,
    },
    /// This OS has no reader for `path`: wattline's readers are Linux's.
    #[error("reading {} is not supported on {}", path.display(), std::env::consts::OS)]
    Unsupported {
        /// What the reader would have read.
        path: PathBuf,
    },
    /// The content of `path` could not be parsed.
    #[error("cannot parse {}: {detail}", path.display())]
    Parse {
        /// The file whose content is invalid.
        path: PathBuf,
        /// What was wrong with it.
        #[source]
        detail: ParseError,
    },
}

impl ReadError {
    /// The class of this failure.
    pub fn class(&self) -> ReadErrorClass {
        match self {
            ReadError::PermissionDenied { .. } => ReadErrorClass::PermissionDenied,
            ReadError::Gone { .. } => ReadErrorClass::TargetGone,
            ReadError::Io { .. } | ReadError::Unsupported { .. } => ReadErrorClass::Unavailable,
            ReadError::Parse { .. } => ReadErrorClass::Invalid,
        }
    }

    /// The path this error is about.
    pub fn path(&self) -> &Path {
        match self {
            ReadError::PermissionDenied { path }
            | ReadError::Gone { path }
            | ReadError::Io { path, .. }
            | ReadError::Unsupported { path }
            | ReadError::Parse { path, .. } => path,
        }
    }

    /// Wraps a [`ParseError`] with the path whose content failed.
    pub fn parse(path: &Path, detail: ParseError) -> Self {
        ReadError::Parse {
            path: path.to_path_buf(),
            detail,
        }
    }

    /// Maps an I/O error on `path` to a [`ReadError`].
    ///
    /// EACCES/EPERM become [`ReadError::PermissionDenied`], ESRCH becomes
    /// [`ReadError::Gone`], anything else (including ENOENT, which readers normally turn
    /// into `Ok(None)` first) becomes [`ReadError::Io`].
    pub fn from_io(path: &Path, source: io::Error) -> Self {
        let path = path.to_path_buf();
        if source.raw_os_error() == Some(libc::ESRCH) {
            return ReadError::Gone { path };
        }
        if source.kind() == io::ErrorKind::PermissionDenied {
            return ReadError::PermissionDenied { path };
        }
        ReadError::Io { path, source }
    }
}

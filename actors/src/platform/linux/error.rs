//! The error every Linux reader returns: which file, and what class of failure.

use std::path::{Path, PathBuf};

/// Why a reader could not produce a value. An absent optional file is not an error
/// (readers return `Ok(None)`).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file exists but this process may not read it.
    #[error("{path}: permission denied")]
    PermissionDenied {
        /// The file.
        path: PathBuf,
    },
    /// The process the file belongs to has exited.
    #[error("{path}: the process is gone")]
    Gone {
        /// The file.
        path: PathBuf,
    },
    /// Any other I/O failure.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The text did not have the expected format.
    #[error("{path}: cannot parse: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}

/// The failure classes samplers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadErrorClass {
    /// Access denied.
    PermissionDenied,
    /// The target process exited.
    TargetGone,
    /// The source could not be read.
    Unavailable,
    /// The source's content was not understood.
    Invalid,
}

impl ReadError {
    /// The failure class.
    pub fn class(&self) -> ReadErrorClass {
        match self {
            ReadError::PermissionDenied { .. } => ReadErrorClass::PermissionDenied,
            ReadError::Gone { .. } => ReadErrorClass::TargetGone,
            ReadError::Io { .. } => ReadErrorClass::Unavailable,
            ReadError::Parse { .. } => ReadErrorClass::Invalid,
        }
    }

    /// Classifies an I/O error on a file under `/proc/PID`: a vanished process shows as
    /// `ENOENT` or `ESRCH`.
    pub fn from_process_io(path: &Path, error: std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::PermissionDenied => {
                ReadError::PermissionDenied { path: path.into() }
            }
            std::io::ErrorKind::NotFound => ReadError::Gone { path: path.into() },
            _ if error.raw_os_error() == Some(libc::ESRCH) => ReadError::Gone { path: path.into() },
            _ => ReadError::Io {
                path: path.into(),
                source: error,
            },
        }
    }

    /// A parse failure of `path`.
    pub fn parse(path: &Path, detail: impl Into<String>) -> Self {
        ReadError::Parse {
            path: path.into(),
            detail: detail.into(),
        }
    }
}

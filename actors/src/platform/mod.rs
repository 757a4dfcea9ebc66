//! Operating-system readers. One module per OS, each exporting the same readers; the OS
//! is chosen once here (`os`), so callers name neither an OS nor a `cfg`. Error types
//! are OS-neutral.

pub mod error;
#[cfg(target_os = "linux")]
pub mod linux;

/// The readers of the OS this build runs on.
#[cfg(target_os = "linux")]
pub use linux as os;

pub use error::{ParseError, ReadError, ReadErrorClass};

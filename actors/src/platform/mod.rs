//! Operating-system readers. One module per OS, each exporting the same readers; the OS
//! is chosen once here (`os`), so callers name neither an OS nor a `cfg`. Error types
//! are OS-neutral.
//!
//! Elsewhere than Linux, `os` is `unsupported`: the same functions, each answering
//! "not supported on this OS". The Linux module's types and parsers build on every OS
//! (they are plain Rust over text), so both modules share one set of types.

pub mod error;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub mod linux;
// Built in Linux tests too, so its answers are tested here.
#[cfg(any(not(target_os = "linux"), test))]
pub mod unsupported;

/// The readers of the OS this build runs on.
#[cfg(target_os = "linux")]
pub use linux as os;
/// The readers of the OS this build runs on: none yet.
#[cfg(not(target_os = "linux"))]
pub use unsupported as os;

pub use error::{ParseError, ReadError, ReadErrorClass};

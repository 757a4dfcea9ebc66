//! The diagnostics limits: a context's schema lives with the rest of the configuration;
//! the shape of a worker's extension code is fixed by the grpc-v1 protocol, which the
//! host enforces and the worker SDK checks before sending (spec/worker-protocol.md).

pub use wattline_config::diagnostics::*;

/// Longest extension code name a worker may register over grpc-v1, in bytes.
pub const MAX_WORKER_EXTENSION_NAME_BYTES: usize = 32;
/// Longest extension code description a worker may register over grpc-v1, in bytes.
pub const MAX_WORKER_EXTENSION_DESCRIPTION_BYTES: usize = 256;
/// Most failure classes one worker extension code may allow.
pub const MAX_WORKER_EXTENSION_CLASSES: usize = 16;

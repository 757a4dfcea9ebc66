//! The diagnostics limits: their schema lives with the rest of the configuration.

pub use wattline_config::diagnostics::*;

//! The diagnostics vocabulary and context, from `wattline-diagnostics` (a crate with no
//! runtime, which the worker SDK shares), re-exported so `wattline_actors::diagnostics`
//! keeps its paths. A sampler's read problems are recorded by
//! `samplers::record_read_problems`, which needs the OS readers' error classes.

pub use wattline_diagnostics::*;

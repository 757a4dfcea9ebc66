//! The diagnostics vocabulary and context, from `wattline-diagnostics` (a crate with no
//! runtime, which the worker SDK shares), re-exported so `wattline_actors::diagnostics`
//! keeps its paths. A sampler's read problems are recorded by
//! `samplers::record_read_problems`, which needs the OS readers' error classes.

pub use wattline_diagnostics::*;

/// The codes of `context`'s recent events, sorted (for tests).
#[cfg(test)]
pub(crate) fn recent_codes(context: &Diagnostics) -> Vec<String> {
    let mut codes: Vec<String> = context
        .snapshot()
        .map(|snapshot| snapshot.recent_events)
        .unwrap_or_default()
        .iter()
        .map(|event| event.code.as_str().to_owned())
        .collect();
    codes.sort();
    codes
}

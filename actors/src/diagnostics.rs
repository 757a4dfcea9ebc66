//! What the crate's tests read of a diagnostics context (the vocabulary and the
//! context are `wattline-diagnostics`).

use wattline_diagnostics::Diagnostics;

/// The codes of `context`'s recent events, sorted.
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

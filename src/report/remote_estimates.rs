//! The words every renderer uses for remote model calls' estimates: always a range,
//! always called an estimate, never added to a measured figure.

use wattline_model::remote_call::{RemoteCall, RemoteEstimate, RemoteEstimateTotals};

use super::human_units::energy_text;

/// `low–high` in the unit each end's size calls for.
pub fn range_text(low_kwh: f64, high_kwh: f64) -> String {
    format!("{}–{}", energy_text(low_kwh), energy_text(high_kwh))
}

/// One call: `130 mWh–650 mWh estimated (factor-table, gpt-4o)`, or why it has none.
pub fn call_text(call: &RemoteCall) -> String {
    let model = call.model.as_deref().unwrap_or("no model named");
    match &call.estimate {
        Some(RemoteEstimate {
            low_kwh,
            high_kwh,
            method,
            estimator,
            ..
        }) => format!(
            "{} {method} ({estimator}, {model})",
            range_text(*low_kwh, *high_kwh)
        ),
        None => format!("no estimate ({model}: no factor, or no token counts)"),
    }
}

/// The run's remote calls in one line, with the models that had no estimate.
pub fn totals_text(totals: &RemoteEstimateTotals) -> String {
    let mut text = format!(
        "{} of {} remote model calls estimated at {} in all (estimated where they ran; \
         not measured, not in the totals)",
        totals.estimated_calls,
        totals.calls,
        range_text(totals.low_kwh, totals.high_kwh)
    );
    if !totals.models_without_estimate.is_empty() {
        text.push_str("; no estimate for ");
        text.push_str(&totals.models_without_estimate.join(", "));
    }
    text
}

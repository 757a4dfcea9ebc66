//! Storage and admission limits of a diagnostics context, with their safe bounds.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Fixed maximum of live (open) components per native plugin session; closing one frees a slot.
pub const MAX_LIVE_COMPONENTS: usize = 8;
/// Fixed maximum of codes one component may declare.
pub const MAX_CODES_PER_COMPONENT: usize = 32;
/// Fixed maximum of cumulative extension code declarations per native plugin session; closing does not restore.
pub const MAX_EXTENSION_DECLARATIONS: usize = 16;
/// Fixed maximum of cumulative registration text per native plugin session, in bytes; closing does not restore.
pub const MAX_REGISTRATION_TEXT_BYTES: usize = 16 * 1024;
/// Fixed maximum of aggregate input text (detail + request id + session id) per recording call.
pub const MAX_INPUT_TEXT_BYTES: usize = 16 * 1024;
/// Largest allowed recent-evidence history.
pub const MAX_HISTORY_CAPACITY: usize = 4096;
/// Largest allowed retained detail per event, in bytes.
pub const MAX_DETAIL_BYTES: usize = 16 * 1024;

/// Limits in force for one diagnostics context.
///
/// Deserializes from a `[components.config]` table of a `diagnostics` component; every
/// field is optional (missing fields take their defaults) and unknown fields are
/// rejected. Admission limits are fixed maxima: they may be lowered, never raised.
/// Call [`DiagnosticsLimits::validate`] (done by `Diagnostics::new`) before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiagnosticsLimits {
    /// Recent events kept in the evidence ring; `0` keeps counters only. Range 0..=4096, default 256.
    pub history_capacity: usize,
    /// Detail bytes kept per event, cut on a UTF-8 boundary. Range 1..=16384, default 1024.
    pub max_detail_bytes: usize,
    /// Live components per native plugin session. Range 1..=8, default 8.
    pub max_live_components: usize,
    /// Codes per component. Range 1..=32, default 32.
    pub max_codes_per_component: usize,
    /// Cumulative extension declarations per native plugin session. Range 0..=16, default 16.
    pub max_extension_declarations: usize,
    /// Cumulative registration text bytes per native plugin session. Range 1..=16384, default 16384.
    pub max_registration_text_bytes: usize,
    /// Aggregate input text bytes per recording call. Range 1..=16384, default 16384.
    pub max_input_text_bytes: usize,
    /// The host-policy grant that lets native plugins read the whole context (every
    /// component's counters and evidence). Default `false`: plugins record only.
    /// Worker plugins never read, whatever it says (their credentials only record).
    pub grant_plugin_reads: bool,
}

impl Default for DiagnosticsLimits {
    fn default() -> Self {
        Self {
            history_capacity: 256,
            max_detail_bytes: 1024,
            max_live_components: MAX_LIVE_COMPONENTS,
            max_codes_per_component: MAX_CODES_PER_COMPONENT,
            max_extension_declarations: MAX_EXTENSION_DECLARATIONS,
            max_registration_text_bytes: MAX_REGISTRATION_TEXT_BYTES,
            max_input_text_bytes: MAX_INPUT_TEXT_BYTES,
            grant_plugin_reads: false,
        }
    }
}

/// A limit outside its allowed range; names the field and the range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("diagnostics limit `{field}` is {value}; allowed range is {min}..={max}")]
pub struct DiagnosticsLimitsError {
    /// The offending field, spelled as in the configuration table.
    pub field: &'static str,
    /// The rejected value.
    pub value: usize,
    /// Smallest allowed value.
    pub min: usize,
    /// Largest allowed value.
    pub max: usize,
}

impl DiagnosticsLimits {
    /// Checks every field against its allowed range, reporting the first one out of range.
    pub fn validate(&self) -> Result<(), DiagnosticsLimitsError> {
        let checks: [(&'static str, usize, usize, usize); 7] = [
            (
                "history_capacity",
                self.history_capacity,
                0,
                MAX_HISTORY_CAPACITY,
            ),
            (
                "max_detail_bytes",
                self.max_detail_bytes,
                1,
                MAX_DETAIL_BYTES,
            ),
            (
                "max_live_components",
                self.max_live_components,
                1,
                MAX_LIVE_COMPONENTS,
            ),
            (
                "max_codes_per_component",
                self.max_codes_per_component,
                1,
                MAX_CODES_PER_COMPONENT,
            ),
            (
                "max_extension_declarations",
                self.max_extension_declarations,
                0,
                MAX_EXTENSION_DECLARATIONS,
            ),
            (
                "max_registration_text_bytes",
                self.max_registration_text_bytes,
                1,
                MAX_REGISTRATION_TEXT_BYTES,
            ),
            (
                "max_input_text_bytes",
                self.max_input_text_bytes,
                1,
                MAX_INPUT_TEXT_BYTES,
            ),
        ];
        for (field, value, min, max) in checks {
            if !(min..=max).contains(&value) {
                return Err(DiagnosticsLimitsError {
                    field,
                    value,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }
}

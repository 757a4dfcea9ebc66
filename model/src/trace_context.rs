//! Where an Agent scope's span sits in a trace: the W3C `traceparent` a caller passes
//! (its own span, so the step's span becomes its child), and the [`ScopeTrace`] every
//! scope gets at its start from that, from its parent scope, or of its own.
//!
//! Span IDs come from scope UUIDs ([`span_id_of`]): a child scope can name its parent's
//! span before the parent has ended, and the same scope always has the same span.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A parsed W3C `traceparent` (`00-<trace id>-<parent span id>-<flags>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParent {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// 16 lowercase hex digits, not all zero: the caller's span.
    pub span_id: String,
    /// The caller's `sampled` flag.
    pub sampled: bool,
}

/// Why a `traceparent` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("traceparent {value:?}: {reason}")]
pub struct TraceParentError {
    /// The value given.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Parses a W3C trace-context `traceparent` header value. Versions other than `00`
/// are read by their first four fields, as the recommendation says; `ff` is refused.
pub fn parse_traceparent(value: &str) -> Result<TraceParent, TraceParentError> {
    let refuse = |reason| TraceParentError {
        value: value.to_owned(),
        reason,
    };
    let fields: Vec<&str> = value.trim().split('-').collect();
    let [version, trace_id, span_id, flags, rest @ ..] = fields.as_slice() else {
        return Err(refuse("not version-traceid-parentid-flags"));
    };
    let hex = |text: &str, length: usize| {
        text.len() == length
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !hex(version, 2) || *version == "ff" {
        return Err(refuse(
            "the version is not two lowercase hex digits other than ff",
        ));
    }
    if *version == "00" && !rest.is_empty() {
        return Err(refuse("version 00 has exactly four fields"));
    }
    if !hex(trace_id, 32) || trace_id.bytes().all(|b| b == b'0') {
        return Err(refuse(
            "the trace ID is not 32 lowercase hex digits, not all zero",
        ));
    }
    if !hex(span_id, 16) || span_id.bytes().all(|b| b == b'0') {
        return Err(refuse(
            "the parent ID is not 16 lowercase hex digits, not all zero",
        ));
    }
    if !hex(flags, 2) {
        return Err(refuse("the flags are not two lowercase hex digits"));
    }
    let flags = u8::from_str_radix(flags, 16).map_err(|_| refuse("the flags are not hex"))?;
    Ok(TraceParent {
        trace_id: (*trace_id).to_owned(),
        span_id: (*span_id).to_owned(),
        sampled: flags & 1 == 1,
    })
}

/// Where one scope's span sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeTrace {
    /// The trace, 32 hex digits.
    pub trace_id: String,
    /// The scope's own span, 16 hex digits ([`span_id_of`] its UUID).
    pub span_id: String,
    /// The span it is a child of: the caller's (from its `traceparent`) or the parent
    /// scope's; `None` for a scope that starts a trace of its own.
    pub parent_span_id: Option<String>,
    /// The parent span is another process's (it came in a `traceparent`).
    pub remote_parent: bool,
    /// Whether the span is recorded: the caller's decision where there is one.
    pub sampled: bool,
}

impl ScopeTrace {
    /// The trace of scope `uuid`: under `traceparent` when one is given, else under
    /// its `parent` scope's trace, else a trace of its own whose ID is the UUID.
    pub fn resolve(
        uuid: Uuid,
        traceparent: Option<&TraceParent>,
        parent: Option<(Uuid, &ScopeTrace)>,
    ) -> Self {
        let span_id = span_id_of(uuid);
        match (traceparent, parent) {
            (Some(caller), _) => ScopeTrace {
                trace_id: caller.trace_id.clone(),
                span_id,
                parent_span_id: Some(caller.span_id.clone()),
                remote_parent: true,
                sampled: caller.sampled,
            },
            (None, Some((parent_uuid, parent))) => ScopeTrace {
                trace_id: parent.trace_id.clone(),
                span_id,
                parent_span_id: Some(span_id_of(parent_uuid)),
                remote_parent: false,
                sampled: parent.sampled,
            },
            (None, None) => ScopeTrace {
                trace_id: lower_hex(uuid.as_u128(), 32),
                span_id,
                parent_span_id: None,
                remote_parent: false,
                sampled: true,
            },
        }
    }
}

/// The span ID of scope `uuid`: its last 64 bits (a UUIDv7's random part), in hex;
/// never all zero.
pub fn span_id_of(uuid: Uuid) -> String {
    let low = uuid.as_u128() as u64;
    lower_hex(u128::from(if low == 0 { 1 } else { low }), 16)
}

/// The last `digits` hex digits of `value`, lowercase, zero-padded: what
/// `format!("{value:0digits$x}")` gives, without the formatting machinery (every scope
/// makes two of these).
fn lower_hex(value: u128, digits: usize) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [b'0'; 32];
    let digits = digits.min(text.len());
    for (place, digit) in text[..digits].iter_mut().rev().enumerate() {
        *digit = DIGITS[((value >> (4 * place)) & 0xf) as usize];
    }
    // ASCII digits: always valid, borrowed, then copied once.
    String::from_utf8_lossy(&text[..digits]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn hex_digits_are_the_formatters_own() {
        for value in [
            0u128,
            1,
            0xabc,
            u128::from(u64::MAX),
            u128::MAX,
            0x0123_4567_89ab_cdef,
        ] {
            assert_eq!(lower_hex(value, 32), format!("{value:032x}"));
            assert_eq!(lower_hex(value, 16), format!("{:016x}", value as u64));
        }
    }

    #[test]
    fn the_w3c_example_parses_and_bad_values_say_what_is_wrong() {
        let parent = parse_traceparent(CALLER).unwrap();
        assert_eq!(parent.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.span_id, "00f067aa0ba902b7");
        assert!(parent.sampled);
        assert!(
            !parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
                .unwrap()
                .sampled
        );
        for (bad, reason) in [
            ("", "not version-traceid-parentid-flags"),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "the version is not two lowercase hex digits other than ff",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "the trace ID is not 32 lowercase hex digits, not all zero",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "the trace ID is not 32 lowercase hex digits, not all zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "the parent ID is not 16 lowercase hex digits, not all zero",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "version 00 has exactly four fields",
            ),
        ] {
            assert_eq!(parse_traceparent(bad).unwrap_err().reason, reason, "{bad}");
        }
        // A later version may add fields.
        assert!(
            parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra")
                .is_ok()
        );
    }

    #[test]
    fn a_scope_joins_its_callers_trace_else_its_parents_else_starts_its_own() {
        let caller = parse_traceparent(CALLER).unwrap();
        let outer = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_00aa);
        let inner = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_00bb);
        let outer_trace = ScopeTrace::resolve(outer, Some(&caller), None);
        assert_eq!(outer_trace.trace_id, caller.trace_id);
        assert_eq!(
            outer_trace.parent_span_id.as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert!(outer_trace.remote_parent);
        let inner_trace = ScopeTrace::resolve(inner, None, Some((outer, &outer_trace)));
        assert_eq!(inner_trace.trace_id, caller.trace_id);
        assert_eq!(
            inner_trace.parent_span_id,
            Some(outer_trace.span_id.clone())
        );
        assert_eq!(inner_trace.span_id, "80000000000000bb");
        let alone = ScopeTrace::resolve(inner, None, None);
        assert_eq!(alone.trace_id, format!("{:032x}", inner.as_u128()));
        assert_eq!(alone.parent_span_id, None);
    }
}

//! Observations handed to a component, the receipts recording returns, and their rules.

use std::borrow::Cow;
use std::num::NonZeroU64;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::declaration::CodeSpec;
use super::error::{DiagnosticError, ObservationProblem};
use super::limits::DiagnosticsLimits;
use super::vocabulary::{DiagnosticOutcome, FailureClass, Severity};

/// Request and session identifiers linking evidence to work; never put them in names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Correlation<'a> {
    /// Identifier of the request the observation belongs to.
    pub request_id: Option<Cow<'a, str>>,
    /// Identifier of the session the observation belongs to.
    pub session_id: Option<Cow<'a, str>>,
}

/// Where a worker's observation came from. The host keeps it with the event; counts
/// and summaries still use the host's receipt time, since worker clocks can differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance<'a> {
    /// The worker that sent it (its `NEMO_RELAY_WORKER_ID`, the activation id).
    pub worker_id: Cow<'a, str>,
    /// The producer's own clock when it observed, if it said.
    pub observed_at: Option<DateTime<Utc>>,
}

/// One recording call's content: new occurrences of one declared code.
///
/// Rules checked at recording:
/// * `code` is the 1-based position of a declared code;
/// * `outcome` equals the code's declared outcome exactly (an `Unknown`-outcome code
///   accepts only `Unknown` observations);
/// * a `Failure` carries one of the code's allowed classes; `Success` and `Unknown`
///   carry none;
/// * detail + request id + session id together fit the per-call input text limit.
///
/// Severity describes the evidence and is independent of outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation<'a> {
    /// 1-based position of the code in the component's declaration.
    pub code: u32,
    /// New occurrences to add to the code's lifetime total.
    pub count: NonZeroU64,
    /// The outcome observed; must match the code's declared outcome.
    pub outcome: DiagnosticOutcome,
    /// Importance of the evidence.
    pub severity: Severity,
    /// Failure cause; required for failures, absent otherwise.
    pub failure_class: Option<FailureClass>,
    /// Restricted free-text evidence; may hold private data and is never sanitized.
    pub detail: Option<Cow<'a, str>>,
    /// Request and session identifiers.
    pub correlation: Correlation<'a>,
    /// The sending worker, for observations that came over the host endpoint; `None`
    /// for in-process producers.
    pub provenance: Option<Provenance<'a>>,
}

impl<'a> Observation<'a> {
    /// A failure of `code` with `class`, severity `error`.
    pub fn failure(
        code: u32,
        class: FailureClass,
        detail: impl Into<Cow<'a, str>>,
        count: NonZeroU64,
    ) -> Self {
        Self {
            code,
            count,
            outcome: DiagnosticOutcome::Failure,
            severity: Severity::Error,
            failure_class: Some(class),
            detail: Some(detail.into()),
            correlation: Correlation::default(),
            provenance: None,
        }
    }

    /// A success of `code`, severity `info`, no failure class.
    pub fn success(code: u32, detail: impl Into<Cow<'a, str>>, count: NonZeroU64) -> Self {
        Self {
            code,
            count,
            outcome: DiagnosticOutcome::Success,
            severity: Severity::Info,
            failure_class: None,
            detail: Some(detail.into()),
            correlation: Correlation::default(),
            provenance: None,
        }
    }

    /// An unspecified-outcome observation of `code`, severity `info`, no failure class.
    pub fn unknown(code: u32, detail: impl Into<Cow<'a, str>>, count: NonZeroU64) -> Self {
        Self {
            code,
            count,
            outcome: DiagnosticOutcome::Unknown,
            severity: Severity::Info,
            failure_class: None,
            detail: Some(detail.into()),
            correlation: Correlation::default(),
            provenance: None,
        }
    }

    /// Replaces the severity.
    pub fn with_severity(mut self, severity: Severity) -> Self {
        self.severity = severity;
        self
    }

    /// Sets the request identifier.
    pub fn with_request_id(mut self, request_id: impl Into<Cow<'a, str>>) -> Self {
        self.correlation.request_id = Some(request_id.into());
        self
    }

    /// Sets the session identifier.
    pub fn with_session_id(mut self, session_id: impl Into<Cow<'a, str>>) -> Self {
        self.correlation.session_id = Some(session_id.into());
        self
    }

    /// Aggregate text bytes charged to the per-call input limit.
    pub fn input_text_bytes(&self) -> usize {
        let len = |text: &Option<Cow<'a, str>>| text.as_deref().map_or(0, str::len);
        len(&self.detail) + len(&self.correlation.request_id) + len(&self.correlation.session_id)
    }
}

/// What happened to an accepted observation's evidence. Counts are updated in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceDisposition {
    /// An event was added to the recent history with its detail intact (or with no detail).
    Retained,
    /// An event was added, with its detail cut to `max_detail_bytes` on a UTF-8 boundary.
    Truncated,
    /// No event was kept because the context keeps counters only (`history_capacity = 0`).
    Dropped,
}

/// Confirmation that the context accepted an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordReceipt {
    /// Context-wide sequence number in accepted order, starting at 1.
    pub sequence: u64,
    /// The code's lifetime occurrences after this call (saturating).
    pub code_total: u64,
    /// What happened to the evidence.
    pub evidence: EvidenceDisposition,
}

/// Result of a recording call that was not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOutcome {
    /// The context accepted the observation.
    Recorded(RecordReceipt),
    /// The context or component is disabled; nothing was recorded and the factory did not run.
    Disabled,
}

impl RecordOutcome {
    /// The receipt, when recorded.
    pub fn receipt(&self) -> Option<RecordReceipt> {
        match self {
            RecordOutcome::Recorded(receipt) => Some(*receipt),
            RecordOutcome::Disabled => None,
        }
    }
}

fn invalid(problem: ObservationProblem) -> DiagnosticError {
    DiagnosticError::InvalidObservation(problem)
}

/// Checks an observation against the per-call limit and its declared code.
///
/// Order: input text limit, code position, outcome, failure class.
pub(super) fn validate_observation(
    observation: &Observation<'_>,
    codes: &[CodeSpec],
    limits: &DiagnosticsLimits,
) -> Result<(), DiagnosticError> {
    let bytes = observation.input_text_bytes();
    if bytes > limits.max_input_text_bytes {
        return Err(DiagnosticError::InputTextLimit {
            bytes,
            limit: limits.max_input_text_bytes,
        });
    }
    let code = observation.code;
    let spec = code_spec(codes, code)?;
    if spec.outcome != observation.outcome {
        return Err(invalid(ObservationProblem::OutcomeMismatch {
            code,
            declared: spec.outcome,
            observed: observation.outcome,
        }));
    }
    match (observation.outcome, observation.failure_class) {
        (DiagnosticOutcome::Failure, None) => {
            Err(invalid(ObservationProblem::MissingFailureClass { code }))
        }
        (DiagnosticOutcome::Failure, Some(class)) if !spec.allowed_classes.contains(&class) => {
            Err(invalid(ObservationProblem::DisallowedFailureClass {
                code,
                class,
            }))
        }
        (DiagnosticOutcome::Success | DiagnosticOutcome::Unknown, Some(class)) => {
            Err(invalid(ObservationProblem::UnexpectedFailureClass {
                code,
                class,
            }))
        }
        _ => Ok(()),
    }
}

/// The declared code at 1-based `code`, or `unknown code`.
pub(super) fn code_spec(codes: &[CodeSpec], code: u32) -> Result<&CodeSpec, DiagnosticError> {
    usize::try_from(code)
        .ok()
        .and_then(|position| position.checked_sub(1))
        .and_then(|index| codes.get(index))
        .ok_or_else(|| {
            invalid(ObservationProblem::UnknownCode {
                code,
                declared: codes.len(),
            })
        })
}

/// Cuts `text` to at most `max_bytes`, backing off to a UTF-8 boundary.
/// Returns true when anything was removed.
pub(super) fn truncate_on_char_boundary(text: &mut String, max_bytes: usize) -> bool {
    if text.len() <= max_bytes {
        return false;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    true
}

//! Records a tick's read problems of one sampler into the pipeline's diagnostics, one
//! observation per failure class with the number of occurrences.

use std::num::NonZeroU64;

use super::context::DiagnosticComponent;
use super::error::DiagnosticError;
use super::observation::{Correlation, Observation, RecordOutcome};
use super::pipeline_components::{
    PipelineCode, PipelineDiagnostics, SamplerCategory, SamplerFailure,
};
use super::vocabulary::FailureClass;
use crate::platform::linux::ReadErrorClass;
use crate::samplers::ReadProblems;

/// How often a recording that found the context busy is tried again before the
/// observation is given up (and logged).
const BUSY_RETRIES: usize = 64;

/// Records each class of `problems` as one observation of `category`'s matching code.
pub fn record_read_problems(
    diagnostics: &PipelineDiagnostics,
    category: SamplerCategory,
    problems: &ReadProblems,
) {
    for (class, count, first) in &problems.by_class {
        let (failure, failure_class) = match class {
            ReadErrorClass::PermissionDenied => (
                SamplerFailure::PermissionDenied,
                FailureClass::PermissionDenied,
            ),
            ReadErrorClass::TargetGone => continue,
            ReadErrorClass::Unavailable => (SamplerFailure::ReadFailed, FailureClass::Io),
            ReadErrorClass::Invalid => (SamplerFailure::ReadFailed, FailureClass::Io),
        };
        let Some(count) = NonZeroU64::new(*count) else {
            continue;
        };
        let code = PipelineCode::Sampler { category, failure };
        let component = diagnostics.component(code.component());
        if let Err(error) = record_with_retry(component, code, Some(failure_class), count, first) {
            tracing::debug!(%error, "a sampler problem could not be recorded in diagnostics");
        }
    }
}

/// Records `count` occurrences of `code`, trying again while the context is busy.
pub fn record_with_retry(
    component: &DiagnosticComponent,
    code: PipelineCode,
    class: Option<FailureClass>,
    count: NonZeroU64,
    detail: &str,
) -> Result<RecordOutcome, DiagnosticError> {
    let mut attempt = 0;
    loop {
        let result = component.try_record_lazy(|| Observation {
            code: code.position(),
            count,
            outcome: code.outcome(),
            severity: code.default_severity(),
            failure_class: class,
            detail: (!detail.is_empty()).then_some(detail.into()),
            correlation: Correlation::default(),
        });
        match result {
            Err(error) if error.reason() == "busy" && attempt < BUSY_RETRIES => {
                attempt += 1;
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

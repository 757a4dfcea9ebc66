//! Records a tick's read problems of one sampler into the pipeline's diagnostics, one
//! observation per failure class with the number of occurrences.

use std::num::NonZeroU64;

use super::ReadProblems;
use crate::platform::ReadErrorClass;
use wattline_diagnostics::{FailureClass, PipelineCode, PipelineDiagnostics, SamplerFailure};
use wattline_model::category::SamplerCategory;

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
        if let Err(error) = diagnostics.record_counted(code, Some(failure_class), count, first) {
            tracing::debug!(%error, "a sampler problem could not be recorded in diagnostics");
        }
    }
}

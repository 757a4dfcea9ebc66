//! GPU backend events recorded in the pipeline's diagnostics.

use wattline_diagnostics::{GpuCode, PipelineDiagnostics, SamplerFailure};
use wattline_gpu::{GpuEvent, GpuEventSink};
use wattline_model::category::SamplerCategory;

/// Records each GPU event under the `gpu` component's matching code.
pub struct DiagnosticsGpuEvents(pub PipelineDiagnostics);

impl GpuEventSink for DiagnosticsGpuEvents {
    fn record(&self, event: GpuEvent) {
        let detail = event.to_string();
        let code = match event {
            GpuEvent::NvmlUnavailable { .. } => GpuCode::NvmlLibraryUnavailable,
            GpuEvent::NvmlCallNotSupported { .. } => GpuCode::NvmlCallNotSupported,
            GpuEvent::SmiNotFound => GpuCode::SmiNotFound,
            GpuEvent::SmiNoDevices => GpuCode::SmiNoDevices,
            GpuEvent::SmiStartFailed { .. } => GpuCode::SmiStartFailed,
            GpuEvent::SmiTimeout => GpuCode::SmiTimeout,
            GpuEvent::SmiParseFailure { .. } | GpuEvent::SmiEmptyAnswer => GpuCode::SmiParseFailure,
            GpuEvent::SmiStoppedAfterFailures { .. } => GpuCode::SmiStoppedAfterFailures,
            // A later sample failing is a failed GPU read; a downgrade is logged only.
            GpuEvent::SmiSampleFailed { .. } => {
                let _ = self.0.record_sampler_failure(
                    SamplerCategory::Gpu,
                    SamplerFailure::ReadFailed,
                    &detail,
                );
                return;
            }
            GpuEvent::SmiDowngradedToCoreFields { .. } => return,
        };
        let _ = self.0.record_gpu(code, &detail);
    }
}

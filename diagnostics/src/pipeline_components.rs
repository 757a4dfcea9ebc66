//! The wattline pipeline's own diagnostic components, codes and typed recording helpers.
//!
//! Layout: the pipeline's vocabulary is 12 responsibilities (six samplers, two GPU
//! backends, two exporters, the tick loop) and 36 codes, but a context admits only 8
//! live components and 16 cumulative extension codes, which must stay available to
//! other producers. So the pipeline registers **4 components** and declares its codes
//! as **host-owned built-ins** (0 extensions):
//!
//! | component  | codes (canonical names)                                          |
//! |------------|------------------------------------------------------------------|
//! | `sampler`  | `sampler.<category>.<failure>`: 6 categories × 4 failures = 24    |
//! | `gpu`      | `gpu.nvml.*` (2) and `gpu.nvidia_smi.*` (6)                        |
//! | `exporter` | `exporter.atof.write_failed`, `exporter.otlp.{export_failed,dropped}` |
//! | `pipeline` | `pipeline.tick_missed`, `pipeline.worker_failed`                  |
//!
//! The per-responsibility names (`sampler.cpu`, `gpu.nvml`, `exporter.otlp`, …) stay
//! stable as prefixes of the code names, so counters keep full per-category
//! resolution. This leaves 4 live slots, all 16 extensions and about 15 KiB of
//! registration text for other producers. Callers use the typed helpers on
//! [`PipelineDiagnostics`] and never handle code positions.

use std::num::NonZeroU64;

use super::context::{DiagnosticComponent, Diagnostics, retry_soon_while_busy};
use super::declaration::{BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode};
use super::error::DiagnosticError;
use super::observation::{Correlation, Observation, RecordOutcome};
use super::pipeline_codes::{
    ExporterCode, GpuCode, PipelineCode, PipelineComponent, SamplerFailure,
};
use std::io;

use super::vocabulary::FailureClass;
use wattline_model::category::SamplerCategory;

const fn host(code: PipelineCode) -> DiagnosticCode<'static> {
    DiagnosticCode::Builtin(BuiltinDiagnosticCode::Pipeline(code))
}

/// A component's codes as host-owned built-ins, in its codes' order.
const fn declared<const N: usize>(codes: &[PipelineCode]) -> [DiagnosticCode<'static>; N] {
    let mut declared = [host(PipelineCode::TickMissed); N];
    let mut i = 0;
    while i < N {
        declared[i] = host(codes[i]);
        i += 1;
    }
    declared
}

const SAMPLER_CODES: [DiagnosticCode<'static>; 24] = declared(PipelineComponent::Sampler.codes());
const GPU_CODES: [DiagnosticCode<'static>; 8] = declared(PipelineComponent::Gpu.codes());
const EXPORTER_CODES: [DiagnosticCode<'static>; 3] = declared(PipelineComponent::Exporter.codes());
const PIPELINE_CODES: [DiagnosticCode<'static>; 4] = declared(PipelineComponent::Pipeline.codes());

impl PipelineComponent {
    /// The component's constant declaration.
    pub const fn declaration(self) -> ComponentDeclaration<'static> {
        let codes: &'static [DiagnosticCode<'static>] = match self {
            PipelineComponent::Sampler => &SAMPLER_CODES,
            PipelineComponent::Gpu => &GPU_CODES,
            PipelineComponent::Exporter => &EXPORTER_CODES,
            PipelineComponent::Pipeline => &PIPELINE_CODES,
        };
        ComponentDeclaration {
            name: self.name(),
            codes,
        }
    }
}

/// Handles for the pipeline's four components, with typed recording helpers.
///
/// Every helper records one occurrence with the code's default severity and, unless
/// told otherwise, its default (first allowed) failure class. An empty `detail` is
/// recorded as no detail. Errors are those of `DiagnosticComponent::try_record_lazy`;
/// handle them at the call site without replacing the operation's own result.
#[derive(Debug, Clone)]
pub struct PipelineDiagnostics {
    sampler: DiagnosticComponent,
    gpu: DiagnosticComponent,
    exporter: DiagnosticComponent,
    pipeline: DiagnosticComponent,
}

impl PipelineDiagnostics {
    /// Registers the four pipeline components once per context.
    ///
    /// A second registration while the first is open fails with
    /// `duplicate_component`. If one registration fails, the components already
    /// registered by this call are dropped (closed); their registration text stays
    /// charged. On a disabled context every handle is disabled.
    pub fn register(diagnostics: &Diagnostics) -> Result<Self, DiagnosticError> {
        let register = |component: PipelineComponent| {
            diagnostics.component_lazy_host(|| component.declaration())
        };
        Ok(Self {
            sampler: register(PipelineComponent::Sampler)?,
            gpu: register(PipelineComponent::Gpu)?,
            exporter: register(PipelineComponent::Exporter)?,
            pipeline: register(PipelineComponent::Pipeline)?,
        })
    }

    /// The handle of one component.
    pub fn component(&self, component: PipelineComponent) -> &DiagnosticComponent {
        match component {
            PipelineComponent::Sampler => &self.sampler,
            PipelineComponent::Gpu => &self.gpu,
            PipelineComponent::Exporter => &self.exporter,
            PipelineComponent::Pipeline => &self.pipeline,
        }
    }

    /// Records one occurrence of `code` with its default class.
    pub fn record(
        &self,
        code: PipelineCode,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        self.record_as(code, code.allowed_classes().first().copied(), detail)
    }

    /// Records one occurrence of `code` with an explicit class (`None` for non-failures).
    pub fn record_as(
        &self,
        code: PipelineCode,
        class: Option<FailureClass>,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        self.record_counted(code, class, NonZeroU64::MIN, detail)
    }

    /// Records `count` occurrences of `code`. The pipeline's actors record from several
    /// threads, so a call that finds the context busy is tried again a bounded number
    /// of times rather than losing the count.
    pub fn record_counted(
        &self,
        code: PipelineCode,
        class: Option<FailureClass>,
        count: NonZeroU64,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        let component = self.component(code.component());
        retry_soon_while_busy(|| {
            component.try_record_lazy(|| Observation {
                code: code.position(),
                count,
                outcome: code.outcome(),
                severity: code.default_severity(),
                failure_class: class,
                detail: (!detail.is_empty()).then_some(detail.into()),
                correlation: Correlation::default(),
                provenance: None,
            })
        })
    }

    /// Records a sampler failure with the kind's default class.
    pub fn record_sampler_failure(
        &self,
        category: SamplerCategory,
        failure: SamplerFailure,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        self.record(PipelineCode::Sampler { category, failure }, detail)
    }

    /// Records a sampler I/O error, classified by [`SamplerFailure::classify_io`].
    pub fn record_sampler_io_error(
        &self,
        category: SamplerCategory,
        error: &io::Error,
    ) -> Result<RecordOutcome, DiagnosticError> {
        let (failure, class) = SamplerFailure::classify_io(error);
        let detail = error.to_string();
        self.record_as(
            PipelineCode::Sampler { category, failure },
            Some(class),
            &detail,
        )
    }

    /// Records a GPU backend code with its default class.
    pub fn record_gpu(
        &self,
        code: GpuCode,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        self.record(PipelineCode::Gpu(code), detail)
    }

    /// Records an exporter code with its default class.
    pub fn record_exporter(
        &self,
        code: ExporterCode,
        detail: &str,
    ) -> Result<RecordOutcome, DiagnosticError> {
        self.record(PipelineCode::Exporter(code), detail)
    }

    /// Records a worker plugin that failed to start, register or stay up.
    pub fn record_worker_failed(&self, detail: &str) -> Result<RecordOutcome, DiagnosticError> {
        self.record(PipelineCode::WorkerFailed, detail)
    }

    /// Records a clock task or actor that stopped on its own; a failure to record
    /// (a full or closed context) is logged, the health board keeps the problem.
    pub fn task_failed(&self, detail: &str) {
        if let Err(error) = self.record(PipelineCode::TaskFailed, detail) {
            tracing::warn!(%error, detail, "pipeline.task_failed not recorded");
        }
    }

    /// Records one answer a sampler did not give in time (counted, with `detail`).
    pub fn record_deadline_missed(&self, category: SamplerCategory, detail: &str) {
        let code = PipelineCode::Sampler {
            category,
            failure: SamplerFailure::DeadlineMissed,
        };
        let _ = self.record_counted(
            code,
            code.allowed_classes().first().copied(),
            std::num::NonZeroU64::MIN,
            detail,
        );
    }

    /// Records why the measured command has no cgroup of its own (or a partial one).
    pub fn command_cgroup_unavailable(&self, detail: &str) {
        if let Err(error) = self.record(PipelineCode::CommandCgroupUnavailable, detail) {
            tracing::warn!(%error, detail, "pipeline.command_cgroup_unavailable not recorded");
        }
    }

    /// Records a missed pipeline tick.
    pub fn record_tick_missed(&self, detail: &str) -> Result<RecordOutcome, DiagnosticError> {
        self.record(PipelineCode::TickMissed, detail)
    }

    /// Closes all four components (fencing every clone).
    pub fn close(&self) {
        for component in PipelineComponent::ALL {
            self.component(component).close();
        }
    }
}

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

use std::io;
use std::num::NonZeroU64;

use super::context::{DiagnosticComponent, Diagnostics};
use super::declaration::{BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode};
use super::error::DiagnosticError;
use super::observation::{Correlation, Observation, RecordOutcome};
use super::vocabulary::{DiagnosticOutcome, FailureClass, Severity};
use wattline_model::category::SamplerCategory;

/// How often a recording that found the context busy is tried again.
const BUSY_RETRIES: usize = 1024;

/// What went wrong in a sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerFailure {
    /// A source could not be read (`io`, `not_found`).
    ReadFailed,
    /// A source could not be opened for lack of permission (`permission_denied`).
    PermissionDenied,
    /// A sample was not ready by its deadline (`timeout`).
    DeadlineMissed,
    /// The supervisor restarted the sampler (`internal`).
    Restarted,
}

impl SamplerFailure {
    /// Every failure kind, in declaration order.
    pub const ALL: [SamplerFailure; 4] = [
        SamplerFailure::ReadFailed,
        SamplerFailure::PermissionDenied,
        SamplerFailure::DeadlineMissed,
        SamplerFailure::Restarted,
    ];

    /// The failure's name segment (`read_failed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerFailure::ReadFailed => "read_failed",
            SamplerFailure::PermissionDenied => "permission_denied",
            SamplerFailure::DeadlineMissed => "deadline_missed",
            SamplerFailure::Restarted => "restarted",
        }
    }

    /// Failure classes this kind allows; the first is the default.
    pub fn allowed_classes(self) -> &'static [FailureClass] {
        match self {
            SamplerFailure::ReadFailed => &[FailureClass::Io, FailureClass::NotFound],
            SamplerFailure::PermissionDenied => &[FailureClass::PermissionDenied],
            SamplerFailure::DeadlineMissed => &[FailureClass::Timeout],
            SamplerFailure::Restarted => &[FailureClass::Internal],
        }
    }

    /// Maps an I/O error to a failure kind and class.
    pub fn classify_io(error: &io::Error) -> (SamplerFailure, FailureClass) {
        match error.kind() {
            io::ErrorKind::PermissionDenied => (
                SamplerFailure::PermissionDenied,
                FailureClass::PermissionDenied,
            ),
            io::ErrorKind::NotFound => (SamplerFailure::ReadFailed, FailureClass::NotFound),
            io::ErrorKind::TimedOut => (SamplerFailure::DeadlineMissed, FailureClass::Timeout),
            _ => (SamplerFailure::ReadFailed, FailureClass::Io),
        }
    }
}

/// Codes of the `gpu` component (NVML and `nvidia-smi` backends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GpuCode {
    /// `gpu.nvml.library_unavailable` (`unavailable`, `not_found`).
    NvmlLibraryUnavailable,
    /// `gpu.nvml.call_not_supported` (`unsupported`).
    NvmlCallNotSupported,
    /// `gpu.nvidia_smi.not_found` (`not_found`).
    SmiNotFound,
    /// `gpu.nvidia_smi.no_devices`: outcome unknown, severity info, no class.
    SmiNoDevices,
    /// `gpu.nvidia_smi.timeout` (`timeout`).
    SmiTimeout,
    /// `gpu.nvidia_smi.parse_failure` (`invalid_input`).
    SmiParseFailure,
    /// `gpu.nvidia_smi.start_failed` (`execution_failed`, `unavailable`).
    SmiStartFailed,
    /// `gpu.nvidia_smi.stopped_after_failures` (`unavailable`).
    SmiStoppedAfterFailures,
}

impl GpuCode {
    /// Every GPU code, in declaration order.
    pub const ALL: [GpuCode; 8] = [
        GpuCode::NvmlLibraryUnavailable,
        GpuCode::NvmlCallNotSupported,
        GpuCode::SmiNotFound,
        GpuCode::SmiNoDevices,
        GpuCode::SmiTimeout,
        GpuCode::SmiParseFailure,
        GpuCode::SmiStartFailed,
        GpuCode::SmiStoppedAfterFailures,
    ];
}

/// Codes of the `exporter` component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExporterCode {
    /// `exporter.atof.write_failed` (`io`, `permission_denied`).
    AtofWriteFailed,
    /// `exporter.otlp.export_failed` (`unavailable`, `timeout`, `io`).
    OtlpExportFailed,
    /// `exporter.otlp.dropped` (`resource_exhausted`).
    OtlpDropped,
}

impl ExporterCode {
    /// Every exporter code, in declaration order.
    pub const ALL: [ExporterCode; 3] = [
        ExporterCode::AtofWriteFailed,
        ExporterCode::OtlpExportFailed,
        ExporterCode::OtlpDropped,
    ];
}

/// One code of the pipeline's host-owned vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PipelineCode {
    /// `sampler.<category>.<failure>`.
    Sampler {
        /// The sampler's category.
        category: SamplerCategory,
        /// What went wrong.
        failure: SamplerFailure,
    },
    /// A `gpu.*` code.
    Gpu(GpuCode),
    /// An `exporter.*` code.
    Exporter(ExporterCode),
    /// `pipeline.tick_missed` (`timeout`): a scheduler tick fired late.
    TickMissed,
    /// `pipeline.worker_failed`: a worker plugin did not start, did not register, or
    /// died (`execution_failed`, `timeout`, `unavailable`).
    WorkerFailed,
    /// `pipeline.task_failed` (`execution_failed`): a clock task or actor of the
    /// pipeline stopped on its own (see `Pipeline::health`).
    TaskFailed,
    /// `pipeline.command_cgroup_unavailable` (`unavailable`, `permission_denied`): the
    /// measured command could not get a cgroup of its own, or got one without every
    /// controller; the cgroup fields it would fill stay null.
    CommandCgroupUnavailable,
}

/// Canonical names of the sampler codes, `[category][failure]`.
const SAMPLER_CODE_NAMES: [[&str; 4]; 6] = [
    [
        "sampler.cpu.read_failed",
        "sampler.cpu.permission_denied",
        "sampler.cpu.deadline_missed",
        "sampler.cpu.restarted",
    ],
    [
        "sampler.memory.read_failed",
        "sampler.memory.permission_denied",
        "sampler.memory.deadline_missed",
        "sampler.memory.restarted",
    ],
    [
        "sampler.process.read_failed",
        "sampler.process.permission_denied",
        "sampler.process.deadline_missed",
        "sampler.process.restarted",
    ],
    [
        "sampler.disk.read_failed",
        "sampler.disk.permission_denied",
        "sampler.disk.deadline_missed",
        "sampler.disk.restarted",
    ],
    [
        "sampler.network.read_failed",
        "sampler.network.permission_denied",
        "sampler.network.deadline_missed",
        "sampler.network.restarted",
    ],
    [
        "sampler.gpu.read_failed",
        "sampler.gpu.permission_denied",
        "sampler.gpu.deadline_missed",
        "sampler.gpu.restarted",
    ],
];

impl PipelineCode {
    /// Every pipeline code, component by component, in declaration order.
    pub fn all() -> impl Iterator<Item = PipelineCode> {
        PipelineComponent::ALL
            .into_iter()
            .flat_map(|component| component.declaration().codes.iter())
            .filter_map(|code| match code {
                DiagnosticCode::Builtin(BuiltinDiagnosticCode::Pipeline(code)) => Some(*code),
                _ => None,
            })
    }

    /// The canonical dotted name.
    pub fn name(self) -> &'static str {
        match self {
            PipelineCode::Sampler { category, failure } => {
                SAMPLER_CODE_NAMES[category as usize][failure as usize]
            }
            PipelineCode::Gpu(code) => match code {
                GpuCode::NvmlLibraryUnavailable => "gpu.nvml.library_unavailable",
                GpuCode::NvmlCallNotSupported => "gpu.nvml.call_not_supported",
                GpuCode::SmiNotFound => "gpu.nvidia_smi.not_found",
                GpuCode::SmiNoDevices => "gpu.nvidia_smi.no_devices",
                GpuCode::SmiTimeout => "gpu.nvidia_smi.timeout",
                GpuCode::SmiParseFailure => "gpu.nvidia_smi.parse_failure",
                GpuCode::SmiStartFailed => "gpu.nvidia_smi.start_failed",
                GpuCode::SmiStoppedAfterFailures => "gpu.nvidia_smi.stopped_after_failures",
            },
            PipelineCode::Exporter(code) => match code {
                ExporterCode::AtofWriteFailed => "exporter.atof.write_failed",
                ExporterCode::OtlpExportFailed => "exporter.otlp.export_failed",
                ExporterCode::OtlpDropped => "exporter.otlp.dropped",
            },
            PipelineCode::TickMissed => "pipeline.tick_missed",
            PipelineCode::WorkerFailed => "pipeline.worker_failed",
            PipelineCode::TaskFailed => "pipeline.task_failed",
            PipelineCode::CommandCgroupUnavailable => "pipeline.command_cgroup_unavailable",
        }
    }

    /// A one-line description.
    pub fn description(self) -> &'static str {
        match self {
            PipelineCode::Sampler { failure, .. } => match failure {
                SamplerFailure::ReadFailed => "A sampler could not read its source",
                SamplerFailure::PermissionDenied => "A sampler was denied access to its source",
                SamplerFailure::DeadlineMissed => "A sample was not ready by its deadline",
                SamplerFailure::Restarted => "The supervisor restarted a sampler",
            },
            PipelineCode::Gpu(code) => match code {
                GpuCode::NvmlLibraryUnavailable => "The NVML library could not be loaded",
                GpuCode::NvmlCallNotSupported => "An NVML call is not supported by the device",
                GpuCode::SmiNotFound => "nvidia-smi was not found",
                GpuCode::SmiNoDevices => "nvidia-smi reported no devices",
                GpuCode::SmiTimeout => "nvidia-smi did not answer in time",
                GpuCode::SmiParseFailure => "nvidia-smi output could not be parsed",
                GpuCode::SmiStartFailed => "nvidia-smi could not be started",
                GpuCode::SmiStoppedAfterFailures => {
                    "nvidia-smi polling stopped after repeated failures"
                }
            },
            PipelineCode::Exporter(code) => match code {
                ExporterCode::AtofWriteFailed => "An ATOF line could not be written",
                ExporterCode::OtlpExportFailed => "An OTLP export failed",
                ExporterCode::OtlpDropped => "OTLP data was dropped from a full buffer",
            },
            PipelineCode::TickMissed => "A pipeline tick fired after its deadline",
            PipelineCode::WorkerFailed => "A worker plugin did not start, register or stay up",
            PipelineCode::TaskFailed => "A clock or actor of the pipeline stopped on its own",
            PipelineCode::CommandCgroupUnavailable => {
                "The measured command has no cgroup of its own, or one without every controller"
            }
        }
    }

    /// The declared outcome: failure, except `gpu.nvidia_smi.no_devices` (unknown).
    pub fn outcome(self) -> DiagnosticOutcome {
        match self {
            PipelineCode::Gpu(GpuCode::SmiNoDevices) => DiagnosticOutcome::Unknown,
            _ => DiagnosticOutcome::Failure,
        }
    }

    /// Allowed failure classes; the first is the helpers' default.
    pub fn allowed_classes(self) -> &'static [FailureClass] {
        use FailureClass as C;
        match self {
            PipelineCode::Sampler { failure, .. } => failure.allowed_classes(),
            PipelineCode::Gpu(code) => match code {
                GpuCode::NvmlLibraryUnavailable => &[C::Unavailable, C::NotFound],
                GpuCode::NvmlCallNotSupported => &[C::Unsupported],
                GpuCode::SmiNotFound => &[C::NotFound],
                GpuCode::SmiNoDevices => &[],
                GpuCode::SmiTimeout => &[C::Timeout],
                GpuCode::SmiParseFailure => &[C::InvalidInput],
                GpuCode::SmiStartFailed => &[C::ExecutionFailed, C::Unavailable],
                GpuCode::SmiStoppedAfterFailures => &[C::Unavailable],
            },
            PipelineCode::Exporter(code) => match code {
                ExporterCode::AtofWriteFailed => &[C::Io, C::PermissionDenied],
                ExporterCode::OtlpExportFailed => &[C::Unavailable, C::Timeout, C::Io],
                ExporterCode::OtlpDropped => &[C::ResourceExhausted],
            },
            PipelineCode::TickMissed => &[C::Timeout],
            PipelineCode::WorkerFailed => &[C::ExecutionFailed, C::Timeout, C::Unavailable],
            PipelineCode::TaskFailed => &[C::ExecutionFailed],
            PipelineCode::CommandCgroupUnavailable => &[C::Unavailable, C::PermissionDenied],
        }
    }

    /// Severity the helpers use.
    pub fn default_severity(self) -> Severity {
        match self {
            PipelineCode::Sampler { failure, .. } => match failure {
                SamplerFailure::ReadFailed | SamplerFailure::PermissionDenied => Severity::Error,
                SamplerFailure::DeadlineMissed | SamplerFailure::Restarted => Severity::Warning,
            },
            PipelineCode::Gpu(code) => match code {
                GpuCode::SmiNoDevices | GpuCode::NvmlCallNotSupported => Severity::Info,
                GpuCode::NvmlLibraryUnavailable | GpuCode::SmiNotFound | GpuCode::SmiTimeout => {
                    Severity::Warning
                }
                GpuCode::SmiParseFailure
                | GpuCode::SmiStartFailed
                | GpuCode::SmiStoppedAfterFailures => Severity::Error,
            },
            PipelineCode::Exporter(ExporterCode::OtlpDropped)
            | PipelineCode::TickMissed
            | PipelineCode::CommandCgroupUnavailable => Severity::Warning,
            PipelineCode::Exporter(_) | PipelineCode::WorkerFailed | PipelineCode::TaskFailed => {
                Severity::Error
            }
        }
    }

    /// The component that declares this code.
    pub fn component(self) -> PipelineComponent {
        match self {
            PipelineCode::Sampler { .. } => PipelineComponent::Sampler,
            PipelineCode::Gpu(_) => PipelineComponent::Gpu,
            PipelineCode::Exporter(_) => PipelineComponent::Exporter,
            PipelineCode::TickMissed
            | PipelineCode::WorkerFailed
            | PipelineCode::TaskFailed
            | PipelineCode::CommandCgroupUnavailable => PipelineComponent::Pipeline,
        }
    }

    /// 1-based position in its component's declaration.
    pub fn position(self) -> u32 {
        let index = match self {
            PipelineCode::Sampler { category, failure } => {
                category as usize * SamplerFailure::ALL.len() + failure as usize
            }
            PipelineCode::Gpu(code) => code as usize,
            PipelineCode::Exporter(code) => code as usize,
            PipelineCode::TickMissed => 0,
            PipelineCode::WorkerFailed => 1,
            PipelineCode::TaskFailed => 2,
            PipelineCode::CommandCgroupUnavailable => 3,
        };
        // At most 24 codes per component, so the index always fits.
        u32::try_from(index).unwrap_or(u32::MAX).saturating_add(1)
    }
}

const fn host(code: PipelineCode) -> DiagnosticCode<'static> {
    DiagnosticCode::Builtin(BuiltinDiagnosticCode::Pipeline(code))
}

const SAMPLER_CODES: [DiagnosticCode<'static>; 24] = {
    let mut codes = [host(PipelineCode::TickMissed); 24];
    let mut c = 0;
    while c < SamplerCategory::ALL.len() {
        let mut f = 0;
        while f < SamplerFailure::ALL.len() {
            codes[c * SamplerFailure::ALL.len() + f] = host(PipelineCode::Sampler {
                category: SamplerCategory::ALL[c],
                failure: SamplerFailure::ALL[f],
            });
            f += 1;
        }
        c += 1;
    }
    codes
};

const GPU_CODES: [DiagnosticCode<'static>; 8] = {
    let mut codes = [host(PipelineCode::TickMissed); 8];
    let mut i = 0;
    while i < GpuCode::ALL.len() {
        codes[i] = host(PipelineCode::Gpu(GpuCode::ALL[i]));
        i += 1;
    }
    codes
};

const EXPORTER_CODES: [DiagnosticCode<'static>; 3] = [
    host(PipelineCode::Exporter(ExporterCode::AtofWriteFailed)),
    host(PipelineCode::Exporter(ExporterCode::OtlpExportFailed)),
    host(PipelineCode::Exporter(ExporterCode::OtlpDropped)),
];

const PIPELINE_CODES: [DiagnosticCode<'static>; 4] = [
    host(PipelineCode::TickMissed),
    host(PipelineCode::WorkerFailed),
    host(PipelineCode::TaskFailed),
    host(PipelineCode::CommandCgroupUnavailable),
];

/// One of the pipeline's four components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PipelineComponent {
    /// `sampler`: every sampler category's failures.
    Sampler,
    /// `gpu`: NVML and `nvidia-smi` backends.
    Gpu,
    /// `exporter`: ATOF and OTLP exporters.
    Exporter,
    /// `pipeline`: the tick loop.
    Pipeline,
}

impl PipelineComponent {
    /// Every pipeline component, in registration order.
    pub const ALL: [PipelineComponent; 4] = [
        PipelineComponent::Sampler,
        PipelineComponent::Gpu,
        PipelineComponent::Exporter,
        PipelineComponent::Pipeline,
    ];

    /// The component's stable name.
    pub const fn name(self) -> &'static str {
        match self {
            PipelineComponent::Sampler => "sampler",
            PipelineComponent::Gpu => "gpu",
            PipelineComponent::Exporter => "exporter",
            PipelineComponent::Pipeline => "pipeline",
        }
    }

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
                provenance: None,
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

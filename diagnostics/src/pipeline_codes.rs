//! The wattline pipeline's own diagnostic vocabulary: its four components and every
//! code each declares, with their names, classes, outcomes and severities. Below the
//! declarations that list them as host-owned built-ins and the helpers that record them
//! ([`crate::pipeline_components`]).

use std::io;

use super::vocabulary::{DiagnosticOutcome, FailureClass, Severity};
use wattline_model::category::SamplerCategory;

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
            .flat_map(|component| component.codes().iter().copied())
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

    /// The component's codes, in declaration order (their positions).
    pub const fn codes(self) -> &'static [PipelineCode] {
        match self {
            PipelineComponent::Sampler => &SAMPLER_CODES,
            PipelineComponent::Gpu => &GPU_CODES,
            PipelineComponent::Exporter => &EXPORTER_CODES,
            PipelineComponent::Pipeline => &PIPELINE_CODES,
        }
    }
}

const SAMPLER_CODES: [PipelineCode; 24] = {
    let mut codes = [PipelineCode::TickMissed; 24];
    let mut c = 0;
    while c < SamplerCategory::ALL.len() {
        let mut f = 0;
        while f < SamplerFailure::ALL.len() {
            codes[c * SamplerFailure::ALL.len() + f] = PipelineCode::Sampler {
                category: SamplerCategory::ALL[c],
                failure: SamplerFailure::ALL[f],
            };
            f += 1;
        }
        c += 1;
    }
    codes
};

const GPU_CODES: [PipelineCode; 8] = {
    let mut codes = [PipelineCode::TickMissed; 8];
    let mut i = 0;
    while i < GpuCode::ALL.len() {
        codes[i] = PipelineCode::Gpu(GpuCode::ALL[i]);
        i += 1;
    }
    codes
};

const EXPORTER_CODES: [PipelineCode; 3] = [
    PipelineCode::Exporter(ExporterCode::AtofWriteFailed),
    PipelineCode::Exporter(ExporterCode::OtlpExportFailed),
    PipelineCode::Exporter(ExporterCode::OtlpDropped),
];

const PIPELINE_CODES: [PipelineCode; 4] = [
    PipelineCode::TickMissed,
    PipelineCode::WorkerFailed,
    PipelineCode::TaskFailed,
    PipelineCode::CommandCgroupUnavailable,
];

//! wattline's diagnostics vocabulary and in-process context: typed components and
//! codes, lifetime counters and bounded evidence.
//!
//! A [`Diagnostics`] context stores lifetime counters per (component, code) and a
//! bounded ring of recent events. Producers register a [`ComponentDeclaration`] with
//! [`Diagnostics::component_lazy`] and record [`Observation`]s through the returned
//! [`DiagnosticComponent`]. Every call is synchronous and never blocks: overlapping
//! calls on one context get [`DiagnosticError::Busy`]. Readers take a serializable
//! [`DiagnosticsSnapshot`]. The pipeline's own vocabulary lives in
//! [`pipeline_components`].
//!
//! The crate links no runtime and reads no OS, so the pipeline (`wattline-actors`),
//! the exporters, the host endpoint and the worker SDK (`wattline-worker`, which never
//! links the pipeline) share one list of built-in codes and one set of limits.

#![warn(missing_docs)]

mod context;
mod declaration;
mod error;
mod limits;
mod observation;
pub mod pipeline_codes;
pub mod pipeline_components;
mod snapshot;
mod store;
mod vocabulary;

pub use context::{DiagnosticComponent, Diagnostics, PluginDiagnostics, retry_soon_while_busy};
pub use declaration::{
    BuiltinDiagnosticCode, CodeOrigin, ComponentDeclaration, DiagnosticCode, MAX_NAME_BYTES,
};
pub use error::{DeclarationProblem, DiagnosticError, ObservationProblem};
pub use limits::{
    DiagnosticsLimits, DiagnosticsLimitsError, MAX_CODES_PER_COMPONENT, MAX_DETAIL_BYTES,
    MAX_EXTENSION_DECLARATIONS, MAX_HISTORY_CAPACITY, MAX_INPUT_TEXT_BYTES, MAX_LIVE_COMPONENTS,
    MAX_REGISTRATION_TEXT_BYTES, MAX_WORKER_EXTENSION_CLASSES,
    MAX_WORKER_EXTENSION_DESCRIPTION_BYTES, MAX_WORKER_EXTENSION_NAME_BYTES,
};
pub use observation::{
    Correlation, EvidenceDisposition, Observation, Provenance, RecordOutcome, RecordReceipt,
};
pub use pipeline_codes::{ExporterCode, GpuCode, PipelineCode, PipelineComponent, SamplerFailure};
pub use pipeline_components::PipelineDiagnostics;
pub use snapshot::{
    AdmissionUsage, CodeSnapshot, ComponentSnapshot, ComponentState, DeliveryStats,
    DiagnosticEvent, DiagnosticsSnapshot, EventCorrelation, HistoryStats,
};
pub use vocabulary::{Availability, DiagnosticOutcome, FailureClass, Severity};

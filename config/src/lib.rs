//! wattline's configuration: the `plugins.toml` schema with defaults and validation,
//! layered discovery and merge, and the unit types with their conversions.
//!
//! No OS access beyond reading the configuration files, no async.

#![warn(missing_docs)]

pub mod atof;
pub mod diagnostics;
pub mod document;
pub mod energy;
pub mod error;
pub mod grid_intensity;
pub mod layers;
pub mod opentelemetry;
pub mod remote_models;
pub mod resource_metrics;
pub mod units;
pub mod worker;

pub use atof::{AtofCompression, AtofConfig, AtofWriteMode, MIN_ATOF_FILE_BYTES};
pub use document::{ComponentEntry, ComponentKind, KNOWN_KINDS, PluginsDocument};
pub use error::{ConfigError, FieldError};
pub use layers::{
    CODE_SOURCE, ComponentSwitch, Discovery, EffectiveConfig, load_file, merge_tables,
    polling_setting,
};
pub use opentelemetry::{
    MetricTemporality, OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport,
};
pub use resource_metrics::{MeasurementScopeSetting, ResourceMetricsConfig};
pub use worker::{WorkerConfig, WorkerTransport};

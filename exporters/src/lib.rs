//! wattline's exporters: the ATOF JSON-lines file, OTLP metrics (gRPC and HTTP/protobuf),
//! a stdout printer for debugging, and the fan-out that runs each as its own task with
//! a lane bounded by bytes and drop counters per kind.
//!
//! Every exporter implements [`Exporter`]; build them from the `atof` and
//! `opentelemetry` configuration kinds, hand them to a [`FanOut`], and send it
//! [`PipelineEvent`](wattline_model::events::PipelineEvent)s. Nothing here reads the
//! operating system beyond the files it writes and the sockets it sends on (and the
//! environment variables named in `header_env`, read once at build).

#![warn(missing_docs)]

pub mod atof;
pub mod atof_files;
pub mod atof_frames;
pub mod atof_lines;
pub mod atof_reader;
pub mod energy_names;
pub mod exporter;
pub mod fanout;
mod hw_names;
pub mod instruments;
pub mod metric_schema;
mod metrics_pipeline;
pub mod otlp;
mod otlp_grpc;
pub mod otlp_http;
pub mod otlp_resource;
pub mod otlp_retry;
pub mod otlp_spans;
mod otlp_transport;
pub mod semconv_names;
pub mod stdout;

pub use atof::AtofExporter;
pub use atof_reader::{
    AtofFile, AtofMarkStream, AtofReadError, RecordedMark, read_atof_file, read_atof_marks,
};
pub use exporter::{BuildError, ExportError, Exporter, ExporterKind};
pub use fanout::{
    DEFAULT_LANE_BYTES, ExportFailureSink, ExporterStats, FanOut, FanOutBuilder, FanOutError,
    FanOutReport, LaneOutcome, LaneReport,
};
pub use metric_schema::{parse_metric_measurements, validate_metric_measurements};
pub use metrics_pipeline::ExportStatus;
pub use otlp::{EndpointStatus, EnvLookup, OtlpExporter, OtlpExporterBuilder};
pub use otlp_resource::RunIdentity;
pub use stdout::StdoutExporter;

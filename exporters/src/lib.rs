//! wattline's exporters: the ATOF JSON-lines file, OTLP metrics (gRPC and HTTP/protobuf),
//! a stdout printer for debugging, and the fan-out that runs each as its own actor with
//! a bounded mailbox and drop counters.

pub mod atof;
pub mod exporter;
pub mod metric_schema;

pub use atof::AtofExporter;
pub use exporter::{BuildError, ExportError, Exporter, ExporterKind};
pub use metric_schema::{parse_metric_measurements, validate_metric_measurements};

//! Builds the exporters the configuration enables (`atof`, `opentelemetry`) behind one
//! fan-out, and hands the pipeline a sink that never waits on them.

use std::sync::Arc;
use std::time::Duration;

use wattline_config::EffectiveConfig;
use wattline_diagnostics::PipelineDiagnostics;
use wattline_exporters::{
    AtofExporter, BuildError, EnvLookup, ExportFailureSink, FanOut, FanOutError, OtlpExporter,
    RunIdentity, StdoutExporter,
};

/// How long flush and shutdown wait for the exporters together.
pub const EXPORTER_DEADLINE: Duration = Duration::from_secs(15);

/// Why the exporters could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExporterError {
    /// An exporter's settings or target were rejected.
    #[error("exporter {name}: {source}")]
    Build {
        /// `atof` or `opentelemetry`.
        name: &'static str,
        /// Why.
        source: BuildError,
    },
    /// The fan-out's tasks could not start.
    #[error("exporters: {0}")]
    FanOut(#[from] FanOutError),
}

/// What the OTLP exports say of the run, and where their variables are read.
pub struct OtlpIdentity {
    /// `service.name` default, `host.name`, `process.pid`, `wattline.run.id`.
    pub run: RunIdentity,
    /// `header_env` and `OTEL_*` variables.
    pub environment: EnvLookup,
}

/// Starts the exporters `config` enables, plus the OpenTelemetry stdout printer every
/// `stdout_interval` when given (for debugging); `None` when there are none.
pub async fn start_exporters(
    config: &EffectiveConfig,
    stdout_interval: Option<Duration>,
    diagnostics: Option<PipelineDiagnostics>,
    identity: OtlpIdentity,
) -> Result<Option<Arc<FanOut>>, ExporterError> {
    let mut builder = FanOut::builder();
    let mut any = false;
    if let Some(interval) = stdout_interval {
        let temporality = config
            .opentelemetry
            .as_ref()
            .map(|otlp| otlp.temporality)
            .unwrap_or_default();
        builder = builder.exporter("stdout", StdoutExporter::new(interval, temporality));
        any = true;
    }
    if let Some(atof) = &config.atof {
        let exporter = AtofExporter::build(atof).map_err(|source| ExporterError::Build {
            name: "atof",
            source,
        })?;
        builder = builder.exporter("atof", exporter);
        any = true;
    }
    if let Some(otlp) = &config.opentelemetry {
        let exporter = OtlpExporter::builder(otlp.clone())
            .run_identity(identity.run)
            .env_lookup(identity.environment)
            .build()
            .map_err(|source| ExporterError::Build {
                name: "opentelemetry",
                source,
            })?;
        builder = builder.exporter("opentelemetry", exporter);
        any = true;
    }
    if !any {
        return Ok(None);
    }
    if let Some(diagnostics) = diagnostics {
        builder = builder.failure_sink(Arc::new(diagnostics) as Arc<dyn ExportFailureSink>);
    }
    Ok(Some(Arc::new(builder.start().await?)))
}

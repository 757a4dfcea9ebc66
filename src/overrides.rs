//! Settings given as arguments (the CLI's `--atof` and `--otlp`, the Python and Node
//! packages' `atof_dir` and `otlp_endpoint`) laid over the configuration, validated by
//! the same rules as a file's, so every way in accepts and refuses the same values.

use std::path::Path;

use wattline_config::{ConfigError, EffectiveConfig, OtlpEndpointConfig, OtlpTransport};

/// Turns the ATOF file exporter on, writing into `directory`, over the configuration's
/// (its other settings kept). `argument` names the setting in an error.
pub fn enable_atof(
    config: &mut EffectiveConfig,
    directory: &Path,
    argument: &str,
) -> Result<(), ConfigError> {
    let mut atof = config.atof.clone().unwrap_or_default();
    atof.output_directory = directory.to_string_lossy().into_owned();
    atof.validate()
        .map_err(|error| ConfigError::new(argument, error.path, error.rule))?;
    config.atof = Some(atof);
    Ok(())
}

/// Sends metrics over OTLP to `url` alone, over the configuration's endpoints: a URL
/// ending in `/v1/metrics` is OTLP/HTTP, anything else gRPC. `argument` names the
/// setting in an error.
pub fn enable_otlp(
    config: &mut EffectiveConfig,
    url: &str,
    argument: &str,
) -> Result<(), ConfigError> {
    let transport = if url.trim_end_matches('/').ends_with("/v1/metrics") {
        OtlpTransport::HttpBinary
    } else {
        OtlpTransport::Grpc
    };
    let endpoint = OtlpEndpointConfig::new(url.to_string(), transport);
    endpoint
        .validate()
        .map_err(|error| ConfigError::new(argument, "", error.rule))?;
    let mut otlp = config.opentelemetry.clone().unwrap_or_default();
    otlp.endpoints = vec![endpoint];
    config.opentelemetry = Some(otlp);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> EffectiveConfig {
        EffectiveConfig::merge(&[]).expect("the defaults are valid")
    }

    #[test]
    fn an_empty_atof_directory_is_refused_naming_the_argument() {
        let mut config = defaults();
        let error = enable_atof(&mut config, Path::new(""), "--atof").unwrap_err();
        assert_eq!(error.source_name, "--atof");
        assert_eq!(error.field_path, "output_directory");
        assert!(config.atof.is_none(), "nothing changed");
        enable_atof(&mut config, Path::new("/tmp/runs"), "--atof").unwrap();
        assert_eq!(config.atof.unwrap().output_directory, "/tmp/runs");
    }

    #[test]
    fn the_otlp_transport_follows_the_url() {
        let mut config = defaults();
        enable_otlp(&mut config, "http://localhost:4318/v1/metrics", "--otlp").unwrap();
        let endpoint = &config.opentelemetry.as_ref().unwrap().endpoints[0];
        assert_eq!(endpoint.transport, OtlpTransport::HttpBinary);
        enable_otlp(&mut config, "http://localhost:4317", "--otlp").unwrap();
        let endpoints = &config.opentelemetry.as_ref().unwrap().endpoints;
        assert_eq!(endpoints.len(), 1, "the argument replaces the endpoints");
        assert_eq!(endpoints[0].transport, OtlpTransport::Grpc);
        let error = enable_otlp(&mut config, "not a url", "otlp_endpoint").unwrap_err();
        assert_eq!(error.source_name, "otlp_endpoint");
    }
}

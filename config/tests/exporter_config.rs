//! The `atof` and `opentelemetry` components: defaults, and one test per validation rule
//! asserting the message names the file, the field path and the rule.

use wattline_config::{
    AtofCompression, AtofWriteMode, EffectiveConfig, MetricTemporality, OtlpTransport,
    PluginsDocument,
};

fn rejection(text: &str) -> String {
    match PluginsDocument::parse("plugins.toml", text) {
        Ok(document) => panic!("expected a rejection, got {document:?}"),
        Err(error) => error.to_string(),
    }
}

fn atof(config: &str) -> String {
    format!("version = 1\n[[components]]\nkind = \"atof\"\n[components.config]\n{config}\n")
}

fn otel(config: &str) -> String {
    format!(
        "version = 1\n[[components]]\nkind = \"opentelemetry\"\n[components.config]\n{config}\n"
    )
}

/// An `opentelemetry` document with one valid endpoint first and `second` as the
/// second endpoint's body, so paths must say `endpoints[1]`.
fn second_endpoint(second: &str) -> String {
    otel(&format!(
        "[[components.config.endpoints]]\nendpoint = \"http://127.0.0.1:4317\"\n[[components.config.endpoints]]\n{second}"
    ))
}

fn effective(text: &str) -> EffectiveConfig {
    let document = PluginsDocument::parse("plugins.toml", text).unwrap();
    EffectiveConfig::merge(&[document]).unwrap()
}

#[test]
fn exporters_are_off_unless_enabled() {
    let config = EffectiveConfig::merge(&[]).unwrap();
    assert_eq!(config.atof, None);
    assert_eq!(config.opentelemetry, None);
    let disabled = effective(
        "version = 1\n[[components]]\nkind = \"atof\"\nenabled = false\n[[components]]\nkind = \"opentelemetry\"\nenabled = false\n",
    );
    assert_eq!(disabled.atof, None);
    assert_eq!(disabled.opentelemetry, None);
}

#[test]
fn atof_defaults() {
    let config = effective(&atof("")).atof.unwrap();
    assert_eq!(config.output_directory, ".");
    assert_eq!(config.filename, "wattline-%Y-%m-%d-%H.%M.%S.jsonl");
    assert_eq!(config.mode, AtofWriteMode::Append);
    assert_eq!(config.compression, AtofCompression::None);
    assert_eq!(config.max_file_bytes, None);
}

#[test]
fn atof_zstd_appends_zst_to_the_name_unless_the_pattern_ends_in_it() {
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-04T05:06:07Z")
        .unwrap()
        .to_utc();
    let config = effective(&atof("compression = \"zstd\"\nfilename = \"run-%H.jsonl\""))
        .atof
        .unwrap();
    assert_eq!(config.compression, AtofCompression::Zstd);
    assert_eq!(config.file_name(at).unwrap(), "run-05.jsonl.zst");
    let already = effective(&atof(
        "compression = \"zstd\"\nfilename = \"run-%H.jsonl.zst\"",
    ))
    .atof
    .unwrap();
    assert_eq!(already.file_name(at).unwrap(), "run-05.jsonl.zst");
    let plain = effective(&atof("filename = \"run-%H.jsonl\""))
        .atof
        .unwrap();
    assert_eq!(plain.file_name(at).unwrap(), "run-05.jsonl");
    let message = rejection(&atof("compression = \"gzip\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config.compression: ")
            && message.contains("`zstd`"),
        "{message}"
    );
}

#[test]
fn atof_max_file_bytes_below_64_kib_is_rejected_naming_the_field() {
    assert_eq!(
        rejection(&atof("max_file_bytes = 65535")),
        "plugins.toml: components[0].config.max_file_bytes: must be at least 65536 (64 KiB); got 65535"
    );
    let config = effective(&atof("max_file_bytes = 65536")).atof.unwrap();
    assert_eq!(config.max_file_bytes, Some(65536));
}

#[test]
fn atof_mode_overwrite_is_read_and_unknown_mode_names_the_known_ones() {
    let config = effective(&atof("mode = \"overwrite\"")).atof.unwrap();
    assert_eq!(config.mode, AtofWriteMode::Overwrite);
    let message = rejection(&atof("mode = \"rotate\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config.mode: "),
        "{message}"
    );
    assert!(
        message.contains("`append`") && message.contains("`overwrite`"),
        "{message}"
    );
}

#[test]
fn atof_empty_filename_is_rejected() {
    assert_eq!(
        rejection(&atof("filename = \"\"")),
        "plugins.toml: components[0].config.filename: must not be empty"
    );
}

#[test]
fn atof_filename_with_a_slash_is_rejected() {
    let message = rejection(&atof("filename = \"logs/run.jsonl\""));
    assert!(
        message.starts_with(
            "plugins.toml: components[0].config.filename: must be a file name without `/`"
        ),
        "{message}"
    );
}

#[test]
fn atof_filename_that_renders_a_slash_is_rejected() {
    // %D is month/day/year.
    let message = rejection(&atof("filename = \"run-%D.jsonl\""));
    assert!(
        message
            .starts_with("plugins.toml: components[0].config.filename: renders to a name with `/`"),
        "{message}"
    );
}

#[test]
fn atof_invalid_strftime_pattern_is_rejected() {
    let message = rejection(&atof("filename = \"run-%Q.jsonl\""));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.filename: not a valid strftime pattern (got \"run-%Q.jsonl\")"
    );
}

#[test]
fn atof_empty_output_directory_is_rejected() {
    let message = rejection(&atof("output_directory = \"\""));
    assert!(
        message
            .starts_with("plugins.toml: components[0].config.output_directory: must not be empty"),
        "{message}"
    );
}

#[test]
fn atof_unknown_field_names_the_known_ones() {
    let message = rejection(&atof("directory = \"/tmp\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config"),
        "{message}"
    );
    for known in ["output_directory", "filename", "mode"] {
        assert!(message.contains(&format!("`{known}`")), "{message}");
    }
}

#[test]
fn opentelemetry_defaults() {
    let config = effective(&second_endpoint(
        "endpoint = \"https://collector.example:4318\"\ntransport = \"http_binary\"",
    ))
    .opentelemetry
    .unwrap();
    assert_eq!(config.export_interval_millis, 60_000);
    assert_eq!(config.temporality, MetricTemporality::Cumulative);
    assert_eq!(config.endpoints.len(), 2);
    let first = &config.endpoints[0];
    assert_eq!(first.transport, OtlpTransport::Grpc);
    assert_eq!(first.timeout_millis, 3_000);
    assert_eq!(first.service_name, None);
    assert_eq!(first.service_namespace, None);
    assert_eq!(first.service_version, None);
    assert!(first.headers.is_empty() && first.header_env.is_empty());
    assert!(first.resource_attributes.is_empty());
    assert_eq!(config.endpoints[1].transport, OtlpTransport::HttpBinary);
}

#[test]
fn opentelemetry_delta_and_low_memory_are_selectable() {
    let config = effective(&otel("temporality = \"delta\""))
        .opentelemetry
        .unwrap();
    assert_eq!(config.temporality, MetricTemporality::Delta);
    let config = effective(&otel("temporality = \"low_memory\""))
        .opentelemetry
        .unwrap();
    assert_eq!(config.temporality, MetricTemporality::LowMemory);
    let message = rejection(&otel("temporality = \"lowmemory\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config.temporality: "),
        "{message}"
    );
    for known in ["delta", "cumulative", "low_memory"] {
        assert!(message.contains(&format!("`{known}`")), "{message}");
    }
}

#[test]
fn opentelemetry_limits_default_to_256_instruments_and_2000_attribute_sets() {
    let config = effective(&otel("")).opentelemetry.unwrap();
    assert_eq!(config.max_instruments, 256);
    assert_eq!(config.cardinality_limit, 2_000);
}

#[test]
fn opentelemetry_limits_accept_their_bounds() {
    let config = effective(&otel("max_instruments = 1\ncardinality_limit = 1"))
        .opentelemetry
        .unwrap();
    assert_eq!((config.max_instruments, config.cardinality_limit), (1, 1));
    let config = effective(&otel(
        "max_instruments = 65536\ncardinality_limit = 1000000",
    ))
    .opentelemetry
    .unwrap();
    assert_eq!(
        (config.max_instruments, config.cardinality_limit),
        (65_536, 1_000_000)
    );
}

#[test]
fn max_instruments_out_of_range_is_rejected() {
    assert_eq!(
        rejection(&otel("max_instruments = 0")),
        "plugins.toml: components[0].config.max_instruments: must be between 1 and 65536 (got 0)"
    );
    assert_eq!(
        rejection(&otel("max_instruments = 65537")),
        "plugins.toml: components[0].config.max_instruments: must be between 1 and 65536 (got 65537)"
    );
    let message = rejection(&otel("max_instruments = -1"));
    assert!(
        message.starts_with("plugins.toml: components[0].config.max_instruments: "),
        "{message}"
    );
}

#[test]
fn cardinality_limit_out_of_range_is_rejected() {
    assert_eq!(
        rejection(&otel("cardinality_limit = 0")),
        "plugins.toml: components[0].config.cardinality_limit: must be between 1 and 1000000 (got 0)"
    );
    assert_eq!(
        rejection(&otel("cardinality_limit = 1000001")),
        "plugins.toml: components[0].config.cardinality_limit: must be between 1 and 1000000 (got 1000001)"
    );
}

#[test]
fn opentelemetry_zero_export_interval_is_rejected() {
    assert_eq!(
        rejection(&otel("export_interval_millis = 0")),
        "plugins.toml: components[0].config.export_interval_millis: must be greater than zero (got 0)"
    );
}

#[test]
fn endpoint_url_is_required() {
    let message = rejection(&second_endpoint("transport = \"grpc\""));
    assert!(
        message.starts_with("plugins.toml: components[0].config.endpoints[1]"),
        "{message}"
    );
    assert!(message.contains("missing field `endpoint`"), "{message}");
}

#[test]
fn endpoint_url_must_be_http_or_https() {
    assert_eq!(
        rejection(&second_endpoint("endpoint = \"grpc://127.0.0.1:4317\"")),
        "plugins.toml: components[0].config.endpoints[1].endpoint: must be an http:// or https:// URL (got \"grpc://127.0.0.1:4317\")"
    );
}

#[test]
fn endpoint_url_needs_a_host_and_a_valid_port() {
    assert_eq!(
        rejection(&second_endpoint("endpoint = \"http://:4317\"")),
        "plugins.toml: components[0].config.endpoints[1].endpoint: has no host (got \"http://:4317\")"
    );
    let message = rejection(&second_endpoint("endpoint = \"http://collector:99999\""));
    assert!(
        message.starts_with(
            "plugins.toml: components[0].config.endpoints[1].endpoint: has an invalid port \"99999\""
        ),
        "{message}"
    );
    let message = rejection(&second_endpoint("endpoint = \"http://collector :4317\""));
    assert!(message.contains("must not contain spaces"), "{message}");
}

#[test]
fn endpoint_url_with_credentials_is_rejected_without_echoing_them() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://user:hunter2@collector:4317\"",
    ));
    assert!(
        message.starts_with(
            "plugins.toml: components[0].config.endpoints[1].endpoint: must not carry credentials"
        ),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[test]
fn endpoint_ipv6_url_is_accepted() {
    let config = effective(&second_endpoint("endpoint = \"http://[::1]:4317\""))
        .opentelemetry
        .unwrap();
    assert_eq!(config.endpoints[1].endpoint, "http://[::1]:4317");
}

#[test]
fn unknown_transport_names_the_known_ones() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4318\"\ntransport = \"http_json\"",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.endpoints[1].transport: "),
        "{message}"
    );
    assert!(
        message.contains("`grpc`") && message.contains("`http_binary`"),
        "{message}"
    );
}

#[test]
fn zero_timeout_names_its_endpoint() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\ntimeout_millis = 0"
        )),
        "plugins.toml: components[0].config.endpoints[1].timeout_millis: must be greater than zero (got 0)"
    );
}

#[test]
fn blank_header_name_is_rejected() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nheaders = { \" \" = \"x\" }"
        )),
        "plugins.toml: components[0].config.endpoints[1].headers.\" \": header name must not be blank (got \" \")"
    );
}

#[test]
fn header_name_with_a_space_inside_is_rejected() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nheaders = { \"x api\" = \"x\" }",
    ));
    assert!(
        message.starts_with(
            "plugins.toml: components[0].config.endpoints[1].headers.\"x api\": header name \"x api\" holds ' '"
        ),
        "{message}"
    );
}

#[test]
fn header_value_with_a_newline_is_rejected_without_echoing_it() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nheaders = { authorization = \"Bearer s3cret\\nx\" }",
    ));
    assert_eq!(
        message,
        "plugins.toml: components[0].config.endpoints[1].headers.authorization: value must not contain control characters (CR, LF, NUL, ...)"
    );
    assert!(!message.contains("s3cret"));
}

#[test]
fn blank_header_env_name_and_variable_are_rejected() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nheader_env = { \"\" = \"TOKEN\" }",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.endpoints[1].header_env.\"\": header name must not be blank"),
        "{message}"
    );
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nheader_env = { authorization = \" \" }"
        )),
        "plugins.toml: components[0].config.endpoints[1].header_env.authorization: must name an environment variable (got a blank name)"
    );
}

#[test]
fn header_set_twice_is_rejected() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nheaders = { Authorization = \"a\" }\nheader_env = { authorization = \"TOKEN\" }",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.endpoints[1].header_env.authorization: header \"authorization\" is also set in `headers`"),
        "{message}"
    );
}

#[test]
fn blank_service_name_and_resource_attribute_are_rejected() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nservice_name = \"  \""
        )),
        "plugins.toml: components[0].config.endpoints[1].service_name: must not be blank when given (got \"  \")"
    );
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nresource_attributes = { \"\" = \"x\" }"
        )),
        "plugins.toml: components[0].config.endpoints[1].resource_attributes.\"\": attribute name must not be blank"
    );
}

#[test]
fn service_namespace_and_version_are_read() {
    let config = effective(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nservice_namespace = \"perf\"\nservice_version = \"1.4.2\"",
    ))
    .opentelemetry
    .unwrap();
    assert_eq!(
        config.endpoints[1].service_namespace.as_deref(),
        Some("perf")
    );
    assert_eq!(
        config.endpoints[1].service_version.as_deref(),
        Some("1.4.2")
    );
}

#[test]
fn blank_service_namespace_is_rejected() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nservice_namespace = \"\""
        )),
        "plugins.toml: components[0].config.endpoints[1].service_namespace: must not be blank when given (got \"\")"
    );
}

#[test]
fn blank_service_version_is_rejected() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nservice_version = \" \""
        )),
        "plugins.toml: components[0].config.endpoints[1].service_version: must not be blank when given (got \" \")"
    );
}

#[test]
fn service_version_set_twice_is_rejected() {
    assert_eq!(
        rejection(&second_endpoint(
            "endpoint = \"http://127.0.0.1:4317\"\nservice_version = \"1\"\nresource_attributes = { \"service.version\" = \"2\" }"
        )),
        "plugins.toml: components[0].config.endpoints[1].resource_attributes.\"service.version\": \"service.version\" is also set by `service_version`; set it in one place"
    );
    // Without the dedicated field, the attribute alone is fine.
    let config = effective(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\nresource_attributes = { \"service.namespace\" = \"perf\" }",
    ))
    .opentelemetry
    .unwrap();
    assert_eq!(
        config.endpoints[1].resource_attributes["service.namespace"],
        "perf"
    );
}

#[test]
fn unknown_endpoint_field_names_the_known_ones() {
    let message = rejection(&second_endpoint(
        "endpoint = \"http://127.0.0.1:4317\"\ncompression = \"gzip\"",
    ));
    assert!(
        message.starts_with("plugins.toml: components[0].config.endpoints[1]"),
        "{message}"
    );
    for known in [
        "endpoint",
        "transport",
        "headers",
        "header_env",
        "timeout_millis",
        "service_namespace",
        "service_version",
    ] {
        assert!(message.contains(&format!("`{known}`")), "{message}");
    }
}

#[test]
fn merged_layers_are_validated_too() {
    let lower =
        PluginsDocument::parse("lower.toml", &otel("export_interval_millis = 1000")).unwrap();
    let upper = PluginsDocument::parse(
        "upper.toml",
        &atof("mode = \"overwrite\"\nfilename = \"run.jsonl\""),
    )
    .unwrap();
    let merged = EffectiveConfig::merge(&[lower, upper]).unwrap();
    assert_eq!(merged.opentelemetry.unwrap().export_interval_millis, 1000);
    assert_eq!(merged.atof.unwrap().filename, "run.jsonl");
}

#[test]
fn exporter_configuration_round_trips_through_toml() {
    let text = format!(
        "{}\n[[components]]\nkind = \"atof\"\n[components.config]\noutput_directory = \"/var/log/wattline\"\nmode = \"overwrite\"\n",
        second_endpoint(
            "endpoint = \"http://127.0.0.1:4318\"\ntransport = \"http_binary\"\nheaders = { \"x-team\" = \"perf\" }\nheader_env = { authorization = \"WATTLINE_TOKEN\" }\nresource_attributes = { \"deployment.environment\" = \"ci\" }\nservice_namespace = \"perf\"\nservice_version = \"1.4.2\""
        )
    );
    let effective = effective(&text);
    let shown = effective.to_toml().unwrap();
    let reparsed =
        EffectiveConfig::merge(&[PluginsDocument::parse("shown", &shown).unwrap()]).unwrap();
    assert_eq!(reparsed.atof, effective.atof);
    assert_eq!(reparsed.opentelemetry, effective.opentelemetry);
    assert!(shown.contains("kind = \"atof\""), "{shown}");
    assert!(shown.contains("kind = \"opentelemetry\""), "{shown}");
    assert!(shown.contains("export_interval_millis = 60000"), "{shown}");
    assert!(shown.contains("timeout_millis = 3000"), "{shown}");
    assert!(shown.contains("max_instruments = 256"), "{shown}");
    assert!(shown.contains("cardinality_limit = 2000"), "{shown}");
    assert!(shown.contains("service_namespace = \"perf\""), "{shown}");
    assert!(shown.contains("WATTLINE_TOKEN"), "{shown}");
}

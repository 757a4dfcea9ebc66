//! The resource every OTLP export carries, so a collector receiving many wattline
//! processes keeps their series apart: `service.name`, `host.name`, `process.pid` and
//! `wattline.run.id`, the endpoint's configured attributes, and the OpenTelemetry
//! variables every SDK honours.
//!
//! `service.name`, highest first: `OTEL_SERVICE_NAME`; `service.name` in
//! `OTEL_RESOURCE_ATTRIBUTES`; the endpoint's `service_name`; the run's default (the
//! measured command's or the host program's name); `wattline`. Any other attribute:
//! `OTEL_RESOURCE_ATTRIBUTES`, then the endpoint's `resource_attributes` (and
//! `service_namespace`, `service_version`), then the run's own (`host.name`,
//! `process.pid`, `wattline.run.id`). Environment beats configuration, as every
//! wattline variable does.

use std::collections::BTreeMap;

use opentelemetry::KeyValue;
use opentelemetry_sdk::Resource;
use wattline_config::opentelemetry::{DEFAULT_SERVICE_NAME, OtlpEndpointConfig};

/// `OTEL_SERVICE_NAME`.
pub const SERVICE_NAME_VARIABLE: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs separated by commas, values
/// percent-encoded.
pub const RESOURCE_ATTRIBUTES_VARIABLE: &str = "OTEL_RESOURCE_ATTRIBUTES";
/// The attribute naming the run: the UUID of its root scope in the ATOF file.
pub const RUN_ID_ATTRIBUTE: &str = "wattline.run.id";

/// What tells this run apart from every other one exporting to the same collector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunIdentity {
    /// `service.name` when neither the environment nor the endpoint names one: the
    /// measured command's name under `wattline run`, the host program's otherwise.
    pub default_service_name: Option<String>,
    /// `host.name`.
    pub host_name: Option<String>,
    /// `process.pid`: the exporting (wattline's own) process.
    pub process_id: Option<u32>,
    /// `wattline.run.id`.
    pub run_id: Option<String>,
}

/// The resource of one endpoint, given the run's identity and the values of
/// [`SERVICE_NAME_VARIABLE`] and [`RESOURCE_ATTRIBUTES_VARIABLE`] (`None` when unset).
pub fn endpoint_resource(
    endpoint: &OtlpEndpointConfig,
    identity: &RunIdentity,
    service_name_variable: Option<&str>,
    resource_attributes_variable: Option<&str>,
) -> Resource {
    let mut attributes: BTreeMap<String, String> = BTreeMap::new();
    let own = [
        ("host.name", identity.host_name.clone()),
        (
            "process.pid",
            identity.process_id.map(|pid| pid.to_string()),
        ),
        (RUN_ID_ATTRIBUTE, identity.run_id.clone()),
        ("service.namespace", endpoint.service_namespace.clone()),
        ("service.version", endpoint.service_version.clone()),
    ];
    for (key, value) in own {
        if let Some(value) = value {
            attributes.insert(key.to_owned(), value);
        }
    }
    attributes.extend(endpoint.resource_attributes.clone());
    let from_environment = resource_attributes_variable
        .map(parse_resource_attributes)
        .unwrap_or_default();
    attributes.extend(from_environment);
    let service_name = non_blank(service_name_variable)
        .or_else(|| attributes.remove("service.name"))
        .or_else(|| endpoint.service_name.clone())
        .or_else(|| identity.default_service_name.clone())
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
    attributes.remove("service.name");
    Resource::builder_empty()
        .with_service_name(service_name)
        .with_attributes(attributes.into_iter().map(|(key, value)| {
            // The process ID is an integer on the wire, as the semantic conventions say.
            match (key.as_str(), value.parse::<i64>()) {
                ("process.pid", Ok(pid)) => KeyValue::new(key, pid),
                _ => KeyValue::new(key, value),
            }
        }))
        .build()
}

fn non_blank(value: Option<&str>) -> Option<String> {
    value
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

/// The pairs of an `OTEL_RESOURCE_ATTRIBUTES` value. An entry without `=` or with a
/// blank key, or a value whose percent-encoding is broken, is left out with a warning
/// naming it (as OpenTelemetry SDKs do): a malformed variable meant for another
/// program must not stop this one's exports.
pub fn parse_resource_attributes(value: &str) -> BTreeMap<String, String> {
    let mut attributes = BTreeMap::new();
    for entry in value.split(',').filter(|entry| !entry.trim().is_empty()) {
        let parsed = entry.split_once('=').and_then(|(key, value)| {
            let key = key.trim();
            let value = percent_decode(value.trim())?;
            (!key.is_empty()).then(|| (key.to_owned(), value))
        });
        match parsed {
            Some((key, value)) => {
                attributes.insert(key, value);
            }
            None => tracing::warn!(
                variable = RESOURCE_ATTRIBUTES_VARIABLE,
                entry,
                "left out: not a key=value pair with a non-blank key and a well-formed \
                 percent-encoded value"
            ),
        }
    }
    attributes
}

/// `text` with every `%XX` decoded; `None` when an escape is cut short, not hex, or
/// the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::{Key, Value};
    use wattline_config::OtlpTransport;

    fn endpoint() -> OtlpEndpointConfig {
        OtlpEndpointConfig::new("http://127.0.0.1:4317", OtlpTransport::Grpc)
    }

    fn identity() -> RunIdentity {
        RunIdentity {
            default_service_name: Some("train.py".into()),
            host_name: Some("node-7".into()),
            process_id: Some(4242),
            run_id: Some("0190-run".into()),
        }
    }

    fn get(resource: &Resource, key: &str) -> Option<Value> {
        resource.get(&Key::from(key.to_owned()))
    }

    #[test]
    fn the_run_is_told_apart_by_host_process_and_run_and_named_after_its_program() {
        let resource = endpoint_resource(&endpoint(), &identity(), None, None);
        assert_eq!(get(&resource, "service.name"), Some("train.py".into()));
        assert_eq!(get(&resource, "host.name"), Some("node-7".into()));
        assert_eq!(get(&resource, "process.pid"), Some(Value::I64(4242)));
        assert_eq!(get(&resource, "wattline.run.id"), Some("0190-run".into()));
        let nameless = endpoint_resource(&endpoint(), &RunIdentity::default(), None, None);
        assert_eq!(get(&nameless, "service.name"), Some("wattline".into()));
    }

    #[test]
    fn the_variables_beat_the_configuration_and_otel_service_name_beats_both() {
        let mut configured = endpoint();
        configured.service_name = Some("configured".into());
        configured
            .resource_attributes
            .insert("deployment.environment".into(), "staging".into());
        let resource = endpoint_resource(&configured, &identity(), None, None);
        assert_eq!(get(&resource, "service.name"), Some("configured".into()));
        let attributes =
            "service.name=from-attributes,deployment.environment=prod,host.name=pod%2D1";
        let resource = endpoint_resource(&configured, &identity(), None, Some(attributes));
        assert_eq!(
            get(&resource, "service.name"),
            Some("from-attributes".into())
        );
        assert_eq!(
            get(&resource, "deployment.environment"),
            Some("prod".into())
        );
        assert_eq!(get(&resource, "host.name"), Some("pod-1".into()));
        let resource = endpoint_resource(&configured, &identity(), Some("agent"), Some(attributes));
        assert_eq!(get(&resource, "service.name"), Some("agent".into()));
        // A blank OTEL_SERVICE_NAME is unset.
        let resource = endpoint_resource(&configured, &identity(), Some(" "), None);
        assert_eq!(get(&resource, "service.name"), Some("configured".into()));
    }

    #[test]
    fn malformed_entries_are_left_out_and_the_rest_kept() {
        let parsed = parse_resource_attributes("a=1, broken ,=blank,b=%zz,c=x%20y,d=%4");
        assert_eq!(
            parsed,
            BTreeMap::from([("a".into(), "1".into()), ("c".into(), "x y".into())])
        );
    }
}

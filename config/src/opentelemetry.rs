//! The `opentelemetry` component: how often metrics are exported, with which
//! temporality, and to which OTLP endpoints (transport, headers, timeout, resource).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::FieldError;

/// Default milliseconds between two exports.
pub const DEFAULT_EXPORT_INTERVAL_MILLIS: u64 = 60_000;
/// Default milliseconds one export to one endpoint may take.
pub const DEFAULT_TIMEOUT_MILLIS: u64 = 3_000;
/// The `service.name` resource attribute when nothing else names the service.
pub const DEFAULT_SERVICE_NAME: &str = "wattline";
/// Default most instruments each endpoint creates.
pub const DEFAULT_MAX_INSTRUMENTS: usize = 256;
/// The largest `max_instruments` accepted.
pub const MAX_MAX_INSTRUMENTS: usize = 65_536;
/// Default most attribute sets one instrument's stream keeps per export (the SDK's
/// cardinality limit); further sets are folded into one overflow point.
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2_000;
/// The largest `cardinality_limit` accepted.
pub const MAX_CARDINALITY_LIMIT: usize = 1_000_000;

/// How sums and histograms are aggregated between exports. Gauges are delta whatever
/// is set (the spec: a gauge nobody recorded in an interval is not exported, so a
/// source that stopped shows as a gap); a gauge has no temporality on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricTemporality {
    /// Each export carries totals since start (energy, cost and CO2 sums grow), what
    /// cumulative-only backends need. The default.
    #[default]
    Cumulative,
    /// Each export carries what was recorded since the previous one.
    Delta,
    /// Counters and histograms are delta, up-down counters cumulative: the SDK keeps no
    /// per-attribute state across exports for the instruments that have the most
    /// attribute sets.
    LowMemory,
}

/// Which metric names the OTLP and stdout exporters send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricNames {
    /// The specification's names: `gen_ai.*`, `nemo.relay.resource.*` and wattline's
    /// `wattline.*`. The default.
    #[default]
    Genai,
    /// OpenTelemetry semantic-convention names (`hw.*`, `process.*`, `system.*`) in
    /// place of the specification's names that have one; the others keep theirs.
    Semconv,
    /// Both: every specification name and every semantic-convention name.
    Both,
}

impl MetricNames {
    /// Whether the semantic-convention names are sent.
    pub fn sends_semconv(self) -> bool {
        self != MetricNames::Genai
    }
}

/// The OTLP transport of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtlpTransport {
    /// OTLP over gRPC (collector port 4317 by convention). The default.
    #[default]
    Grpc,
    /// OTLP over HTTP with protobuf bodies (collector port 4318; `/v1/metrics` is
    /// appended when the URL has no path).
    HttpBinary,
}

/// Configuration of the `opentelemetry` component (`[components.config]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenTelemetryConfig {
    /// Milliseconds between two exports to each endpoint. Default 60000; > 0.
    pub export_interval_millis: u64,
    /// `cumulative` (default), `delta` or `low_memory`, for sums and histograms;
    /// gauges are always delta.
    pub temporality: MetricTemporality,
    /// The most instruments (distinct metric names) each endpoint creates; further
    /// names are refused and counted. Default 256; 1..=65536.
    pub max_instruments: usize,
    /// The most attribute sets each instrument exports per interval; measurements with
    /// further sets are summed into one point carrying `otel.metric.overflow = true`.
    /// Default 2000; 1..=1000000.
    pub cardinality_limit: usize,
    /// Where metrics go; each endpoint gets its own pipeline. Default none.
    pub endpoints: Vec<OtlpEndpointConfig>,
    /// `genai` (default), `semconv` or `both`: which metric names are sent.
    pub metric_names: MetricNames,
    /// Also send a span per Agent scope (its energy, cost and CO2 as attributes) to
    /// each endpoint over OTLP traces, in the trace its caller named. Default `false`.
    pub spans: bool,
}

impl Default for OpenTelemetryConfig {
    fn default() -> Self {
        OpenTelemetryConfig {
            export_interval_millis: DEFAULT_EXPORT_INTERVAL_MILLIS,
            temporality: MetricTemporality::Cumulative,
            max_instruments: DEFAULT_MAX_INSTRUMENTS,
            cardinality_limit: DEFAULT_CARDINALITY_LIMIT,
            endpoints: Vec::new(),
            metric_names: MetricNames::Genai,
            spans: false,
        }
    }
}

/// One `[[components.config.endpoints]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpEndpointConfig {
    /// The collector's URL, `http://` or `https://`. Required.
    pub endpoint: String,
    /// `grpc` (default) or `http_binary`.
    #[serde(default)]
    pub transport: OtlpTransport,
    /// Headers sent with every export, name → value. Default none.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Headers whose values are read from environment variables when the exporter is
    /// built, header name → variable name. The values are never logged. Default none.
    #[serde(default)]
    pub header_env: BTreeMap<String, String>,
    /// Milliseconds one export may take, retries included. Default 3000; > 0.
    #[serde(default = "default_timeout_millis")]
    pub timeout_millis: u64,
    /// The `service.name` resource attribute. Default none: `OTEL_SERVICE_NAME` (or
    /// `service.name` in `OTEL_RESOURCE_ATTRIBUTES`) when set, else the measured
    /// command's or host program's name, else `wattline`. Non-blank when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The `service.namespace` resource attribute. Default none; non-blank when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// The `service.version` resource attribute. Default none; non-blank when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_version: Option<String>,
    /// Further resource attributes, name → value. Default none.
    #[serde(default)]
    pub resource_attributes: BTreeMap<String, String>,
}

fn default_timeout_millis() -> u64 {
    DEFAULT_TIMEOUT_MILLIS
}

impl OtlpEndpointConfig {
    /// An endpoint with every optional field at its default.
    pub fn new(endpoint: impl Into<String>, transport: OtlpTransport) -> Self {
        OtlpEndpointConfig {
            endpoint: endpoint.into(),
            transport,
            headers: BTreeMap::new(),
            header_env: BTreeMap::new(),
            timeout_millis: DEFAULT_TIMEOUT_MILLIS,
            service_name: None,
            service_namespace: None,
            service_version: None,
            resource_attributes: BTreeMap::new(),
        }
    }

    /// Checks this endpoint's rules; paths are relative to the endpoint's table.
    pub fn validate(&self) -> Result<(), FieldError> {
        check_endpoint_url(&self.endpoint).map_err(|rule| FieldError::new("endpoint", rule))?;
        for (name, value) in &self.headers {
            let at = format!("headers.{}", quote_key(name));
            check_header_name(name).map_err(|rule| FieldError::new(&at, rule))?;
            // The value is a secret as often as not: the rule never repeats it.
            if value
                .chars()
                .any(|c| (c.is_control() && c != '\t') || c == '\u{7f}')
            {
                return Err(FieldError::new(
                    at,
                    "value must not contain control characters (CR, LF, NUL, ...)",
                ));
            }
        }
        for (name, variable) in &self.header_env {
            let at = format!("header_env.{}", quote_key(name));
            check_header_name(name).map_err(|rule| FieldError::new(&at, rule))?;
            if self
                .headers
                .keys()
                .any(|other| other.eq_ignore_ascii_case(name))
            {
                return Err(FieldError::new(
                    at,
                    format!("header {name:?} is also set in `headers`; set it in one place"),
                ));
            }
            if variable.trim().is_empty() {
                return Err(FieldError::new(
                    at,
                    "must name an environment variable (got a blank name)",
                ));
            }
            if variable.contains('=') || variable.contains('\0') {
                return Err(FieldError::new(
                    at,
                    format!("{variable:?} is not an environment variable name (`=` or NUL)"),
                ));
            }
        }
        if self.timeout_millis == 0 {
            return Err(FieldError::new(
                "timeout_millis",
                "must be greater than zero (got 0)",
            ));
        }
        let dedicated = [
            ("service_name", "service.name", &self.service_name),
            (
                "service_namespace",
                "service.namespace",
                &self.service_namespace,
            ),
            ("service_version", "service.version", &self.service_version),
        ];
        for (field, _, value) in dedicated {
            if let Some(value) = value
                && value.trim().is_empty()
            {
                return Err(FieldError::new(
                    field,
                    format!("must not be blank when given (got {value:?})"),
                ));
            }
        }
        for name in self.resource_attributes.keys() {
            let at = || format!("resource_attributes.{}", quote_key(name));
            if name.trim().is_empty() {
                return Err(FieldError::new(at(), "attribute name must not be blank"));
            }
            if let Some((field, _, _)) = dedicated
                .iter()
                .find(|(_, attribute, value)| value.is_some() && name == attribute)
            {
                return Err(FieldError::new(
                    at(),
                    format!("{name:?} is also set by `{field}`; set it in one place"),
                ));
            }
        }
        Ok(())
    }
}

impl OpenTelemetryConfig {
    /// Checks the rules serde cannot express; the first broken rule is returned with its
    /// path relative to the component's `config` table, e.g.
    /// `endpoints[1].timeout_millis`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.export_interval_millis == 0 {
            return Err(FieldError::new(
                "export_interval_millis",
                "must be greater than zero (got 0)",
            ));
        }
        check_range(
            "max_instruments",
            self.max_instruments,
            1,
            MAX_MAX_INSTRUMENTS,
        )?;
        check_range(
            "cardinality_limit",
            self.cardinality_limit,
            1,
            MAX_CARDINALITY_LIMIT,
        )?;
        for (index, endpoint) in self.endpoints.iter().enumerate() {
            endpoint.validate().map_err(|error| {
                FieldError::new(format!("endpoints[{index}].{}", error.path), error.rule)
            })?;
        }
        Ok(())
    }
}

/// `value` within `low..=high`, or an error at `path` saying so.
fn check_range(path: &str, value: usize, low: usize, high: usize) -> Result<(), FieldError> {
    if (low..=high).contains(&value) {
        Ok(())
    } else {
        Err(FieldError::new(
            path,
            format!("must be between {low} and {high} (got {value})"),
        ))
    }
}

/// A table key as it appears in a dotted path: bare when it is a bare TOML key,
/// otherwise quoted.
fn quote_key(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    }
}

/// An HTTP header name: a non-blank RFC 9110 token.
fn check_header_name(name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err(format!("header name must not be blank (got {name:?})"));
    }
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if let Some(bad) = name.chars().find(|c| !token(*c)) {
        return Err(format!(
            "header name {name:?} holds {bad:?}; only letters, digits and !#$%&'*+-.^_`|~ are allowed"
        ));
    }
    Ok(())
}

/// An `http://` or `https://` URL with a host and, if given, a port in 1..=65535.
pub fn check_endpoint_url(url: &str) -> Result<(), String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return Err(format!("must be an http:// or https:// URL (got {url:?})"));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "must not contain spaces or control characters (got {url:?})"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        // Never echo: the part before `@` is a credential.
        return Err(
            "must not carry credentials (user:password@); use `headers` or `header_env`".into(),
        );
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return Err(format!("has an unclosed IPv6 address (got {url:?})"));
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(format!("has junk after the IPv6 address (got {url:?})")),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("has no host (got {url:?})"));
    }
    if let Some(port) = port {
        let valid = !port.is_empty()
            && port.chars().all(|c| c.is_ascii_digit())
            && port.parse::<u32>().is_ok_and(|p| (1..=65_535).contains(&p));
        if !valid {
            return Err(format!(
                "has an invalid port {port:?}; expected 1..=65535 (got {url:?})"
            ));
        }
    }
    Ok(())
}

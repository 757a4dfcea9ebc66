//! The Node.js package's bridge to the `wattline` crate (napi-rs). Data crosses as
//! JSON, with every integer above `Number.MAX_SAFE_INTEGER` tagged so that the
//! JavaScript layer (`index.js`) makes it a `bigint`; the option rules are the
//! crate's (`wattline::embedded`). No measurement logic lives here.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use wattline::embedded::{ConfigSource, EmbeddedError, EmbeddedOptions, EmbeddedPipeline};

pub mod gpu_source;
pub mod plugin_host;

use gpu_source::GpuSampler;

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Error messages start with a code the JavaScript layer turns into `error.code`.
pub(crate) fn failure(code: &str, message: impl std::fmt::Display) -> Error {
    Error::new(Status::GenericFailure, format!("[{code}] {message}"))
}

pub(crate) fn embedded_error(error: EmbeddedError) -> Error {
    match error {
        EmbeddedError::Config(error) => failure("WATTLINE_CONFIG", error),
        EmbeddedError::Other(message) => failure("WATTLINE_ERROR", message),
    }
}

/// `value` as JSON text with each integer above the safe range written
/// `{"$bigint": "<digits>"}`, in one pass (no intermediate `serde_json::Value`).
pub(crate) fn to_tagged_json(value: impl serde::Serialize) -> Result<String> {
    let mut text = Vec::with_capacity(4096);
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut text, BigIntTagging::default());
    value
        .serialize(&mut serializer)
        .map_err(|error| failure("WATTLINE_ERROR", error))?;
    String::from_utf8(text).map_err(|error| failure("WATTLINE_ERROR", error))
}

/// serde_json's compact output, except that an integer JavaScript cannot hold exactly
/// is written as a tagged string. An integer map key is written inside quotes already
/// (it stays a key, as JSON keys are strings).
#[derive(Default)]
struct BigIntTagging {
    in_string: bool,
}

impl BigIntTagging {
    /// Writes `digits` tagged when `safe` is false and the integer is not inside a
    /// string; as they are otherwise.
    fn write_integer<W: ?Sized + std::io::Write>(
        &self,
        writer: &mut W,
        safe: bool,
        digits: impl std::fmt::Display,
    ) -> std::io::Result<()> {
        if safe || self.in_string {
            write!(writer, "{digits}")
        } else {
            write!(writer, "{{\"$bigint\":\"{digits}\"}}")
        }
    }
}

impl serde_json::ser::Formatter for BigIntTagging {
    fn begin_string<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.in_string = true;
        writer.write_all(b"\"")
    }

    fn end_string<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.in_string = false;
        writer.write_all(b"\"")
    }

    fn write_u64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: u64,
    ) -> std::io::Result<()> {
        self.write_integer(writer, value <= MAX_SAFE_INTEGER, value)
    }

    fn write_i64<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: i64,
    ) -> std::io::Result<()> {
        self.write_integer(writer, value.unsigned_abs() <= MAX_SAFE_INTEGER, value)
    }

    fn write_u128<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: u128,
    ) -> std::io::Result<()> {
        self.write_integer(writer, value <= u128::from(MAX_SAFE_INTEGER), value)
    }

    fn write_i128<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        value: i128,
    ) -> std::io::Result<()> {
        self.write_integer(
            writer,
            value.unsigned_abs() <= u128::from(MAX_SAFE_INTEGER),
            value,
        )
    }
}

/// The options every call takes (each optional; camelCase in JavaScript).
#[napi(object)]
pub struct Options {
    /// A plugins.toml path.
    pub config_path: Option<String>,
    /// A plugins.toml table as JSON text.
    pub config_json: Option<String>,
    /// The measurement scope.
    pub scope: Option<String>,
    /// The process measured by process scopes.
    pub pid: Option<u32>,
    /// Turns polling on at this period, ms.
    pub interval_ms: Option<u32>,
    /// Turns the ATOF exporter on, writing here.
    pub atof_dir: Option<String>,
    /// Turns OTLP on towards this URL.
    pub otlp_endpoint: Option<String>,
    /// `false` reads no GPU.
    pub gpu: Option<bool>,
}

fn embedded_options(options: Options) -> EmbeddedOptions {
    let config = match (options.config_path, options.config_json) {
        (Some(path), _) => ConfigSource::File(path.into()),
        (None, Some(json)) => ConfigSource::Json(json),
        (None, None) => ConfigSource::Defaults,
    };
    EmbeddedOptions {
        config,
        scope: options.scope,
        pid: options.pid,
        interval_ms: options.interval_ms.map(u64::from),
        atof_dir: options.atof_dir.map(Into::into),
        otlp_endpoint: options.otlp_endpoint,
        gpu: options.gpu.unwrap_or(true),
        gpu_source: None,
    }
}

/// A running pipeline (`wattline::embedded::EmbeddedPipeline`).
#[napi]
pub struct NativePipeline {
    inner: EmbeddedPipeline,
}

/// Starts a pipeline; `gpu_sampler` (with `gpu_source_name`) is a GPU source written
/// in JavaScript (`setGpuSource`), in place of source selection.
#[napi]
pub async fn start_pipeline(
    options: Options,
    gpu_sampler: Option<GpuSampler>,
    gpu_source_name: Option<String>,
) -> Result<NativePipeline> {
    let mut options = embedded_options(options);
    options.gpu_source = gpu_sampler.map(|sampler| gpu_source::hook(sampler, gpu_source_name));
    let inner = EmbeddedPipeline::start(&options)
        .await
        .map_err(embedded_error)?;
    Ok(NativePipeline { inner })
}

#[napi]
impl NativePipeline {
    /// One on-demand snapshot as tagged JSON. The promise is settled from the thread
    /// that finished the snapshot: no runtime thread is woken only to pass it on.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn collect_json<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let (deferred, promise) = env.create_deferred()?;
        self.inner.collect_then(move |snapshot| {
            match snapshot.map_err(embedded_error).and_then(to_tagged_json) {
                Ok(text) => deferred.resolve(move |_| Ok(text)),
                Err(error) => deferred.reject(error),
            }
        });
        Ok(promise)
    }

    /// Starts an Agent scope of `weight` (1 when absent), nested in the live scope
    /// `parent` (a UUID this returned) when given; its UUID. Synchronous, on the
    /// calling thread: a start is a send to the pipeline that waits for no device
    /// read and no poll, so it needs no worker thread and enters no runtime.
    #[napi]
    pub fn start_scope(
        &self,
        name: String,
        weight: Option<f64>,
        traceparent: Option<String>,
        parent: Option<String>,
    ) -> Result<String> {
        self.inner
            .start_scope(&name, weight, traceparent, parent.as_deref())
            .map_err(embedded_error)
    }

    /// Ends the Agent scope `uuid`; `false` when it was not live, an error when the
    /// pipeline has shut down. Synchronous, as [`Self::start_scope`]. `span_end`: the
    /// step's span at its end as JSON (`{"attributes": {...}, "estimate": {...}}`): a
    /// remote model call's step keeps the call's estimate.
    #[napi]
    pub fn end_scope(&self, uuid: String, span_end: Option<String>) -> Result<bool> {
        self.inner
            .end_scope(&uuid, span_end.as_deref())
            .map_err(embedded_error)
    }

    /// Sends what the exporters hold (with or without the energy component).
    #[napi]
    pub async fn flush_telemetry(&self) -> Result<()> {
        self.inner.flush_telemetry().await.map_err(embedded_error)
    }

    /// The energy report so far, as tagged JSON.
    #[napi]
    pub async fn flush_json(&self) -> Result<String> {
        to_tagged_json(self.inner.flush().await.map_err(embedded_error)?)
    }

    /// Stops the pipeline and returns the final report as tagged JSON (the same one
    /// on a second call).
    #[napi]
    pub async fn shutdown_json(&self) -> Result<Option<String>> {
        let report = self.inner.shutdown().await.map_err(embedded_error)?;
        report.map(to_tagged_json).transpose()
    }
}

/// `json` re-encoded as the bridge encodes every answer (integers above the safe range
/// tagged): what the JavaScript layer decodes, for checking that rule on any value.
#[napi]
pub fn encode_json(json: String) -> Result<String> {
    let value: serde_json::Value = serde_json::from_str(&json)
        .map_err(|error| failure("WATTLINE_ERROR", format!("not JSON: {error}")))?;
    to_tagged_json(&value)
}

/// Reads an ATOF event file into its report on libuv's thread pool (a long file is
/// seconds of reading, which the event loop must not wait on).
pub struct ReadReport {
    path: String,
}

impl Task for ReadReport {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        let report = wattline::report_from_atof(self.path.as_ref())
            .map_err(|error| failure("WATTLINE_ERROR", error.to_string()))?;
        to_tagged_json(report)
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

/// The report rebuilt from an ATOF event file (plain, zstd or any part of a rotated
/// set), as `wattline report FILE` rebuilds it, as tagged JSON.
#[napi(ts_return_type = "Promise<string>")]
pub fn report_from_atof_json(path: String) -> AsyncTask<ReadReport> {
    AsyncTask::new(ReadReport { path })
}

/// The CLI's table for a report given as JSON (tags removed by the caller).
#[napi]
pub fn report_table(report_json: String) -> Result<String> {
    let report: wattline::EnergyReport = serde_json::from_str(&report_json)
        .map_err(|error| failure("WATTLINE_ERROR", format!("not a wattline report: {error}")))?;
    Ok(wattline::report::render_table(&report))
}

#[cfg(unix)]
pub mod host {
    //! Agent scopes in the pipeline of `wattline run`, over its host endpoint.

    use napi::bindgen_prelude::*;
    use napi_derive::napi;
    use wattline::embedded::host_scopes;

    use super::failure;

    fn host_error(error: wattline::embedded::EmbeddedError) -> Error {
        failure("WATTLINE_HOST", error)
    }

    /// Starts a scope of `weight` (1 when absent) in the run's pipeline, nested in
    /// the open scope `parent` (a scope id) when given; its id.
    #[napi]
    pub async fn host_start_scope(
        name: String,
        weight: Option<f64>,
        traceparent: Option<String>,
        parent: Option<String>,
    ) -> Result<String> {
        host_scopes::start(&name, weight, traceparent.as_deref(), parent.as_deref())
            .await
            .map_err(host_error)
    }

    /// Ends a scope `host_start_scope` started; `false` when it was not open.
    /// `span_end` as for `endScope`.
    #[napi]
    pub async fn host_end_scope(scope_id: String, span_end: Option<String>) -> Result<bool> {
        host_scopes::end(&scope_id, span_end.as_deref())
            .await
            .map_err(host_error)
    }
}

#[cfg(test)]
mod tests {
    use super::to_tagged_json;
    use std::collections::BTreeMap;

    #[test]
    fn integers_past_the_safe_range_are_tagged_wherever_they_are_values() {
        let text = to_tagged_json(serde_json::json!({
            "safe": 9_007_199_254_740_991_u64,
            "above": 9_007_199_254_740_992_u64,
            "below": -9_007_199_254_740_992_i64,
            "lowest": i64::MIN,
            "nested": [u64::MAX, 1, "text 18446744073709551615"],
        }))
        .unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"above":{"$bigint":"9007199254740992"},"below":{"$bigint":"-9007199254740992"},"#,
                r#""lowest":{"$bigint":"-9223372036854775808"},"#,
                r#""nested":[{"$bigint":"18446744073709551615"},1,"text 18446744073709551615"],"#,
                r#""safe":9007199254740991}"#
            )
        );
    }

    /// Each integer writer at both edges of the safe range, −(2^53 − 1) to 2^53 − 1:
    /// typed fields, so an `i64` or 128-bit value takes its own writer (a `json!` value
    /// sends every non-negative integer through `write_u64`).
    #[derive(serde::Serialize)]
    struct Edges {
        i64_max_safe: i64,
        i64_past_max: i64,
        i64_min_safe: i64,
        i64_past_min: i64,
        u128_max_safe: u128,
        u128_past_max: u128,
        i128_max_safe: i128,
        i128_past_max: i128,
        i128_min_safe: i128,
        i128_past_min: i128,
    }

    #[test]
    fn every_integer_writer_tags_exactly_past_the_safe_range() {
        const SAFE: i64 = (1 << 53) - 1;
        let edges = Edges {
            i64_max_safe: SAFE,
            i64_past_max: SAFE + 1,
            i64_min_safe: -SAFE,
            i64_past_min: -SAFE - 1,
            u128_max_safe: SAFE as u128,
            u128_past_max: SAFE as u128 + 1,
            i128_max_safe: i128::from(SAFE),
            i128_past_max: i128::from(SAFE) + 1,
            i128_min_safe: -i128::from(SAFE),
            i128_past_min: -i128::from(SAFE) - 1,
        };
        assert_eq!(
            to_tagged_json(&edges).unwrap(),
            concat!(
                r#"{"i64_max_safe":9007199254740991,"#,
                r#""i64_past_max":{"$bigint":"9007199254740992"},"#,
                r#""i64_min_safe":-9007199254740991,"#,
                r#""i64_past_min":{"$bigint":"-9007199254740992"},"#,
                r#""u128_max_safe":9007199254740991,"#,
                r#""u128_past_max":{"$bigint":"9007199254740992"},"#,
                r#""i128_max_safe":9007199254740991,"#,
                r#""i128_past_max":{"$bigint":"9007199254740992"},"#,
                r#""i128_min_safe":-9007199254740991,"#,
                r#""i128_past_min":{"$bigint":"-9007199254740992"}}"#
            )
        );
    }

    #[test]
    fn an_integer_key_stays_a_key_and_wide_integers_are_tagged() {
        let keys = BTreeMap::from([(u64::MAX, (1_u128 << 64, -(1_i128 << 64))), (2, (3, -4))]);
        assert_eq!(
            to_tagged_json(&keys).unwrap(),
            concat!(
                r#"{"2":[3,-4],"18446744073709551615":"#,
                r#"[{"$bigint":"18446744073709551616"},{"$bigint":"-18446744073709551616"}]}"#
            )
        );
    }
}

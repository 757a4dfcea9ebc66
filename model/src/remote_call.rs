//! A model call served by another machine (a hosted provider's API): what its span
//! said of it ([`RemoteCall`]), and the labelled estimate of the energy it cost there
//! ([`RemoteEstimate`]), which never enters the measured figures.
//!
//! The local machine only waits during such a call, so the step's measured energy says
//! nothing of the call's cost; the estimate is a range from the call's token counts,
//! always marked [`ESTIMATED`], with its source named.

use serde::{Deserialize, Serialize};

use crate::metric_measurements::AttributeValue;

/// The method every remote estimate carries: not a measurement.
pub const ESTIMATED: &str = "estimated";
/// The estimator that uses the factor table (shipped defaults and `plugins.toml`
/// rows).
pub const FACTOR_TABLE_ESTIMATOR: &str = "factor-table";

/// The `gen_ai.operation.name` values of a model call: a span of one of these whose
/// server is not this machine is a remote call.
pub const MODEL_CALL_OPERATIONS: [&str; 4] =
    ["chat", "text_completion", "embeddings", "generate_content"];

/// A model call a step made to another machine, as its span described it at its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteCall {
    /// The GenAI operation (`chat`, `text_completion`, `embeddings`,
    /// `generate_content`).
    pub operation: String,
    /// The provider (`gen_ai.provider.name`, or the older `gen_ai.system`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model that answered (`gen_ai.response.model`), else the one asked for
    /// (`gen_ai.request.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Input (prompt) tokens, when the span counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output (completion) tokens, when the span counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The estimate of its energy on the machine that served it; `None` when there is
    /// none (an unknown model, no token counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<RemoteEstimate>,
}

impl RemoteCall {
    /// The remote model call a GenAI span describes, from its attributes at its end
    /// (`attribute` gives one by key): `None` unless its `gen_ai.operation.name` is one
    /// of [`MODEL_CALL_OPERATIONS`] and its `server.address`, when it has one, is not
    /// this machine (a loopback address or `localhost`). Without a `server.address`
    /// the call is taken as remote: hosted providers' clients often leave it out.
    /// Older names are read where the current ones are absent
    /// (`gen_ai.system`, `gen_ai.usage.prompt_tokens`, `gen_ai.usage.completion_tokens`).
    pub fn from_span_attributes(
        attribute: impl Fn(&str) -> Option<AttributeValue>,
    ) -> Option<RemoteCall> {
        let text = |key: &str| match attribute(key)? {
            AttributeValue::String(value) if !value.trim().is_empty() => Some(value),
            _ => None,
        };
        let count = |key: &str| match attribute(key)? {
            AttributeValue::Int(value) => u64::try_from(value).ok(),
            AttributeValue::Float(value)
                if value.is_finite() && value >= 0.0 && value.fract() == 0.0 =>
            {
                Some(value as u64)
            }
            _ => None,
        };
        let operation = text("gen_ai.operation.name")?;
        if !MODEL_CALL_OPERATIONS.contains(&operation.as_str()) {
            return None;
        }
        if text("server.address").is_some_and(|address| is_this_machine(&address)) {
            return None;
        }
        Some(RemoteCall {
            operation,
            provider: text("gen_ai.provider.name").or_else(|| text("gen_ai.system")),
            model: text("gen_ai.response.model").or_else(|| text("gen_ai.request.model")),
            input_tokens: count("gen_ai.usage.input_tokens")
                .or_else(|| count("gen_ai.usage.prompt_tokens")),
            output_tokens: count("gen_ai.usage.output_tokens")
                .or_else(|| count("gen_ai.usage.completion_tokens")),
            estimate: None,
        })
    }
}

/// Whether a `server.address` names this machine: `localhost` (or a name under it), a
/// loopback or unspecified IP address.
fn is_this_machine(address: &str) -> bool {
    let host = address.trim().trim_start_matches('[').trim_end_matches(']');
    let host = host.to_ascii_lowercase();
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
}

/// The energy a remote model call is estimated to have cost where it ran: a range,
/// never a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteEstimate {
    /// The low end, kWh.
    pub low_kwh: f64,
    /// The high end, kWh.
    pub high_kwh: f64,
    /// Always [`ESTIMATED`].
    pub method: String,
    /// What made it: [`FACTOR_TABLE_ESTIMATOR`], or a library by name and version
    /// (`ecologits 0.11.3`).
    pub estimator: String,
    /// Where its factors come from (the table row's source, or the library's
    /// methodology).
    pub source: String,
}

impl RemoteEstimate {
    /// An estimate a caller's library made, checked: both ends finite with
    /// `0 <= low <= high`, and what made it and from what named. The problem in words
    /// otherwise.
    pub fn checked(
        low_kwh: f64,
        high_kwh: f64,
        estimator: String,
        source: String,
    ) -> Result<RemoteEstimate, String> {
        if !(low_kwh.is_finite() && high_kwh.is_finite() && 0.0 <= low_kwh && low_kwh <= high_kwh) {
            return Err(format!(
                "low_kwh {low_kwh} and high_kwh {high_kwh} must be finite with \
                 0 <= low_kwh <= high_kwh"
            ));
        }
        if estimator.trim().is_empty() || source.trim().is_empty() {
            return Err("estimator and source must name what made it and from what".into());
        }
        Ok(RemoteEstimate {
            low_kwh,
            high_kwh,
            method: ESTIMATED.to_owned(),
            estimator,
            source,
        })
    }
}

/// A span's end as a language binding hands it over, in JSON: the span's attributes
/// (`{"gen_ai.operation.name": "chat", …}`) and, when the caller's library made one,
/// an estimate (`{"low_kwh", "high_kwh", "estimator", "source"}`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpanEnd {
    attributes: std::collections::BTreeMap<String, AttributeValue>,
    #[serde(default)]
    estimate: Option<BroughtEstimate>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BroughtEstimate {
    low_kwh: f64,
    high_kwh: f64,
    estimator: String,
    source: String,
}

/// The remote call a span's end describes, given as JSON:
/// `{"attributes": {…}, "estimate": {"low_kwh", "high_kwh", "estimator", "source"}}`,
/// the estimate optional. `None` when the span is no remote model call; the problem in
/// words when the JSON is malformed.
pub fn remote_call_from_span_end_json(text: &str) -> Result<Option<RemoteCall>, String> {
    let end: SpanEnd =
        serde_json::from_str(text).map_err(|error| format!("a span's end as JSON: {error}"))?;
    let Some(mut call) = RemoteCall::from_span_attributes(|key| end.attributes.get(key).cloned())
    else {
        return Ok(None);
    };
    if let Some(brought) = end.estimate {
        let estimate = RemoteEstimate::checked(
            brought.low_kwh,
            brought.high_kwh,
            brought.estimator,
            brought.source,
        )
        .map_err(|problem| format!("a span's end, estimate: {problem}"))?;
        call.estimate = Some(estimate);
    }
    Ok(Some(call))
}

/// The remote estimates of a run, summed: beside the measured totals, never in them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteEstimateTotals {
    /// Remote model calls seen.
    pub calls: u64,
    /// Of those, the calls with an estimate.
    pub estimated_calls: u64,
    /// Sum of the estimates' low ends, kWh.
    pub low_kwh: f64,
    /// Sum of the estimates' high ends, kWh.
    pub high_kwh: f64,
    /// The models whose calls had no estimate (`unknown` for a call naming none),
    /// sorted, each once.
    pub models_without_estimate: Vec<String>,
}

impl RemoteEstimateTotals {
    /// Counts `call` in.
    pub fn add(&mut self, call: &RemoteCall) {
        self.calls += 1;
        match &call.estimate {
            Some(estimate) => {
                self.estimated_calls += 1;
                self.low_kwh += estimate.low_kwh;
                self.high_kwh += estimate.high_kwh;
            }
            None => {
                let model = call.model.as_deref().unwrap_or("unknown");
                if let Err(position) = self
                    .models_without_estimate
                    .binary_search_by(|known| known.as_str().cmp(model))
                {
                    self.models_without_estimate
                        .insert(position, model.to_owned());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(model: &str, estimate: Option<(f64, f64)>) -> RemoteCall {
        RemoteCall {
            operation: "chat".into(),
            provider: Some("openai".into()),
            model: Some(model.into()),
            input_tokens: Some(10),
            output_tokens: Some(20),
            estimate: estimate.map(|(low_kwh, high_kwh)| RemoteEstimate {
                low_kwh,
                high_kwh,
                method: ESTIMATED.into(),
                estimator: FACTOR_TABLE_ESTIMATOR.into(),
                source: "test".into(),
            }),
        }
    }

    fn span(pairs: &[(&str, AttributeValue)]) -> Option<RemoteCall> {
        let attributes: std::collections::BTreeMap<String, AttributeValue> = pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect();
        RemoteCall::from_span_attributes(|key| attributes.get(key).cloned())
    }

    fn text(value: &str) -> AttributeValue {
        AttributeValue::String(value.into())
    }

    #[test]
    fn a_model_call_span_gives_its_provider_model_and_token_counts() {
        let call = span(&[
            ("gen_ai.operation.name", text("chat")),
            ("gen_ai.system", text("openai")),
            ("gen_ai.request.model", text("gpt-4o")),
            ("gen_ai.response.model", text("gpt-4o-2024-08-06")),
            ("gen_ai.usage.input_tokens", AttributeValue::Int(12)),
            ("gen_ai.usage.output_tokens", AttributeValue::Float(30.0)),
            ("server.address", text("api.openai.com")),
        ])
        .unwrap();
        assert_eq!(call.operation, "chat");
        assert_eq!(call.provider.as_deref(), Some("openai"));
        assert_eq!(call.model.as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(
            (call.input_tokens, call.output_tokens),
            (Some(12), Some(30))
        );
        // The older names, where the current ones are absent.
        let older = span(&[
            ("gen_ai.operation.name", text("text_completion")),
            ("gen_ai.request.model", text("m")),
            ("gen_ai.usage.prompt_tokens", AttributeValue::Int(5)),
            ("gen_ai.usage.completion_tokens", AttributeValue::Int(6)),
        ])
        .unwrap();
        assert_eq!(older.model.as_deref(), Some("m"));
        assert_eq!(
            (older.input_tokens, older.output_tokens),
            (Some(5), Some(6))
        );
    }

    #[test]
    fn a_local_server_a_step_that_is_no_model_call_and_bad_counts_give_no_remote_call() {
        for local in [
            "localhost",
            "127.0.0.1",
            "::1",
            "[::1]",
            "0.0.0.0",
            "vllm.localhost",
        ] {
            let call = span(&[
                ("gen_ai.operation.name", text("chat")),
                ("server.address", text(local)),
            ]);
            assert_eq!(call, None, "{local}");
        }
        assert_eq!(
            span(&[("gen_ai.operation.name", text("execute_tool"))]),
            None
        );
        assert_eq!(span(&[("gen_ai.request.model", text("m"))]), None);
        let negative = span(&[
            ("gen_ai.operation.name", text("embeddings")),
            ("gen_ai.usage.input_tokens", AttributeValue::Int(-3)),
            ("gen_ai.usage.output_tokens", AttributeValue::Float(2.5)),
        ])
        .unwrap();
        assert_eq!(
            (negative.input_tokens, negative.output_tokens),
            (None, None)
        );
    }

    #[test]
    fn a_bindings_span_end_in_json_gives_the_call_and_the_estimate_it_brought() {
        let call = remote_call_from_span_end_json(
            r#"{"attributes": {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                "gen_ai.usage.output_tokens": 7},
                "estimate": {"low_kwh": 1e-6, "high_kwh": 2e-6, "estimator": "ecologits 0.11.3",
                "source": "EcoLogits"}}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(call.output_tokens, Some(7));
        let estimate = call.estimate.unwrap();
        assert_eq!((estimate.low_kwh, estimate.high_kwh), (1e-6, 2e-6));
        assert_eq!(estimate.method, ESTIMATED);
        let tool = r#"{"attributes": {"gen_ai.operation.name": "execute_tool"}}"#;
        assert_eq!(remote_call_from_span_end_json(tool), Ok(None));
        let backwards = r#"{"attributes": {"gen_ai.operation.name": "chat"},
            "estimate": {"low_kwh": 2, "high_kwh": 1, "estimator": "e", "source": "s"}}"#;
        let problem = remote_call_from_span_end_json(backwards).unwrap_err();
        assert!(problem.contains("low_kwh 2 and high_kwh 1"), "{problem}");
        assert!(remote_call_from_span_end_json("{").is_err());
    }

    #[test]
    fn totals_add_the_ranges_and_name_each_model_without_an_estimate_once() {
        let mut totals = RemoteEstimateTotals::default();
        totals.add(&call("a", Some((1.0, 2.0))));
        totals.add(&call("zeta", None));
        totals.add(&call("b", Some((0.5, 4.0))));
        totals.add(&call("alpha", None));
        totals.add(&call("zeta", None));
        assert_eq!(totals.calls, 5);
        assert_eq!(totals.estimated_calls, 2);
        assert_eq!((totals.low_kwh, totals.high_kwh), (1.5, 6.0));
        assert_eq!(totals.models_without_estimate, ["alpha", "zeta"]);
    }
}

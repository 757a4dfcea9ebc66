//! The remote estimate of a model call served by another machine, from the factor
//! table: its token counts times the energy per 1,000 tokens of its model's row, low
//! and high. A pure transform: the call and the table in, the estimate out.

use wattline_config::remote_models::{RemoteModelFactor, remote_model_factor};
use wattline_model::remote_call::{ESTIMATED, FACTOR_TABLE_ESTIMATOR, RemoteCall, RemoteEstimate};

/// `call` with its estimate: the one it brought (a caller's library made it), else
/// the factor table's, from the first of `configured` rows covering its model and then
/// the shipped rows. None when it names no model, counts no tokens, or no row covers
/// its model. A missing count (an embedding's output) counts as none.
pub fn with_estimate(mut call: RemoteCall, configured: &[RemoteModelFactor]) -> RemoteCall {
    if call.estimate.is_none() {
        call.estimate = factor_table_estimate(&call, configured);
    }
    call
}

fn factor_table_estimate(
    call: &RemoteCall,
    configured: &[RemoteModelFactor],
) -> Option<RemoteEstimate> {
    if call.input_tokens.is_none() && call.output_tokens.is_none() {
        return None;
    }
    let row = remote_model_factor(configured, call.model.as_deref()?)?;
    let thousands = |tokens: Option<u64>| tokens.unwrap_or(0) as f64 / 1000.0;
    let (input, output) = (thousands(call.input_tokens), thousands(call.output_tokens));
    let watt_hours = |bound: usize| {
        input * row.input_wh_per_1k_tokens[bound] + output * row.output_wh_per_1k_tokens[bound]
    };
    Some(RemoteEstimate {
        low_kwh: watt_hours(0) / 1000.0,
        high_kwh: watt_hours(1) / 1000.0,
        method: ESTIMATED.to_owned(),
        estimator: FACTOR_TABLE_ESTIMATOR.to_owned(),
        source: row.source.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<RemoteModelFactor> {
        vec![RemoteModelFactor {
            provider: "example".into(),
            models: vec!["model-a".into()],
            output_wh_per_1k_tokens: [0.4, 2.0],
            input_wh_per_1k_tokens: [0.02, 0.1],
            source: "a row for the test".into(),
        }]
    }

    fn call(model: Option<&str>, input: Option<u64>, output: Option<u64>) -> RemoteCall {
        RemoteCall {
            operation: "chat".into(),
            provider: Some("example".into()),
            model: model.map(str::to_owned),
            input_tokens: input,
            output_tokens: output,
            estimate: None,
        }
    }

    #[test]
    fn the_estimate_is_the_tokens_times_the_rows_factors_low_and_high() {
        // 1,500 input and 250 output tokens: low 1.5·0.02 + 0.25·0.4 = 0.13 Wh,
        // high 1.5·0.1 + 0.25·2.0 = 0.65 Wh.
        let estimate = with_estimate(
            call(Some("model-a-2025-01-01"), Some(1500), Some(250)),
            &table(),
        )
        .estimate
        .unwrap();
        assert!((estimate.low_kwh - 0.13e-3).abs() < 1e-15, "{estimate:?}");
        assert!((estimate.high_kwh - 0.65e-3).abs() < 1e-15, "{estimate:?}");
        assert_eq!(estimate.method, "estimated");
        assert_eq!(estimate.estimator, "factor-table");
        assert_eq!(estimate.source, "a row for the test");
    }

    #[test]
    fn an_embedding_with_input_tokens_only_counts_those() {
        let estimate = with_estimate(call(Some("model-a"), Some(2000), None), &table())
            .estimate
            .unwrap();
        assert!((estimate.low_kwh - 0.04e-3).abs() < 1e-15);
        assert!((estimate.high_kwh - 0.2e-3).abs() < 1e-15);
    }

    #[test]
    fn no_estimate_for_an_unknown_model_no_model_or_no_token_counts() {
        assert_eq!(
            with_estimate(call(Some("model-b"), Some(1), Some(1)), &table()).estimate,
            None
        );
        assert_eq!(
            with_estimate(call(None, Some(1), Some(1)), &table()).estimate,
            None
        );
        assert_eq!(
            with_estimate(call(Some("model-a"), None, None), &table()).estimate,
            None
        );
    }

    #[test]
    fn an_estimate_the_call_brought_is_kept() {
        let mut brought = call(Some("model-a"), Some(1000), Some(1000));
        let theirs = RemoteEstimate {
            low_kwh: 1.0,
            high_kwh: 2.0,
            method: ESTIMATED.into(),
            estimator: "ecologits 0.11.3".into(),
            source: "EcoLogits".into(),
        };
        brought.estimate = Some(theirs.clone());
        assert_eq!(with_estimate(brought, &table()).estimate, Some(theirs));
    }
}

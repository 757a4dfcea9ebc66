//! The `nemo.relay.metric_measurements` v1 validator: one rejection per rule, the
//! limits themselves accepted, unknown fields rejected when parsing.

mod support;

use serde_json::json;
use support::{gauge_f64, resource_measurements};
use wattline_exporters::{parse_metric_measurements, validate_metric_measurements};
use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
};

fn one(measurement: MetricMeasurement) -> MetricMeasurements {
    MetricMeasurements {
        measurements: vec![measurement],
    }
}

fn rejected(measurement: MetricMeasurement) -> String {
    validate_metric_measurements(&one(measurement)).expect_err("must be rejected")
}

fn base() -> MetricMeasurement {
    gauge_f64("gen_ai.gpu.power", 100.0, "W", &[("gpu_id", "GPU-0")])
}

#[test]
fn a_resource_mark_validates() {
    validate_metric_measurements(&resource_measurements(1, 2.0)).unwrap();
    validate_metric_measurements(&MetricMeasurements::default()).unwrap();
}

#[test]
fn names_must_be_1_to_255_bytes() {
    let mut m = base();
    m.name = String::new();
    assert!(rejected(m).contains("name must be 1..=255 bytes (got 0)"));
    let mut m = base();
    m.name = format!("a{}", "b".repeat(255));
    assert!(rejected(m).contains("(got 256)"));
    let mut m = base();
    m.name = format!("a{}", "b".repeat(254));
    validate_metric_measurements(&one(m)).unwrap();
}

#[test]
fn names_must_start_with_a_letter() {
    for name in ["1gpu", "_gpu", ".gpu", "/gpu"] {
        let mut m = base();
        m.name = name.into();
        let reason = rejected(m);
        assert!(
            reason.contains("must start with an ASCII letter"),
            "{name}: {reason}"
        );
    }
}

#[test]
fn names_allow_only_letters_digits_and_underscore_dot_dash_slash() {
    for name in ["gpu power", "gpu:power", "gpu\u{e9}", "gpu*"] {
        let mut m = base();
        m.name = name.into();
        assert!(
            rejected(m).contains("only letters, digits and _ . - / are allowed"),
            "{name}"
        );
    }
    let mut m = base();
    m.name = "Gpu_0.power-draw/total".into();
    validate_metric_measurements(&one(m)).unwrap();
}

#[test]
fn units_must_be_ascii_and_at_most_63_bytes() {
    let mut m = base();
    m.unit = Some("\u{b0}C".into());
    assert!(rejected(m).contains("must be ASCII"));
    let mut m = base();
    m.unit = Some("u".repeat(64));
    assert!(rejected(m).contains("at most 63 bytes (got 64)"));
    let mut m = base();
    m.unit = Some("u".repeat(63));
    validate_metric_measurements(&one(m)).unwrap();
}

#[test]
fn u64_values_must_fit_in_i64() {
    let mut m = base();
    m.value_type = MetricValueType::U64;
    m.value = MetricValue::U64(i64::MAX as u64 + 1);
    assert!(rejected(m).contains("is above i64::MAX"));
    let mut m = base();
    m.value_type = MetricValueType::U64;
    m.value = MetricValue::U64(i64::MAX as u64);
    validate_metric_measurements(&one(m)).unwrap();
}

#[test]
fn value_must_match_value_type_and_be_finite() {
    let mut m = base();
    m.value = MetricValue::I64(3);
    assert!(rejected(m).contains("value_type is f64 but the value is i64"));
    let mut m = base();
    m.value = MetricValue::F64(f64::NAN);
    assert!(rejected(m).contains("not finite"));
}

#[test]
fn histogram_boundaries_at_most_64_strictly_increasing() {
    let mut m = base();
    m.kind = MetricKind::Histogram;
    m.boundaries = Some((0..65).map(f64::from).collect());
    assert!(rejected(m).contains("at most 64 histogram boundaries (got 65)"));
    let mut m = base();
    m.kind = MetricKind::Histogram;
    m.boundaries = Some(vec![1.0, 2.0, 2.0]);
    assert!(rejected(m).contains("strictly increasing (2 then 2)"));
    let mut m = base();
    m.kind = MetricKind::Histogram;
    m.boundaries = Some(vec![3.0, 1.0]);
    assert!(rejected(m).contains("strictly increasing"));
    let mut m = base();
    m.kind = MetricKind::Histogram;
    m.boundaries = Some((0..64).map(f64::from).collect());
    validate_metric_measurements(&one(m)).unwrap();
}

#[test]
fn attributes_are_primitives_or_non_empty_homogeneous_arrays() {
    let mut m = base();
    m.attributes
        .get_or_insert_default()
        .insert("devices".into(), AttributeValue::StringArray(vec![]));
    assert!(rejected(m).contains("an array must not be empty"));
    let mut m = base();
    m.attributes
        .get_or_insert_default()
        .insert("ratio".into(), AttributeValue::Float(f64::INFINITY));
    assert!(rejected(m).contains("not finite"));
    // Mixed arrays cannot even be read.
    let data = json!({"measurements": [{
        "name": "a", "kind": "gauge", "value_type": "u64", "value": 1,
        "unit": null, "description": null, "boundaries": null,
        "attributes": {"mixed": ["a", 1]}
    }]});
    assert!(parse_metric_measurements(&data).is_err());
}

#[test]
fn one_name_keeps_one_kind_unit_and_value_type_case_insensitively() {
    let first = base();
    let mut other_kind = base();
    other_kind.kind = MetricKind::Counter;
    let mut other_unit = base();
    other_unit.name = "GEN_AI.GPU.POWER".into();
    other_unit.unit = Some("kW".into());
    let mut other_type = base();
    other_type.value_type = MetricValueType::I64;
    other_type.value = MetricValue::I64(1);
    for second in [other_kind, other_unit, other_type] {
        let data = MetricMeasurements {
            measurements: vec![first.clone(), second],
        };
        let reason = validate_metric_measurements(&data).unwrap_err();
        assert!(
            reason.starts_with("measurements[1]: name") && reason.contains("was measurements[0]"),
            "{reason}"
        );
    }
    // The same instrument twice (two GPUs) is fine.
    let mut second_gpu = base();
    second_gpu.attributes = support::attrs(&[("gpu_id", "GPU-1")]);
    validate_metric_measurements(&MetricMeasurements {
        measurements: vec![first, second_gpu],
    })
    .unwrap();
}

#[test]
fn parsing_rejects_unknown_fields_and_kinds() {
    let ok = json!({"measurements": [{
        "name": "a", "kind": "gauge", "value_type": "f64", "value": 2,
        "unit": "W", "description": null, "attributes": null, "boundaries": null
    }]});
    let parsed = parse_metric_measurements(&ok).unwrap();
    assert_eq!(
        parsed.measurements[0].value,
        MetricValue::F64(2.0),
        "integer JSON for f64"
    );

    let mut extra = ok.clone();
    extra["measurements"][0]["colour"] = json!("red");
    assert!(
        parse_metric_measurements(&extra)
            .unwrap_err()
            .contains("unknown field `colour`")
    );
    let mut top = ok.clone();
    top["version"] = json!(1);
    assert!(
        parse_metric_measurements(&top)
            .unwrap_err()
            .contains("unknown field `version`")
    );
    let mut kind = ok.clone();
    kind["measurements"][0]["kind"] = json!("summary");
    assert!(
        parse_metric_measurements(&kind)
            .unwrap_err()
            .contains("unknown variant `summary`")
    );
    let mut negative = ok;
    negative["measurements"][0]["value_type"] = json!("u64");
    negative["measurements"][0]["value"] = json!(-1);
    assert!(
        parse_metric_measurements(&negative)
            .unwrap_err()
            .contains("value_type is u64")
    );
}

//! The spec's example snapshot (CPU only) deserializes and re-serializes to the same
//! JSON, and the model keeps `null`, integers and decimals apart.

use wattline_config::units::{DurationUnit, MeasurementValue};
use wattline_model::snapshot::{MeasurementScope, Snapshot};

const SPEC_EXAMPLE: &str = include_str!("golden/spec_cpu_only_snapshot.json");

#[test]
fn spec_example_round_trips_to_the_same_json() {
    let snapshot: Snapshot = serde_json::from_str(SPEC_EXAMPLE).unwrap();
    assert_eq!(snapshot.measurement_scope, MeasurementScope::ProcessTree);
    let cpu = snapshot.cpu.as_ref().unwrap();
    assert_eq!(cpu.user_time.unwrap().value, MeasurementValue::Integer(120));
    assert_eq!(cpu.user_time.unwrap().unit, DurationUnit::Milliseconds);
    assert!(cpu.consumption_rate.is_none());
    assert!(snapshot.memory.is_none());
    let written: serde_json::Value = serde_json::to_value(&snapshot).unwrap();
    let expected: serde_json::Value = serde_json::from_str(SPEC_EXAMPLE).unwrap();
    assert_eq!(written, expected);
    // Same bytes too, so field order and the `Z` timestamp match the spec.
    // (The spec lists `field_sampled_processes` keys in a different order than a
    // sorted map writes them; compare everything else textually.)
    let text = serde_json::to_string(&snapshot).unwrap();
    assert!(text.starts_with("{\"timestamp\":\"2026-09-29T14:30:00Z\",\"operating_system\":\"linux\",\"measurement_scope\":\"process_tree\",\"process_sampling\":"));
    assert!(text.ends_with(
        ",\"memory\":null,\"process\":null,\"disk\":null,\"gpu\":null,\"network\":null}"
    ));
}

#[test]
fn integers_and_decimals_stay_distinct() {
    let text = SPEC_EXAMPLE.replace("{\"value\":30,", "{\"value\":30.5,");
    let snapshot: Snapshot = serde_json::from_str(&text).unwrap();
    let cpu = snapshot.cpu.unwrap();
    assert_eq!(
        cpu.system_time.unwrap().value,
        MeasurementValue::Decimal(30.5)
    );
    assert_eq!(cpu.user_time.unwrap().value, MeasurementValue::Integer(120));
}

#[test]
fn a_wrong_unit_for_the_field_is_rejected() {
    let text = SPEC_EXAMPLE.replacen("\"unit\":\"milliseconds\"", "\"unit\":\"bytes\"", 1);
    assert!(serde_json::from_str::<Snapshot>(&text).is_err());
}

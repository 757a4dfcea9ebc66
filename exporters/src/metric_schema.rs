//! The rules of the `nemo.relay.metric_measurements` v1 schema: a validator for a whole
//! mark's data (all or nothing) and a parser that reads it back from JSON.

use std::collections::HashMap;

use wattline_model::metric_measurements::{
    AttributeValue, MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
};

/// Longest metric name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// Longest unit, in bytes.
pub const MAX_UNIT_BYTES: usize = 63;
/// Most histogram boundaries.
pub const MAX_BOUNDARIES: usize = 64;

/// Checks a metric name: 1–255 ASCII bytes, a letter first, then only
/// `[A-Za-z0-9_.-/]`.
pub fn check_metric_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "name must be 1..={MAX_NAME_BYTES} bytes (got {})",
            name.len()
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("name {name:?} must start with an ASCII letter"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if let Some(bad) = name.chars().find(|c| !allowed(*c)) {
        return Err(format!(
            "name {name:?} holds {bad:?}; only letters, digits and _ . - / are allowed"
        ));
    }
    Ok(())
}

/// Checks a unit: ASCII, at most 63 bytes.
pub fn check_unit(unit: &str) -> Result<(), String> {
    if !unit.is_ascii() {
        return Err(format!("unit {unit:?} must be ASCII"));
    }
    if unit.len() > MAX_UNIT_BYTES {
        return Err(format!(
            "unit must be at most {MAX_UNIT_BYTES} bytes (got {})",
            unit.len()
        ));
    }
    Ok(())
}

/// Checks one measurement on its own (the per-name consistency of a mark is checked by
/// [`validate_metric_measurements`]).
pub fn check_measurement(measurement: &MetricMeasurement) -> Result<(), String> {
    check_metric_name(&measurement.name)?;
    if let Some(unit) = &measurement.unit {
        check_unit(unit)?;
    }
    if measurement.value.value_type() != measurement.value_type {
        return Err(format!(
            "value_type is {} but the value is {}",
            type_name(measurement.value_type),
            type_name(measurement.value.value_type())
        ));
    }
    match measurement.value {
        MetricValue::U64(value) if value > i64::MAX as u64 => {
            return Err(format!("u64 value {value} is above i64::MAX"));
        }
        MetricValue::F64(value) if !value.is_finite() => {
            return Err(format!("f64 value {value} is not finite"));
        }
        _ => {}
    }
    if let Some(boundaries) = &measurement.boundaries {
        check_boundaries(boundaries)?;
    }
    if let Some(attributes) = &measurement.attributes {
        for (key, value) in attributes {
            check_attribute(key, value)?;
        }
    }
    Ok(())
}

fn check_boundaries(boundaries: &[f64]) -> Result<(), String> {
    if boundaries.len() > MAX_BOUNDARIES {
        return Err(format!(
            "at most {MAX_BOUNDARIES} histogram boundaries (got {})",
            boundaries.len()
        ));
    }
    if let Some(bad) = boundaries.iter().find(|b| !b.is_finite()) {
        return Err(format!("histogram boundary {bad} is not finite"));
    }
    if let Some(pair) = boundaries.windows(2).find(|pair| pair[0] >= pair[1]) {
        return Err(format!(
            "histogram boundaries must be strictly increasing ({} then {})",
            pair[0], pair[1]
        ));
    }
    Ok(())
}

fn check_attribute(key: &str, value: &AttributeValue) -> Result<(), String> {
    if key.is_empty() {
        return Err("attribute names must not be empty".into());
    }
    match value {
        AttributeValue::Float(value) if !value.is_finite() => {
            Err(format!("attribute {key:?}: float {value} is not finite"))
        }
        AttributeValue::StringArray(values) if values.is_empty() => {
            Err(format!("attribute {key:?}: an array must not be empty"))
        }
        _ => Ok(()),
    }
}

fn type_name(value_type: MetricValueType) -> &'static str {
    match value_type {
        MetricValueType::U64 => "u64",
        MetricValueType::I64 => "i64",
        MetricValueType::F64 => "f64",
    }
}

/// Validates a whole mark's data: every measurement's own rules, and one kind, unit and
/// value type per name (names compared case-insensitively). All or nothing: the first
/// broken rule is returned as `measurements[i]: rule`.
///
/// ```
/// use wattline_model::metric_measurements::{
///     MetricKind, MetricMeasurement, MetricMeasurements, MetricValue, MetricValueType,
/// };
/// use wattline_exporters::validate_metric_measurements;
///
/// let power = MetricMeasurement {
///     name: "gen_ai.gpu.power".into(),
///     kind: MetricKind::Gauge,
///     value_type: MetricValueType::F64,
///     value: MetricValue::F64(312.5),
///     unit: Some("W".into()),
///     description: None,
///     attributes: None,
///     boundaries: None,
/// };
/// let mut data = MetricMeasurements { measurements: vec![power.clone()] };
/// assert_eq!(validate_metric_measurements(&data), Ok(()));
///
/// // The same name again with another unit breaks "one name, one unit".
/// data.measurements.push(MetricMeasurement { unit: Some("kW".into()), ..power });
/// let reason = validate_metric_measurements(&data).unwrap_err();
/// assert!(reason.starts_with("measurements[1]: name \"gen_ai.gpu.power\""));
/// ```
pub fn validate_metric_measurements(data: &MetricMeasurements) -> Result<(), String> {
    let mut seen: HashMap<String, (usize, MetricKind, Option<&str>, MetricValueType)> =
        HashMap::new();
    for (index, measurement) in data.measurements.iter().enumerate() {
        check_measurement(measurement).map_err(|rule| format!("measurements[{index}]: {rule}"))?;
        let identity = (
            measurement.kind,
            measurement.unit.as_deref(),
            measurement.value_type,
        );
        let key = measurement.name.to_ascii_lowercase();
        match seen.get(&key) {
            Some(&(first, kind, unit, value_type)) if (kind, unit, value_type) != identity => {
                return Err(format!(
                    "measurements[{index}]: name {:?} was measurements[{first}] with another kind, unit or value type",
                    measurement.name
                ));
            }
            Some(_) => {}
            None => {
                seen.insert(
                    key,
                    (index, measurement.kind, identity.1, measurement.value_type),
                );
            }
        }
    }
    Ok(())
}

/// Reads a mark's `data` from JSON: unknown fields are rejected, a JSON integer is
/// accepted where `value_type` says `f64` (and a non-negative one where it says `i64`),
/// then the whole mark is validated.
pub fn parse_metric_measurements(data: &serde_json::Value) -> Result<MetricMeasurements, String> {
    let mut parsed: MetricMeasurements =
        serde_json::from_value(data.clone()).map_err(|error| error.to_string())?;
    for measurement in &mut parsed.measurements {
        measurement.value = match (measurement.value_type, measurement.value) {
            (MetricValueType::F64, MetricValue::U64(value)) => MetricValue::F64(value as f64),
            (MetricValueType::F64, MetricValue::I64(value)) => MetricValue::F64(value as f64),
            (MetricValueType::I64, MetricValue::U64(value)) => i64::try_from(value)
                .map(MetricValue::I64)
                .unwrap_or(measurement.value),
            (_, value) => value,
        };
    }
    validate_metric_measurements(&parsed)?;
    Ok(parsed)
}

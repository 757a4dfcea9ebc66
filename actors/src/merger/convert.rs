//! Unit conversion from base-unit readings to snapshot categories: the only place
//! output units are applied.

use wattline_config::resource_metrics::CpuUnits;
use wattline_config::units::{CountUnit, CpuUnit, DurationUnit, MeasurementValue};

use crate::readings::{CpuReading, LimitEventReading};
use crate::snapshot::{CpuMetrics, LimitEvent, Measurement};

/// A duration in microseconds, in `unit`.
pub fn duration(
    microseconds: Option<u64>,
    unit: DurationUnit,
) -> Option<Measurement<DurationUnit>> {
    let value = unit.from_microseconds(MeasurementValue::Integer(microseconds?))?;
    Some(Measurement::new(value, unit))
}

/// An amount of CPU in logical processors, in `unit`.
pub fn cpu_amount(logical_processors: Option<f64>, unit: CpuUnit) -> Option<Measurement<CpuUnit>> {
    let value = unit.from_logical_processors(MeasurementValue::Decimal(logical_processors?))?;
    Some(Measurement::new(value, unit))
}

/// A count in its fixed unit.
pub fn count(value: Option<u64>, unit: CountUnit) -> Option<Measurement<CountUnit>> {
    Some(Measurement::new(MeasurementValue::Integer(value?), unit))
}

/// Limit events, each count in `events`.
pub fn limit_events(readings: &[LimitEventReading]) -> Vec<LimitEvent> {
    readings
        .iter()
        .map(|reading| LimitEvent {
            resource: reading.resource,
            event: reading.event,
            count: count(reading.count, CountUnit::Events),
        })
        .collect()
}

/// The CPU category in output units.
pub fn cpu(reading: &CpuReading, units: &CpuUnits) -> CpuMetrics {
    CpuMetrics {
        user_time: duration(reading.user_microseconds, units.user_time),
        system_time: duration(reading.system_microseconds, units.system_time),
        total_time: duration(reading.total_microseconds, units.total_time),
        consumption_rate: cpu_amount(
            reading.consumption_logical_processors,
            units.consumption_rate,
        ),
        throttled_time: duration(reading.throttled_microseconds, units.throttled_time),
        effective_limit: cpu_amount(
            reading.effective_limit_logical_processors,
            units.effective_limit,
        ),
        some_pressure_stall_time: duration(
            reading.some_pressure_microseconds,
            units.some_pressure_stall_time,
        ),
        full_pressure_stall_time: duration(
            reading.full_pressure_microseconds,
            units.full_pressure_stall_time,
        ),
        limit_events: limit_events(&reading.limit_events),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MeasurementValue::{Decimal, Integer};

    #[test]
    fn cpu_times_convert_with_configured_units() {
        let reading = CpuReading {
            user_microseconds: Some(1_200_000),
            system_microseconds: Some(300_000),
            total_microseconds: Some(1_500_000),
            consumption_logical_processors: Some(0.25),
            ..CpuReading::default()
        };
        let units = CpuUnits {
            user_time: DurationUnit::Seconds,
            consumption_rate: CpuUnit::Millicores,
            ..CpuUnits::default()
        };
        let metrics = cpu(&reading, &units);
        assert_eq!(
            metrics.user_time,
            Some(Measurement::new(Decimal(1.2), DurationUnit::Seconds))
        );
        assert_eq!(
            metrics.system_time,
            Some(Measurement::new(Integer(300), DurationUnit::Milliseconds))
        );
        assert_eq!(
            metrics.total_time,
            Some(Measurement::new(Integer(1500), DurationUnit::Milliseconds))
        );
        assert_eq!(
            metrics.consumption_rate,
            Some(Measurement::new(Decimal(250.0), CpuUnit::Millicores))
        );
        assert_eq!(metrics.throttled_time, None);
        assert!(metrics.limit_events.is_empty());
    }

    #[test]
    fn non_finite_rate_is_null() {
        let reading = CpuReading {
            consumption_logical_processors: Some(f64::NAN),
            ..CpuReading::default()
        };
        assert_eq!(cpu(&reading, &CpuUnits::default()).consumption_rate, None);
    }
}

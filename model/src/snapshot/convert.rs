//! Unit conversion of base-unit readings, one helper per unit family: the only place
//! output units are applied. Each category's file (`super`) builds its record from
//! its reading with these.

use wattline_config::units::{
    BandwidthUnit, CapacityUnit, CountUnit, CpuUnit, DataUnit, DurationUnit, MeasurementValue,
    UtilizationUnit,
};

use crate::measurement::{LimitEvent, LimitEventReading, Measurement};

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

/// Memory in bytes, truncated to whole KiB, then in `unit`.
pub fn memory(bytes: Option<u64>, unit: CapacityUnit) -> Option<Measurement<CapacityUnit>> {
    Some(Measurement::new(unit.from_memory_bytes(bytes?)?, unit))
}

/// Filesystem capacity in bytes, in `unit` (no KiB truncation).
pub fn capacity(bytes: Option<u64>, unit: CapacityUnit) -> Option<Measurement<CapacityUnit>> {
    Some(Measurement::new(
        unit.from_bytes(MeasurementValue::Integer(bytes?))?,
        unit,
    ))
}

/// Transferred data in bytes, in `unit`.
pub fn data(bytes: Option<u64>, unit: DataUnit) -> Option<Measurement<DataUnit>> {
    Some(Measurement::new(
        unit.from_bytes(MeasurementValue::Integer(bytes?))?,
        unit,
    ))
}

/// A rate in bytes per second, in `unit`.
pub fn bandwidth(
    bytes_per_second: Option<f64>,
    unit: BandwidthUnit,
) -> Option<Measurement<BandwidthUnit>> {
    Some(Measurement::new(
        unit.from_bytes_per_second(MeasurementValue::Decimal(bytes_per_second?))?,
        unit,
    ))
}

/// A utilization in percent, in `unit`.
pub fn utilization(
    percent: Option<f64>,
    unit: UtilizationUnit,
) -> Option<Measurement<UtilizationUnit>> {
    Some(Measurement::new(
        unit.from_percent(MeasurementValue::Decimal(percent?))?,
        unit,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measurement::{LimitEventKind, LimitResource};

    #[test]
    fn a_count_keeps_its_number_and_unit_and_an_unknown_count_stays_null() {
        let measured = count(Some(7), CountUnit::Events).unwrap();
        assert_eq!(measured.value, MeasurementValue::Integer(7));
        assert_eq!(measured.unit, CountUnit::Events);
        assert_eq!(count(None, CountUnit::Events), None);
    }

    #[test]
    fn limit_events_keep_their_resource_kind_and_count_in_events() {
        let events = limit_events(&[
            LimitEventReading {
                resource: LimitResource::Cpu,
                event: LimitEventKind::Throttled,
                count: Some(12),
            },
            LimitEventReading {
                resource: LimitResource::Memory,
                event: LimitEventKind::OutOfMemory,
                count: None,
            },
        ]);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].resource, LimitResource::Cpu);
        assert_eq!(events[0].event, LimitEventKind::Throttled);
        assert_eq!(
            events[0].count,
            Some(Measurement::new(
                MeasurementValue::Integer(12),
                CountUnit::Events
            ))
        );
        assert_eq!(events[1].resource, LimitResource::Memory);
        assert_eq!(events[1].event, LimitEventKind::OutOfMemory);
        assert_eq!(events[1].count, None);
    }
}

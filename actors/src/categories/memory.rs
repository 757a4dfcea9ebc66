//! The memory category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::resource_metrics::MemoryUnits;
use wattline_config::units::CountUnit;

use super::{CategoryDescriptor, rooted};
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::{count, duration, limit_events, memory};
use crate::readings::MemoryReading;
use crate::samplers::{CategoryReading, memory::MemorySampler};
use wattline_model::snapshot::MemoryMetrics;

/// The memory category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Memory,
    enabled: |config| config.memory.enabled,
    os_sampler: Some(|root, _| rooted(root, MemorySampler::new)),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Memory(reading) = reading {
            snapshot.memory = Some(memory_metrics(&reading, &units.memory));
        }
    },
};

/// The memory category in output units.
pub fn memory_metrics(reading: &MemoryReading, units: &MemoryUnits) -> MemoryMetrics {
    MemoryMetrics {
        system_used: memory(reading.system_used_bytes, units.system_used),
        system_total: memory(reading.system_total_bytes, units.system_total),
        system_available: memory(reading.system_available_bytes, units.system_available),
        resident: memory(reading.resident_bytes, units.resident),
        private: memory(reading.private_bytes, units.private),
        physical_footprint: None,
        virtual_memory: memory(reading.virtual_bytes, units.virtual_memory),
        peak_resident: memory(reading.peak_resident_bytes, units.peak_resident),
        limit: memory(reading.limit_bytes, units.limit),
        environment_accounted: memory(
            reading.environment_accounted_bytes,
            units.environment_accounted,
        ),
        some_pressure_stall_time: duration(
            reading.some_pressure_microseconds,
            units.some_pressure_stall_time,
        ),
        full_pressure_stall_time: duration(
            reading.full_pressure_microseconds,
            units.full_pressure_stall_time,
        ),
        out_of_memory_event_count: count(reading.out_of_memory_events, CountUnit::Events),
        limit_events: limit_events(&reading.limit_events),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merger::convert::capacity;
    use wattline_config::units::MeasurementValue::{Decimal, Integer};
    use wattline_config::units::*;
    use wattline_model::snapshot::*;

    #[test]
    fn memory_truncates_to_kibibytes_and_capacity_does_not() {
        let units = MemoryUnits::default();
        let reading = MemoryReading {
            resident_bytes: Some(10_000),
            system_total_bytes: Some(2048),
            ..MemoryReading::default()
        };
        let metrics = memory_metrics(&reading, &units);
        assert_eq!(
            metrics.resident,
            Some(Measurement::new(Integer(9), CapacityUnit::Kibibytes))
        );
        assert_eq!(
            metrics.system_total,
            Some(Measurement::new(Integer(2), CapacityUnit::Kibibytes))
        );
        assert_eq!(metrics.private, None);
        assert_eq!(
            capacity(Some(10_000), CapacityUnit::Kibibytes),
            Some(Measurement::new(Decimal(9.765625), CapacityUnit::Kibibytes))
        );
    }
}

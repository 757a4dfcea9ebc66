//! The CPU category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::resource_metrics::CpuUnits;

use super::{CategoryDescriptor, rooted};
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::{cpu_amount, duration, limit_events};
use crate::readings::CpuReading;
use crate::samplers::{CategoryReading, cpu::CpuSampler};
use wattline_model::snapshot::CpuMetrics;

/// The CPU category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Cpu,
    enabled: |config| config.cpu.enabled,
    os_sampler: Some(|root, _| rooted(root, CpuSampler::new)),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Cpu(reading) = reading {
            snapshot.cpu = Some(cpu(&reading, &units.cpu));
        }
    },
};

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
    use wattline_config::units::MeasurementValue::{Decimal, Integer};
    use wattline_config::units::*;
    use wattline_model::snapshot::*;

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

//! The CPU category: its base-unit reading (what the sampler reports), its snapshot
//! record in output units with the conversion between them, and the gauges a mark
//! carries for the record, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CpuUnit, DurationUnit};

use super::convert::{cpu_amount, duration, limit_events};
use super::{LimitEvent, Measurement, Snapshot};
use crate::marks::{CPU_TIME_RESOLUTION, Gauge, MarkBuilder, at, semconv_in, whole_base};
use crate::measurement::LimitEventReading;
use crate::semconv::{SemconvEquivalent, SemconvShape};
use wattline_config::resource_metrics::CpuUnits;

/// The CPU category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuMetrics {
    /// User-mode CPU time of the scope. Default unit milliseconds.
    pub user_time: Option<Measurement<DurationUnit>>,
    /// Kernel-mode CPU time of the scope.
    pub system_time: Option<Measurement<DurationUnit>>,
    /// User plus system time.
    pub total_time: Option<Measurement<DurationUnit>>,
    /// Average CPU use since the previous sample of the same series, in logical
    /// processors by default; `null` on a series' first sample.
    pub consumption_rate: Option<Measurement<CpuUnit>>,
    /// Time the environment was throttled (exclusive cgroup only).
    pub throttled_time: Option<Measurement<DurationUnit>>,
    /// CPU capacity available to the environment.
    pub effective_limit: Option<Measurement<CpuUnit>>,
    /// Time some work stalled on CPU.
    pub some_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Time all work stalled on CPU.
    pub full_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Supported cumulative CPU limit-event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// The CPU category's gauges.
const CPU_GAUGES: &[Gauge<CpuMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.cpu.user_time",
        description: "User CPU time of the measured scope",
        value: |cpu| at(&cpu.user_time, CPU_TIME_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: Some("process.cpu.time"),
            system: Some("system.cpu.time"),
            unit: "s",
            shape: SemconvShape::Total,
            attribute: Some(("cpu.mode", "user")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.system_time",
        description: "System CPU time of the measured scope",
        value: |cpu| at(&cpu.system_time, CPU_TIME_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: Some("process.cpu.time"),
            system: Some("system.cpu.time"),
            unit: "s",
            shape: SemconvShape::Total,
            attribute: Some(("cpu.mode", "system")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.cpu.total_time",
        description: "User plus system CPU time",
        value: |cpu| at(&cpu.total_time, CPU_TIME_RESOLUTION),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.cpu.consumption_rate",
        description: "Average CPU use since the previous poll",
        value: |cpu| whole_base(&cpu.consumption_rate),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.cpu.throttled_time",
        description: "Time the environment was throttled",
        value: |cpu| whole_base(&cpu.throttled_time),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.cpu.effective_limit",
        description: "CPU capacity available to the environment",
        value: |cpu| whole_base(&cpu.effective_limit),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.cpu.pressure.some_stall_time",
        description: "Time some work stalled on CPU",
        value: |cpu| whole_base(&cpu.some_pressure_stall_time),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.cpu.pressure.full_stall_time",
        description: "Time all work stalled on CPU",
        value: |cpu| whole_base(&cpu.full_pressure_stall_time),
        semconv: None,
    },
];

/// The CPU category's part of a mark.
pub fn cpu_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(cpu) = &snapshot.cpu {
        mark.gauges(CPU_GAUGES, cpu, &[]);
        mark.limit_events(&cpu.limit_events);
    }
}

/// The semantic-convention equivalent of the CPU gauge named `mark`, if any.
pub(super) fn cpu_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(CPU_GAUGES, mark)
}

/// The CPU category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuReading {
    /// User time, µs.
    pub user_microseconds: Option<u64>,
    /// System time, µs.
    pub system_microseconds: Option<u64>,
    /// User + system, µs.
    pub total_microseconds: Option<u64>,
    /// Logical processors used since the previous sample of the series.
    pub consumption_logical_processors: Option<f64>,
    /// Throttled time, µs.
    pub throttled_microseconds: Option<u64>,
    /// Effective CPU limit, logical processors.
    pub effective_limit_logical_processors: Option<f64>,
    /// Some-pressure stall, µs.
    pub some_pressure_microseconds: Option<u64>,
    /// Full-pressure stall, µs.
    pub full_pressure_microseconds: Option<u64>,
    /// CPU limit events.
    pub limit_events: Vec<LimitEventReading>,
}

/// The CPU category in output units.
pub fn cpu_metrics(reading: &CpuReading, units: &CpuUnits) -> CpuMetrics {
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
        let metrics = cpu_metrics(&reading, &units);
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
        assert_eq!(
            cpu_metrics(&reading, &CpuUnits::default()).consumption_rate,
            None
        );
    }
}

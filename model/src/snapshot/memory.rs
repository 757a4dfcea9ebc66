//! The memory category: its base-unit reading (what the sampler reports), its snapshot
//! record in output units with the conversion between them, and the gauges a mark
//! carries for the record, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CapacityUnit, CountUnit, DurationUnit};

use super::convert::{count, duration, limit_events, memory};
use super::{LimitEvent, Measurement, Snapshot};
use crate::marks::{Gauge, MarkBuilder, PROC_MEMORY_RESOLUTION, at, semconv_in, whole_base};
use crate::measurement::LimitEventReading;
use crate::semconv::{SemconvEquivalent, SemconvShape};
use wattline_config::resource_metrics::MemoryUnits;

/// The memory category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryMetrics {
    /// System memory in use. Default unit KiB.
    pub system_used: Option<Measurement<CapacityUnit>>,
    /// Total system memory.
    pub system_total: Option<Measurement<CapacityUnit>>,
    /// System memory available.
    pub system_available: Option<Measurement<CapacityUnit>>,
    /// Resident memory of the scope.
    pub resident: Option<Measurement<CapacityUnit>>,
    /// Private memory of the scope.
    pub private: Option<Measurement<CapacityUnit>>,
    /// macOS physical footprint.
    pub physical_footprint: Option<Measurement<CapacityUnit>>,
    /// Virtual address space.
    pub virtual_memory: Option<Measurement<CapacityUnit>>,
    /// Peak resident memory of one process; `null` for trees.
    pub peak_resident: Option<Measurement<CapacityUnit>>,
    /// Memory limit of the environment.
    pub limit: Option<Measurement<CapacityUnit>>,
    /// Memory charged to the environment.
    pub environment_accounted: Option<Measurement<CapacityUnit>>,
    /// Time some work stalled on memory.
    pub some_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Time all work stalled on memory.
    pub full_pressure_stall_time: Option<Measurement<DurationUnit>>,
    /// Cumulative OOM events.
    pub out_of_memory_event_count: Option<Measurement<CountUnit>>,
    /// Supported cumulative memory limit-event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// The memory category's gauges.
const MEMORY_GAUGES: &[Gauge<MemoryMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.memory.system.used",
        description: "System memory in use",
        value: |memory| at(&memory.system_used, PROC_MEMORY_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.memory.usage"),
            unit: "By",
            shape: SemconvShape::Level,
            attribute: Some(("system.memory.state", "used")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.memory.system.total",
        description: "Total system memory",
        value: |memory| at(&memory.system_total, PROC_MEMORY_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.memory.limit"),
            unit: "By",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.memory.system.available",
        description: "Available system memory",
        value: |memory| at(&memory.system_available, PROC_MEMORY_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.memory.linux.available"),
            unit: "By",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.memory.resident",
        description: "Resident memory of the measured scope",
        value: |memory| at(&memory.resident, PROC_MEMORY_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: Some("process.memory.usage"),
            system: None,
            unit: "By",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.memory.private",
        description: "Private memory of the measured scope",
        value: |memory| at(&memory.private, PROC_MEMORY_RESOLUTION),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.physical_footprint",
        description: "Physical footprint",
        value: |memory| whole_base(&memory.physical_footprint),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.virtual",
        description: "Virtual memory of the measured scope",
        value: |memory| at(&memory.virtual_memory, PROC_MEMORY_RESOLUTION),
        semconv: Some(SemconvEquivalent {
            process: Some("process.memory.virtual"),
            system: None,
            unit: "By",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.memory.peak_resident",
        description: "Peak resident memory of one process",
        value: |memory| at(&memory.peak_resident, PROC_MEMORY_RESOLUTION),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.limit",
        description: "Memory limit of the environment",
        value: |memory| whole_base(&memory.limit),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.environment_accounted",
        description: "Memory charged to the environment",
        value: |memory| whole_base(&memory.environment_accounted),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.pressure.some_stall_time",
        description: "Time some work stalled on memory",
        value: |memory| whole_base(&memory.some_pressure_stall_time),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.pressure.full_stall_time",
        description: "Time all work stalled on memory",
        value: |memory| whole_base(&memory.full_pressure_stall_time),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.memory.out_of_memory_event_count",
        description: "Cumulative out-of-memory events",
        value: |memory| whole_base(&memory.out_of_memory_event_count),
        semconv: None,
    },
];

/// The memory category's part of a mark.
pub fn memory_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(memory) = &snapshot.memory {
        mark.gauges(MEMORY_GAUGES, memory, &[]);
        mark.limit_events(&memory.limit_events);
    }
}

/// The semantic-convention equivalent of the memory gauge named `mark`, if any.
pub(super) fn memory_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(MEMORY_GAUGES, mark)
}

/// System-wide memory in base units: the part of [`MemoryReading`] the OS's memory
/// totals (`/proc/meminfo`) fill, so its reader returns it whole.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemMemoryReading {
    /// System memory in use, bytes.
    pub used_bytes: Option<u64>,
    /// Total system memory, bytes.
    pub total_bytes: Option<u64>,
    /// Available system memory, bytes.
    pub available_bytes: Option<u64>,
}

/// The memory category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MemoryReading {
    /// System-wide memory.
    pub system: SystemMemoryReading,
    /// Resident memory of the scope, bytes.
    pub resident_bytes: Option<u64>,
    /// Private memory of the scope, bytes.
    pub private_bytes: Option<u64>,
    /// Virtual memory of the scope, bytes.
    pub virtual_bytes: Option<u64>,
    /// Peak resident memory (one process), bytes.
    pub peak_resident_bytes: Option<u64>,
    /// Environment limit, bytes.
    pub limit_bytes: Option<u64>,
    /// Memory charged to the environment, bytes.
    pub environment_accounted_bytes: Option<u64>,
    /// Some-pressure stall, µs.
    pub some_pressure_microseconds: Option<u64>,
    /// Full-pressure stall, µs.
    pub full_pressure_microseconds: Option<u64>,
    /// OOM events.
    pub out_of_memory_events: Option<u64>,
    /// Memory limit events.
    pub limit_events: Vec<LimitEventReading>,
}

/// The memory category in output units.
pub fn memory_metrics(reading: &MemoryReading, units: &MemoryUnits) -> MemoryMetrics {
    let system = &reading.system;
    MemoryMetrics {
        system_used: memory(system.used_bytes, units.system_used),
        system_total: memory(system.total_bytes, units.system_total),
        system_available: memory(system.available_bytes, units.system_available),
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
    use super::super::convert::capacity;
    use super::*;
    use wattline_config::units::MeasurementValue::{Decimal, Integer};

    #[test]
    fn memory_truncates_to_kibibytes_and_capacity_does_not() {
        let units = MemoryUnits::default();
        let reading = MemoryReading {
            resident_bytes: Some(10_000),
            system: SystemMemoryReading {
                total_bytes: Some(2048),
                ..SystemMemoryReading::default()
            },
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

//! The memory category's snapshot records and the gauges a mark carries for
//! them, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CapacityUnit, CountUnit, DurationUnit};

use super::{LimitEvent, Measurement, Snapshot};
use crate::marks::{Gauge, MarkBuilder, PROC_MEMORY_RESOLUTION, at, semconv_in, whole_base};
use crate::semconv::{SemconvEquivalent, SemconvShape};

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

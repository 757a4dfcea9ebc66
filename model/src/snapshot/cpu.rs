//! The CPU category's snapshot records and the gauges a mark carries for
//! them, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{CpuUnit, DurationUnit};

use super::{LimitEvent, Measurement, Snapshot};
use crate::marks::{CPU_TIME_RESOLUTION, Gauge, MarkBuilder, at, semconv_in, whole_base};
use crate::semconv::{SemconvEquivalent, SemconvShape};

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

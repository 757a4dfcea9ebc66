//! The process category: its base-unit reading (what the sampler reports), its snapshot
//! record in output units with the conversion between them, and the gauges a mark
//! carries for the record, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::CountUnit;

use super::convert::{count, limit_events};
use super::{LimitEvent, Measurement, Snapshot};
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::measurement::LimitEventReading;
use crate::semconv::{SemconvEquivalent, SemconvShape};

/// The process category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessMetrics {
    /// Process IDs found when collection began.
    pub active_count: Option<Measurement<CountUnit>>,
    /// Live descendants, excluding the root.
    pub descendant_count: Option<Measurement<CountUnit>>,
    /// Threads across the scope.
    pub thread_count: Option<Measurement<CountUnit>>,
    /// Windows Job Object creations.
    pub lifetime_creation_count: Option<Measurement<CountUnit>>,
    /// Open file descriptors across the scope.
    pub open_file_descriptor_count: Option<Measurement<CountUnit>>,
    /// Windows kernel handles.
    pub windows_handle_count: Option<Measurement<CountUnit>>,
    /// Supported cumulative process-limit event counts.
    pub limit_events: Vec<LimitEvent>,
}

/// The process category's gauges.
const PROCESS_GAUGES: &[Gauge<ProcessMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.process.active_count",
        description: "Processes in the measured scope",
        value: |process| whole_base(&process.active_count),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.process.count"),
            unit: "{process}",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.process.descendant_count",
        description: "Live descendants of the root",
        value: |process| whole_base(&process.descendant_count),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.thread.count",
        description: "Threads in the measured scope",
        value: |process| whole_base(&process.thread_count),
        semconv: Some(SemconvEquivalent {
            process: Some("process.thread.count"),
            system: None,
            unit: "{thread}",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.process.lifetime_creation_count",
        description: "Processes created in the job",
        value: |process| whole_base(&process.lifetime_creation_count),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.process.open_file_descriptor_count",
        description: "Open file descriptors",
        value: |process| whole_base(&process.open_file_descriptor_count),
        semconv: Some(SemconvEquivalent {
            process: Some("process.unix.file_descriptor.count"),
            system: None,
            unit: "{file_descriptor}",
            shape: SemconvShape::Level,
            attribute: None,
        }),
    },
    Gauge {
        name: "nemo.relay.resource.process.windows_handle_count",
        description: "Windows kernel handles",
        value: |process| whole_base(&process.windows_handle_count),
        semconv: None,
    },
];

/// The process category's part of a mark.
pub fn process_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(process) = &snapshot.process {
        mark.gauges(PROCESS_GAUGES, process, &[]);
        mark.limit_events(&process.limit_events);
    }
}

/// The semantic-convention equivalent of the process gauge named `mark`, if any.
pub(super) fn process_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(PROCESS_GAUGES, mark)
}

/// The process category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessReading {
    /// Processes listed when collection began.
    pub active_count: Option<u64>,
    /// Live descendants excluding the root.
    pub descendant_count: Option<u64>,
    /// Threads.
    pub thread_count: Option<u64>,
    /// Open file descriptors.
    pub open_file_descriptor_count: Option<u64>,
    /// Process limit events.
    pub limit_events: Vec<LimitEventReading>,
}

/// The process category in output units.
pub fn process_metrics(reading: &ProcessReading) -> ProcessMetrics {
    ProcessMetrics {
        active_count: count(reading.active_count, CountUnit::Processes),
        descendant_count: count(reading.descendant_count, CountUnit::Processes),
        thread_count: count(reading.thread_count, CountUnit::Threads),
        lifetime_creation_count: None,
        open_file_descriptor_count: count(
            reading.open_file_descriptor_count,
            CountUnit::FileDescriptors,
        ),
        windows_handle_count: None,
        limit_events: limit_events(&reading.limit_events),
    }
}

//! The snapshot: one reading of every enabled category, in output units, exactly the
//! shape the spec defines (`null` for what could not be read, `[]` vs `null` as the
//! spec's "Arrays have separate empty and unavailable meanings").
//!
//! Each category's file holds its base-unit reading (what its sampler reports), its
//! record, the conversion from one to the other under the configured units
//! ([`convert`] holds the per-unit-family helpers) and its mark gauges, so a new field
//! of a category is one file here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub mod convert;
mod cpu;
mod disk;
mod gpu;
mod memory;
mod network;
mod process;

pub use cpu::{CpuMetrics, CpuReading, cpu_metrics};
pub use disk::{DiskMetrics, DiskReading, FilesystemMetrics, FilesystemReading, disk_metrics};
pub use gpu::{
    AcceleratorDeviceMetrics, AcceleratorProcessMetrics, AcceleratorVendor, GpuDeviceReading,
    GpuMetrics, GpuProcessReading, GpuReading, GpuSample, GpuVendor, gpu_metrics,
};
pub use memory::{MemoryMetrics, MemoryReading, SystemMemoryReading, memory_metrics};
pub use network::{
    NetworkInterfaceMetrics, NetworkMetrics, NetworkReading, NetworkTrafficMetrics, TrafficReading,
    network_metrics,
};
pub use process::{ProcessMetrics, ProcessReading, process_metrics};

use crate::category::SamplerCategory;
use crate::marks::{MarkBuilder, count};
pub use crate::measurement::{
    LimitEvent, LimitEventKind, LimitEventReading, LimitResource, Measurement,
};
use crate::metric_measurements::{AttributeValue, MetricMeasurements};
use crate::semconv::SemconvEquivalent;

/// One category's gauge tables, seen from outside the category: its part of a mark,
/// and the semantic-convention column of its rows.
struct CategoryGauges {
    marks: fn(&Snapshot, &mut MarkBuilder),
    semconv: fn(&str) -> Option<&'static SemconvEquivalent>,
}

/// The gauge tables of `category`.
fn category_gauges(category: SamplerCategory) -> CategoryGauges {
    match category {
        SamplerCategory::Cpu => CategoryGauges {
            marks: cpu::cpu_marks,
            semconv: cpu::cpu_semconv,
        },
        SamplerCategory::Memory => CategoryGauges {
            marks: memory::memory_marks,
            semconv: memory::memory_semconv,
        },
        SamplerCategory::Process => CategoryGauges {
            marks: process::process_marks,
            semconv: process::process_semconv,
        },
        SamplerCategory::Disk => CategoryGauges {
            marks: disk::disk_marks,
            semconv: disk::disk_semconv,
        },
        SamplerCategory::Gpu => CategoryGauges {
            marks: gpu::gpu_marks,
            semconv: gpu::gpu_semconv,
        },
        SamplerCategory::Network => CategoryGauges {
            marks: network::network_marks,
            semconv: network::network_semconv,
        },
    }
}

/// Every category's gauge tables, in the order its gauges appear in a mark.
fn every_category_gauges() -> impl Iterator<Item = CategoryGauges> {
    SamplerCategory::IN_SNAPSHOT_ORDER
        .into_iter()
        .map(category_gauges)
}

/// What the resource gauge named `mark` (`nemo.relay.resource.cpu.user_time`) becomes
/// under OpenTelemetry's `process.*` / `system.*` names: the semconv column of that
/// gauge's table row. `None` for a name no table holds, or a gauge without an
/// equivalent.
pub fn semconv_equivalent(mark: &str) -> Option<&'static SemconvEquivalent> {
    every_category_gauges().find_map(|category| (category.semconv)(mark))
}

/// The operating system the snapshot was taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatingSystem {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
    /// Windows.
    Windows,
    /// Anything else.
    Unsupported,
}

impl OperatingSystem {
    /// The system this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "linux") {
            OperatingSystem::Linux
        } else if cfg!(target_os = "macos") {
            OperatingSystem::Macos
        } else if cfg!(target_os = "windows") {
            OperatingSystem::Windows
        } else {
            OperatingSystem::Unsupported
        }
    }

    /// The snake_case name used in marks.
    pub fn name(self) -> &'static str {
        match self {
            OperatingSystem::Linux => "linux",
            OperatingSystem::Macos => "macos",
            OperatingSystem::Windows => "windows",
            OperatingSystem::Unsupported => "unsupported",
        }
    }
}

/// The scope a snapshot was collected for (never `runtime_default`: that is resolved
/// before collection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasurementScope {
    /// Every process the operating system shows.
    Global,
    /// One process without its children.
    ApplicationProcess,
    /// A root process and its live descendants.
    ProcessTree,
}

impl MeasurementScope {
    /// The snake_case name used in marks.
    pub fn name(self) -> &'static str {
        match self {
            MeasurementScope::Global => "global",
            MeasurementScope::ApplicationProcess => "application_process",
            MeasurementScope::ProcessTree => "process_tree",
        }
    }
}

/// One resource snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When collection finished, UTC.
    pub timestamp: DateTime<Utc>,
    /// The operating system.
    pub operating_system: OperatingSystem,
    /// The scope collected.
    pub measurement_scope: MeasurementScope,
    /// Coverage of the process sums; `null` when processes were not sampled or could
    /// not be listed.
    pub process_sampling: Option<ProcessSampling>,
    /// CPU category; `null` when disabled.
    pub cpu: Option<CpuMetrics>,
    /// Memory category; `null` when disabled.
    pub memory: Option<MemoryMetrics>,
    /// Process category; `null` when disabled.
    pub process: Option<ProcessMetrics>,
    /// Disk category; `null` when disabled.
    pub disk: Option<DiskMetrics>,
    /// GPU category; `null` when disabled.
    pub gpu: Option<GpuMetrics>,
    /// Network category; `null` when disabled.
    pub network: Option<NetworkMetrics>,
}

/// How many processes each process-summed field covers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessSampling {
    /// Processes listed when collection began.
    pub visible_processes: u64,
    /// Processes whose base query succeeded.
    pub sampled_processes: u64,
    /// Readable values per process-summed field, keyed by canonical path
    /// (`cpu.total_time`, as is in every language: data, not a field name); a missing
    /// key means the sum was not attempted.
    pub field_sampled_processes: BTreeMap<String, u64>,
}

/// The measurements of the resource mark for `snapshot`: the sample count, each
/// category's gauges in the snapshot's order (CPU, memory, process, disk, GPU, network), then the coverage of
/// the process sums.
pub fn resource_measurements(snapshot: &Snapshot) -> MetricMeasurements {
    let common = BTreeMap::from([
        (
            "nemo_relay.resource.operating_system".to_string(),
            AttributeValue::String(snapshot.operating_system.name().into()),
        ),
        (
            "nemo_relay.resource.measurement_scope".to_string(),
            AttributeValue::String(snapshot.measurement_scope.name().into()),
        ),
    ]);
    let mut mark = MarkBuilder::new(common);
    mark.push(
        "nemo.relay.resource.sample_count",
        count(1, "events"),
        "Resource metric samples collected in this poll",
        &[],
    );
    for category in every_category_gauges() {
        (category.marks)(snapshot, &mut mark);
    }
    if let Some(sampling) = &snapshot.process_sampling {
        mark.push(
            "nemo.relay.resource.process_sampling.visible_count",
            count(sampling.visible_processes, "processes"),
            "Processes listed when collection began",
            &[],
        );
        mark.push(
            "nemo.relay.resource.process_sampling.sampled_count",
            count(sampling.sampled_processes, "processes"),
            "Processes whose base query succeeded",
            &[],
        );
        for (field, sampled) in &sampling.field_sampled_processes {
            mark.push(
                "nemo.relay.resource.process_sampling.field_sampled_count",
                count(*sampled, "processes"),
                "Processes that supplied a process-summed field",
                &[(
                    "nemo_relay.resource.field",
                    AttributeValue::String(field.clone()),
                )],
            );
        }
    }
    mark.finish()
}

#[cfg(test)]
mod mark_tests;

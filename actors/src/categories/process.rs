//! The process category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::units::CountUnit;

use super::{CategoryDescriptor, rooted};
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::{count, limit_events};
use crate::readings::ProcessReading;
use crate::samplers::{CategoryReading, process::ProcessSampler};
use wattline_model::snapshot::ProcessMetrics;

/// The process category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Process,
    enabled: |config| config.process.enabled,
    os_sampler: Some(|root, _| rooted(root, ProcessSampler::new)),
    fill: |snapshot, reading, _| {
        if let CategoryReading::Process(reading) = reading {
            snapshot.process = Some(process_metrics(&reading));
        }
    },
};

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

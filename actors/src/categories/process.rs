//! The process category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::{CategoryDescriptor, rooted};
use crate::samplers::{CategoryReading, process::ProcessSampler};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::process_metrics;

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

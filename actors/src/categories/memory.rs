//! The memory category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::{CategoryDescriptor, factory};
use crate::samplers::{CategoryReading, memory::MemorySampler};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::memory_metrics;

/// The memory category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Memory,
    enabled: |config| config.memory.enabled,
    os_sampler: Some(|root, config| {
        let root = root.to_path_buf();
        let share = config.memory.private_max_cpu_share;
        factory(move || MemorySampler::new(root.clone(), share))
    }),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Memory(reading) = reading {
            snapshot.memory = Some(memory_metrics(&reading, &units.memory));
        }
    },
};

//! The CPU category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::{CategoryDescriptor, rooted};
use crate::samplers::{CategoryReading, cpu::CpuSampler};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::cpu_metrics;

/// The CPU category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Cpu,
    enabled: |config| config.cpu.enabled,
    os_sampler: Some(|root, _| rooted(root, CpuSampler::new)),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Cpu(reading) = reading {
            snapshot.cpu = Some(cpu_metrics(&reading, &units.cpu));
        }
    },
};

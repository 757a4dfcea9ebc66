//! The disk category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::{CategoryDescriptor, factory};
use crate::samplers::{CategoryReading, disk::DiskSampler};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::disk_metrics;

/// The disk category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Disk,
    enabled: |config| config.disk.enabled,
    os_sampler: Some(|root, config| {
        let root = root.to_path_buf();
        let (process_io, paths) = (config.disk.process_io, config.disk.filesystem_paths.clone());
        factory(move || DiskSampler::new(root.clone(), process_io, paths.clone()))
    }),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Disk(reading) = reading {
            snapshot.disk = Some(disk_metrics(&reading, &units.disk));
        }
    },
};

//! The disk category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::resource_metrics::DiskUnits;
use wattline_config::units::CountUnit;

use super::{CategoryDescriptor, factory};
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::{bandwidth, capacity, count, data};
use crate::readings::DiskReading;
use crate::samplers::{CategoryReading, disk::DiskSampler};
use wattline_model::snapshot::{DiskMetrics, FilesystemMetrics};

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

/// The disk category in output units.
pub fn disk_metrics(reading: &DiskReading, units: &DiskUnits) -> DiskMetrics {
    DiskMetrics {
        read_data: data(reading.read_bytes, units.read_data),
        write_data: data(reading.write_bytes, units.write_data),
        read_throughput: bandwidth(reading.read_bytes_per_second, units.read_throughput),
        write_throughput: bandwidth(reading.write_bytes_per_second, units.write_throughput),
        read_operations: count(reading.read_operations, CountUnit::Operations),
        write_operations: count(reading.write_operations, CountUnit::Operations),
        filesystems: reading
            .filesystems
            .iter()
            .map(|fs| FilesystemMetrics {
                path: fs.path.clone(),
                total_capacity: capacity(fs.total_bytes, units.filesystem_total_capacity),
                available_capacity: capacity(
                    fs.available_bytes,
                    units.filesystem_available_capacity,
                ),
                free_capacity: capacity(fs.free_bytes, units.filesystem_free_capacity),
            })
            .collect(),
    }
}

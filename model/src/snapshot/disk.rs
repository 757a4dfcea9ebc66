//! The disk and filesystem category: its base-unit reading (what the sampler reports), its snapshot
//! record in output units with the conversion between them, and the gauges a mark
//! carries for the record, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{BandwidthUnit, CapacityUnit, CountUnit, DataUnit};

use super::convert::{bandwidth, capacity, count, data};
use super::{Measurement, Snapshot};
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::metric_measurements::AttributeValue;
use crate::semconv::{SemconvEquivalent, SemconvShape};
use wattline_config::resource_metrics::DiskUnits;

/// Capacity of the filesystem holding one configured path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesystemMetrics {
    /// The configured path.
    pub path: String,
    /// Total capacity. Default unit bytes.
    pub total_capacity: Option<Measurement<CapacityUnit>>,
    /// Space available to the calling user.
    pub available_capacity: Option<Measurement<CapacityUnit>>,
    /// Free space including reserved blocks.
    pub free_capacity: Option<Measurement<CapacityUnit>>,
}

/// The disk category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiskMetrics {
    /// Storage bytes read by the scope.
    pub read_data: Option<Measurement<DataUnit>>,
    /// Storage bytes written by the scope.
    pub write_data: Option<Measurement<DataUnit>>,
    /// Read rate since the previous sample.
    pub read_throughput: Option<Measurement<BandwidthUnit>>,
    /// Write rate since the previous sample.
    pub write_throughput: Option<Measurement<BandwidthUnit>>,
    /// Read system calls.
    pub read_operations: Option<Measurement<CountUnit>>,
    /// Write system calls.
    pub write_operations: Option<Measurement<CountUnit>>,
    /// One entry per configured path; `[]` when none are configured.
    pub filesystems: Vec<FilesystemMetrics>,
}

/// The disk category's gauges.
const DISK_GAUGES: &[Gauge<DiskMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.disk.read_data",
        description: "Storage data read by the measured scope",
        value: |disk| whole_base(&disk.read_data),
        semconv: Some(SemconvEquivalent {
            process: Some("process.disk.io"),
            system: Some("system.disk.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("disk.io.direction", "read")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.disk.write_data",
        description: "Storage data written by the measured scope",
        value: |disk| whole_base(&disk.write_data),
        semconv: Some(SemconvEquivalent {
            process: Some("process.disk.io"),
            system: Some("system.disk.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("disk.io.direction", "write")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.disk.read_throughput",
        description: "Read rate since the previous poll",
        value: |disk| whole_base(&disk.read_throughput),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.disk.write_throughput",
        description: "Write rate since the previous poll",
        value: |disk| whole_base(&disk.write_throughput),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.disk.read.operations",
        description: "Read operations",
        value: |disk| whole_base(&disk.read_operations),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.disk.write.operations",
        description: "Write operations",
        value: |disk| whole_base(&disk.write_operations),
        semconv: None,
    },
];

/// Each configured filesystem's gauges, under its path.
const FILESYSTEM_GAUGES: &[Gauge<FilesystemMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.total_capacity",
        description: "Filesystem capacity",
        value: |filesystem| whole_base(&filesystem.total_capacity),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.available_capacity",
        description: "Space available to the caller",
        value: |filesystem| whole_base(&filesystem.available_capacity),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.disk.filesystem.free_capacity",
        description: "Free space including reserved blocks",
        value: |filesystem| whole_base(&filesystem.free_capacity),
        semconv: None,
    },
];

/// The disk category's part of a mark.
pub fn disk_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(disk) = &snapshot.disk {
        mark.gauges(DISK_GAUGES, disk, &[]);
        for filesystem in &disk.filesystems {
            let path = [(
                "nemo_relay.resource.disk.filesystem_path",
                AttributeValue::String(filesystem.path.clone()),
            )];
            mark.gauges(FILESYSTEM_GAUGES, filesystem, &path);
        }
    }
}

/// The semantic-convention equivalent of the disk gauge named `mark`, if any.
pub(super) fn disk_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(DISK_GAUGES, mark).or_else(|| semconv_in(FILESYSTEM_GAUGES, mark))
}

/// Capacity of one configured path, bytes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilesystemReading {
    /// The configured path.
    pub path: String,
    /// Total, bytes.
    pub total_bytes: Option<u64>,
    /// Available to the caller, bytes.
    pub available_bytes: Option<u64>,
    /// Free including reserved, bytes.
    pub free_bytes: Option<u64>,
}

/// The disk category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DiskReading {
    /// Bytes read.
    pub read_bytes: Option<u64>,
    /// Bytes written.
    pub write_bytes: Option<u64>,
    /// Read rate, bytes per second.
    pub read_bytes_per_second: Option<f64>,
    /// Write rate, bytes per second.
    pub write_bytes_per_second: Option<f64>,
    /// Read system calls.
    pub read_operations: Option<u64>,
    /// Write system calls.
    pub write_operations: Option<u64>,
    /// Configured filesystems.
    pub filesystems: Vec<FilesystemReading>,
}

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

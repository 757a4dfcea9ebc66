//! The GPU category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::CategoryDescriptor;
use crate::samplers::CategoryReading;
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::gpu_metrics;

/// The GPU category's descriptor. Its sampler has no OS factory: the pipeline builds
/// it, since its source needs a runtime and feeds the energy stage.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Gpu,
    enabled: |config| config.gpu.enabled,
    os_sampler: None,
    fill: |snapshot, reading, units| {
        if let CategoryReading::Gpu(reading) = reading {
            snapshot.gpu = Some(gpu_metrics(&reading, &units.gpu));
        }
    },
};

//! The network category's descriptor: its sampler and where its reading goes. The
//! reading, its conversion to the snapshot record and the record's mark gauges are
//! data, beside each other in `wattline_model::snapshot`.

use super::{CategoryDescriptor, factory};
use crate::samplers::{CategoryReading, network::NetworkSampler};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::network_metrics;

/// The network category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Network,
    enabled: |config| config.network.enabled,
    os_sampler: Some(|root, config| {
        let root = root.to_path_buf();
        let interfaces = config.network.interfaces.clone();
        factory(move || NetworkSampler::new(root.clone(), interfaces.clone()))
    }),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Network(reading) = reading {
            snapshot.network = Some(network_metrics(
                &reading,
                &units.network.system,
                &units.network.interface,
            ));
        }
    },
};

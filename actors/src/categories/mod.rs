//! The resource categories, one descriptor each: the single list that sampler
//! spawning and snapshot assembly loop over.
//!
//! Each category is one file here holding its descriptor: which sampler reads it and
//! which model conversion turns its base-unit reading into its snapshot record. The
//! reading, the conversion, the record and its mark gauges are data, one file per
//! category in `wattline_model::snapshot`. A new category adds its reader, its
//! sampler, its variant in the model's `SamplerCategory`, a file here and its arm in
//! [`descriptor`], its model file and its config; the loops pick it up.

pub mod cpu;
pub mod disk;
pub mod gpu;
pub mod memory;
pub mod network;
pub mod process;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wattline_config::ResourceMetricsConfig;
use wattline_config::resource_metrics::UnitsConfig;

use crate::samplers::{CategoryReading, CategorySampler, SamplerFactory};
use wattline_model::category::SamplerCategory;
use wattline_model::snapshot::Snapshot;

/// What wattline knows of one category.
pub(crate) struct CategoryDescriptor {
    /// The category.
    pub category: SamplerCategory,
    /// Whether `config` turns it on.
    pub enabled: fn(&ResourceMetricsConfig) -> bool,
    /// Its OS sampler's factory over a root path. `None` for the GPU, whose sampler
    /// the pipeline builds: its source needs a runtime and feeds the energy stage.
    pub os_sampler: Option<fn(&Path, &ResourceMetricsConfig) -> SamplerFactory>,
    /// Fills the category's snapshot slot from its reading, in output units.
    pub fill: fn(&mut Snapshot, CategoryReading, &UnitsConfig),
}

pub(crate) fn factory<S: CategorySampler>(
    make: impl Fn() -> S + Send + Sync + 'static,
) -> SamplerFactory {
    Arc::new(move || Box::new(make()) as Box<dyn CategorySampler>)
}

/// The factory of a sampler that needs only the root path.
pub(crate) fn rooted<S: CategorySampler>(root: &Path, make: fn(PathBuf) -> S) -> SamplerFactory {
    let root = root.to_path_buf();
    factory(move || make(root.clone()))
}

/// The descriptor of `category`: the model's list of categories, each mapped here to
/// its file.
pub(crate) fn descriptor(category: SamplerCategory) -> &'static CategoryDescriptor {
    match category {
        SamplerCategory::Cpu => &cpu::DESCRIPTOR,
        SamplerCategory::Memory => &memory::DESCRIPTOR,
        SamplerCategory::Process => &process::DESCRIPTOR,
        SamplerCategory::Disk => &disk::DESCRIPTOR,
        SamplerCategory::Gpu => &gpu::DESCRIPTOR,
        SamplerCategory::Network => &network::DESCRIPTOR,
    }
}

/// Every category's descriptor, in the order of the snapshot (and of its gauges in a
/// mark).
fn descriptors() -> impl Iterator<Item = &'static CategoryDescriptor> {
    SamplerCategory::IN_SNAPSHOT_ORDER
        .into_iter()
        .map(descriptor)
}

/// The categories `config` enables, in the snapshot's order.
pub fn enabled_categories(config: &ResourceMetricsConfig) -> Vec<SamplerCategory> {
    descriptors()
        .filter(|descriptor| (descriptor.enabled)(config))
        .map(|descriptor| descriptor.category)
        .collect()
}

/// The OS-reading categories `config` enables, each with its sampler factory: the one
/// list the pipeline spawns from and the one-shot collector builds from.
pub fn sampler_factories(
    root: &Path,
    config: &ResourceMetricsConfig,
) -> Vec<(SamplerCategory, SamplerFactory)> {
    descriptors()
        .filter(|descriptor| (descriptor.enabled)(config))
        .filter_map(|descriptor| {
            let make = descriptor.os_sampler?;
            Some((descriptor.category, make(root, config)))
        })
        .collect()
}

impl CategoryReading {
    /// The category this reading fills.
    pub fn category(&self) -> SamplerCategory {
        match self {
            CategoryReading::Cpu(_) => SamplerCategory::Cpu,
            CategoryReading::Memory(_) => SamplerCategory::Memory,
            CategoryReading::Process(_) => SamplerCategory::Process,
            CategoryReading::Disk(_) => SamplerCategory::Disk,
            CategoryReading::Network(_) => SamplerCategory::Network,
            CategoryReading::Gpu(_) => SamplerCategory::Gpu,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_has_its_own_descriptor() {
        for category in SamplerCategory::ALL {
            assert_eq!(descriptor(category).category, category, "{category:?}");
        }
    }

    #[test]
    fn disabled_categories_get_no_sampler() {
        let mut config = ResourceMetricsConfig::default();
        config.memory.enabled = false;
        config.gpu.enabled = true;
        let categories = enabled_categories(&config);
        assert!(!categories.contains(&SamplerCategory::Memory));
        assert!(categories.contains(&SamplerCategory::Gpu));
        let factories: Vec<SamplerCategory> = sampler_factories(Path::new("/"), &config)
            .into_iter()
            .map(|(category, make)| {
                assert_eq!(
                    make().category(),
                    category,
                    "the factory makes its category"
                );
                category
            })
            .collect();
        assert!(!factories.contains(&SamplerCategory::Memory));
        assert!(
            !factories.contains(&SamplerCategory::Gpu),
            "the pipeline builds the GPU sampler"
        );
        assert!(factories.contains(&SamplerCategory::Cpu));
    }
}

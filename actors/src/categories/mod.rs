//! The resource categories, one descriptor each: the single list that sampler
//! spawning and snapshot assembly loop over.
//!
//! Each category is one file here holding its descriptor: which sampler reads it and
//! which model conversion turns its base-unit reading into its snapshot record. The
//! reading, the conversion, the record and its mark gauges are data, one file per
//! category in `wattline_model::snapshot`. A new category adds its reader, its
//! sampler, a file here, an entry in [`CATEGORIES`], its model file and its config;
//! the loops pick it up.

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

use crate::diagnostics::SamplerCategory;
use crate::samplers::{CategoryReading, CategorySampler, SamplerFactory};
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

/// Every category, in the order of the snapshot (and of its gauges in a mark).
pub(crate) const CATEGORIES: &[CategoryDescriptor] = &[
    cpu::DESCRIPTOR,
    memory::DESCRIPTOR,
    process::DESCRIPTOR,
    disk::DESCRIPTOR,
    gpu::DESCRIPTOR,
    network::DESCRIPTOR,
];

/// The descriptor of `category`.
pub(crate) fn descriptor(category: SamplerCategory) -> Option<&'static CategoryDescriptor> {
    CATEGORIES
        .iter()
        .find(|descriptor| descriptor.category == category)
}

/// The categories `config` enables, in [`CATEGORIES`] order.
pub fn enabled_categories(config: &ResourceMetricsConfig) -> Vec<SamplerCategory> {
    CATEGORIES
        .iter()
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
    CATEGORIES
        .iter()
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
    fn every_category_has_exactly_one_descriptor() {
        for category in SamplerCategory::ALL {
            let count = CATEGORIES
                .iter()
                .filter(|descriptor| descriptor.category == category)
                .count();
            assert_eq!(count, 1, "{category:?}");
        }
        assert_eq!(CATEGORIES.len(), SamplerCategory::ALL.len());
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

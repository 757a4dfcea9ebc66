//! The resource categories, one descriptor each: the single list that sampler
//! spawning, snapshot assembly and marks loop over.
//!
//! A new category adds its reader, its sampler, a descriptor here and its config; the
//! loops pick it up.

use std::path::Path;
use std::sync::Arc;

use wattline_config::ResourceMetricsConfig;
use wattline_config::resource_metrics::UnitsConfig;

use crate::diagnostics::SamplerCategory;
use crate::merger::convert;
use crate::merger::marks::{self, MarkBuilder};
use crate::samplers::{
    CategoryReading, CategorySampler, SamplerFactory, cpu, disk, memory, network, process,
};
use crate::snapshot::Snapshot;

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
    /// Adds the category's gauges to a mark.
    pub marks: fn(&Snapshot, &mut MarkBuilder),
}

fn factory<S: CategorySampler>(make: impl Fn() -> S + Send + Sync + 'static) -> SamplerFactory {
    Arc::new(move || Box::new(make()) as Box<dyn CategorySampler>)
}

/// Every category, in the order its gauges appear in a mark.
pub(crate) const CATEGORIES: &[CategoryDescriptor] = &[
    CategoryDescriptor {
        category: SamplerCategory::Cpu,
        enabled: |config| config.cpu.enabled,
        os_sampler: Some(|root, _| {
            let root = root.to_path_buf();
            factory(move || cpu::CpuSampler::new(root.clone()))
        }),
        fill: |snapshot, reading, units| {
            if let CategoryReading::Cpu(reading) = reading {
                snapshot.cpu = Some(convert::cpu(&reading, &units.cpu));
            }
        },
        marks: marks::cpu_marks,
    },
    CategoryDescriptor {
        category: SamplerCategory::Memory,
        enabled: |config| config.memory.enabled,
        os_sampler: Some(|root, _| {
            let root = root.to_path_buf();
            factory(move || memory::MemorySampler::new(root.clone()))
        }),
        fill: |snapshot, reading, units| {
            if let CategoryReading::Memory(reading) = reading {
                snapshot.memory = Some(convert::memory_metrics(&reading, &units.memory));
            }
        },
        marks: marks::memory_marks,
    },
    CategoryDescriptor {
        category: SamplerCategory::Process,
        enabled: |config| config.process.enabled,
        os_sampler: Some(|root, _| {
            let root = root.to_path_buf();
            factory(move || process::ProcessSampler::new(root.clone()))
        }),
        fill: |snapshot, reading, _| {
            if let CategoryReading::Process(reading) = reading {
                snapshot.process = Some(convert::process_metrics(&reading));
            }
        },
        marks: marks::process_marks,
    },
    CategoryDescriptor {
        category: SamplerCategory::Disk,
        enabled: |config| config.disk.enabled,
        os_sampler: Some(|root, config| {
            let root = root.to_path_buf();
            let (process_io, paths) =
                (config.disk.process_io, config.disk.filesystem_paths.clone());
            factory(move || disk::DiskSampler::new(root.clone(), process_io, paths.clone()))
        }),
        fill: |snapshot, reading, units| {
            if let CategoryReading::Disk(reading) = reading {
                snapshot.disk = Some(convert::disk_metrics(&reading, &units.disk));
            }
        },
        marks: marks::disk_marks,
    },
    CategoryDescriptor {
        category: SamplerCategory::Gpu,
        enabled: |config| config.gpu.enabled,
        os_sampler: None,
        fill: |snapshot, reading, units| {
            if let CategoryReading::Gpu(reading) = reading {
                snapshot.gpu = Some(convert::gpu_metrics(&reading, &units.gpu));
            }
        },
        marks: marks::gpu_marks,
    },
    CategoryDescriptor {
        category: SamplerCategory::Network,
        enabled: |config| config.network.enabled,
        os_sampler: Some(|root, config| {
            let root = root.to_path_buf();
            let interfaces = config.network.interfaces.clone();
            factory(move || network::NetworkSampler::new(root.clone(), interfaces.clone()))
        }),
        fill: |snapshot, reading, units| {
            if let CategoryReading::Network(reading) = reading {
                snapshot.network = Some(convert::network_metrics(
                    &reading,
                    &units.network.system,
                    &units.network.interface,
                ));
            }
        },
        marks: marks::network_marks,
    },
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

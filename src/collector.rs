//! Snapshots without a pipeline: [`Collector`] takes them synchronously, one
//! on-demand series across its calls (rates from the second), with the GPU group
//! read from the sources a pipeline would choose (NVML, else `nvidia-smi` inside a
//! Tokio runtime): an enabled category is an object, as the specification says.

use std::path::PathBuf;

use wattline_config::ResourceMetricsConfig;
use wattline_gpu::GpuSource;
use wattline_gpu::selection::{GpuSourceEnv, select_default_sources};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;

use crate::ScopeTarget;

/// Takes snapshots of one target with one configuration, synchronously, without actors:
/// for a one-shot tool or a script. Use [`crate::Pipeline`] for polling, marks,
/// Agent scopes and energy.
///
/// ```no_run
/// let target = wattline::ScopeTarget::Global;
/// let mut collector = wattline::Collector::new(target, Default::default());
/// let first = collector.collect(); // no rates yet
/// let second = collector.collect(); // rates since the first
/// # drop((first, second));
/// ```
#[derive(Debug)]
pub struct Collector {
    inner: wattline_actors::Collector,
}

impl Collector {
    /// A collector of `target` with `config`; its GPU group from the sources a
    /// pipeline would choose (when `config.gpu` is enabled).
    pub fn new(target: ScopeTarget, config: ResourceMetricsConfig) -> Self {
        let source = config.gpu.enabled.then(|| {
            let environment = GpuSourceEnv::default();
            Box::new(select_default_sources(
                std::path::Path::new("/"),
                environment,
            )) as Box<dyn GpuSource>
        });
        Self::with_gpu_source(target, config, source)
    }

    /// A collector whose GPU group comes from `source` (`None`: no GPU source at all,
    /// so the group's records are `null`; [`Self::new`] chooses the sources, which
    /// answer no devices, `[]`, on a machine without a GPU).
    pub fn with_gpu_source(
        target: ScopeTarget,
        config: ResourceMetricsConfig,
        source: Option<Box<dyn GpuSource>>,
    ) -> Self {
        let inner = wattline_actors::Collector::new(PathBuf::from("/"), target, config)
            .with_gpu_source(source);
        Collector { inner }
    }

    /// One snapshot on this collector's on-demand series: the first has no rates,
    /// later ones have the rates since the one before.
    pub fn collect(&mut self) -> Snapshot {
        self.inner.collect(SamplingSeries::OnDemand)
    }
}

//! Samplers: one per category, each owning its state (rate baselines per sampling
//! series) and turning OS readings into base-unit readings for one tick.

pub mod actor;
pub mod cpu;
pub mod disk;
pub mod environment;
pub mod gpu;
pub mod memory;
pub mod network;
pub mod per_process;
pub mod process;
pub mod rapl;
mod read_problems;
pub mod registry;

pub use read_problems::record_read_problems;

use std::sync::Arc;
use std::time::Instant;

use crate::platform::{ReadError, ReadErrorClass};
use crate::readings::FieldCoverage;
use crate::samplers::environment::Environment;
use crate::scope::{ResolvedScope, ScopeTarget};
use wattline_model::category::SamplerCategory;
use wattline_model::series::SamplingSeries;

/// What a sampler is asked for on a tick.
#[derive(Debug, Clone)]
pub struct SampleRequest {
    /// The series whose baselines this sample uses and updates.
    pub series: SamplingSeries,
    /// The processes of this tick, shared by every sampler.
    pub scope: Arc<ResolvedScope>,
    /// The environment of this tick (cgroup, system pressure), shared likewise.
    pub environment: Arc<Environment>,
    /// The monotonic time of the tick, for rates.
    pub taken_at: Instant,
}

/// Read failures of one tick, grouped by class: a count and the first message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadProblems {
    /// (class, how many, first error's text), one entry per class seen.
    pub by_class: Vec<(ReadErrorClass, u64, String)>,
}

impl ReadProblems {
    /// Counts `error` under its class.
    pub fn add(&mut self, error: &ReadError) {
        let class = error.class();
        if class == ReadErrorClass::TargetGone {
            // A process that exited after listing is skipped, not a failure.
            return;
        }
        match self.by_class.iter_mut().find(|(seen, _, _)| *seen == class) {
            Some((_, count, _)) => *count += 1,
            None => self.by_class.push((class, 1, error.to_string())),
        }
    }
}

/// A sampler's answer: its category reading and the coverage of its process sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SamplerOutput<R> {
    /// The category in base units.
    pub reading: R,
    /// How many processes supplied each process-summed field.
    pub coverage: FieldCoverage,
    /// What could not be read this tick.
    pub problems: ReadProblems,
}

/// A category's reading, so every sampler answers with one type.
#[derive(Debug, Clone, PartialEq)]
pub enum CategoryReading {
    /// CPU.
    Cpu(wattline_model::snapshot::CpuReading),
    /// Memory.
    Memory(wattline_model::snapshot::MemoryReading),
    /// Process.
    Process(wattline_model::snapshot::ProcessReading),
    /// Disk.
    Disk(wattline_model::snapshot::DiskReading),
    /// Network.
    Network(wattline_model::snapshot::NetworkReading),
    /// GPU.
    Gpu(wattline_model::snapshot::GpuReading),
}

/// One category's sampler: owns its state, reads the OS for one tick.
pub trait CategorySampler: Send + 'static {
    /// Which category it fills.
    fn category(&self) -> SamplerCategory;
    /// Samples one tick.
    fn sample_category(&mut self, request: &SampleRequest) -> SamplerOutput<CategoryReading>;
    /// Takes a sample for the energy stage (GPU only); with `fresh`, a source that
    /// caches answers measures again first, waiting at most that long. Returns the
    /// GPU source's status.
    fn sample_power(
        &mut self,
        _fresh: Option<std::time::Duration>,
    ) -> Option<gpu::GpuSourceStatus> {
        None
    }
}

macro_rules! impl_category_sampler {
    ($sampler:ty, $category:ident) => {
        impl CategorySampler for $sampler {
            fn category(&self) -> SamplerCategory {
                SamplerCategory::$category
            }

            fn sample_category(
                &mut self,
                request: &SampleRequest,
            ) -> SamplerOutput<CategoryReading> {
                let output = self.sample(request);
                SamplerOutput {
                    reading: CategoryReading::$category(output.reading),
                    coverage: output.coverage,
                    problems: output.problems,
                }
            }
        }
    };
}

impl_category_sampler!(cpu::CpuSampler, Cpu);
impl_category_sampler!(memory::MemorySampler, Memory);
impl_category_sampler!(process::ProcessSampler, Process);
impl_category_sampler!(disk::DiskSampler, Disk);
impl_category_sampler!(network::NetworkSampler, Network);

impl CategorySampler for gpu::GpuSampler {
    fn category(&self) -> SamplerCategory {
        SamplerCategory::Gpu
    }

    fn sample_category(&mut self, request: &SampleRequest) -> SamplerOutput<CategoryReading> {
        let output = self.sample(request);
        SamplerOutput {
            reading: CategoryReading::Gpu(output.reading),
            coverage: output.coverage,
            problems: output.problems,
        }
    }

    fn sample_power(&mut self, fresh: Option<std::time::Duration>) -> Option<gpu::GpuSourceStatus> {
        Some(gpu::GpuSampler::sample_power(self, fresh))
    }
}

/// Makes a category's sampler: at start, and again after each restart.
pub type SamplerFactory = std::sync::Arc<dyn Fn() -> Box<dyn CategorySampler> + Send + Sync>;

/// Baselines for the two sampling series, reset when the target changes.
#[derive(Debug)]
pub struct SeriesBaselines<B> {
    target: Option<ScopeTarget>,
    baselines: [Option<B>; 2],
}

impl<B> Default for SeriesBaselines<B> {
    fn default() -> Self {
        SeriesBaselines {
            target: None,
            baselines: [None, None],
        }
    }
}

impl<B> SeriesBaselines<B> {
    /// Takes the previous baseline of `series` for `target`; a retarget clears both
    /// series.
    pub fn take(&mut self, target: ScopeTarget, series: SamplingSeries) -> Option<B> {
        if self.target != Some(target) {
            self.target = Some(target);
            self.baselines = [None, None];
        }
        self.baselines[series.index()].take()
    }

    /// Stores the baseline the next sample of `series` compares against.
    pub fn store(&mut self, series: SamplingSeries, baseline: B) {
        self.baselines[series.index()] = Some(baseline);
    }
}

/// Adds `values`, `None` when there are none or the sum overflows.
pub fn checked_sum(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut total: Option<u64> = None;
    for value in values {
        total = Some(total.unwrap_or(0).checked_add(value)?);
    }
    total
}

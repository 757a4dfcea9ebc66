//! The GPU sampler: owns the GPU source, answers resource polls with device and process
//! records, takes the energy stage's own power samples, and forwards every sample's
//! power readings, in time order, to the energy stage.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use wattline_config::resource_metrics::GpuConfig;

use super::{ReadProblems, SampleRequest, SamplerOutput};
use crate::gpu::{GpuSample, GpuSampleRequest, GpuSource, ProcessScope};
use crate::readings::{FieldCoverage, SamplingSeries};
use crate::scope::ScopeTarget;

/// One GPU sample as the energy stage sees it: the readings (or `None` for a failed
/// sample, a gap) and when it was taken.
#[derive(Debug, Clone)]
pub struct PowerSample {
    /// The device readings; `None` when the source observed nothing.
    pub sample: Option<Arc<GpuSample>>,
    /// Wall-clock time of the sample.
    pub observed_at: DateTime<Utc>,
    /// Monotonic time of the sample (the source's own stamp when it gave one).
    pub taken_at: std::time::Instant,
}

/// Where the GPU sampler sends every sample's readings.
pub trait PowerSampleSink: Send + Sync {
    /// Receives one sample; must not block.
    fn send(&self, sample: PowerSample);
}

/// The GPU category in base units: the source's sample and which groups are wanted.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReading {
    /// The source's answer; `None` when it observed nothing.
    pub sample: Option<GpuSample>,
    /// Device records wanted.
    pub device_metrics: bool,
    /// Process records wanted.
    pub process_metrics: bool,
}

/// The GPU sampler's state.
pub struct GpuSampler {
    source: Option<Box<dyn GpuSource>>,
    config: GpuConfig,
    power_sink: Option<Arc<dyn PowerSampleSink>>,
}

impl std::fmt::Debug for GpuSampler {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GpuSampler")
            .field(
                "source",
                &self.source.as_ref().map(|s| s.name().to_string()),
            )
            .finish_non_exhaustive()
    }
}

impl GpuSampler {
    /// A sampler over `source` (`None`: GPU reading is off).
    pub fn new(
        source: Option<Box<dyn GpuSource>>,
        config: GpuConfig,
        power_sink: Option<Arc<dyn PowerSampleSink>>,
    ) -> Self {
        GpuSampler {
            source,
            config,
            power_sink,
        }
    }

    /// The name of the source in use, e.g. `nvml+drm`.
    pub fn source_name(&self) -> Option<String> {
        self.source.as_ref().map(|source| source.name().to_string())
    }

    /// Samples the GPU category for a resource tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<GpuReading> {
        let scope = &request.scope;
        let processes = match scope.target {
            ScopeTarget::Global => ProcessScope::All,
            // Exited children are not in the list, so they are not in the pid set.
            _ => ProcessScope::Pids(
                scope
                    .processes
                    .iter()
                    .map(|p| p.pid)
                    .collect::<BTreeSet<u32>>(),
            ),
        };
        let gpu_request = GpuSampleRequest {
            series: request.series,
            device_metrics: self.config.device_metrics,
            process_metrics: self.config.process_metrics && !scope.is_unavailable(),
            device_selectors: self.config.devices.clone(),
            processes,
        };
        let sample = self.sample_source(&gpu_request);
        SamplerOutput {
            reading: GpuReading {
                sample,
                device_metrics: self.config.device_metrics,
                process_metrics: self.config.process_metrics,
            },
            coverage: FieldCoverage::new(),
            problems: ReadProblems::default(),
        }
    }

    /// Takes a device-only sample for the energy stage's own interval.
    pub fn sample_power(&mut self) {
        let request = GpuSampleRequest {
            series: SamplingSeries::Polling,
            device_metrics: true,
            process_metrics: false,
            device_selectors: self.config.devices.clone(),
            processes: ProcessScope::Pids(BTreeSet::new()),
        };
        self.sample_source(&request);
    }

    fn sample_source(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        let source = self.source.as_mut()?;
        let sample = source.sample(request);
        if let Some(sink) = &self.power_sink {
            // Energy needs every device reading, so ask for devices even when the
            // snapshot does not show them.
            let power = if request.device_metrics {
                sample.clone()
            } else {
                let devices_only = GpuSampleRequest {
                    device_metrics: true,
                    process_metrics: false,
                    processes: ProcessScope::Pids(BTreeSet::new()),
                    ..request.clone()
                };
                source.sample(&devices_only)
            };
            sink.send(PowerSample {
                taken_at: power
                    .as_ref()
                    .map_or_else(std::time::Instant::now, |s| s.taken_at),
                sample: power.map(Arc::new),
                observed_at: Utc::now(),
            });
        }
        sample
    }
}

//! The GPU sampler: owns the GPU source, answers resource polls with device and process
//! records, takes the energy stage's own power samples, and forwards every sample's
//! power readings, in time order, to the energy stage.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use wattline_config::resource_metrics::GpuConfig;

use super::{ReadProblems, SampleRequest, SamplerOutput};
use crate::readings::FieldCoverage;
use wattline_gpu::visible_devices::configured_selection;
use wattline_gpu::{GpuSampleRequest, GpuSource, ProcessScope, SamplePart, merge_parts};
use wattline_model::gpu_selection::GpuSelection;
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::GpuSample;

use wattline_gpu::{PowerSample, PowerSampleSink};
use wattline_model::snapshot::GpuReading;

/// What the GPU sources are and why they read nothing, when they do not.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GpuSourceStatus {
    /// The configured source's name (`none` without one).
    pub configured: String,
    /// Why nothing is read, in words, while nothing is.
    pub unavailable: Option<String>,
    /// The devices counted, when a selection narrows them, and where it came from.
    pub selection: Option<GpuSelection>,
}

/// The GPU sampler's state.
pub struct GpuSampler {
    source: Option<Box<dyn GpuSource>>,
    config: GpuConfig,
    power_sink: Option<Arc<dyn PowerSampleSink>>,
    /// The processes of the latest resource poll: the energy stage's own samples read
    /// process shares for them (every process until a poll says otherwise).
    processes: ProcessScope,
    /// Dense power reading started on the source; stops with this sampler.
    dense: Option<wattline_gpu::dense_power::DensePower>,
    /// The devices counted, when a selection narrows them.
    selection: Option<GpuSelection>,
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
    /// A sampler over `source` (`None`: GPU reading is off). With a power sink, the
    /// source's own readings (a background tool's answers) go to it as they arrive.
    pub fn new(
        mut source: Option<Box<dyn GpuSource>>,
        config: GpuConfig,
        power_sink: Option<Arc<dyn PowerSampleSink>>,
    ) -> Self {
        if let (Some(source), Some(sink)) = (source.as_mut(), &power_sink) {
            source.forward_readings(Arc::clone(sink));
        }
        GpuSampler {
            selection: configured_selection(&config.devices),
            source,
            config,
            power_sink,
            processes: ProcessScope::All,
            dense: None,
        }
    }

    /// Counts only the devices `selection` selects (it replaces the configuration's
    /// `devices`). Call before [`GpuSampler::with_dense_power`].
    pub fn with_selection(mut self, selection: Option<GpuSelection>) -> Self {
        if let Some(selection) = selection {
            self.config.devices.clone_from(&selection.selectors);
            self.selection = Some(selection);
        }
        self
    }

    /// Starts dense power reading every `period` on the source where it can, feeding
    /// the power sink: the edge from this sampler's source to the energy stage for
    /// the integral, beside the samples it answers at the collection interval.
    pub fn with_dense_power(mut self, period: Duration) -> Self {
        if let (Some(source), Some(sink)) = (self.source.as_mut(), &self.power_sink) {
            self.dense = source.start_dense_power(period, &self.config.devices, Arc::clone(sink));
        }
        self
    }

    /// The configured source and why it reads nothing, when it does not.
    pub fn status(&self) -> GpuSourceStatus {
        match &self.source {
            Some(source) => GpuSourceStatus {
                configured: source.name().to_owned(),
                unavailable: source.unavailable_reason(),
                selection: self.selection.clone(),
            },
            None => GpuSourceStatus {
                configured: "none".into(),
                unavailable: Some("GPU reading is off".into()),
                selection: self.selection.clone(),
            },
        }
    }

    /// Samples the GPU category for a resource tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<GpuReading> {
        let scope = &request.scope;
        // Only processes this tick can see, in every scope: the driver also reports PIDs
        // of other PID namespaces (containers), which are no process of ours. Exited
        // children are not in the list either.
        let processes = ProcessScope::Pids(
            scope
                .processes
                .iter()
                .map(|p| p.pid)
                .collect::<BTreeSet<u32>>(),
        );
        if !scope.is_unavailable() {
            self.processes = processes.clone();
        }
        let process_metrics = self.config.process_metrics && !scope.is_unavailable();
        let gpu_request = GpuSampleRequest {
            series: request.series,
            // Energy needs every device reading, so devices are read even when the
            // snapshot does not show them.
            device_metrics: self.config.device_metrics || self.power_sink.is_some(),
            process_metrics,
            device_selectors: self.config.devices.clone(),
            processes,
        };
        let sample = self.sample_source(&gpu_request).map(|mut sample| {
            if !self.config.device_metrics {
                sample.devices.clear();
            }
            // Whatever the source answered, a record is a visible process.
            sample
                .processes
                .retain(|process| gpu_request.processes.contains(process.process_id));
            sample
        });
        SamplerOutput {
            // Without a source GPU reading is off (the host's choice): its groups are
            // `null`, as when the configuration turns them off. A source that answers
            // nothing (no backend) gives empty groups instead.
            reading: GpuReading {
                sample,
                device_metrics: self.config.device_metrics && self.source.is_some(),
                process_metrics: self.config.process_metrics && self.source.is_some(),
            },
            coverage: FieldCoverage::new(),
            problems: ReadProblems::default(),
        }
    }

    /// Takes a sample for the energy stage: devices, and process shares for the latest
    /// poll's processes. With `fresh`, a source that caches answers measures again
    /// first (waiting at most `limit`), so the reading is from after this call.
    pub fn sample_power(&mut self, fresh: Option<Duration>) -> GpuSourceStatus {
        if let (Some(limit), Some(source)) = (fresh, self.source.as_mut()) {
            source.refresh(limit);
        }
        let request = GpuSampleRequest {
            series: SamplingSeries::Polling,
            device_metrics: true,
            process_metrics: self.config.process_metrics,
            device_selectors: self.config.devices.clone(),
            processes: self.processes.clone(),
        };
        self.sample_source(&request);
        self.status()
    }

    fn sample_source(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        let source = self.source.as_mut()?;
        let parts: Vec<SamplePart> = source.sample_parts(request);
        let merged = merge_parts(&parts);
        if let Some(sink) = &self.power_sink {
            for part in parts {
                sink.send(PowerSample::from_part(part, request.process_metrics));
            }
        }
        merged
    }
}

//! `nvidia-smi` standing in for NVML until NVML loads. The spec's retry rule: NVML is
//! tried again after its retry delay (a minute by default) even while `nvidia-smi`
//! answers, and once it loads it takes over: the tool and its power stream stop, and
//! dense power reads move to NVML.

use std::sync::Arc;
use std::time::Duration;

use wattline_model::snapshot::GpuSample;

use crate::dense_power::DensePower;
use crate::nvidia_smi_collector::NvidiaSmiSource;
use crate::nvml::NvmlSource;
use crate::{GpuSampleRequest, GpuSource, PowerSampleSink, SamplePart};

/// What the energy stage asked of the NVIDIA backend, kept to ask NVML the same.
struct DenseRequest {
    period: Duration,
    selectors: Vec<String>,
    sink: Arc<dyn PowerSampleSink>,
}

/// The NVIDIA backend while NVML is missing: `nvidia-smi` answers, NVML is retried.
pub struct NvidiaSmiUntilNvml {
    nvml: NvmlSource,
    smi: Option<NvidiaSmiSource>,
    dense_request: Option<DenseRequest>,
    /// The running dense reads (the tool's stream, then NVML's probe), held here so a
    /// takeover can replace them.
    dense: Option<DensePower>,
}

impl std::fmt::Debug for NvidiaSmiUntilNvml {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("NvidiaSmiUntilNvml")
            .field("nvml_ready", &self.nvml.is_ready())
            .field("smi", &self.smi.is_some())
            .finish_non_exhaustive()
    }
}

impl NvidiaSmiUntilNvml {
    /// `nvidia-smi` now, `nvml` (which failed to load) from when it loads.
    pub fn new(nvml: NvmlSource, smi: NvidiaSmiSource) -> Self {
        NvidiaSmiUntilNvml {
            nvml,
            smi: Some(smi),
            dense_request: None,
            dense: None,
        }
    }

    /// Tries NVML when its retry delay has passed; when it loads, it takes over.
    fn retry_nvml(&mut self) {
        if self.smi.is_none() || !self.nvml.try_init() {
            return;
        }
        tracing::info!("NVML loaded: it takes over from nvidia-smi");
        // The stream and the collector stop with their guards.
        self.dense = None;
        self.smi = None;
        if let Some(request) = &self.dense_request {
            self.dense = self.nvml.start_dense_power(
                request.period,
                &request.selectors,
                Arc::clone(&request.sink),
            );
        }
    }

    /// The source answering now.
    fn active(&mut self) -> &mut dyn GpuSource {
        match self.smi.as_mut() {
            Some(smi) => smi,
            None => &mut self.nvml,
        }
    }
}

impl GpuSource for NvidiaSmiUntilNvml {
    fn name(&self) -> &str {
        match &self.smi {
            Some(smi) => smi.name(),
            None => self.nvml.name(),
        }
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        self.retry_nvml();
        self.active().sample(request)
    }

    fn sample_parts(&mut self, request: &GpuSampleRequest) -> Vec<SamplePart> {
        self.retry_nvml();
        self.active().sample_parts(request)
    }

    fn wait_until_ready(&mut self, limit: Duration) {
        self.active().wait_until_ready(limit);
    }

    fn refresh(&mut self, limit: Duration) {
        self.active().refresh(limit);
    }

    fn unavailable_reason(&self) -> Option<String> {
        match &self.smi {
            Some(smi) => smi.unavailable_reason(),
            None => self.nvml.unavailable_reason(),
        }
    }

    fn forward_readings(&mut self, sink: Arc<dyn PowerSampleSink>) {
        // NVML is read when asked: only the tool has readings of its own to forward.
        if let Some(smi) = self.smi.as_mut() {
            smi.forward_readings(sink);
        }
    }

    /// Starts the dense reads on the answering source and holds them itself (so a
    /// takeover can move them to NVML); the caller gets nothing to hold.
    fn start_dense_power(
        &mut self,
        period: Duration,
        selectors: &[String],
        sink: Arc<dyn PowerSampleSink>,
    ) -> Option<DensePower> {
        self.dense = self
            .active()
            .start_dense_power(period, selectors, Arc::clone(&sink));
        self.dense_request = Some(DenseRequest {
            period,
            selectors: selectors.to_vec(),
            sink,
        });
        None
    }
}

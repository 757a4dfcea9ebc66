//! Choosing the GPU sources for a host, combining them, and matching device selectors.
//!
//! [`select_default_sources`] picks NVML when its library loads, else `nvidia-smi`
//! when it is on the search path (NVML is retried meanwhile and takes over when it
//! loads), plus DRM when the root has `sys/class/drm`. The
//! result is one [`CompositeGpuSource`] whose [`GpuSource::name`] says what is in use
//! (`"nvml+drm"`, `"nvidia-smi"`, ...). Any other [`GpuSource`] (a user's) can be put
//! in a composite with [`CompositeGpuSource::new`].

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;

use wattline_model::snapshot::GpuSample;

use crate::dense_power::DensePower;
use crate::drm::DrmSource;
use crate::events::{GpuEventSink, NoopEventSink};
use crate::nvidia_fallback::NvidiaSmiUntilNvml;
use crate::nvidia_smi_collector::{
    DEFAULT_INTERVAL, DEFAULT_TIMEOUT, NvidiaSmiCollector, NvidiaSmiConfig, NvidiaSmiSource,
    locate_nvidia_smi,
};
use crate::nvml::{NvmlConfig, NvmlSource};
use crate::{GpuSampleRequest, GpuSource, PowerSampleSink, SamplePart};

/// What [`select_default_sources`] needs from its surroundings.
#[derive(Clone)]
pub struct GpuSourceEnv {
    /// `PATH`-style list searched for `nvidia-smi`; `None` searches nowhere.
    pub path_env: Option<OsString>,
    /// Where NVML is loaded from and its retry delay.
    pub nvml: NvmlConfig,
    /// Time between two `nvidia-smi` runs.
    pub smi_interval: Duration,
    /// Limit of one `nvidia-smi` run.
    pub smi_timeout: Duration,
    /// Runtime for the `nvidia-smi` background task; `None` uses the current one.
    pub runtime: Option<Handle>,
    /// Where events go.
    pub sink: Arc<dyn GpuEventSink>,
}

impl std::fmt::Debug for GpuSourceEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSourceEnv")
            .field("path_env", &self.path_env)
            .field("nvml", &self.nvml)
            .field("smi_interval", &self.smi_interval)
            .field("smi_timeout", &self.smi_timeout)
            .finish_non_exhaustive()
    }
}

impl GpuSourceEnv {
    /// Defaults: this process's `PATH`, NVML from the platform library name with a
    /// 60 s retry, `nvidia-smi` every 5 s with a 10 s timeout, events to `sink`.
    pub fn from_process(sink: Arc<dyn GpuEventSink>) -> Self {
        Self {
            path_env: std::env::var_os("PATH"),
            nvml: NvmlConfig::default(),
            smi_interval: DEFAULT_INTERVAL,
            smi_timeout: DEFAULT_TIMEOUT,
            runtime: None,
            sink,
        }
    }
}

impl Default for GpuSourceEnv {
    fn default() -> Self {
        Self::from_process(Arc::new(NoopEventSink))
    }
}

/// Pick the sources for this host (see the module docs). NVML is tried at once; when
/// it fails and `nvidia-smi` is absent, the NVML source stays in and keeps retrying
/// after its delay. Call inside a Tokio runtime or set [`GpuSourceEnv::runtime`], or
/// `nvidia-smi` cannot be used.
pub fn select_default_sources(root: &Path, env: GpuSourceEnv) -> CompositeGpuSource {
    let mut sources: Vec<Box<dyn GpuSource>> = Vec::new();
    let mut notes = Vec::new();
    let mut nvml = NvmlSource::new(env.nvml.clone(), Arc::clone(&env.sink));
    if nvml.try_init() {
        sources.push(Box::new(nvml));
    } else {
        let program = env.path_env.as_deref().and_then(locate_nvidia_smi);
        let runtime = env.runtime.clone().or_else(|| Handle::try_current().ok());
        match (program, runtime) {
            (Some(program), Some(runtime)) => {
                let mut config = NvidiaSmiConfig::new(program);
                config.interval = env.smi_interval;
                config.timeout = env.smi_timeout;
                let collector = NvidiaSmiCollector::start(config, Arc::clone(&env.sink), &runtime);
                // NVML keeps being retried; when it loads, it takes over.
                sources.push(Box::new(NvidiaSmiUntilNvml::new(
                    nvml,
                    NvidiaSmiSource::new(collector),
                )));
            }
            (Some(program), None) => {
                tracing::warn!(
                    program = %program.display(),
                    "nvidia-smi found but no Tokio runtime to run it on"
                );
                sources.push(Box::new(nvml));
            }
            (None, _) => {
                // One info line and SmiNotFound; the collector itself is never run.
                drop(NvidiaSmiCollector::not_found(env.sink.as_ref()));
                notes.push("nvidia-smi not on PATH".to_owned());
                sources.push(Box::new(nvml));
            }
        }
    }
    if root.join("sys/class/drm").is_dir() {
        sources.push(Box::new(DrmSource::new(root)));
    }
    CompositeGpuSource::new(sources).with_notes(notes)
}

/// `nvml+drm`, or `none` without a source.
fn composite_name(sources: &[Box<dyn GpuSource>]) -> String {
    if sources.is_empty() {
        return "none".to_owned();
    }
    let names: Vec<&str> = sources.iter().map(|source| source.name()).collect();
    names.join("+")
}

/// Several sources read as one: records are concatenated in source order.
pub struct CompositeGpuSource {
    sources: Vec<Box<dyn GpuSource>>,
    name: String,
    /// Why a backend that was looked for is not in the list ("nvidia-smi not on PATH").
    notes: Vec<String>,
}

impl std::fmt::Debug for CompositeGpuSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeGpuSource")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl CompositeGpuSource {
    /// Combine `sources`; the first one's timestamp stamps the combined sample.
    pub fn new(sources: Vec<Box<dyn GpuSource>>) -> Self {
        Self {
            name: composite_name(&sources),
            sources,
            notes: Vec::new(),
        }
    }

    /// Adds why backends that were looked for are absent, for [`GpuSource::unavailable_reason`].
    pub fn with_notes(mut self, notes: Vec<String>) -> Self {
        self.notes = notes;
        self
    }

    /// Names of the sources, in order.
    pub fn source_names(&self) -> Vec<&str> {
        self.sources.iter().map(|source| source.name()).collect()
    }

    /// Whether there is no source at all.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }
}

impl GpuSource for CompositeGpuSource {
    fn name(&self) -> &str {
        &self.name
    }

    /// `None` when no source observed anything; otherwise the records of every source
    /// that did, stamped with the first answering source's time (the NVIDIA source
    /// comes first, so an energy integrator sees its reading time).
    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        crate::merge_parts(&self.sample_parts(request))
    }

    fn sample_parts(&mut self, request: &GpuSampleRequest) -> Vec<SamplePart> {
        let parts = self
            .sources
            .iter_mut()
            .flat_map(|source| source.sample_parts(request))
            .collect();
        // A backend can hand over to another (nvidia-smi to NVML): name what answers.
        self.name = composite_name(&self.sources);
        parts
    }

    fn wait_until_ready(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for source in &mut self.sources {
            source.wait_until_ready(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    }

    fn refresh(&mut self, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        for source in &mut self.sources {
            source.refresh(deadline.saturating_duration_since(std::time::Instant::now()));
        }
    }

    /// Every backend's reason and every note, `; `-separated; `None` when there is
    /// nothing to say. With no backend at all: "no GPU source".
    fn unavailable_reason(&self) -> Option<String> {
        let mut reasons: Vec<String> = self
            .sources
            .iter()
            .filter_map(|source| source.unavailable_reason())
            .collect();
        reasons.extend(self.notes.iter().cloned());
        if self.sources.is_empty() && reasons.is_empty() {
            reasons.push("no GPU source".to_owned());
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    fn forward_readings(&mut self, sink: Arc<dyn PowerSampleSink>) {
        for source in &mut self.sources {
            source.forward_readings(Arc::clone(&sink));
        }
    }

    fn start_dense_power(
        &mut self,
        period: Duration,
        selectors: &[String],
        sink: Arc<dyn PowerSampleSink>,
    ) -> Option<DensePower> {
        self.sources
            .iter_mut()
            .filter_map(|source| source.start_dense_power(period, selectors, Arc::clone(&sink)))
            .reduce(DensePower::join)
    }
}

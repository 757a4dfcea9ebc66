//! The public pipeline API: build, spawn, collect, scope, flush, shut down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use wattline_actors::ScopeTarget;
use wattline_actors::command_cgroup::CommandCgroup;
use wattline_actors::error::PipelineError;
use wattline_actors::pipeline::DIAGNOSTICS_BUSY_LIMIT;
use wattline_actors::pipeline::{
    GpuSourceFactory, PipelineSpec, PreparedGpu, RunningPipeline, open_diagnostics,
    prepare_gpu_source,
};
use wattline_config::{EffectiveConfig, MeasurementScopeSetting, ResourceMetricsConfig};
use wattline_diagnostics::DiagnosticError;
use wattline_exporters::RunIdentity;
use wattline_gpu::GpuSource;
use wattline_gpu::selection::{GpuSourceEnv, select_default_sources};
use wattline_model::category::SamplerCategory;
use wattline_model::energy::Epoch;
use wattline_model::events::EventSink;
use wattline_model::events::new_uuid;
use wattline_model::gpu_selection::GpuSelection;
use wattline_model::report::EnergyReport;
use wattline_model::snapshot::Snapshot;

use crate::agent_scope::{AgentScope, ScopeOptions};
pub use crate::error::Error;
use crate::exporting::OtlpIdentity;

/// Builds a [`Pipeline`].
pub struct PipelineBuilder {
    config: Option<EffectiveConfig>,
    environment: Option<BTreeMap<String, String>>,
    gpu_source: Option<GpuSourceFactory>,
    scope: Option<ScopeTarget>,
    sinks: Vec<Arc<dyn EventSink>>,
    tick_deadline: Option<Duration>,
    stdout_metrics: Option<Duration>,
    gpu_selection: Option<GpuSelection>,
    command_group: Option<PathBuf>,
    command_group_notes: Vec<String>,
    service_name: Option<String>,
}

impl Default for PipelineBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PipelineBuilder {
    /// A builder with the default configuration: `resource_metrics` on (polling off),
    /// `energy` and `diagnostics` on.
    pub fn new() -> Self {
        PipelineBuilder {
            config: None,
            environment: None,
            gpu_source: None,
            scope: None,
            sinks: Vec::new(),
            tick_deadline: None,
            stdout_metrics: None,
            gpu_selection: None,
            command_group: None,
            command_group_notes: Vec::new(),
            service_name: None,
        }
    }

    /// The `service.name` OTLP exports carry when neither `OTEL_SERVICE_NAME`,
    /// `OTEL_RESOURCE_ATTRIBUTES` nor the endpoint's `service_name` names one (default:
    /// this program's name; `wattline run` gives the measured command's).
    pub fn default_service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Uses an effective (merged) configuration, e.g. from
    /// [`load_config`](crate::load_config).
    pub fn config(mut self, config: EffectiveConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// The environment the `GENAI_*` energy variables and the `OTEL_SERVICE_NAME` and
    /// `OTEL_RESOURCE_ATTRIBUTES` resource variables are read from (default: this
    /// process's environment).
    pub fn environment(mut self, environment: BTreeMap<String, String>) -> Self {
        self.environment = Some(environment);
        self
    }

    /// Replaces GPU source selection: `factory` is called at start and after each
    /// restart of the GPU sampler; returning `None` turns GPU reading off.
    pub fn gpu_source(
        mut self,
        factory: impl Fn() -> Option<Box<dyn GpuSource>> + Send + Sync + 'static,
    ) -> Self {
        self.gpu_source = Some(Arc::new(move |_events| factory()));
        self
    }

    /// Measures this target instead of the configured scope.
    pub fn scope(mut self, target: ScopeTarget) -> Self {
        self.scope = Some(target);
        self
    }

    /// Counts only the GPUs `selection` selects, instead of the configuration's
    /// `gpu.devices` (e.g. the devices a measured command can use: see
    /// [`gpu_selection_for_command`](wattline_gpu::visible_devices::gpu_selection_for_command)).
    pub fn gpu_selection(mut self, selection: GpuSelection) -> Self {
        self.gpu_selection = Some(selection);
        self
    }

    /// The measured command's own cgroup (from
    /// [`command_cgroup::create`](wattline_actors::command_cgroup::create)): its members
    /// join a process-tree scope, so a child that daemonises is still counted. An
    /// `Err` is why there is none, recorded as `pipeline.command_cgroup_unavailable`.
    pub fn command_cgroup(mut self, cgroup: Result<&CommandCgroup, String>) -> Self {
        match cgroup {
            Ok(cgroup) => {
                self.command_group = cgroup.membership_group().map(Path::to_path_buf);
                self.command_group_notes.clone_from(&cgroup.notes);
            }
            Err(reason) => self.command_group_notes = vec![reason],
        }
        self
    }

    /// Adds a receiver of scope events, marks and metrics.
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// How long a tick waits for its samplers before leaving a category `null`.
    pub fn tick_deadline(mut self, deadline: Duration) -> Self {
        self.tick_deadline = Some(deadline);
        self
    }

    /// Also prints the metrics with the OpenTelemetry stdout exporter every `interval`
    /// (for debugging).
    pub fn stdout_metrics(mut self, interval: Duration) -> Self {
        self.stdout_metrics = Some(interval);
        self
    }

    /// Starts the pipeline on the current Tokio runtime.
    pub async fn spawn(self) -> Result<Pipeline, Error> {
        self.prepare().await?.spawn().await
    }

    /// Does everything that can fail on configuration or I/O (the environment
    /// variables, the diagnostics context, the exporters: files opened, endpoints
    /// built) without starting to measure, so a host can check it before starting
    /// the work it wants measured, then choose the scope.
    pub async fn prepare(self) -> Result<PreparedPipeline, Error> {
        // Before any reading, so none is stamped before the energy stage's zero.
        let epoch = Epoch::now();
        let mut config = self.config.unwrap_or_else(library_default_config);
        // A configuration built in code never went through a file's checks: an
        // interval of 0 would otherwise stop the poll clock without a word.
        config.validate()?;
        let environment = self.environment.unwrap_or_else(|| {
            std::env::vars()
                .filter(|(name, _)| {
                    name.starts_with("GENAI_")
                        || name.starts_with("OTEL_")
                        || name == wattline_config::energy::PUE_VARIABLE
                })
                .collect()
        });
        // The run's identity: its root scope in the event file, and on every export.
        let run_id = new_uuid();
        let identity = OtlpIdentity {
            run: RunIdentity {
                default_service_name: self.service_name.or_else(program_name),
                host_name: wattline_actors::host_name(),
                process_id: Some(std::process::id()),
                run_id: Some(run_id.to_string()),
            },
            environment: otlp_environment(&environment),
        };
        if let Some(energy) = &mut config.energy {
            energy.apply_environment(&environment)?;
        }
        let diagnostics = open_diagnostics(config.diagnostics)?;
        let exporters = crate::exporting::start_exporters(
            &config,
            self.stdout_metrics,
            diagnostics
                .as_ref()
                .map(|(_, components)| components.clone()),
            identity,
        )
        .await?;
        let mut sinks = self.sinks;
        if let Some(fan_out) = &exporters {
            sinks.push(Arc::clone(fan_out) as Arc<dyn EventSink>);
        }
        let sink: Arc<dyn EventSink> = match sinks.len() {
            1 => Arc::clone(&sinks[0]),
            _ => Arc::new(wattline_model::events::FanOutSink(sinks)),
        };
        let smi_interval = config.energy.as_ref().map_or(Duration::from_secs(5), |e| {
            Duration::from_millis(e.config.interval_millis)
        });
        let smi_interval = nvidia_smi_interval(smi_interval);
        let gpu_source = self
            .gpu_source
            .unwrap_or_else(|| default_gpu_sources(smi_interval));
        // Source selection and the first answer (bounded by the source's own timeout,
        // 10 s for nvidia-smi) before anything is measured.
        let gpu_wanted = config.energy.is_some()
            || config
                .resource_metrics
                .as_ref()
                .is_some_and(|resource| resource.gpu.enabled);
        let prepared_gpu = if gpu_wanted {
            Some(
                prepare_gpu_source(
                    &gpu_source,
                    diagnostics.as_ref().map(|(_, components)| components),
                    wattline_gpu::nvidia_smi_collector::DEFAULT_TIMEOUT,
                    gpu_selectors(self.gpu_selection.as_ref(), &config),
                )
                .await,
            )
        } else {
            None
        };
        Ok(PreparedPipeline {
            run_id,
            config,
            scope: self.scope,
            diagnostics,
            exporters,
            sink,
            gpu_source,
            tick_deadline: self.tick_deadline,
            epoch,
            prepared_gpu,
            measuring_from: None,
            gpu_selection: self.gpu_selection,
            command_group: self.command_group,
            command_group_notes: self.command_group_notes,
        })
    }
}

/// This program's name, from how it was invoked (`argv[0]`'s file name).
fn program_name() -> Option<String> {
    let invoked = std::env::args_os().next()?;
    let name = std::path::Path::new(&invoked).file_name()?;
    Some(name.to_string_lossy().into_owned()).filter(|name| !name.is_empty())
}

/// The OTLP exporter's variables: `OTEL_*` from `environment` (the pipeline's), the
/// rest (`header_env`'s secrets) from the process.
fn otlp_environment(environment: &BTreeMap<String, String>) -> wattline_exporters::EnvLookup {
    let variables: BTreeMap<String, String> = environment
        .iter()
        .filter(|(name, _)| name.starts_with("OTEL_"))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Arc::new(move |name: &str| {
        if name.starts_with("OTEL_") {
            variables.get(name).map(std::ffi::OsString::from)
        } else {
            std::env::var_os(name)
        }
    })
}

/// Why [`Pipeline::diagnostics_json`] could not give the diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum DiagnosticsReadError {
    /// The context refused (still busy after the retries, or closed).
    #[error("diagnostics could not be read: {0}")]
    Context(#[from] DiagnosticError),
    /// The snapshot could not be written as JSON.
    #[error("diagnostics snapshot as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The device selectors a pipeline reads: the selection's, else the configuration's.
fn gpu_selectors(selection: Option<&GpuSelection>, config: &EffectiveConfig) -> Vec<String> {
    match selection {
        Some(selection) => selection.selectors.clone(),
        None => config
            .resource_metrics
            .as_ref()
            .map(|resource| resource.gpu.devices.clone())
            .unwrap_or_default(),
    }
}

/// A pipeline whose configuration, diagnostics and exporters are ready; nothing is
/// measured until [`PreparedPipeline::spawn`].
pub struct PreparedPipeline {
    run_id: uuid::Uuid,
    config: EffectiveConfig,
    scope: Option<ScopeTarget>,
    diagnostics: Option<(
        wattline_diagnostics::Diagnostics,
        wattline_diagnostics::PipelineDiagnostics,
    )>,
    exporters: Option<Arc<wattline_exporters::FanOut>>,
    sink: Arc<dyn EventSink>,
    gpu_source: GpuSourceFactory,
    tick_deadline: Option<Duration>,
    epoch: Epoch,
    prepared_gpu: Option<PreparedGpu>,
    measuring_from: Option<(std::time::Instant, chrono::DateTime<chrono::Utc>)>,
    gpu_selection: Option<GpuSelection>,
    command_group: Option<PathBuf>,
    command_group_notes: Vec<String>,
}

impl PreparedPipeline {
    /// Counts energy from this instant (default: when [`Self::spawn`] is called), e.g.
    /// the moment a measured command was started.
    pub fn measuring_from(mut self, at: std::time::Instant) -> Self {
        let wall =
            chrono::Utc::now() - chrono::Duration::from_std(at.elapsed()).unwrap_or_default();
        self.measuring_from = Some((at, wall));
        self
    }

    /// Reads the GPU devices' power now, for the energy stage's opening interval: call
    /// it right before and right after starting the work to measure (with
    /// [`Self::measuring_from`] between), so the instant the window opens falls in an
    /// interval a few milliseconds long. Nothing happens when GPU reading is off.
    pub async fn read_gpu_power_now(&mut self) {
        let Some(mut prepared) = self.prepared_gpu.take() else {
            return;
        };
        let selectors = gpu_selectors(self.gpu_selection.as_ref(), &self.config);
        // Driver calls block: off the runtime's workers.
        self.prepared_gpu = tokio::task::spawn_blocking(move || {
            prepared.read_again(selectors);
            prepared
        })
        .await
        .ok();
    }

    /// The diagnostics context the pipeline will record into (a disabled one when
    /// the configuration turns diagnostics off): what a host endpoint started before
    /// the pipeline serves.
    pub fn diagnostics_context(&self) -> wattline_diagnostics::Diagnostics {
        self.diagnostics.as_ref().map_or_else(
            wattline_diagnostics::Diagnostics::disabled,
            |(context, _)| context.clone(),
        )
    }

    /// Measures this target instead of the builder's or the configuration's.
    pub fn scope(mut self, target: ScopeTarget) -> Self {
        self.scope = Some(target);
        self
    }

    /// Starts the actors and clocks: the first poll runs now.
    pub async fn spawn(self) -> Result<Pipeline, Error> {
        let config = self.config;
        let target = match self.scope {
            Some(target) => target,
            None => {
                let setting = config
                    .resource_metrics
                    .as_ref()
                    .map_or(MeasurementScopeSetting::RuntimeDefault, |c| {
                        c.measurement_scope
                    });
                // The library's runtime_default is the tree rooted at this process.
                crate::scope_target::resolve_target(
                    setting,
                    MeasurementScopeSetting::ProcessTree,
                    Some(std::process::id()),
                )?
            }
        };
        let running = RunningPipeline::spawn(PipelineSpec {
            run_id: self.run_id,
            root: "/".into(),
            target,
            resource: config.resource_metrics.clone(),
            energy: config.energy.clone(),
            diagnostics: self.diagnostics,
            gpu_source: self.gpu_source,
            sink: self.sink,
            tick_deadline: self.tick_deadline,
            epoch: self.epoch,
            prepared_gpu: self.prepared_gpu,
            measuring_from: self.measuring_from,
            gpu_selection: self.gpu_selection,
            command_group: self.command_group,
            command_group_notes: self.command_group_notes,
        })
        .await?;
        let running = Arc::new(running);
        let workers = start_workers(&config, &running).await;
        Ok(Pipeline {
            inner: running,
            exporters: self.exporters,
            workers: Arc::new(tokio::sync::Mutex::new(workers)),
            owner: std::process::id(),
            target,
        })
    }
}

#[cfg(unix)]
use crate::host::plugins::WorkerPlugins;

/// Worker plugins need Unix sockets; elsewhere none is started.
#[cfg(not(unix))]
#[derive(Debug)]
struct WorkerPlugins;

#[cfg(not(unix))]
impl WorkerPlugins {
    async fn stop(self) {}

    fn running(&self) -> Vec<&str> {
        Vec::new()
    }
}

/// The configured worker plugins, started beside the running pipeline.
#[cfg(unix)]
async fn start_workers(
    config: &EffectiveConfig,
    running: &Arc<RunningPipeline>,
) -> Option<WorkerPlugins> {
    WorkerPlugins::start(
        &config.workers,
        running.diagnostics(),
        running.pipeline_diagnostics(),
        Arc::new(RemoteScopes(Arc::clone(running))),
    )
    .await
}

/// Worker plugins need Unix sockets: say so once when some are configured.
#[cfg(not(unix))]
async fn start_workers(
    config: &EffectiveConfig,
    _running: &Arc<RunningPipeline>,
) -> Option<WorkerPlugins> {
    if !config.workers.is_empty() {
        tracing::warn!("worker plugins need Unix sockets: none started on this OS");
    }
    None
}

/// How often `nvidia-smi`'s full query runs for a polling `interval`: as often, but no
/// more often than `nvidia_smi_collector::MIN_PIPELINE_INTERVAL` (polls in between
/// reuse its last answer).
fn nvidia_smi_interval(interval: Duration) -> Duration {
    use wattline_gpu::nvidia_smi_collector::MIN_PIPELINE_INTERVAL;
    if interval < MIN_PIPELINE_INTERVAL {
        tracing::debug!(
            asked_ms = interval.as_millis() as u64,
            "nvidia-smi's full query runs every {} ms at most",
            MIN_PIPELINE_INTERVAL.as_millis()
        );
    }
    interval.max(MIN_PIPELINE_INTERVAL)
}

/// NVML when it loads, else `nvidia-smi` when present, plus DRM devices.
fn default_gpu_sources(smi_interval: Duration) -> GpuSourceFactory {
    Arc::new(move |events| {
        let mut environment = GpuSourceEnv::from_process(events);
        environment.smi_interval = smi_interval;
        let source = select_default_sources(std::path::Path::new("/"), environment);
        Some(Box::new(source) as Box<dyn GpuSource>)
    })
}

/// The configuration of a pipeline given none: `resource_metrics` on (polling off),
/// `energy` and `diagnostics` on, no exporter, no configuration file read.
pub fn library_default_config() -> EffectiveConfig {
    EffectiveConfig {
        resource_metrics: Some(ResourceMetricsConfig::default()),
        ..EffectiveConfig::default()
    }
}

/// A running pipeline. Cheap to clone; every clone talks to the same actors.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<RunningPipeline>,
    exporters: Option<Arc<wattline_exporters::FanOut>>,
    /// The worker plugins and their host endpoint, until shutdown.
    workers: Arc<tokio::sync::Mutex<Option<WorkerPlugins>>>,
    owner: u32,
    target: ScopeTarget,
}

impl Pipeline {
    /// A builder.
    pub fn builder() -> PipelineBuilder {
        PipelineBuilder::new()
    }

    /// Errors with [`Error::ForkedChild`] when called in a process forked from the one
    /// that started the pipeline (its actors live in the parent). Every other method
    /// checks this first. Allocation-free, so it is safe right after `fork`.
    pub fn ensure_same_process(&self) -> Result<(), Error> {
        self.check_process()
    }

    fn check_process(&self) -> Result<(), Error> {
        let current = wattline_actors::pipeline::current_process_id();
        if current == self.owner {
            Ok(())
        } else {
            Err(Error::ForkedChild {
                owner: self.owner,
                current,
            })
        }
    }

    /// What the pipeline measures.
    pub fn target(&self) -> ScopeTarget {
        self.target
    }

    /// The running pipeline, shared (a span processor starts scopes in it).
    pub(crate) fn running(&self) -> Arc<RunningPipeline> {
        Arc::clone(&self.inner)
    }

    /// The run's identity: the UUID of its root scope in the event file, sent as
    /// `wattline.run.id` on every OTLP export.
    pub fn run_id(&self) -> uuid::Uuid {
        self.inner.root_scope()
    }

    /// A fresh snapshot on the on-demand series (no mark). The first one has no rates.
    pub async fn collect(&self) -> Result<Snapshot, Error> {
        self.check_process()?;
        Ok(self.inner.collect().await?)
    }

    /// A fresh snapshot on the on-demand series, handed to `done` on the thread that
    /// finished it (no mark; the first has no rates): for bindings that hand it to
    /// another runtime, without a thread woken only to pass it on. `done` is called
    /// exactly once, possibly before this returns.
    pub fn collect_then(&self, done: impl FnOnce(Result<Snapshot, Error>) + Send + 'static) {
        if let Err(error) = self.check_process() {
            done(Err(error));
            return;
        }
        self.inner
            .collect_then(move |snapshot| done(snapshot.map_err(Error::from)));
    }

    /// This pipeline's Agent scopes as the host endpoint drives them: scopes another
    /// process starts carry the ATOF `remote` flag.
    #[cfg(unix)]
    pub fn scope_control(&self) -> Arc<dyn crate::host::ScopeControl> {
        Arc::new(RemoteScopes(Arc::clone(&self.inner)))
    }

    /// Starts an Agent scope at this instant (never after a poll in flight): every
    /// poll's mark is copied under it until the guard is dropped or
    /// [`AgentScope::end`] is called. Inside [`AgentScope::run`] of one of this
    /// pipeline's scopes it is that scope's child (see [`crate::current_scope`]). A
    /// send to the pipeline: it waits for nothing (no poll, no device read) and may
    /// be called from any thread, inside a runtime or not.
    pub fn agent_scope(&self, name: &str) -> Result<AgentScope, Error> {
        self.agent_scope_with(name, ScopeOptions::default())
    }

    /// Starts an Agent scope like [`Self::agent_scope`], with `options` (its weight
    /// among the scopes live beside it).
    pub fn agent_scope_with(&self, name: &str, options: ScopeOptions) -> Result<AgentScope, Error> {
        self.check_process()?;
        let parent = crate::agent_scope::current_scope_in(&self.inner);
        AgentScope::start(&self.inner, name, &options, parent)
    }

    /// The energy/cost report so far; takes one last sample first, so even a pipeline
    /// younger than one interval reports a reading.
    /// The exporters flush too (the ATOF file is fsynced) and the report counts what
    /// each exporter dropped.
    pub async fn flush(&self) -> Result<EnergyReport, Error> {
        self.check_process()?;
        // Scope events before this call go out with this flush.
        self.inner.scope_events_written().await;
        let mut report = self.inner.energy_report().await?;
        report.health = self.inner.health().problems;
        if let Some(exporters) = &self.exporters {
            exporters.flush(crate::exporting::EXPORTER_DEADLINE).await;
            report.exporter_drops = exporter_drops(exporters);
            report.exporters = exporter_outcomes(exporters, ExportersAre::Running);
        }
        Ok(report)
    }

    /// Sends what the exporters hold: [`Self::flush`] where the energy component is
    /// on (one last sample, the report dropped), else the exporters alone. For
    /// `flushTelemetry()` before a short program exits.
    pub async fn flush_telemetry(&self) -> Result<(), Error> {
        match self.flush().await {
            Ok(_) => Ok(()),
            Err(Error::Pipeline(PipelineError::EnergyDisabled)) => {
                if let Some(exporters) = &self.exporters {
                    exporters.flush(crate::exporting::EXPORTER_DEADLINE).await;
                }
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Closes the energy window at `at` (e.g. when a measured command exited): the
    /// final report of [`Self::shutdown`], and every scope still live then, end at that
    /// instant instead of at the shutdown call. The first call wins.
    pub fn measuring_until(&self, at: std::time::Instant) {
        let wall =
            chrono::Utc::now() - chrono::Duration::from_std(at.elapsed()).unwrap_or_default();
        self.inner.measuring_until(at, wall);
    }

    /// Flushes, ends every scope, and stops the pipeline; returns the final report when
    /// the energy component is on.
    pub async fn shutdown(&self) -> Result<Option<EnergyReport>, Error> {
        self.check_process()?;
        // Workers first: each closes its diagnostics session while the host still serves.
        if let Some(workers) = self.workers.lock().await.take() {
            workers.stop().await;
        }
        // Before the clocks stop on purpose: afterwards a stopped part is no news.
        let health = self.inner.health();
        self.inner.stop_clocks().await;
        let mut report = match self.inner.final_report().await {
            Ok(mut report) => {
                report.health = health.problems;
                Some(report)
            }
            Err(PipelineError::EnergyDisabled) => None,
            Err(error) => return Err(error.into()),
        };
        self.inner.shutdown().await;
        if let Some(exporters) = &self.exporters {
            // After the pipeline's last events (scope ends); fsyncs the ATOF file.
            exporters
                .shutdown(crate::exporting::EXPORTER_DEADLINE)
                .await;
            if let Some(report) = &mut report {
                report.exporter_drops = exporter_drops(exporters);
                report.exporters = exporter_outcomes(exporters, ExportersAre::ShutDown);
            }
        }
        // Activation teardown: no handle records after this.
        if let Some(context) = self.inner.diagnostics() {
            context.revoke();
        }
        Ok(report)
    }

    /// Whether every clock and actor of the pipeline is still running; a part that
    /// stopped on its own is listed with why, recorded as `pipeline.task_failed`, and
    /// named in the next report.
    pub fn health(&self) -> wattline_actors::pipeline::PipelineHealth {
        self.inner.health()
    }

    /// The pipeline's diagnostics as JSON; `Ok(None)` when the configuration turns
    /// diagnostics off. A context busy with another call is asked again for up to
    /// half a second before [`DiagnosticError::Busy`] is returned: busy is never
    /// reported as off.
    pub fn diagnostics_json(&self) -> Result<Option<String>, DiagnosticsReadError> {
        let Some(context) = self.inner.diagnostics() else {
            return Ok(None);
        };
        let snapshot = context.snapshot_waiting(DIAGNOSTICS_BUSY_LIMIT)?;
        Ok(Some(snapshot.to_json()?))
    }

    /// The plugin ids of the worker plugins running.
    pub async fn running_workers(&self) -> Vec<String> {
        self.workers
            .lock()
            .await
            .as_ref()
            .map(|workers| workers.running().into_iter().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The pipeline's diagnostics snapshot (the host reads the whole context), when
    /// diagnostics are on.
    pub fn diagnostics_snapshot(&self) -> Option<wattline_diagnostics::DiagnosticsSnapshot> {
        self.inner.diagnostics()?.snapshot().ok()
    }

    /// The diagnostics context as a plugin inside this host gets it: one native
    /// session (each call opens another, with budgets of its own), which registers
    /// components and records; it reads the whole context only when the configuration
    /// grants it (`grant_plugin_reads`). With diagnostics off, a disabled facade
    /// (`availability()` says so; factories are never called). Its handles are revoked
    /// at shutdown.
    pub fn diagnostics(&self) -> wattline_diagnostics::PluginDiagnostics {
        let Some(context) = self.inner.diagnostics() else {
            return wattline_diagnostics::PluginDiagnostics::disabled();
        };
        let granted = context
            .capabilities()
            .is_some_and(|limits| limits.grant_plugin_reads);
        wattline_diagnostics::PluginDiagnostics::new(context.clone(), granted)
    }

    /// Registers a native plugin: its [`crate::plugin::NativePlugin::register`] runs
    /// now, with a runtime whose diagnostics are [`Self::diagnostics`] (a native
    /// session of its own).
    pub fn register_native_plugin(
        &self,
        plugin: &mut dyn crate::plugin::NativePlugin,
    ) -> Result<(), Error> {
        crate::plugin::register_native(plugin, self.diagnostics())
            .map_err(|source| Error::NativePlugin { source })
    }

    /// How many times a category's sampler was restarted after failing.
    pub async fn restart_count(&self, category: SamplerCategory) -> u32 {
        self.inner.restart_count(category).await
    }

    /// Poll ticks missed so far (a poll still running when the next was due).
    pub fn missed_ticks(&self) -> u64 {
        self.inner.missed_ticks()
    }

    /// The GPU source in use (`nvml`, `nvidia-smi`, `drm`, a user's), once started.
    pub fn gpu_source_name(&self) -> Option<String> {
        self.inner.gpu_source_name()
    }
}

fn exporter_drops(exporters: &wattline_exporters::FanOut) -> Vec<(String, u64)> {
    exporters
        .stats()
        .into_iter()
        .map(|stats| (stats.name, stats.dropped))
        .collect()
}

/// Whether the exporters' outcomes are final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportersAre {
    /// Still running: what waits in a mailbox will still be exported.
    Running,
    /// Shut down: what still waits in a mailbox (a lane that did not finish by the
    /// shutdown deadline) never will be.
    ShutDown,
}

fn exporter_outcomes(
    exporters: &wattline_exporters::FanOut,
    state: ExportersAre,
) -> Vec<wattline_model::report::ExporterOutcome> {
    exporters
        .stats()
        .into_iter()
        .map(|stats| wattline_model::report::ExporterOutcome {
            name: stats.name,
            exported: stats.exported,
            dropped: stats.dropped,
            lost: stats.lost
                + match state {
                    ExportersAre::Running => 0,
                    ExportersAre::ShutDown => stats.queued as u64,
                },
            failed: stats.failed,
            last_error: stats.last_error,
            slowest_answer_millis: stats
                .slowest_answer
                .map(|took| u64::try_from(took.as_micros().div_ceil(1000)).unwrap_or(u64::MAX)),
        })
        .collect()
}

/// The running pipeline seen by the host endpoint's `AgentScopes` service.
#[cfg(unix)]
struct RemoteScopes(Arc<RunningPipeline>);

#[cfg(unix)]
impl crate::host::ScopeControl for RemoteScopes {
    fn start_remote_scope(&self, start: crate::host::RemoteScopeStart<'_>) -> uuid::Uuid {
        self.0
            .start_agent_scope_with(wattline_actors::pipeline::ScopeStart {
                name: start.name,
                parent: start.parent,
                attributes: &[wattline_model::events::REMOTE_SCOPE],
                process_id: start.process_id,
                weight: start.weight,
                traceparent: start.traceparent,
            })
    }

    fn end_scope(&self, uuid: uuid::Uuid, flags: &[&'static str]) -> bool {
        self.0.end_agent_scope_with(uuid, flags)
    }

    fn end_remote_call_scope(
        &self,
        uuid: uuid::Uuid,
        call: wattline_model::remote_call::RemoteCall,
    ) -> bool {
        self.0.end_remote_call_scope(uuid, call)
    }
}

//! The actor pipeline's wiring: spawning the energy actor (`energy/actor.rs`), the
//! supervisor over one actor per sampler (`samplers/actor.rs`), the merger
//! (`merger/actor.rs`) and the clocks. [`RunningPipeline`] is the handle the public
//! library API wraps.

pub(crate) mod clock;
pub(crate) mod gpu_events;
pub(crate) mod health;
pub use health::PipelineHealth;
mod scope_start;
mod stages;
pub(crate) mod supervisor;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use ractor::rpc::CallResult;
use ractor::{ActorRef, RpcReplyPort};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;
use wattline_config::diagnostics::DiagnosticsLimits;
use wattline_config::energy::EnergySettings;
use wattline_model::remote_call::RemoteCall;

use self::clock::{MissedTicks, sample_energy_now};
use self::health::HealthBoard;
use self::supervisor::SupervisorMessage;
use crate::energy::input::EnergyInbox;
use crate::error::PipelineError;
use crate::merger::actor::MergerMessage;
pub use crate::merger::scopes::ROOT_SCOPE_NAME;
use crate::merger::scopes::{scope_event, strictly_after};
use crate::samplers::rapl::RaplReader;
use crate::samplers::registry::SamplerRegistry;
use crate::scope::ScopeTarget;
use crate::scope_boundary::stream::{self as scope_stream, StreamItem};
use crate::scope_boundary::{BoundaryAt, ScopeBoundary, ScopeStartExtras};
pub use scope_start::{ScopeStart, current_process_id};
use wattline_diagnostics::{Diagnostics, PipelineDiagnostics};
use wattline_gpu::{GpuEventSink, GpuSource, NoopEventSink, SamplePart};
use wattline_model::category::SamplerCategory;
use wattline_model::energy::Epoch;
use wattline_model::events::{ENDED_AT_PROGRAM_EXIT, EventSink, ScopeCategory, new_uuid_at};
use wattline_model::gpu_selection::GpuSelection;
use wattline_model::report::EnergyReport;
use wattline_model::snapshot::Snapshot;

/// Makes the GPU source (at start and after each restart of the GPU sampler), given
/// where its events go. A factory that returns `None` turns GPU reading off.
pub type GpuSourceFactory =
    Arc<dyn Fn(Arc<dyn GpuEventSink>) -> Option<Box<dyn GpuSource>> + Send + Sync>;

/// Everything a pipeline needs to start.
pub struct PipelineSpec {
    /// The run's identity: the UUID of its root scope (`wattline.run.id` on exports).
    pub run_id: Uuid,
    /// Root of the OS readers (`/`).
    pub root: PathBuf,
    /// What to measure.
    pub target: ScopeTarget,
    /// The `resource_metrics` component; `None` when it is off.
    pub resource: Option<ResourceMetricsConfig>,
    /// The `energy` component; `None` when it is off.
    pub energy: Option<EnergySettings>,
    /// The diagnostics context and the pipeline's components in it (see
    /// [`open_diagnostics`]); `None` when the `diagnostics` component is off.
    pub diagnostics: Option<(Diagnostics, PipelineDiagnostics)>,
    /// The GPU source.
    pub gpu_source: GpuSourceFactory,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// How long a tick waits for its samplers; default 80% of the poll interval,
    /// between 50 ms and 10 s.
    pub tick_deadline: Option<Duration>,
    /// The monotonic epoch energy records count from: taken before the first reading.
    pub epoch: Epoch,
    /// The GPU source already started and answered (see [`prepare_gpu_source`]); the
    /// factory makes the next one only after a restart.
    pub prepared_gpu: Option<PreparedGpu>,
    /// Energy counts from this instant (default: when `spawn` is called).
    pub measuring_from: Option<(Instant, DateTime<Utc>)>,
    /// The GPUs counted, replacing the configuration's `gpu.devices` (see
    /// [`wattline_gpu::visible_devices`]); `None` keeps the configuration's.
    pub gpu_selection: Option<GpuSelection>,
    /// The measured command's own cgroup (see [`crate::command_cgroup`]): its
    /// members join a process tree.
    pub command_group: Option<PathBuf>,
    /// Why the command has no cgroup of its own, or what its group lacks: recorded as
    /// `pipeline.command_cgroup_unavailable` when the pipeline starts.
    pub command_group_notes: Vec<String>,
}

/// A GPU source started before the pipeline, with the readings taken while waiting for
/// its first answer.
pub struct PreparedGpu {
    /// The source; `None` when GPU reading is off.
    pub source: Option<Box<dyn GpuSource>>,
    /// What it read first, one part per backend.
    pub first_parts: Vec<SamplePart>,
    /// Power read again around the start of the work ([`PreparedGpu::read_again`]):
    /// integrated, with no gauge of their own.
    pub edge_parts: Vec<SamplePart>,
}

impl PreparedGpu {
    /// Reads the devices' power again now and keeps the parts for after the others. A
    /// host calls it right before and right after it starts the work to measure, so
    /// the interval that holds the start is milliseconds long (an NVML driver call
    /// each) rather than the time the pipeline takes to spawn: the energy cut at the
    /// start is then exact to within what those milliseconds can hold. For
    /// `nvidia-smi` it is the tool's latest answer, kept only when newer. May block on
    /// driver calls.
    pub fn read_again(&mut self, device_selectors: Vec<String>) {
        if let Some(source) = self.source.as_mut() {
            let parts = source.sample_parts(&devices_only(device_selectors));
            self.edge_parts.extend(parts);
        }
    }
}

/// A request for the devices' readings alone (no processes): what the energy stage
/// needs before the pipeline runs.
fn devices_only(device_selectors: Vec<String>) -> wattline_gpu::GpuSampleRequest {
    wattline_gpu::GpuSampleRequest {
        series: wattline_model::series::SamplingSeries::Polling,
        device_metrics: true,
        process_metrics: false,
        device_selectors,
        processes: wattline_gpu::ProcessScope::Pids(Default::default()),
    }
}

/// Where a GPU source's events go: the `gpu` diagnostics component, or nowhere.
pub fn gpu_event_sink(diagnostics: Option<&PipelineDiagnostics>) -> Arc<dyn GpuEventSink> {
    match diagnostics {
        Some(diagnostics) => Arc::new(gpu_events::DiagnosticsGpuEvents(diagnostics.clone())),
        None => Arc::new(NoopEventSink),
    }
}

/// Makes the GPU source and waits, at most `limit`, for its first answer, on a
/// blocking worker; then takes its first reading. Run before the work to measure
/// starts, so even the first instant of it has a reading (and `collect` shows devices
/// on its first call).
pub async fn prepare_gpu_source(
    factory: &GpuSourceFactory,
    diagnostics: Option<&PipelineDiagnostics>,
    limit: Duration,
    device_selectors: Vec<String>,
) -> PreparedGpu {
    let factory = Arc::clone(factory);
    let events = gpu_event_sink(diagnostics);
    let make = move || {
        let mut source = factory(events);
        let first_parts = match source.as_mut() {
            Some(source) => {
                source.wait_until_ready(limit);
                source.sample_parts(&devices_only(device_selectors))
            }
            None => Vec::new(),
        };
        PreparedGpu {
            source,
            first_parts,
            edge_parts: Vec::new(),
        }
    };
    // The runtime is needed inside: an `nvidia-smi` source starts its task on it.
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let _entered = runtime.enter();
        make()
    })
    .await
    .unwrap_or(PreparedGpu {
        source: None,
        first_parts: Vec::new(),
        edge_parts: Vec::new(),
    })
}

/// How long a diagnostics read keeps asking a context busy with another call.
pub const DIAGNOSTICS_BUSY_LIMIT: Duration = Duration::from_millis(500);

/// A running pipeline.
pub struct RunningPipeline {
    supervisor: ActorRef<SupervisorMessage>,
    merger: ActorRef<MergerMessage>,
    energy: Option<EnergyInbox>,
    registry: SamplerRegistry,
    diagnostics: Option<Diagnostics>,
    pipeline_diagnostics: Option<PipelineDiagnostics>,
    cancel: CancellationToken,
    missed_ticks: Arc<MissedTicks>,
    gpu_source_name: Arc<Mutex<Option<String>>>,
    clock_tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    root_scope: Uuid,
    root_started: DateTime<Utc>,
    root_ended: AtomicBool,
    sink: Arc<dyn EventSink>,
    rapl: Arc<RaplReader>,
    health: HealthBoard,
    /// Scope boundaries' one way to the merger, which writes their events and sends
    /// them on to the energy actor: stamped and sent in one step.
    scopes: scope_stream::ScopeStream,
    /// On-demand collections (`None` with resource metrics off).
    on_demand: Option<ActorRef<crate::on_demand::OnDemandMessage>>,
    /// Where the final report's window closes when it is not the shutdown call (a
    /// measured command's exit).
    measuring_until: std::sync::OnceLock<(Instant, DateTime<Utc>)>,
}

fn is_alive(status: ractor::ActorStatus) -> bool {
    matches!(
        status,
        ractor::ActorStatus::Unstarted
            | ractor::ActorStatus::Starting
            | ractor::ActorStatus::Running
            | ractor::ActorStatus::Upgrading
    )
}

/// Opens the diagnostics context with `limits` and registers the pipeline's components
/// in it, once; the exporters record into the same components.
pub fn open_diagnostics(
    limits: Option<DiagnosticsLimits>,
) -> Result<Option<(Diagnostics, PipelineDiagnostics)>, PipelineError> {
    let Some(limits) = limits else {
        return Ok(None);
    };
    let context =
        Diagnostics::new(limits).map_err(|error| PipelineError::Diagnostics(error.to_string()))?;
    let components = PipelineDiagnostics::register(&context)
        .map_err(|error| PipelineError::Diagnostics(error.to_string()))?;
    Ok(Some((context, components)))
}

impl RunningPipeline {
    /// Starts every actor and clock of `spec`.
    pub async fn spawn(mut spec: PipelineSpec) -> Result<Self, PipelineError> {
        let (diagnostics, pipeline_diagnostics) = match &spec.diagnostics {
            Some((context, components)) => (Some(context.clone()), Some(components.clone())),
            None => (None, None),
        };
        let cancel = CancellationToken::new();
        let registry = SamplerRegistry::default();
        // The root scope opens first, so every event of the pipeline sits inside it.
        let root_scope = spec.run_id;
        let root_started = Utc::now();
        spec.sink.send(scope_event(
            root_scope,
            root_scope,
            None,
            &ROOT_SCOPE_NAME.into(),
            root_started,
            ScopeCategory::Start,
            Vec::new(),
        ));
        let energy = stages::spawn_energy(stages::energy_arguments(&spec)).await?;
        // Scope boundaries' one way to the merger (and through it to the energy actor).
        let (scopes, scope_receiver) = scope_stream::scope_stream();
        let mut prepared_gpu = spec.prepared_gpu.take();
        if let Some(energy) = &energy {
            stages::send_prepared_readings(energy, spec.measuring_from, prepared_gpu.as_mut());
        }
        let samplers = stages::plan_samplers(
            &spec,
            energy.as_ref(),
            pipeline_diagnostics.as_ref(),
            prepared_gpu.and_then(|prepared| prepared.source),
        );
        let supervisor =
            stages::spawn_supervisor(samplers.factories, &registry, pipeline_diagnostics.as_ref())
                .await?;
        let merger = stages::spawn_merger(stages::plan_merger(
            &spec,
            samplers.categories,
            &registry,
            pipeline_diagnostics.as_ref(),
            root_scope,
            (energy.clone(), scope_receiver),
        ))
        .await?;
        if let Some(diagnostics) = &pipeline_diagnostics {
            for note in &spec.command_group_notes {
                diagnostics.command_cgroup_unavailable(note);
            }
        }
        let health = HealthBoard::new(pipeline_diagnostics.clone());
        let energy_interval = spec
            .energy
            .as_ref()
            .map_or(Duration::from_secs(5), |settings| {
                Duration::from_millis(settings.config.interval_millis)
            });
        let rapl = Arc::new(RaplReader::new(
            spec.root.clone(),
            pipeline_diagnostics.clone(),
        ));
        let clocks = stages::spawn_clocks(stages::ClockInputs {
            merger: &merger,
            energy: energy.as_ref(),
            energy_interval,
            registry: &registry,
            rapl: &rapl,
            health: &health,
            diagnostics: pipeline_diagnostics.as_ref(),
            cancel: &cancel,
        });
        // The readings sent above reach the energy actor before any scope boundary:
        // those go through the merger, spawned after they were sent.
        Ok(RunningPipeline {
            supervisor,
            scopes,
            on_demand: merger.on_demand.clone(),
            merger: merger.merger,
            energy,
            registry,
            diagnostics,
            pipeline_diagnostics,
            cancel,
            missed_ticks: clocks.missed_ticks,
            gpu_source_name: samplers.gpu_source_name,
            clock_tasks: Mutex::new(clocks.tasks),
            root_scope,
            root_started,
            root_ended: AtomicBool::new(false),
            measuring_until: std::sync::OnceLock::new(),
            sink: spec.sink,
            rapl,
            health,
        })
    }

    /// The next scope boundary's caller (a start, an end, the final report's close,
    /// a report's instant) stops for `pause` right after its instant is read, as a
    /// thread preempted there would: tests of the order the energy stage books
    /// boundaries and readings in.
    #[cfg(feature = "test-support")]
    pub fn stall_next_boundary(&self, pause: Duration) {
        self.scopes.stall_next(pause);
    }

    /// Whether the stall [`Self::stall_next_boundary`] armed is still to come: once
    /// not, its caller has read its instant (and holds the scope stream until it
    /// sends).
    #[cfg(feature = "test-support")]
    pub fn boundary_stall_armed(&self) -> bool {
        self.scopes.stall_armed()
    }

    /// Stops the merger as if it had failed (tests of [`Self::health`]).
    #[cfg(feature = "test-support")]
    pub fn stop_merger_for_tests(&self) {
        self.merger.stop(Some("stopped by a test".into()));
    }

    /// The UUID of the pipeline's root scope (the run's identity).
    pub fn root_scope(&self) -> Uuid {
        self.root_scope
    }

    /// Whether every clock and actor is still running: a part that stopped on its own
    /// is listed with why (and was recorded as `pipeline.task_failed`). After
    /// shutdown, stopped parts are no problem.
    pub fn health(&self) -> PipelineHealth {
        if !self.cancel.is_cancelled() {
            let actors = [
                ("merger", Some(self.merger.get_status())),
                (
                    "on-demand collection",
                    self.on_demand.as_ref().map(|actor| actor.get_status()),
                ),
                ("supervisor", Some(self.supervisor.get_status())),
                (
                    "energy stage",
                    self.energy
                        .as_ref()
                        .map(|energy| energy.actor().get_status()),
                ),
            ];
            for (component, status) in actors {
                if let Some(status) = status.filter(|status| !is_alive(*status)) {
                    self.health
                        .record(component, format!("actor is {status:?}, not running"));
                }
            }
        }
        PipelineHealth {
            problems: self.health.problems(),
        }
    }

    /// A fresh snapshot on the on-demand series; no mark.
    pub async fn collect(&self) -> Result<Snapshot, PipelineError> {
        let (sender, answer) = tokio::sync::oneshot::channel();
        self.collect_then(move |snapshot| {
            let _ = sender.send(snapshot);
        });
        answer.await.unwrap_or(Err(PipelineError::Stopped))
    }

    /// A fresh snapshot on the on-demand series, handed to `done` on the thread that
    /// finished it (a blocking reader thread, usually): for callers that would
    /// otherwise wake a thread only to pass it on. `done` is called exactly once,
    /// with an error when resource metrics are off or the pipeline stopped.
    pub fn collect_then(
        &self,
        done: impl FnOnce(Result<Snapshot, PipelineError>) + Send + 'static,
    ) {
        let done = crate::on_demand::SnapshotCallback::new(done);
        let Some(on_demand) = &self.on_demand else {
            done.call(Err(PipelineError::ResourceMetricsDisabled));
            return;
        };
        // A stopped actor drops the message, and with it `done`: called with
        // `Stopped` then.
        let _ = on_demand.cast(crate::on_demand::OnDemandMessage::Collect(done));
    }

    /// Starts an Agent scope at this instant, without waiting for a poll in flight; its
    /// UUID identifies it for [`Self::end_agent_scope`].
    pub fn start_agent_scope(&self, name: &str) -> Uuid {
        self.start_agent_scope_in(name, None)
    }

    /// Starts an Agent scope nested in the live Agent scope `parent` (its events name
    /// `parent` as their parent); like [`Self::start_agent_scope`] otherwise.
    pub fn start_agent_scope_in(&self, name: &str, parent: Option<Uuid>) -> Uuid {
        self.start_agent_scope_with(ScopeStart {
            parent,
            ..ScopeStart::local(name)
        })
    }

    /// Starts the Agent scope `start` describes (its parent, ATOF scope flags such as
    /// [`wattline_model::events::REMOTE_SCOPE`], its process and weight); like
    /// [`Self::start_agent_scope_in`] otherwise.
    pub fn start_agent_scope_with(&self, start: ScopeStart<'_>) -> Uuid {
        let ScopeStart {
            name,
            parent,
            attributes,
            process_id,
            weight,
            traceparent,
        } = start;
        let name = scope_start::shared_name(name);
        let extras = ScopeStartExtras::new(attributes, traceparent);
        // The merger writes the start event in order with its polls: no mark under
        // this scope comes before it. Stamped as it is sent (raw clock readings: the
        // actors make the calendar time).
        self.scopes.send_stamped(|at, wall| {
            let uuid = new_uuid_at(wall.into());
            let boundary = ScopeBoundary::Started {
                uuid,
                name,
                parent,
                process_id,
                weight,
                extras,
                at,
                wall,
            };
            (StreamItem::Boundary(boundary), uuid)
        })
    }

    /// Ends an Agent scope at this instant, without waiting (safe from `Drop`).
    pub fn end_agent_scope(&self, uuid: Uuid) {
        self.end_agent_scope_with(uuid, &[]);
    }

    /// Ends an Agent scope adding `flags` to its end event (e.g.
    /// [`wattline_model::events::ENDED_AT_PROGRAM_EXIT`]); `false` when the pipeline
    /// has shut down, which ended every scope still live. Ending a scope that is not
    /// live does nothing.
    pub fn end_agent_scope_with(&self, uuid: Uuid, flags: &[&'static str]) -> bool {
        self.end_scope(uuid, flags, None)
    }

    /// Ends an Agent scope that stood for `call`, a model call served by another
    /// machine: the energy stage estimates the call's energy there (the configured and
    /// shipped factor tables) unless `call` brings an estimate, and keeps it beside the
    /// measured figures. `false` when the pipeline has shut down.
    pub fn end_remote_call_scope(&self, uuid: Uuid, call: RemoteCall) -> bool {
        self.end_scope(uuid, &[], Some(Box::new(call)))
    }

    fn end_scope(
        &self,
        uuid: Uuid,
        flags: &[&'static str],
        remote_call: Option<Box<RemoteCall>>,
    ) -> bool {
        if self.root_ended.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let ended_at_program_exit = flags.contains(&ENDED_AT_PROGRAM_EXIT);
        let flags = flags.to_vec();
        // Ended at its program's exit: at that instant, where the window closed, so its
        // figures and the final report's agree (the close was sent before).
        if let Some(&(at, wall)) = self.measuring_until.get().filter(|_| ended_at_program_exit) {
            self.scopes.send(StreamItem::Boundary(ScopeBoundary::Ended {
                uuid,
                flags,
                at: BoundaryAt::WindowClose(at),
                wall: std::time::SystemTime::from(wall).into(),
                remote_call,
            }));
        } else {
            self.scopes.send_stamped(|at, wall| {
                let at = BoundaryAt::Stamped(at);
                let boundary = ScopeBoundary::Ended {
                    uuid,
                    flags,
                    at,
                    wall,
                    remote_call,
                };
                (StreamItem::Boundary(boundary), ())
            });
        }
        true
    }

    /// Waits until the start and end events of every scope started or ended before
    /// this call are written to the sink (the merger writes them, in order with its
    /// polls), without waiting for a poll in flight: a flush then carries them.
    pub async fn scope_events_written(&self) {
        let _ = self
            .ask_behind_scopes(StreamItem::Written, Some(Duration::from_secs(10)))
            .await;
    }

    /// Sends the item `make` builds around a reply port on the scope stream, behind
    /// every boundary sent before, and waits (at most `limit`) for the answer; `None`
    /// when none came.
    async fn ask_behind_scopes<T>(
        &self,
        make: impl FnOnce(RpcReplyPort<T>) -> StreamItem,
        limit: Option<Duration>,
    ) -> Option<T> {
        let (reply, answer) = ractor::concurrency::oneshot();
        self.scopes.send(make(reply.into()));
        match limit {
            Some(limit) => tokio::time::timeout(limit, answer).await.ok()?.ok(),
            None => answer.await.ok(),
        }
    }

    /// The report as of this call: takes a fresh reading from every source (for a
    /// cached source, a new measurement, waited for within its timeout), integrates up
    /// to it, and leaves out what lies after this instant.
    /// Every boundary stamped before this call is in it.
    pub async fn energy_report(&self) -> Result<EnergyReport, PipelineError> {
        // Stamped on the scope stream: the report, asked through the merger after the
        // last reading, comes behind every boundary stamped before this instant.
        let (at, wall) = self.scopes.stamp();
        self.energy_report_at(at.instant(), wall.into(), false)
            .await
    }

    async fn energy_report_at(
        &self,
        at: Instant,
        wall: DateTime<Utc>,
        final_report: bool,
    ) -> Result<EnergyReport, PipelineError> {
        let energy = self.energy.as_ref().ok_or(PipelineError::EnergyDisabled)?;
        // Always sent (no slot), bounded by its own limit; when it cannot be taken the
        // report ends at the previous reading and says why.
        let last_sample = sample_energy_now(
            &self.registry,
            energy,
            &self.rapl,
            wattline_gpu::nvidia_smi_collector::DEFAULT_TIMEOUT,
            true,
            None,
        )
        .await;
        let last_sample_missing = last_sample.err();
        if let (Some(reason), Some(diagnostics)) =
            (&last_sample_missing, &self.pipeline_diagnostics)
        {
            diagnostics.record_deadline_missed(
                SamplerCategory::Gpu,
                &format!("the report's last power sample: {reason}"),
            );
        }
        // Through the merger: behind every boundary sent before, which it sends on to
        // the energy actor first. The energy actor answers.
        let report = |reply| StreamItem::Report {
            at,
            wall,
            final_report,
            reply,
        };
        let mut report = self
            .ask_behind_scopes(report, None)
            .await
            .ok_or(PipelineError::Stopped)?;
        report.last_sample_missing = last_sample_missing;
        report.diagnostics = self
            .diagnostics
            .as_ref()
            .and_then(|d| d.snapshot_waiting(DIAGNOSTICS_BUSY_LIMIT).ok())
            .and_then(|snapshot| serde_json::to_value(snapshot).ok());
        Ok(report)
    }

    /// Closes the energy window at `at` (wall-clock `wall`), e.g. when a measured
    /// command exited: the final report, and the end of every scope still live, are
    /// as of that instant, not of the shutdown that follows it. The first call wins.
    pub fn measuring_until(&self, at: Instant, wall: DateTime<Utc>) {
        if self.measuring_until.set((at, wall)).is_ok() {
            // Sent before any end made at that instant: the energy stage settles no
            // step such an end could still reach.
            self.scopes
                .send(StreamItem::Boundary(ScopeBoundary::WindowCloses {
                    at: BoundaryAt::WindowClose(at),
                }));
        }
    }

    /// The final report: live Agent scopes end at this instant (the one given to
    /// [`Self::measuring_until`], else now), which is also the report's, so the report
    /// and the event file agree.
    pub async fn final_report(&self) -> Result<EnergyReport, PipelineError> {
        let (at, wall) = match self.measuring_until.get() {
            Some(&closes) => closes,
            // The window closes now, stamped as it is sent: the scopes still live end
            // at it, after readings taken later may have been booked.
            None => self.scopes.send_stamped(|at, wall| {
                let closes = (at.instant(), DateTime::<Utc>::from(wall));
                let at = BoundaryAt::Stamped(at);
                let close = ScopeBoundary::WindowCloses { at };
                (StreamItem::Boundary(close), closes)
            }),
        };
        // The merger ends them and sends the ends on, ahead of the report.
        self.scopes.send(StreamItem::EndLiveScopes { at, wall });
        self.energy_report_at(at, wall, true).await
    }

    /// How many times a category's sampler was restarted.
    pub async fn restart_count(&self, category: SamplerCategory) -> u32 {
        match self
            .supervisor
            .call(
                |reply| SupervisorMessage::RestartCount(category, reply),
                None,
            )
            .await
        {
            Ok(CallResult::Success(count)) => count,
            _ => 0,
        }
    }

    /// Poll ticks missed so far.
    pub fn missed_ticks(&self) -> u64 {
        self.missed_ticks
            .0
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The diagnostics context, when diagnostics are on.
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        self.diagnostics.as_ref()
    }

    /// The pipeline's own components, to record host-side failures (a worker plugin's).
    pub fn pipeline_diagnostics(&self) -> Option<&PipelineDiagnostics> {
        self.pipeline_diagnostics.as_ref()
    }

    /// The GPU source in use, once the GPU sampler has started.
    pub fn gpu_source_name(&self) -> Option<String> {
        self.gpu_source_name
            .lock()
            .ok()
            .and_then(|name| name.clone())
    }

    /// Stops the poll and energy clocks and waits until no tick is in progress, so a
    /// report taken next is the last word: no later sample can add to it.
    pub async fn stop_clocks(&self) {
        self.cancel.cancel();
        let tasks: Vec<_> = match self.clock_tasks.lock() {
            Ok(mut tasks) => tasks.drain(..).collect(),
            Err(poisoned) => poisoned.into_inner().drain(..).collect(),
        };
        for task in tasks {
            let _ = task.await;
        }
        // A poll the clock had already started finishes before this returns.
        let _ = self.merger.call(MergerMessage::Sync, None).await;
    }

    /// Stops the clocks, ends every scope, and stops every actor.
    pub async fn shutdown(&self) {
        // After the last mark (no poll left in flight), the scopes end, stamped on the
        // scope stream: the merger sends their ends on behind every boundary stamped
        // before.
        self.stop_clocks().await;
        let (reply, closed) = ractor::concurrency::oneshot();
        self.scopes.send_stamped(|at, wall| {
            let reply = reply.into();
            (StreamItem::Close { at, wall, reply }, ())
        });
        let _ = tokio::time::timeout(Duration::from_secs(10), closed).await;
        if !self
            .root_ended
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            self.sink.send(scope_event(
                self.root_scope,
                self.root_scope,
                None,
                &ROOT_SCOPE_NAME.into(),
                strictly_after(self.root_started, Utc::now()),
                ScopeCategory::End,
                Vec::new(),
            ));
        }
        self.merger.stop(None);
        if let Some(on_demand) = &self.on_demand {
            on_demand.stop(None);
        }
        let _ = self
            .supervisor
            .call(
                SupervisorMessage::StopChildren,
                Some(Duration::from_secs(10)),
            )
            .await;
        self.supervisor.stop(None);
        if let Some(energy) = &self.energy {
            // Drained, and waited for: the scopes' ends the merger sent are booked, and
            // a power reading it is still booking (the dense stream keeps coming until
            // now) would otherwise reach the exporters after their shutdown, and the
            // report would count it as lost.
            let _ = energy
                .actor()
                .drain_and_wait(Some(Duration::from_secs(10)))
                .await;
        }
        // The activation ends with its last handle: so do its components.
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.revoke();
        }
    }
}

impl Drop for RunningPipeline {
    /// A pipeline dropped without `shutdown` still stops its clocks and actors, so
    /// nothing keeps sampling for a handle nobody holds.
    fn drop(&mut self) {
        self.cancel.cancel();
        self.merger.stop(None);
        if let Some(on_demand) = &self.on_demand {
            on_demand.stop(None);
        }
        self.supervisor.stop(None);
        if let Some(energy) = &self.energy {
            energy.actor().stop(None);
        }
        // The activation ends with its last handle: so do its components.
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.revoke();
        }
    }
}

//! Starting the pipeline's stages, one function each, in the order
//! [`RunningPipeline::spawn`](super::RunningPipeline::spawn) runs them: the energy
//! actor (handed the readings taken while the GPU source was prepared), the sampler
//! factories and their supervisor, the merger, and the clocks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorRef};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;

use super::clock::{MissedTicks, spawn_energy_clock, spawn_poll_clock};
use super::health::{HealthBoard, watch_task};
use super::supervisor::{SamplerFactory, Supervisor, SupervisorArguments, SupervisorMessage};
use super::{PipelineSpec, PreparedGpu, gpu_event_sink};
use crate::categories::{enabled_categories, sampler_factories};
use crate::energy::actor::{EnergyActor, EnergyArguments};
use crate::energy::input::{EnergyInbox, EnergyInput};
use crate::error::PipelineError;
use crate::merger::actor::{MergerActor, MergerArguments, MergerMessage};
use crate::merger::tick_plan::TickPlan;
use crate::on_demand::{ON_DEMAND_LIMIT, OnDemandActor, OnDemandArguments, OnDemandMessage};
use crate::samplers::CategorySampler;
use crate::samplers::environment::EnvironmentReader;
use crate::samplers::gpu::GpuSampler;
use crate::samplers::rapl::RaplReader;
use crate::samplers::registry::SamplerRegistry;
use crate::scope_boundary::stream::StreamItem;
use wattline_diagnostics::PipelineDiagnostics;
use wattline_gpu::{GpuSource, PowerSample, PowerSampleSink};
use wattline_model::category::SamplerCategory;

fn spawn_error(error: ractor::SpawnErr) -> PipelineError {
    PipelineError::Spawn(error.to_string())
}

/// The energy actor's arguments when the `energy` component is on. Taken from `spec`
/// before any await: the spec holds the prepared GPU source, which is not `Sync`, so
/// no borrow of it may live across one.
pub(super) fn energy_arguments(spec: &PipelineSpec) -> Option<EnergyArguments> {
    spec.energy.as_ref().map(|settings| EnergyArguments {
        settings: settings.clone(),
        sink: Arc::clone(&spec.sink),
        epoch: spec.epoch,
    })
}

/// Spawns the energy actor, when it has `arguments`.
pub(super) async fn spawn_energy(
    arguments: Option<EnergyArguments>,
) -> Result<Option<EnergyInbox>, PipelineError> {
    let Some(arguments) = arguments else {
        return Ok(None);
    };
    let (actor, _) = Actor::spawn(None, EnergyActor, arguments)
        .await
        .map_err(spawn_error)?;
    Ok(Some(EnergyInbox::new(actor)))
}

/// Opens the energy window (at `measuring_from`, default now) and hands the energy
/// stage the readings taken while the GPU source was prepared, which it takes out of
/// `prepared`.
pub(super) fn send_prepared_readings(
    energy: &EnergyInbox,
    measuring_from: Option<(Instant, DateTime<Utc>)>,
    prepared: Option<&mut PreparedGpu>,
) {
    // The window's opening first, so an interval the readings taken while preparing
    // close (one before and one after a command's exec) is cut at it.
    let (at, wall) = measuring_from.unwrap_or_else(|| (Instant::now(), Utc::now()));
    energy.send(EnergyInput::MeasuringFrom { at, wall });
    let (first, edges) = prepared
        .map(|prepared| {
            (
                std::mem::take(&mut prepared.first_parts),
                std::mem::take(&mut prepared.edge_parts),
            )
        })
        .unwrap_or_default();
    for part in first {
        let sample = PowerSample::from_part(part, false);
        energy.send(EnergyInput::Power { sample });
    }
    for part in edges {
        let mut sample = PowerSample::from_part(part, false);
        sample.dense = true;
        energy.send(EnergyInput::Power { sample });
    }
}

/// The samplers the supervisor starts and the categories the merger assembles.
pub(super) struct SamplerPlan {
    /// One factory per sampler, the GPU's last when it is wanted.
    pub factories: Vec<(SamplerCategory, SamplerFactory)>,
    /// The enabled resource categories.
    pub categories: Vec<SamplerCategory>,
    /// The GPU source in use, filled when the GPU sampler starts.
    pub gpu_source_name: Arc<Mutex<Option<String>>>,
}

/// Plans the samplers of `spec`: one per enabled resource category, and the GPU's
/// when resource metrics want it or the energy stage runs (`energy`). The GPU sampler
/// starts on `prepared_source` and forwards its power samples to `energy`.
pub(super) fn plan_samplers(
    spec: &PipelineSpec,
    energy: Option<&EnergyInbox>,
    diagnostics: Option<&PipelineDiagnostics>,
    prepared_source: Option<Box<dyn GpuSource>>,
) -> SamplerPlan {
    let resource = spec.resource.as_ref();
    let mut factories = resource
        .map(|config| sampler_factories(&spec.root, config))
        .unwrap_or_default();
    let categories = resource.map(enabled_categories).unwrap_or_default();
    let gpu_source_name = Arc::new(Mutex::new(None));
    if resource.is_some_and(|c| c.gpu.enabled) || energy.is_some() {
        let factory = gpu_sampler_factory(
            spec,
            energy,
            diagnostics,
            prepared_source,
            Arc::clone(&gpu_source_name),
        );
        factories.push((SamplerCategory::Gpu, factory));
    }
    SamplerPlan {
        factories,
        categories,
        gpu_source_name,
    }
}

/// The GPU sampler's factory: the source prepared before the pipeline first, a new
/// one from `spec.gpu_source` after each restart; its name goes to `name_slot`.
fn gpu_sampler_factory(
    spec: &PipelineSpec,
    energy: Option<&EnergyInbox>,
    diagnostics: Option<&PipelineDiagnostics>,
    prepared_source: Option<Box<dyn GpuSource>>,
    name_slot: Arc<Mutex<Option<String>>>,
) -> SamplerFactory {
    let prepared_source = Mutex::new(prepared_source);
    let gpu_config = spec
        .resource
        .as_ref()
        .map(|c| c.gpu.clone())
        .unwrap_or_default();
    let power_sink = energy.map(|inbox| Arc::new(inbox.clone()) as Arc<dyn PowerSampleSink>);
    let make_source = Arc::clone(&spec.gpu_source);
    let events = gpu_event_sink(diagnostics);
    let gpu_selection = spec.gpu_selection.clone();
    let dense_period = spec
        .energy
        .as_ref()
        .map(|settings| Duration::from_millis(settings.config.power_sample_millis));
    Arc::new(move || {
        let prepared = prepared_source.lock().ok().and_then(|mut slot| slot.take());
        let source = prepared.or_else(|| make_source(Arc::clone(&events)));
        let name = source.as_ref().map(|s| s.name().to_string());
        if let Ok(mut slot) = name_slot.lock() {
            slot.clone_from(&name);
        }
        let sampler = GpuSampler::new(source, gpu_config.clone(), power_sink.clone())
            .with_selection(gpu_selection.clone());
        let sampler = match dense_period {
            Some(period) => sampler.with_dense_power(period),
            None => sampler,
        };
        Box::new(sampler) as Box<dyn CategorySampler>
    })
}

/// Spawns the supervisor, which starts one sampler actor per factory.
pub(super) async fn spawn_supervisor(
    factories: Vec<(SamplerCategory, SamplerFactory)>,
    registry: &SamplerRegistry,
    diagnostics: Option<&PipelineDiagnostics>,
) -> Result<ActorRef<SupervisorMessage>, PipelineError> {
    let (supervisor, _) = Actor::spawn(
        None,
        Supervisor,
        SupervisorArguments {
            factories,
            registry: registry.clone(),
            diagnostics: diagnostics.cloned(),
        },
    )
    .await
    .map_err(spawn_error)?;
    Ok(supervisor)
}

/// The merger, the on-demand actor, and the poll clock's period when it is to run.
pub(super) struct MergerStage {
    /// The merger actor.
    pub merger: ActorRef<MergerMessage>,
    /// The poll period, when resource metrics are on and polled.
    pub poll_period: Option<Duration>,
    /// The on-demand actor, when resource metrics are on.
    pub on_demand: Option<ActorRef<OnDemandMessage>>,
}

/// What the merger and the on-demand actor are made of, and the poll period, before
/// they are spawned.
pub(super) struct MergerPlan {
    root: std::path::PathBuf,
    target: crate::scope::ScopeTarget,
    command_group: Option<std::path::PathBuf>,
    config: ResourceMetricsConfig,
    categories: Vec<SamplerCategory>,
    registry: SamplerRegistry,
    diagnostics: Option<PipelineDiagnostics>,
    sink: Arc<dyn wattline_model::events::EventSink>,
    deadline: Duration,
    root_scope: Uuid,
    /// The on-demand actor's samplers' factories, when resource metrics are on.
    on_demand: Option<Vec<(SamplerCategory, SamplerFactory)>>,
    /// The energy actor the merger sends scope boundaries on to.
    energy: Option<EnergyInbox>,
    /// The scope stream the merger takes boundaries from.
    scope_stream: UnboundedReceiver<StreamItem>,
    poll_period: Option<Duration>,
}

/// Plans the merger and the on-demand actor over `categories` (taken from `spec`
/// before any await, as [`energy_arguments`] is). The merger also keeps the Agent
/// scopes, taken from `scope_stream`, and sends their starts and ends on to `energy`,
/// which needs them even when resource metrics are off: it runs either way, with no
/// categories and no polling then.
pub(super) fn plan_merger(
    spec: &PipelineSpec,
    categories: Vec<SamplerCategory>,
    registry: &SamplerRegistry,
    diagnostics: Option<&PipelineDiagnostics>,
    root_scope: Uuid,
    (energy, scope_stream): (Option<EnergyInbox>, UnboundedReceiver<StreamItem>),
) -> MergerPlan {
    let config = spec.resource.clone().unwrap_or_else(|| {
        let mut idle = ResourceMetricsConfig::default();
        idle.polling.enabled = false;
        idle
    });
    let interval = Duration::from_millis(config.polling.interval_millis);
    let deadline = spec.tick_deadline.unwrap_or_else(|| {
        interval
            .mul_f64(0.8)
            .clamp(Duration::from_millis(50), Duration::from_secs(10))
    });
    let polled = spec.resource.is_some() && config.polling.enabled;
    MergerPlan {
        root: spec.root.clone(),
        target: spec.target,
        command_group: spec.command_group.clone(),
        config,
        categories,
        registry: registry.clone(),
        diagnostics: diagnostics.cloned(),
        sink: Arc::clone(&spec.sink),
        deadline,
        root_scope,
        on_demand: spec
            .resource
            .as_ref()
            .map(|config| sampler_factories(&spec.root, config)),
        energy,
        scope_stream,
        poll_period: polled.then_some(interval),
    }
}

/// Spawns the merger of `plan` and the on-demand actor; both run ticks of one
/// [`TickPlan`].
pub(super) async fn spawn_merger(plan: MergerPlan) -> Result<MergerStage, PipelineError> {
    let environment = {
        let root = plan.root.clone();
        tokio::task::spawn_blocking(move || EnvironmentReader::new(&root))
            .await
            .map_err(|error| PipelineError::Spawn(error.to_string()))?
    };
    let tick = Arc::new(TickPlan {
        root: plan.root,
        target: plan.target,
        command_group: plan.command_group,
        config: plan.config,
        categories: plan.categories,
        registry: plan.registry,
        diagnostics: plan.diagnostics,
        environment: Arc::new(environment),
    });
    let arguments = MergerArguments {
        plan: Arc::clone(&tick),
        sink: plan.sink,
        deadline: plan.deadline,
        root_scope: plan.root_scope,
        energy: plan.energy,
        scope_stream: Some(plan.scope_stream),
    };
    let (merger, _) = Actor::spawn(None, MergerActor, arguments)
        .await
        .map_err(spawn_error)?;
    let on_demand = match plan.on_demand {
        Some(factories) => {
            let arguments = OnDemandArguments {
                plan: tick,
                factories,
                limit: ON_DEMAND_LIMIT,
            };
            let (actor, _) = Actor::spawn(None, OnDemandActor, arguments)
                .await
                .map_err(spawn_error)?;
            Some(actor)
        }
        None => None,
    };
    Ok(MergerStage {
        merger,
        poll_period: plan.poll_period,
        on_demand,
    })
}

/// What the clocks need: the stages they drive and where their failures go.
pub(super) struct ClockInputs<'a> {
    /// The merger, polled by the poll clock.
    pub merger: &'a MergerStage,
    /// The energy stage, sampled by the energy clock when it runs.
    pub energy: Option<&'a EnergyInbox>,
    /// The energy clock's period.
    pub energy_interval: Duration,
    /// The live samplers, asked for power by the energy clock.
    pub registry: &'a SamplerRegistry,
    /// The CPU energy counters, read by the energy clock.
    pub rapl: &'a Arc<RaplReader>,
    /// Where a clock that stops on its own is reported.
    pub health: &'a HealthBoard,
    /// Where the poll clock records missed ticks.
    pub diagnostics: Option<&'a PipelineDiagnostics>,
    /// Stops both clocks.
    pub cancel: &'a CancellationToken,
}

/// The running clocks.
pub(super) struct Clocks {
    /// Each clock's watched task.
    pub tasks: Vec<JoinHandle<()>>,
    /// Ticks the poll clock missed.
    pub missed_ticks: Arc<MissedTicks>,
}

/// Starts the poll clock (when the merger is polled) and the energy clock (when the
/// energy stage runs), each watched so a clock that stops on its own is reported.
pub(super) fn spawn_clocks(inputs: ClockInputs<'_>) -> Clocks {
    let missed_ticks = Arc::new(MissedTicks::default());
    let mut tasks = Vec::new();
    let watch = |name, clock| watch_task(name, clock, inputs.health.clone(), inputs.cancel.clone());
    if let Some(period) = inputs.merger.poll_period {
        let clock = spawn_poll_clock(
            inputs.merger.merger.clone(),
            period,
            Arc::clone(&missed_ticks),
            inputs.diagnostics.cloned(),
            inputs.cancel.clone(),
        );
        tasks.push(watch("poll clock", clock));
    }
    if let Some(energy) = inputs.energy {
        let clock = spawn_energy_clock(
            inputs.registry.clone(),
            energy.clone(),
            Arc::clone(inputs.rapl),
            inputs.energy_interval,
            inputs.cancel.clone(),
        );
        tasks.push(watch("energy clock", clock));
    }
    Clocks {
        tasks,
        missed_ticks,
    }
}

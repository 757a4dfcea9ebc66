//! The supervisor: spawns one linked actor per sampler and restarts a sampler that
//! failed (panicked), with exponential back-off. While it restarts, its category has
//! no actor in the registry, so the merger leaves it `null`; each restart is recorded
//! in diagnostics.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::time::Duration;

use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use crate::samplers::actor::SamplerActor;
use crate::samplers::registry::SamplerRegistry;
use wattline_diagnostics::{PipelineCode, PipelineDiagnostics, SamplerFailure};
use wattline_model::category::SamplerCategory;

/// Builds a fresh sampler for a category (at start and after each restart).
pub use crate::samplers::SamplerFactory;

/// First restart delay; doubles per restart of the same category, capped.
pub const FIRST_RESTART_DELAY: Duration = Duration::from_millis(50);
/// Longest restart delay.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(5);

/// What the supervisor starts with.
pub struct SupervisorArguments {
    /// One factory per category to run.
    pub factories: Vec<(SamplerCategory, SamplerFactory)>,
    /// Where live sampler actors are published.
    pub registry: SamplerRegistry,
    /// Where restarts are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
}

/// Messages the supervisor answers.
pub enum SupervisorMessage {
    /// Start the sampler of a category again (sent to itself after the back-off).
    Restart(SamplerCategory),
    /// How many times a category was restarted.
    RestartCount(SamplerCategory, RpcReplyPort<u32>),
    /// Stop every sampler and do not restart them.
    StopChildren(RpcReplyPort<()>),
}

/// The supervisor actor.
pub struct Supervisor;

/// Its state.
pub struct SupervisorState {
    factories: HashMap<SamplerCategory, SamplerFactory>,
    children: HashMap<ActorId, SamplerCategory>,
    restarts: HashMap<SamplerCategory, u32>,
    registry: SamplerRegistry,
    diagnostics: Option<PipelineDiagnostics>,
    stopping: bool,
}

async fn start_child(
    myself: &ActorRef<SupervisorMessage>,
    state: &mut SupervisorState,
    category: SamplerCategory,
) -> Result<(), ActorProcessingErr> {
    let Some(factory) = state.factories.get(&category) else {
        return Ok(());
    };
    let sampler = factory();
    let (actor, _) = Actor::spawn_linked(None, SamplerActor, sampler, myself.get_cell()).await?;
    state.children.insert(actor.get_id(), category);
    state.registry.set(category, Some(actor));
    Ok(())
}

impl Actor for Supervisor {
    type Msg = SupervisorMessage;
    type State = SupervisorState;
    type Arguments = SupervisorArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = SupervisorState {
            factories: HashMap::new(),
            children: HashMap::new(),
            restarts: HashMap::new(),
            registry: arguments.registry,
            diagnostics: arguments.diagnostics,
            stopping: false,
        };
        let categories: Vec<SamplerCategory> =
            arguments.factories.iter().map(|(c, _)| *c).collect();
        state.factories = arguments.factories.into_iter().collect();
        for category in categories {
            start_child(&myself, &mut state, category).await?;
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMessage::Restart(category) => {
                if !state.stopping {
                    start_child(&myself, state, category).await?;
                }
            }
            SupervisorMessage::RestartCount(category, reply) => {
                let _ = reply.send(state.restarts.get(&category).copied().unwrap_or(0));
            }
            SupervisorMessage::StopChildren(reply) => {
                state.stopping = true;
                for category in state.children.values() {
                    if let Some(actor) = state.registry.get(*category) {
                        actor.stop(None);
                    }
                    state.registry.set(*category, None);
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, reason) = match event {
            SupervisionEvent::ActorFailed(cell, error) => (cell, error.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            _ => return Ok(()),
        };
        let Some(category) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        state.registry.set(category, None);
        if state.stopping {
            return Ok(());
        }
        let count = state.restarts.entry(category).or_insert(0);
        *count += 1;
        let delay = FIRST_RESTART_DELAY
            .saturating_mul(1u32 << (*count - 1).min(10))
            .min(MAX_RESTART_DELAY);
        tracing::warn!(category = category.as_str(), %reason, ?delay, "sampler failed; restarting");
        if let Some(diagnostics) = &state.diagnostics {
            let code = PipelineCode::Sampler {
                category,
                failure: SamplerFailure::Restarted,
            };
            let _ = diagnostics.record_counted(
                code,
                code.allowed_classes().first().copied(),
                NonZeroU64::MIN,
                &reason,
            );
        }
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = myself.cast(SupervisorMessage::Restart(category));
        });
        Ok(())
    }
}

//! The merger actor: on each tick resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and for
//! polls emits one mark per live Agent scope (or one under the root scope).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;

use super::energy_actor::EnergyMessage;
use super::registry::SamplerRegistry;
use super::sampler_actor::SamplerMessage;
use crate::diagnostics::{PipelineCode, PipelineDiagnostics, SamplerCategory, SamplerFailure};
use crate::environment::EnvironmentReader;
use crate::events::{
    EventSink, Mark, PipelineEvent, RESOURCE_MARK_NAME, ScopeCategory, ScopeEvent, ScopeKind,
    new_uuid,
};
use crate::merger::marks::resource_measurements;
use crate::merger::snapshot_builder::assemble_snapshot;
use crate::readings::SamplingSeries;
use crate::samplers::{CategoryReading, SampleRequest, SamplerOutput};
use crate::scope::{ScopeTarget, resolve_scope};
use crate::snapshot::Snapshot;

/// Messages the merger answers.
pub enum MergerMessage {
    /// Take a snapshot; polls (no reply) also emit marks.
    Tick {
        /// Which series' baselines to use.
        series: SamplingSeries,
        /// Where to send the snapshot (on-demand collection).
        reply: Option<RpcReplyPort<Snapshot>>,
    },
    /// Ends every Agent scope still live and the root scope (shutdown).
    Close(RpcReplyPort<()>),
    /// Replies once every message sent before it has been handled.
    Sync(RpcReplyPort<()>),
}

/// What the merger starts with.
pub struct MergerArguments {
    /// Root of the OS readers.
    pub root: std::path::PathBuf,
    /// What to measure.
    pub target: ScopeTarget,
    /// The resource configuration (units, enabled categories).
    pub config: ResourceMetricsConfig,
    /// Categories to ask on each tick, in snapshot order.
    pub categories: Vec<SamplerCategory>,
    /// Live sampler actors.
    pub registry: SamplerRegistry,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// The energy actor, told when shutdown ends a scope.
    pub energy: Option<ActorRef<EnergyMessage>>,
    /// Where missed deadlines are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
    /// How long a tick waits for its samplers.
    pub deadline: Duration,
    /// Set by the poll clock, cleared when a poll is done: a tick that finds it set is
    /// missed rather than queued.
    pub tick_in_flight: Arc<AtomicBool>,
    /// The live Agent scopes (started and ended by the API at the instant it is called).
    pub agents: super::AgentScopes,
    /// The root scope's UUID.
    pub root_scope: Uuid,
    /// When the root scope started (its start event is already out).
    pub root_started: DateTime<Utc>,
}

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    arguments: MergerArguments,
    environment: Arc<EnvironmentReader>,
    root_started: DateTime<Utc>,
    closed: bool,
}

/// cgroup and pressure files feed the CPU and memory categories; their read failures
/// are counted under the CPU sampler's codes.
pub fn record_environment_errors(
    diagnostics: &PipelineDiagnostics,
    errors: &[crate::platform::linux::ReadError],
) {
    let mut problems = crate::samplers::ReadProblems::default();
    errors.iter().for_each(|error| problems.add(error));
    crate::diagnostics::record_read_problems(diagnostics, SamplerCategory::Cpu, &problems);
}

fn strictly_after(earlier: DateTime<Utc>) -> DateTime<Utc> {
    let now = Utc::now();
    if now > earlier {
        now
    } else {
        earlier + chrono::Duration::microseconds(1)
    }
}

impl MergerState {
    fn scope_event(
        &self,
        uuid: Uuid,
        name: &str,
        timestamp: DateTime<Utc>,
        category: ScopeCategory,
        kind: ScopeKind,
    ) -> PipelineEvent {
        PipelineEvent::Scope(ScopeEvent {
            uuid,
            parent_uuid: (kind == ScopeKind::Agent).then_some(self.arguments.root_scope),
            timestamp,
            name: name.to_string(),
            scope_category: category,
            kind,
        })
    }

    async fn tick(&mut self, series: SamplingSeries) -> Snapshot {
        let taken_at = Instant::now();
        let root = self.arguments.root.clone();
        let target = self.arguments.target;
        let environment = Arc::clone(&self.environment);
        let resolved = tokio::task::spawn_blocking(move || {
            let scope = resolve_scope(&root, target);
            let (environment, errors) = environment.read(&scope);
            (scope, environment, errors)
        })
        .await;
        let (scope, environment, environment_errors) = match resolved {
            Ok(resolved) => resolved,
            Err(error) => {
                tracing::error!(%error, "scope resolution failed");
                let scope = crate::scope::ResolvedScope::unavailable(
                    target,
                    crate::scope::ScopeStatus::ListingFailed(error.to_string()),
                );
                (scope, Default::default(), Vec::new())
            }
        };
        if let Some(diagnostics) = &self.arguments.diagnostics {
            record_environment_errors(diagnostics, &environment_errors);
        }
        let scope = Arc::new(scope);
        let request = SampleRequest {
            series,
            scope: Arc::clone(&scope),
            environment: Arc::new(environment),
            taken_at,
        };
        let deadline = self.arguments.deadline;
        let mut calls = tokio::task::JoinSet::new();
        for (position, category) in self.arguments.categories.iter().enumerate() {
            let Some(actor) = self.arguments.registry.get(*category) else {
                continue;
            };
            let request = request.clone();
            let category = *category;
            calls.spawn(async move {
                let remaining = deadline.saturating_sub(taken_at.elapsed());
                let result = actor
                    .call(
                        |reply| SamplerMessage::Sample(request, reply),
                        Some(remaining),
                    )
                    .await;
                (position, category, result)
            });
        }
        let mut outputs: Vec<(usize, SamplerOutput<CategoryReading>)> = Vec::new();
        while let Some(joined) = calls.join_next().await {
            let Ok((position, category, result)) = joined else {
                continue;
            };
            match result {
                Ok(CallResult::Success(output)) => {
                    if let Some(diagnostics) = &self.arguments.diagnostics {
                        crate::diagnostics::record_read_problems(
                            diagnostics,
                            category,
                            &output.problems,
                        );
                    }
                    outputs.push((position, output));
                }
                Ok(CallResult::Timeout) => self.deadline_missed(category, deadline),
                // The sampler failed or is being restarted: its category is null.
                Ok(CallResult::SenderError) | Err(_) => {}
            }
        }
        outputs.sort_by_key(|(position, _)| *position);
        let outputs = outputs.into_iter().map(|(_, output)| output).collect();
        assemble_snapshot(&self.arguments.config, &scope, outputs, Utc::now())
    }

    fn deadline_missed(&self, category: SamplerCategory, deadline: Duration) {
        tracing::debug!(
            category = category.as_str(),
            ?deadline,
            "sampler missed the tick deadline"
        );
        if let Some(diagnostics) = &self.arguments.diagnostics {
            let code = PipelineCode::Sampler {
                category,
                failure: SamplerFailure::DeadlineMissed,
            };
            let _ = diagnostics.record_counted(
                code,
                code.allowed_classes().first().copied(),
                std::num::NonZeroU64::MIN,
                &format!("no answer within {} ms", deadline.as_millis()),
            );
        }
    }

    fn emit_marks(&self, snapshot: &Snapshot) {
        let data = resource_measurements(snapshot);
        let live: Vec<Uuid> = match self.arguments.agents.lock() {
            Ok(agents) => agents.iter().map(|(uuid, _, _)| *uuid).collect(),
            Err(poisoned) => poisoned
                .into_inner()
                .iter()
                .map(|(uuid, _, _)| *uuid)
                .collect(),
        };
        let parents = if live.is_empty() {
            vec![self.arguments.root_scope]
        } else {
            live
        };
        for parent in parents {
            self.arguments.sink.send(PipelineEvent::Mark(Mark {
                uuid: new_uuid(),
                parent_uuid: Some(parent),
                timestamp: snapshot.timestamp,
                name: RESOURCE_MARK_NAME.into(),
                data: data.clone(),
            }));
        }
    }
}

impl Actor for MergerActor {
    type Msg = MergerMessage;
    type State = MergerState;
    type Arguments = MergerArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let root = arguments.root.clone();
        let environment =
            tokio::task::spawn_blocking(move || EnvironmentReader::new(&root)).await?;
        let state = MergerState {
            environment: Arc::new(environment),
            root_started: arguments.root_started,
            closed: false,
            arguments,
        };
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MergerMessage::Tick { series, reply } => {
                let snapshot = state.tick(series).await;
                if reply.is_none() && !state.closed {
                    state.emit_marks(&snapshot);
                }
                if series == SamplingSeries::Polling {
                    state
                        .arguments
                        .tick_in_flight
                        .store(false, Ordering::Release);
                }
                if let Some(reply) = reply {
                    let _ = reply.send(snapshot);
                }
            }
            MergerMessage::Sync(reply) => {
                let _ = reply.send(());
            }
            MergerMessage::Close(reply) => {
                if !state.closed {
                    let live: Vec<(Uuid, String, DateTime<Utc>)> =
                        match state.arguments.agents.lock() {
                            Ok(mut agents) => std::mem::take(&mut *agents),
                            Err(_) => Vec::new(),
                        };
                    for (uuid, name, started) in live {
                        let ended = strictly_after(started);
                        state.arguments.sink.send(state.scope_event(
                            uuid,
                            &name,
                            ended,
                            ScopeCategory::End,
                            ScopeKind::Agent,
                        ));
                        if let Some(energy) = &state.arguments.energy {
                            let _ =
                                energy.cast(EnergyMessage::ScopeEnded(uuid, Instant::now(), ended));
                        }
                    }
                    let ended = strictly_after(state.root_started);
                    state.arguments.sink.send(state.scope_event(
                        state.arguments.root_scope,
                        "wattline",
                        ended,
                        ScopeCategory::End,
                        ScopeKind::Custom,
                    ));
                    state.closed = true;
                }
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

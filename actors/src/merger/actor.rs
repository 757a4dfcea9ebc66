//! The merger actor: on each tick resolves the scope once, asks every sampler with a
//! deadline, assembles the snapshot (a late sampler's category is `null`), and for
//! polls emits one mark per live Agent scope (or one under the root scope).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ractor::rpc::CallResult;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use uuid::Uuid;
use wattline_config::ResourceMetricsConfig;

use crate::diagnostics::{PipelineDiagnostics, SamplerCategory};
use crate::merger::tick::{finish_tick, prepare_tick};
use crate::pipeline::registry::SamplerRegistry;
use crate::readings::SamplingSeries;
use crate::samplers::SampleRequest;
use crate::samplers::actor::{Outstanding, SamplerMessage, TickRequest};
use crate::samplers::environment::EnvironmentReader;
use crate::scope::ScopeTarget;
use wattline_model::events::{EventSink, Mark, PipelineEvent, RESOURCE_MARK_NAME, new_uuid};
use wattline_model::marks::resource_measurements;
use wattline_model::snapshot::Snapshot;

/// Messages the merger answers.
pub enum MergerMessage {
    /// Take a snapshot; polls (no reply) also emit marks.
    Tick {
        /// Which series' baselines to use.
        series: SamplingSeries,
        /// Where to send the snapshot (on-demand collection).
        reply: Option<RpcReplyPort<Snapshot>>,
    },
    /// Emits no more marks (shutdown); replies once any poll in flight is done.
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
    /// The measured command's own cgroup, whose members join a process tree.
    pub command_group: Option<std::path::PathBuf>,
    /// The resource configuration (units, enabled categories).
    pub config: ResourceMetricsConfig,
    /// Categories to ask on each tick, in snapshot order.
    pub categories: Vec<SamplerCategory>,
    /// Live sampler actors.
    pub registry: SamplerRegistry,
    /// Where events go.
    pub sink: Arc<dyn EventSink>,
    /// Where missed deadlines are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
    /// How long a tick waits for its samplers.
    pub deadline: Duration,
    /// Set by the poll clock, cleared when a poll is done: a tick that finds it set is
    /// missed rather than queued.
    pub tick_in_flight: Arc<AtomicBool>,
    /// The live Agent scopes (started and ended by the API at the instant it is called).
    pub agents: crate::pipeline::AgentScopes,
    /// The root scope: marks go under it while no Agent scope is live.
    pub root_scope: Uuid,
}

/// The longest an on-demand collection waits for one sampler.
const ON_DEMAND_LIMIT: Duration = Duration::from_secs(60);

/// The actor.
pub struct MergerActor;

/// Its state.
pub struct MergerState {
    arguments: MergerArguments,
    environment: Arc<EnvironmentReader>,
    closed: bool,
    /// One outstanding tick request per sampler: a sampler still reading an earlier
    /// tick gets no new one (its category is `null` for this tick).
    outstanding: HashMap<SamplerCategory, Arc<AtomicBool>>,
}

impl MergerState {
    async fn tick(&mut self, series: SamplingSeries) -> Snapshot {
        let root = self.arguments.root.clone();
        let target = self.arguments.target;
        let environment = Arc::clone(&self.environment);
        let diagnostics = self.arguments.diagnostics.clone();
        let command_group = self.arguments.command_group.clone();
        let request = match tokio::task::spawn_blocking(move || {
            prepare_tick(
                &root,
                target,
                command_group.as_deref(),
                &environment,
                series,
                diagnostics.as_ref(),
            )
        })
        .await
        {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "scope resolution failed");
                let scope = crate::scope::ResolvedScope::unavailable(
                    target,
                    crate::scope::ScopeStatus::ListingFailed(error.to_string()),
                );
                SampleRequest {
                    series,
                    scope: Arc::new(scope),
                    environment: Arc::default(),
                    taken_at: Instant::now(),
                }
            }
        };
        let taken_at = request.taken_at;
        // A poll keeps to its grid; an on-demand collection is awaited (the spec), bound
        // only so that a wedged driver cannot wedge the pipeline.
        let deadline = match series {
            SamplingSeries::Polling => self.arguments.deadline,
            SamplingSeries::OnDemand => ON_DEMAND_LIMIT,
        };
        let mut calls = tokio::task::JoinSet::new();
        let categories = self.arguments.categories.clone();
        for (position, category) in categories.into_iter().enumerate() {
            let Some(actor) = self.arguments.registry.get(category) else {
                continue;
            };
            let slot = self.outstanding.entry(category).or_default();
            let Some(outstanding) = Outstanding::claim(slot) else {
                self.deadline_missed(category, "still reading an earlier tick".to_owned());
                continue;
            };
            let tick = TickRequest {
                request: request.clone(),
                deadline: taken_at + deadline,
                outstanding: Some(outstanding),
            };
            calls.spawn(async move {
                let remaining = deadline.saturating_sub(taken_at.elapsed());
                let result = actor
                    .call(|reply| SamplerMessage::Sample(tick, reply), Some(remaining))
                    .await;
                (position, category, result)
            });
        }
        let mut outputs = Vec::new();
        while let Some(joined) = calls.join_next().await {
            let Ok((position, category, result)) = joined else {
                continue;
            };
            match result {
                Ok(CallResult::Success(output)) => outputs.push((position, category, output)),
                Ok(CallResult::Timeout) => self.deadline_missed(
                    category,
                    format!("no answer within {} ms", deadline.as_millis()),
                ),
                // The sampler failed or is being restarted: its category is null.
                Ok(CallResult::SenderError) | Err(_) => {}
            }
        }
        outputs.sort_by_key(|(position, _, _)| *position);
        let outputs = outputs
            .into_iter()
            .map(|(_, category, output)| (category, output))
            .collect();
        finish_tick(
            &self.arguments.config,
            &request.scope,
            outputs,
            self.arguments.diagnostics.as_ref(),
        )
    }

    fn deadline_missed(&self, category: SamplerCategory, detail: String) {
        tracing::debug!(
            category = category.as_str(),
            %detail,
            "sampler missed the tick deadline"
        );
        if let Some(diagnostics) = &self.arguments.diagnostics {
            diagnostics.record_deadline_missed(category, &detail);
        }
    }

    fn emit_marks(&self, snapshot: &Snapshot) {
        let data = resource_measurements(snapshot);
        // The scope table stays locked while the copies go out, so a scope's start
        // and end events never land inside its own marks.
        let agents = match self.arguments.agents.lock() {
            Ok(agents) => agents,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut parents: Vec<Uuid> = agents.iter().map(|scope| scope.uuid).collect();
        if parents.is_empty() {
            parents.push(self.arguments.root_scope);
        }
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
            closed: false,
            arguments,
            outstanding: HashMap::new(),
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
            // No mark after this: the pipeline writes the scope ends next.
            MergerMessage::Close(reply) => {
                state.closed = true;
                let _ = reply.send(());
            }
        }
        Ok(())
    }
}

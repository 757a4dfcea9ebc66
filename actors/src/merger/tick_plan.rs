//! What a tick through the sampler actors needs, shared by the two collectors that
//! run one: the merger's polls and the on-demand actor's collections. Each keeps its
//! own claims on the sampler actors ([`ActorClaims`]), so neither waits for the
//! other's: an actor still reading one collector's tick is asked again by the other,
//! and answers it next.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use wattline_config::ResourceMetricsConfig;

use super::tick::{finish_tick, prepare_tick};
use crate::panics::panic_message;
use crate::samplers::actor::{Outstanding, SamplerMessage, TickRequest};
use crate::samplers::environment::EnvironmentReader;
use crate::samplers::registry::SamplerRegistry;
use crate::samplers::{CategoryReading, SampleRequest, SamplerOutput};
use crate::scope::ScopeTarget;
use wattline_diagnostics::PipelineDiagnostics;
use wattline_model::category::SamplerCategory;
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::Snapshot;

/// One category's answer, as a tick assembles them.
pub type CategoryOutput = (SamplerCategory, SamplerOutput<CategoryReading>);

/// What the tick is over and who is asked.
pub struct TickPlan {
    /// Root of the OS readers.
    pub root: std::path::PathBuf,
    /// What to measure.
    pub target: ScopeTarget,
    /// The measured command's own cgroup, whose members join a process tree.
    pub command_group: Option<std::path::PathBuf>,
    /// The resource configuration (units, enabled categories).
    pub config: ResourceMetricsConfig,
    /// Categories in a snapshot, in snapshot order.
    pub categories: Vec<SamplerCategory>,
    /// Live sampler actors.
    pub registry: SamplerRegistry,
    /// Where missed deadlines are recorded.
    pub diagnostics: Option<PipelineDiagnostics>,
    /// The environment (cgroup, pressure) reader, read once per tick.
    pub environment: Arc<EnvironmentReader>,
}

/// One collector's claims on the sampler actors: one outstanding tick request per
/// actor, so a sampler still reading an earlier tick is not asked again by the same
/// collector (its category is `null` for that tick instead).
pub struct ActorClaims(HashMap<SamplerCategory, Arc<AtomicBool>>);

impl ActorClaims {
    /// A claim slot for every category of `plan`.
    pub fn for_plan(plan: &TickPlan) -> Self {
        ActorClaims(
            plan.categories
                .iter()
                .map(|category| (*category, Arc::default()))
                .collect(),
        )
    }
}

/// A sampler actor asked for a tick: the category's place in the snapshot, the
/// category, and where its answer comes.
pub type Asked = (
    usize,
    SamplerCategory,
    oneshot::Receiver<SamplerOutput<CategoryReading>>,
);

impl TickPlan {
    /// The blocking half that starts a tick: the scope resolved, the environment read.
    pub fn preparation(
        &self,
        series: SamplingSeries,
    ) -> impl FnOnce() -> SampleRequest + Send + 'static {
        let root = self.root.clone();
        let target = self.target;
        let environment = Arc::clone(&self.environment);
        let diagnostics = self.diagnostics.clone();
        let command_group = self.command_group.clone();
        move || {
            prepare_tick(
                &root,
                target,
                command_group.as_deref(),
                &environment,
                series,
                diagnostics.as_ref(),
            )
        }
    }

    /// The tick's request, prepared on this (blocking) thread; a preparation that
    /// panics gives an unavailable scope.
    pub fn prepared_request(&self, series: SamplingSeries) -> SampleRequest {
        catch_unwind(AssertUnwindSafe(self.preparation(series))).unwrap_or_else(|payload| {
            let detail = panic_message(payload.as_ref());
            tracing::error!(%detail, "scope resolution failed");
            self.unavailable(series, detail)
        })
    }

    /// The tick's request, prepared on a blocking thread.
    pub async fn request(&self, series: SamplingSeries) -> SampleRequest {
        match tokio::task::spawn_blocking(self.preparation(series)).await {
            Ok(request) => request,
            Err(error) => {
                tracing::error!(%error, "scope resolution failed");
                self.unavailable(series, error.to_string())
            }
        }
    }

    /// A tick whose scope could not be resolved: every category reads nothing.
    pub fn unavailable(&self, series: SamplingSeries, detail: String) -> SampleRequest {
        let scope = crate::scope::ResolvedScope::unavailable(
            self.target,
            crate::scope::ScopeStatus::ListingFailed(detail),
        );
        SampleRequest {
            series,
            scope: Arc::new(scope),
            environment: Arc::default(),
            taken_at: Instant::now(),
        }
    }

    /// `outputs` with each category's place in the snapshot.
    pub fn positioned(&self, outputs: Vec<CategoryOutput>) -> Vec<(usize, CategoryOutput)> {
        outputs
            .into_iter()
            .filter_map(|output| {
                let position = self.categories.iter().position(|c| *c == output.0)?;
                Some((position, output))
            })
            .collect()
    }

    /// Asks every sampler actor of a category `wanted` selects, under `claims`: all
    /// are asked first, then their answers awaited in turn ([`Self::answers`]), all in
    /// the caller's task: the samplers still read at once, and no task per sampler is
    /// spawned and woken (each a cross-thread hand-off on a busy machine).
    pub fn ask(
        &self,
        request: &SampleRequest,
        wanted: impl Fn(SamplerCategory) -> bool,
        tick_deadline: Instant,
        claims: &ActorClaims,
    ) -> Vec<Asked> {
        let mut asked = Vec::new();
        for (position, category) in self.categories.iter().copied().enumerate() {
            if !wanted(category) {
                continue;
            }
            let Some(actor) = self.registry.get(category) else {
                continue;
            };
            let Some(slot) = claims.0.get(&category) else {
                continue;
            };
            let Some(outstanding) = Outstanding::claim(slot) else {
                self.deadline_missed(category, "still reading an earlier tick".to_owned());
                continue;
            };
            let tick = TickRequest {
                request: request.clone(),
                deadline: tick_deadline,
                outstanding: Some(outstanding),
            };
            let (reply, answer) = oneshot::channel();
            let remaining = tick_deadline.saturating_duration_since(Instant::now());
            // A stopped or restarting sampler takes no message: its category is null.
            if actor
                .cast(SamplerMessage::Sample(tick, (reply, remaining).into()))
                .is_ok()
            {
                asked.push((position, category, answer));
            }
        }
        asked
    }

    /// The answers of the samplers `asked`, each awaited until `tick_deadline` (a late
    /// one is recorded as missing `deadline`).
    pub async fn answers(
        &self,
        asked: Vec<Asked>,
        tick_deadline: Instant,
        deadline: Duration,
    ) -> Vec<(usize, CategoryOutput)> {
        let mut outputs = Vec::new();
        for (position, category, answer) in asked {
            match await_answer(answer, tick_deadline).await {
                Answer::Output(output) => outputs.push((position, (category, output))),
                Answer::Late => self.deadline_missed(
                    category,
                    format!("no answer within {} ms", deadline.as_millis()),
                ),
                // The sampler failed or is being restarted: its category is null.
                Answer::Failed => {}
            }
        }
        outputs
    }

    /// The snapshot from the outputs that arrived, in snapshot order.
    pub fn finish(
        &self,
        request: &SampleRequest,
        mut outputs: Vec<(usize, CategoryOutput)>,
    ) -> Snapshot {
        outputs.sort_by_key(|(position, _)| *position);
        let outputs = outputs.into_iter().map(|(_, output)| output).collect();
        finish_tick(
            &self.config,
            &request.scope,
            outputs,
            self.diagnostics.as_ref(),
        )
    }

    /// Records that `category` missed its tick, and why.
    pub fn deadline_missed(&self, category: SamplerCategory, detail: String) {
        tracing::debug!(
            category = category.as_str(),
            %detail,
            "sampler missed the tick deadline"
        );
        if let Some(diagnostics) = &self.diagnostics {
            diagnostics.record_deadline_missed(category, &detail);
        }
    }
}

/// What came of asking a sampler for a tick.
#[derive(Debug, PartialEq)]
enum Answer<T> {
    /// It answered in time.
    Output(T),
    /// It did not answer by the tick's deadline.
    Late,
    /// Its reply was dropped before the deadline: it failed or is restarting.
    Failed,
}

/// Waits for a sampler's `answer` until `tick_deadline`. A reply dropped unanswered at
/// or after the deadline is a missed deadline too: a sampler skips a tick that expired
/// while it sat in its mailbox, and the drop can reach here before the timer fires.
async fn await_answer<T>(answer: oneshot::Receiver<T>, tick_deadline: Instant) -> Answer<T> {
    match tokio::time::timeout_at(tick_deadline.into(), answer).await {
        Ok(Ok(output)) => Answer::Output(output),
        Ok(Err(_)) if Instant::now() < tick_deadline => Answer::Failed,
        Ok(Err(_)) | Err(_) => Answer::Late,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reply_dropped_after_the_deadline_is_a_missed_deadline_and_one_dropped_before_a_failure()
     {
        // A sampler that skipped an expired tick dropped its reply; the collector looks
        // after the deadline and finds the channel closed, not its timer fired.
        let (reply, answer) = oneshot::channel::<u32>();
        drop(reply);
        let passed = Instant::now() - Duration::from_millis(1);
        assert_eq!(await_answer(answer, passed).await, Answer::Late);

        // Dropped well before the deadline: the sampler failed or is restarting.
        let (reply, answer) = oneshot::channel::<u32>();
        drop(reply);
        let later = Instant::now() + Duration::from_secs(60);
        assert_eq!(await_answer(answer, later).await, Answer::Failed);

        // Never answered: late once the deadline passes.
        let (_reply, answer) = oneshot::channel::<u32>();
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(await_answer(answer, soon).await, Answer::Late);

        let (reply, answer) = oneshot::channel::<u32>();
        let _ = reply.send(7);
        assert_eq!(await_answer(answer, later).await, Answer::Output(7));
    }
}

//! An Agent scope from Rust: how one is started ([`ScopeOptions`]: its weight and the
//! caller's span), the live scope ([`AgentScope`]) that ends it when dropped, and the
//! current scope ([`AgentScope::run`], [`current_scope`]) that a scope started inside
//! it is nested in.
//!
//! The current scope is task-local, like a tracing span entered with `instrument`: a
//! future run with [`AgentScope::run`] sees it across its awaits, and a task it
//! spawns does not (run that task's future with `run` too). An explicit
//! [`AgentScope::child`] always wins over the current scope.

use std::sync::Arc;

use wattline_actors::pipeline::{RunningPipeline, ScopeStart};

use crate::error::Error;

/// How an Agent scope is started, beyond its name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScopeOptions {
    /// Its weight when energy is divided among the innermost scopes live at the same
    /// time (tokens, batch size): a scope of weight 3 beside one of weight 1 is
    /// attributed three quarters of what they share. 1 when `None`; a positive,
    /// finite number.
    pub weight: Option<f64>,
    /// The span the scope's span (with its energy, sent when the `opentelemetry`
    /// component's `spans` is on) is a child of, as a W3C `traceparent`. When `None`,
    /// the span of [`opentelemetry::Context::current`], if any; a nested scope
    /// without either is a child of its parent scope's span.
    pub traceparent: Option<String>,
}

impl ScopeOptions {
    /// Options with this weight.
    pub fn weight(weight: f64) -> Self {
        ScopeOptions {
            weight: Some(weight),
            traceparent: None,
        }
    }

    /// These options with the scope's span a child of the caller's span
    /// `traceparent` (a W3C trace-context value).
    pub fn with_traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// These options with the scope's span a child of the span active in `context`
    /// (nothing changes when it has none).
    pub fn with_parent_context(mut self, context: &opentelemetry::Context) -> Self {
        if let Some(traceparent) = traceparent_of(context) {
            self.traceparent = Some(traceparent);
        }
        self
    }

    /// The caller's span: the one given, checked, else the current context's.
    fn checked_traceparent(&self, name: &str) -> Result<Option<String>, Error> {
        match &self.traceparent {
            Some(value) => {
                wattline_model::trace_context::parse_traceparent(value).map_err(|source| {
                    Error::ScopeTraceparent {
                        name: name.to_owned(),
                        source,
                    }
                })?;
                Ok(Some(value.trim().to_owned()))
            }
            None => Ok(traceparent_of(&opentelemetry::Context::current())),
        }
    }

    fn checked_weight(&self, name: &str) -> Result<Option<f64>, Error> {
        match self.weight {
            Some(weight) if !(weight.is_finite() && weight > 0.0) => Err(Error::ScopeWeight {
                name: name.to_owned(),
                weight,
            }),
            weight => Ok(weight),
        }
    }
}

/// The W3C `traceparent` of the span active in `context`, when it has a valid one.
fn traceparent_of(context: &opentelemetry::Context) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        )
    })
}

tokio::task_local! {
    /// The scope a future runs in ([`AgentScope::run`]).
    static CURRENT_SCOPE: CurrentScope;
}

/// The current scope as the task-local holds it: its UUID and the pipeline it lives
/// in, by address (a scope of another pipeline is no parent here; the scope, and so
/// its pipeline, outlives the future that sees it current).
#[derive(Debug, Clone, Copy)]
struct CurrentScope {
    uuid: uuid::Uuid,
    pipeline: usize,
}

fn pipeline_address(pipeline: &Arc<RunningPipeline>) -> usize {
    Arc::as_ptr(pipeline) as usize
}

/// The UUID of the current Agent scope: the innermost [`AgentScope::run`] (or
/// [`AgentScope::run_sync`]) this code runs in, if any.
pub fn current_scope() -> Option<uuid::Uuid> {
    CURRENT_SCOPE.try_with(|current| current.uuid).ok()
}

/// The current scope when it lives in `pipeline`: the parent of a scope started there
/// without an explicit one.
pub(crate) fn current_scope_in(pipeline: &Arc<RunningPipeline>) -> Option<uuid::Uuid> {
    CURRENT_SCOPE
        .try_with(|current| {
            (current.pipeline == pipeline_address(pipeline)).then_some(current.uuid)
        })
        .ok()
        .flatten()
}

/// A live Agent scope. Dropping it ends the scope.
pub struct AgentScope {
    pipeline: Arc<RunningPipeline>,
    uuid: uuid::Uuid,
    ended: bool,
}

impl AgentScope {
    /// The scope's UUID (the `parent_uuid` of its marks).
    pub fn uuid(&self) -> uuid::Uuid {
        self.uuid
    }

    /// Starts an Agent scope nested in this one: its events name this scope as their
    /// parent (marks are still copied under every live scope). A send to the
    /// pipeline: it waits for nothing, and needs no runtime.
    pub fn child(&self, name: &str) -> Result<AgentScope, Error> {
        self.child_with(name, ScopeOptions::default())
    }

    /// Starts a nested Agent scope like [`Self::child`], with `options`.
    pub fn child_with(&self, name: &str, options: ScopeOptions) -> Result<AgentScope, Error> {
        AgentScope::start(&self.pipeline, name, &options, Some(self.uuid))
    }

    /// Runs `future` with this scope current: a scope started inside it (by
    /// [`crate::Pipeline::agent_scope`]) without an explicit parent is its child,
    /// across every await. A task `future` spawns does not inherit it.
    pub async fn run<F: std::future::Future>(&self, future: F) -> F::Output {
        CURRENT_SCOPE.scope(self.as_current(), future).await
    }

    /// Calls `work` with this scope current, as [`Self::run`] does for a future.
    pub fn run_sync<R>(&self, work: impl FnOnce() -> R) -> R {
        CURRENT_SCOPE.sync_scope(self.as_current(), work)
    }

    fn as_current(&self) -> CurrentScope {
        CurrentScope {
            uuid: self.uuid,
            pipeline: pipeline_address(&self.pipeline),
        }
    }

    /// Starts scope `name` in `pipeline`, inside the live scope `parent` when given.
    /// Its span's parent: the caller's span in `options`, else (top-level only) the
    /// current OpenTelemetry context's; a nested scope without one is a child of its
    /// parent scope's span.
    pub(crate) fn start(
        pipeline: &Arc<RunningPipeline>,
        name: &str,
        options: &ScopeOptions,
        parent: Option<uuid::Uuid>,
    ) -> Result<AgentScope, Error> {
        let traceparent = match (&options.traceparent, parent) {
            (None, Some(_)) => None,
            _ => options.checked_traceparent(name)?,
        };
        let uuid = pipeline.start_agent_scope_with(ScopeStart {
            parent,
            weight: options.checked_weight(name)?,
            traceparent: traceparent.as_deref(),
            ..ScopeStart::local(name)
        });
        Ok(AgentScope {
            pipeline: Arc::clone(pipeline),
            uuid,
            ended: false,
        })
    }

    /// Ends the scope at this instant: a send to the pipeline, which writes its end
    /// event in order with its polls; it waits for nothing and needs no runtime.
    /// [`Error::ScopeAfterShutdown`] when the pipeline has shut down (which ended
    /// the scope at that instant).
    pub fn end(mut self) -> Result<(), Error> {
        self.ended = true;
        if self.pipeline.end_agent_scope_with(self.uuid, &[]) {
            Ok(())
        } else {
            Err(Error::ScopeAfterShutdown { uuid: self.uuid })
        }
    }
}

impl AgentScope {
    /// Ends the scope as [`Self::end`] does, as a step that stood for `call`, a model
    /// call served by another machine: the report, the scope's span and the
    /// `wattline.scope.energy.remote_estimated` histogram carry the call's estimated
    /// energy there (from `call.estimate` when it brings one, else the factor table:
    /// the `remote_models` rows of `plugins.toml`, then the shipped ones), apart from
    /// the measured figures, which it never enters.
    pub fn end_remote_call(mut self, call: crate::remote_call::RemoteCall) -> Result<(), Error> {
        self.ended = true;
        if self.pipeline.end_remote_call_scope(self.uuid, call) {
            Ok(())
        } else {
            Err(Error::ScopeAfterShutdown { uuid: self.uuid })
        }
    }
}

impl Drop for AgentScope {
    fn drop(&mut self) {
        if !self.ended {
            self.pipeline.end_agent_scope(self.uuid);
        }
    }
}

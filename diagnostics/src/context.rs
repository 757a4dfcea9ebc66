//! The cloneable context handle and component handles: locking, admission and lifecycle.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use chrono::Utc;

use super::declaration::{ComponentDeclaration, HostCodes, validate_declaration};
use super::error::DiagnosticError;
use super::limits::{DiagnosticsLimits, DiagnosticsLimitsError};
use super::observation::{Observation, RecordOutcome, validate_observation};
use super::snapshot::{AdmissionUsage, DeliveryStats, DiagnosticsSnapshot, HistoryStats};
use super::store::{ComponentShared, ContextState, SessionId};
use super::vocabulary::Availability;

/// A diagnostics context: counters, recent evidence and admission budgets.
///
/// Cheap to clone; clones share one context. All calls are synchronous and
/// non-blocking: the context is guarded by one lock taken with `try_lock`, so a
/// call that would overlap another call in progress on the same context (from
/// another thread, or from inside a lazy factory) returns
/// [`DiagnosticError::Busy`] instead of waiting. Nothing retries automatically;
/// callers decide whether to retry or drop the observation. `close()` and handle
/// drops never take the lock, so they can neither block nor fail.
#[derive(Debug, Clone)]
pub struct Diagnostics {
    inner: Option<Arc<ContextInner>>,
}

#[derive(Debug)]
struct ContextInner {
    limits: DiagnosticsLimits,
    /// Set by [`Diagnostics::revoke`] (activation teardown); never cleared.
    revoked: AtomicBool,
    state: Mutex<ContextState>,
    accepted: AtomicU64,
    rejected: AtomicU64,
    busy: AtomicU64,
    /// The next native session's id; 0 is the session of calls made on the context
    /// itself ([`Diagnostics::component_lazy`]).
    next_session: AtomicU64,
}

impl ContextInner {
    /// Takes the context lock without waiting.
    ///
    /// A poisoned lock (a lazy factory panicked while the call held it) is recovered:
    /// state is only changed after the factory returns, so it is still consistent.
    fn try_enter(&self) -> Result<MutexGuard<'_, ContextState>, DiagnosticError> {
        match self.state.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => Err(DiagnosticError::Busy),
        }
    }

    fn count(&self, result: &Result<RecordOutcome, DiagnosticError>) {
        let counter = match result {
            Ok(_) => &self.accepted,
            Err(DiagnosticError::Busy) => &self.busy,
            Err(_) => &self.rejected,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn delivery_stats(&self) -> DeliveryStats {
        DeliveryStats {
            accepted: self.accepted.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
        }
    }
}

impl Diagnostics {
    /// An enabled context with validated `limits`.
    pub fn new(limits: DiagnosticsLimits) -> Result<Self, DiagnosticsLimitsError> {
        limits.validate()?;
        Ok(Self {
            inner: Some(Arc::new(ContextInner {
                limits,
                revoked: AtomicBool::new(false),
                state: Mutex::new(ContextState::new(&limits)),
                accepted: AtomicU64::new(0),
                rejected: AtomicU64::new(0),
                busy: AtomicU64::new(0),
                next_session: AtomicU64::new(1),
            })),
        })
    }

    /// A context that records nothing and never calls lazy factories.
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    /// Whether this context collects anything.
    pub fn availability(&self) -> Availability {
        if self.inner.is_some() {
            Availability::Enabled
        } else {
            Availability::Disabled
        }
    }

    /// The limits in force; `None` when disabled.
    pub fn capabilities(&self) -> Option<DiagnosticsLimits> {
        self.inner.as_ref().map(|inner| inner.limits)
    }

    /// Registers one component from a lazily built declaration, on the budget of the
    /// context's own native session (a plugin's facade, [`PluginDiagnostics`], has a
    /// session of its own).
    ///
    /// When the context is disabled the factory is not called and a disabled
    /// component is returned. Otherwise the lock is taken first (`busy` if another
    /// call is in progress), then the factory runs, then the declaration is validated
    /// (`invalid_declaration`, `code_limit`) and admitted (`duplicate_component`,
    /// `component_limit`, `extension_limit`, `registration_text_limit`). A refused
    /// registration charges nothing.
    pub fn component_lazy<'a, F>(&self, factory: F) -> Result<DiagnosticComponent, DiagnosticError>
    where
        F: FnOnce() -> ComponentDeclaration<'a>,
    {
        self.register(factory, Registrant::Plugin(0))
    }

    /// A fresh native session id: its admission budgets start empty.
    fn new_session(&self) -> SessionId {
        self.inner.as_ref().map_or(0, |context| {
            context.next_session.fetch_add(1, Ordering::Relaxed)
        })
    }

    /// Registration path of a worker's component, arriving over the host endpoint: the
    /// same codes a plugin may declare, on the worker session's budget (which the
    /// endpoint enforces) rather than the native plugins'.
    pub fn component_lazy_for_worker<'a, F>(
        &self,
        factory: F,
    ) -> Result<DiagnosticComponent, DiagnosticError>
    where
        F: FnOnce() -> ComponentDeclaration<'a>,
    {
        self.register(factory, Registrant::Worker)
    }

    /// Registration path of the pipeline's own components (host-owned codes allowed).
    pub(super) fn component_lazy_host<'a, F>(
        &self,
        factory: F,
    ) -> Result<DiagnosticComponent, DiagnosticError>
    where
        F: FnOnce() -> ComponentDeclaration<'a>,
    {
        self.register(factory, Registrant::Pipeline)
    }

    fn register<'a, F>(
        &self,
        factory: F,
        registrant: Registrant,
    ) -> Result<DiagnosticComponent, DiagnosticError>
    where
        F: FnOnce() -> ComponentDeclaration<'a>,
    {
        let Some(context) = &self.inner else {
            return Ok(DiagnosticComponent::disabled());
        };
        if context.revoked.load(Ordering::Acquire) {
            return Err(DiagnosticError::Closed);
        }
        let mut state = context.try_enter()?;
        let declaration = factory();
        // The pipeline's own declarations and a worker's (held to its session's limits
        // by the endpoint) are checked against the spec's maxima, whatever the
        // configuration lowered for native plugins, and charge their budget nothing.
        let (host_codes, session) = match registrant {
            Registrant::Plugin(session) => (HostCodes::Rejected, Some(session)),
            Registrant::Worker => (HostCodes::Rejected, None),
            Registrant::Pipeline => (HostCodes::Allowed, None),
        };
        let declaration_limits = if session.is_none() {
            DiagnosticsLimits::default()
        } else {
            context.limits
        };
        let validated = validate_declaration(&declaration, &declaration_limits, host_codes)?;
        let shared = state.admit(validated, &context.limits, session)?;
        drop(state);
        Ok(DiagnosticComponent {
            handle: Some(Arc::new(ComponentHandle {
                shared,
                context: Arc::clone(context),
            })),
        })
    }

    /// Activation teardown: closes every registration, so no handle records after it
    /// (`closed`) and none registers; what was recorded stays readable. Never blocks
    /// on a recording call: handles check the flag before they take the lock.
    pub fn revoke(&self) {
        let Some(context) = &self.inner else {
            return;
        };
        context.revoked.store(true, Ordering::Release);
        let state = match context.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        state.close_all();
    }

    /// Use of the native plugins' budgets so far, every session together (the
    /// pipeline's own components have their own); `busy` if another call is in
    /// progress.
    pub fn usage(&self) -> Result<AdmissionUsage, DiagnosticError> {
        match &self.inner {
            Some(context) => Ok(context.try_enter()?.usage()),
            None => Ok(AdmissionUsage::default()),
        }
    }

    /// Totals of recording calls; reads atomics, never busy.
    pub fn delivery_stats(&self) -> DeliveryStats {
        self.inner
            .as_ref()
            .map_or_else(DeliveryStats::default, |context| context.delivery_stats())
    }

    /// [`Diagnostics::snapshot`], asked again while the context is busy with another
    /// call, for up to `limit`: a caller that must not mistake busy for anything else
    /// (a report, the CLI) uses this.
    pub fn snapshot_waiting(
        &self,
        limit: Duration,
    ) -> Result<DiagnosticsSnapshot, DiagnosticError> {
        retry_while_busy(limit, || self.snapshot())
    }

    /// A consistent copy of the whole context; `busy` if another call is in progress.
    pub fn snapshot(&self) -> Result<DiagnosticsSnapshot, DiagnosticError> {
        let Some(context) = &self.inner else {
            return Ok(DiagnosticsSnapshot {
                availability: Availability::Disabled,
                taken_at: Utc::now(),
                limits: None,
                usage: AdmissionUsage::default(),
                components: Vec::new(),
                recent_events: Vec::new(),
                history: HistoryStats::default(),
                delivery: DeliveryStats::default(),
            });
        };
        let state = context.try_enter()?;
        Ok(DiagnosticsSnapshot {
            availability: Availability::Enabled,
            taken_at: Utc::now(),
            limits: Some(context.limits),
            usage: state.usage(),
            components: state.components(),
            recent_events: state.recent_events(),
            history: state.history_stats(),
            delivery: context.delivery_stats(),
        })
    }
}

/// Who registers a component, which fixes its codes and its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Registrant {
    /// A native plugin: plugin codes, its session's share of the configured budget.
    Plugin(SessionId),
    /// A worker over the host endpoint: plugin codes, its session's budget.
    Worker,
    /// The pipeline itself: host codes allowed, its own budget.
    Pipeline,
}

/// A registered component. Clones share one registration.
///
/// [`DiagnosticComponent::close`] fences every clone; dropping the last clone closes
/// too. Closing frees a live slot but never resets counters or restores the
/// cumulative extension and registration-text budgets.
#[derive(Debug, Clone)]
pub struct DiagnosticComponent {
    handle: Option<Arc<ComponentHandle>>,
}

#[derive(Debug)]
struct ComponentHandle {
    shared: Arc<ComponentShared>,
    context: Arc<ContextInner>,
}

impl Drop for ComponentHandle {
    fn drop(&mut self) {
        self.shared.close();
    }
}

impl ComponentHandle {
    fn record<'a, F>(&self, factory: F) -> Result<RecordOutcome, DiagnosticError>
    where
        F: FnOnce() -> Observation<'a>,
    {
        if self.shared.is_closed() || self.context.revoked.load(Ordering::Acquire) {
            return Err(DiagnosticError::Closed);
        }
        let mut state = self.context.try_enter()?;
        if self.shared.is_closed() {
            return Err(DiagnosticError::Closed);
        }
        let observation = factory();
        let limits = &self.context.limits;
        // Input on its own budget (the pipeline's; a worker's, bounded by the endpoint's
        // request size) is held to the spec's maximum; storage limits (history, detail)
        // are the context's for everyone.
        let input_limits = if self.shared.own_budget() {
            &DiagnosticsLimits::default()
        } else {
            limits
        };
        validate_observation(&observation, &self.shared.codes, input_limits)?;
        let receipt = state.record(&self.shared, observation, limits)?;
        Ok(RecordOutcome::Recorded(receipt))
    }
}

impl DiagnosticComponent {
    /// A component that records nothing (what a disabled context hands out).
    pub fn disabled() -> Self {
        Self { handle: None }
    }

    /// True when backed by an enabled context.
    pub fn is_enabled(&self) -> bool {
        self.handle.is_some()
    }

    /// True once closed; a disabled component is never closed.
    pub fn is_closed(&self) -> bool {
        self.handle
            .as_ref()
            .is_some_and(|handle| handle.shared.is_closed())
    }

    /// The registered name; `None` when disabled.
    pub fn name(&self) -> Option<&str> {
        self.handle
            .as_ref()
            .map(|handle| handle.shared.name.as_str())
    }

    /// Records one observation built lazily.
    ///
    /// Disabled: returns `RecordOutcome::Disabled` without calling the factory.
    /// Closed: `closed`, factory not called. Then the context lock is taken without
    /// waiting (`busy`), the factory runs while the call holds it (a diagnostics call
    /// made from inside the factory on the same context therefore gets `busy`), the
    /// observation is checked (`input_text_limit`, `invalid_observation`) and stored.
    /// A refused observation changes no counter. Never retries.
    pub fn try_record_lazy<'a, F>(&self, factory: F) -> Result<RecordOutcome, DiagnosticError>
    where
        F: FnOnce() -> Observation<'a>,
    {
        let Some(handle) = &self.handle else {
            return Ok(RecordOutcome::Disabled);
        };
        let result = handle.record(factory);
        handle.context.count(&result);
        result
    }

    /// Closes the registration for every clone; true when this call closed it.
    /// Never blocks; the live slot is free for the next registration at once.
    pub fn close(&self) -> bool {
        self.handle
            .as_ref()
            .is_some_and(|handle| handle.shared.close())
    }
}

/// What a plugin inside the host gets of the context: one native session, which
/// registers components and records through them on admission budgets of its own
/// (live components, extensions, registration text: per session, as the spec says);
/// it reads the whole context only with the host's grant (`grant_plugin_reads`),
/// which a query filter would not narrow. Clones share the session.
#[derive(Debug, Clone)]
pub struct PluginDiagnostics {
    context: Diagnostics,
    read_granted: bool,
    session: SessionId,
}

impl PluginDiagnostics {
    /// A new session on `context` as a plugin sees it, reading only when
    /// `read_granted`.
    pub fn new(context: Diagnostics, read_granted: bool) -> Self {
        let session = context.new_session();
        PluginDiagnostics {
            context,
            read_granted,
            session,
        }
    }

    /// A facade that records nothing and never calls factories (diagnostics off).
    pub fn disabled() -> Self {
        PluginDiagnostics::new(Diagnostics::disabled(), false)
    }

    /// Whether the context collects anything (`enabled` or `disabled`).
    pub fn availability(&self) -> Availability {
        self.context.availability()
    }

    /// Totals of the context's recording calls (accepted, rejected, busy); reads
    /// atomics, never busy.
    pub fn delivery_stats(&self) -> DeliveryStats {
        self.context.delivery_stats()
    }

    /// Use of this session's budgets; `busy` if another call is in progress.
    pub fn usage(&self) -> Result<AdmissionUsage, DiagnosticError> {
        match &self.context.inner {
            Some(context) => Ok(context.try_enter()?.session_usage(self.session)),
            None => Ok(AdmissionUsage::default()),
        }
    }

    /// Registers one component on this session's budgets (otherwise as
    /// [`Diagnostics::component_lazy`]).
    pub fn component_lazy<'a, F>(&self, factory: F) -> Result<DiagnosticComponent, DiagnosticError>
    where
        F: FnOnce() -> ComponentDeclaration<'a>,
    {
        self.context
            .register(factory, Registrant::Plugin(self.session))
    }

    /// The limits in force; `None` when disabled.
    pub fn capabilities(&self) -> Option<DiagnosticsLimits> {
        self.context.capabilities()
    }

    /// A copy of the whole context, with the grant; `read_not_granted` without it.
    pub fn snapshot(&self) -> Result<DiagnosticsSnapshot, DiagnosticError> {
        if !self.read_granted {
            return Err(DiagnosticError::ReadNotGranted);
        }
        self.context.snapshot()
    }
}

/// Calls `read` until it is not [`DiagnosticError::Busy`] or `limit` has passed: the
/// context is held only for the length of one record or snapshot.
pub fn retry_while_busy<T>(
    limit: Duration,
    mut read: impl FnMut() -> Result<T, DiagnosticError>,
) -> Result<T, DiagnosticError> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match read() {
            Err(DiagnosticError::Busy) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            other => return other,
        }
    }
}

/// How many times [`retry_soon_while_busy`] asks again.
const BUSY_RETRIES: usize = 1024;

/// Calls `call` until it is not [`DiagnosticError::Busy`], yielding the thread between
/// tries, at most 1,024 times: for a caller that must not sleep (an actor, a
/// request handler) and would otherwise lose what it records to another call that
/// holds the context for the length of one record.
pub fn retry_soon_while_busy<T>(
    mut call: impl FnMut() -> Result<T, DiagnosticError>,
) -> Result<T, DiagnosticError> {
    let mut attempt = 0;
    loop {
        match call() {
            Err(DiagnosticError::Busy) if attempt < BUSY_RETRIES => {
                attempt += 1;
                std::thread::yield_now();
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod busy_tests {
    use super::*;

    #[test]
    fn a_call_that_meets_a_busy_context_is_made_again_a_bounded_number_of_times() {
        let mut calls = 0;
        let answer = retry_soon_while_busy(|| {
            calls += 1;
            if calls < 3 {
                Err(DiagnosticError::Busy)
            } else {
                Ok("recorded")
            }
        });
        assert_eq!(answer.unwrap(), "recorded");
        assert_eq!(calls, 3);
        // Busy for good: the first call and BUSY_RETRIES more, then busy is returned.
        let mut calls = 0;
        let answer: Result<(), _> = retry_soon_while_busy(|| {
            calls += 1;
            Err(DiagnosticError::Busy)
        });
        assert!(matches!(answer, Err(DiagnosticError::Busy)));
        assert_eq!(calls, BUSY_RETRIES + 1);
        // Any other error is returned at once.
        let mut calls = 0;
        let answer: Result<(), _> = retry_soon_while_busy(|| {
            calls += 1;
            Err(DiagnosticError::Closed)
        });
        assert!(matches!(answer, Err(DiagnosticError::Closed)));
        assert_eq!(calls, 1);
    }

    #[test]
    fn a_busy_context_is_asked_again_and_busy_is_never_off() {
        let mut calls = 0;
        let answer = retry_while_busy(Duration::from_secs(5), || {
            calls += 1;
            if calls < 3 {
                Err(DiagnosticError::Busy)
            } else {
                Ok("snapshot")
            }
        });
        assert_eq!(answer.unwrap(), "snapshot");
        assert_eq!(calls, 3);
        // Past the limit, busy is returned as busy.
        let answer: Result<(), _> = retry_while_busy(Duration::ZERO, || Err(DiagnosticError::Busy));
        assert!(matches!(answer, Err(DiagnosticError::Busy)));
        // Other errors are not retried.
        let mut calls = 0;
        let answer: Result<(), _> = retry_while_busy(Duration::from_secs(5), || {
            calls += 1;
            Err(DiagnosticError::Closed)
        });
        assert!(matches!(answer, Err(DiagnosticError::Closed)));
        assert_eq!(calls, 1);
    }
}

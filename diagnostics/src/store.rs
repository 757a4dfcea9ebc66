//! Locked context state: registrations, lifetime counters and the bounded evidence ring.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};

use super::declaration::{CodeSpec, ValidatedDeclaration};
use super::error::DiagnosticError;
use super::limits::DiagnosticsLimits;
use super::observation::{
    EvidenceDisposition, Observation, RecordReceipt, code_spec, truncate_on_char_boundary,
};
use super::snapshot::{
    AdmissionUsage, CodeSnapshot, ComponentSnapshot, ComponentState, DiagnosticEvent,
    EventCorrelation, EventProvenance, HistoryStats,
};

/// Immutable registration data shared by a component's handles and the context.
#[derive(Debug)]
pub(super) struct ComponentShared {
    pub(super) name: String,
    pub(super) codes: Vec<CodeSpec>,
    /// Index of this registration's row in [`ContextState::rows`].
    row: usize,
    /// Set once by `close()` or the last handle's drop; never cleared.
    closed: AtomicBool,
    /// The native session whose budget it was admitted on; `None`: a budget of its
    /// own (the pipeline's components; a worker's, whose session limits the host
    /// endpoint enforces).
    pub(super) session: Option<SessionId>,
}

/// A native plugin session (one activation's facade): admission budgets are per
/// session, as the spec says.
pub(super) type SessionId = u64;

/// What one native session has charged so far; never decreases.
#[derive(Debug, Clone, Copy, Default)]
struct SessionBudget {
    extension_declarations: usize,
    registration_text_bytes: usize,
}

impl ComponentShared {
    /// True when admitted on a budget of its own, not a native session's.
    pub(super) fn own_budget(&self) -> bool {
        self.session.is_none()
    }

    /// Marks the registration closed; true when this call closed it.
    pub(super) fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// True once closed.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct CodeCounter {
    occurrences: u64,
    last_observed_at: Option<DateTime<Utc>>,
}

#[derive(Debug)]
struct ComponentRow {
    shared: Arc<ComponentShared>,
    counters: Vec<CodeCounter>,
}

#[derive(Debug)]
struct History {
    capacity: usize,
    events: VecDeque<DiagnosticEvent>,
    evicted: u64,
    truncated: u64,
    dropped: u64,
}

/// Everything behind the context lock.
///
/// Rows are never removed: a closed registration keeps its counters. Row growth is
/// bounded because every registration charges at least two bytes to the cumulative
/// registration text budget, which closing never restores.
#[derive(Debug)]
pub(super) struct ContextState {
    rows: Vec<ComponentRow>,
    sessions: HashMap<SessionId, SessionBudget>,
    next_sequence: u64,
    history: History,
}

impl ContextState {
    /// Empty state sized for `limits`.
    pub(super) fn new(limits: &DiagnosticsLimits) -> Self {
        Self {
            rows: Vec::new(),
            sessions: HashMap::new(),
            next_sequence: 1,
            history: History {
                capacity: limits.history_capacity,
                events: VecDeque::with_capacity(limits.history_capacity),
                evicted: 0,
                truncated: 0,
                dropped: 0,
            },
        }
    }

    fn live_rows(&self) -> impl Iterator<Item = &ComponentRow> {
        self.rows.iter().filter(|row| !row.shared.is_closed())
    }

    /// Live components on the native plugins' budgets (the pipeline's own have their
    /// own).
    fn live_plugin_rows(&self) -> impl Iterator<Item = &ComponentRow> {
        self.live_rows().filter(|row| !row.shared.own_budget())
    }

    /// Closes every registration (activation teardown): no handle records after it.
    pub(super) fn close_all(&self) {
        for row in &self.rows {
            row.shared.close();
        }
    }

    /// Current use of the native plugins' budgets, every session together.
    pub(super) fn usage(&self) -> AdmissionUsage {
        AdmissionUsage {
            live_components: self.live_plugin_rows().count(),
            extension_declarations: self
                .sessions
                .values()
                .map(|budget| budget.extension_declarations)
                .sum(),
            registration_text_bytes: self
                .sessions
                .values()
                .map(|budget| budget.registration_text_bytes)
                .sum(),
        }
    }

    /// Current use of one native session's budget.
    pub(super) fn session_usage(&self, session: SessionId) -> AdmissionUsage {
        let budget = self.sessions.get(&session).copied().unwrap_or_default();
        AdmissionUsage {
            live_components: self
                .live_rows()
                .filter(|row| row.shared.session == Some(session))
                .count(),
            extension_declarations: budget.extension_declarations,
            registration_text_bytes: budget.registration_text_bytes,
        }
    }

    /// Admits a validated declaration against `session`'s budgets and stores it.
    ///
    /// Order: duplicate live name, live components, extensions, registration text.
    /// Nothing is charged when an error is returned. A declaration with no session (the
    /// pipeline's or a worker's, validated against the spec's maxima) charges no budget
    /// here: the plugins keep every slot the configuration gives them.
    pub(super) fn admit(
        &mut self,
        declaration: ValidatedDeclaration,
        limits: &DiagnosticsLimits,
        session: Option<SessionId>,
    ) -> Result<Arc<ComponentShared>, DiagnosticError> {
        if self
            .live_rows()
            .any(|row| row.shared.name == declaration.name)
        {
            return Err(DiagnosticError::DuplicateComponent {
                name: declaration.name,
            });
        }
        let Some(session) = session else {
            return Ok(self.store_row(declaration, None));
        };
        let used = self.session_usage(session);
        if used.live_components >= limits.max_live_components {
            return Err(DiagnosticError::ComponentLimit {
                limit: limits.max_live_components,
            });
        }
        let extensions = used
            .extension_declarations
            .saturating_add(declaration.extension_count);
        if extensions > limits.max_extension_declarations {
            return Err(DiagnosticError::ExtensionLimit {
                used: used.extension_declarations,
                requested: declaration.extension_count,
                limit: limits.max_extension_declarations,
            });
        }
        let text = used
            .registration_text_bytes
            .saturating_add(declaration.text_bytes);
        if text > limits.max_registration_text_bytes {
            return Err(DiagnosticError::RegistrationTextLimit {
                used: used.registration_text_bytes,
                requested: declaration.text_bytes,
                limit: limits.max_registration_text_bytes,
            });
        }
        self.sessions.insert(
            session,
            SessionBudget {
                extension_declarations: extensions,
                registration_text_bytes: text,
            },
        );
        Ok(self.store_row(declaration, Some(session)))
    }

    fn store_row(
        &mut self,
        declaration: ValidatedDeclaration,
        session: Option<SessionId>,
    ) -> Arc<ComponentShared> {
        let counters = vec![CodeCounter::default(); declaration.codes.len()];
        let shared = Arc::new(ComponentShared {
            name: declaration.name,
            codes: declaration.codes,
            row: self.rows.len(),
            closed: AtomicBool::new(false),
            session,
        });
        self.rows.push(ComponentRow {
            shared: Arc::clone(&shared),
            counters,
        });
        shared
    }

    /// Stores an already validated observation: counters first, then evidence.
    pub(super) fn record(
        &mut self,
        component: &ComponentShared,
        observation: Observation<'_>,
        limits: &DiagnosticsLimits,
    ) -> Result<RecordReceipt, DiagnosticError> {
        let code = observation.code;
        let spec_name = code_spec(&component.codes, code)?.name.clone();
        let index = usize::try_from(code)
            .unwrap_or(usize::MAX)
            .saturating_sub(1);
        let Some(counter) = self
            .rows
            .get_mut(component.row)
            .and_then(|row| row.counters.get_mut(index))
        else {
            return Err(DiagnosticError::Closed);
        };
        let now = Utc::now();
        counter.occurrences = counter.occurrences.saturating_add(observation.count.get());
        counter.last_observed_at = Some(now);
        let code_total = counter.occurrences;
        let sequence = self.next_sequence;
        self.next_sequence = self.next_sequence.saturating_add(1);

        let history = &mut self.history;
        let evidence = if history.capacity == 0 {
            history.dropped = history.dropped.saturating_add(1);
            EvidenceDisposition::Dropped
        } else {
            let mut truncated = false;
            let detail = observation.detail.map(|text| {
                let mut text = text.into_owned();
                truncated = truncate_on_char_boundary(&mut text, limits.max_detail_bytes);
                text
            });
            if history.events.len() >= history.capacity {
                history.events.pop_front();
                history.evicted = history.evicted.saturating_add(1);
            }
            history.events.push_back(DiagnosticEvent {
                sequence,
                component: component.name.clone(),
                code: spec_name,
                position: code,
                count: observation.count.get(),
                outcome: observation.outcome,
                severity: observation.severity,
                failure_class: observation.failure_class,
                detail,
                correlation: EventCorrelation {
                    request_id: observation.correlation.request_id.map(|id| id.into_owned()),
                    session_id: observation.correlation.session_id.map(|id| id.into_owned()),
                },
                recorded_at: now,
                provenance: observation.provenance.map(|provenance| EventProvenance {
                    worker_id: provenance.worker_id.into_owned(),
                    observed_at: provenance.observed_at,
                }),
            });
            if truncated {
                history.truncated = history.truncated.saturating_add(1);
                EvidenceDisposition::Truncated
            } else {
                EvidenceDisposition::Retained
            }
        };
        Ok(RecordReceipt {
            sequence,
            code_total,
            evidence,
        })
    }

    /// Copies every registration with its counters.
    pub(super) fn components(&self) -> Vec<ComponentSnapshot> {
        self.rows
            .iter()
            .map(|row| ComponentSnapshot {
                name: row.shared.name.clone(),
                state: if row.shared.is_closed() {
                    ComponentState::Closed
                } else {
                    ComponentState::Open
                },
                codes: (1u32..)
                    .zip(row.shared.codes.iter().zip(row.counters.iter()))
                    .map(|(position, (spec, counter))| CodeSnapshot {
                        position,
                        code: spec.name.clone(),
                        origin: spec.origin,
                        description: spec.description.clone(),
                        outcome: spec.outcome,
                        allowed_classes: spec.allowed_classes.clone(),
                        occurrences: counter.occurrences,
                        last_observed_at: counter.last_observed_at,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Copies the retained events, oldest first.
    pub(super) fn recent_events(&self) -> Vec<DiagnosticEvent> {
        self.history.events.iter().cloned().collect()
    }

    /// History coverage totals.
    pub(super) fn history_stats(&self) -> HistoryStats {
        HistoryStats {
            capacity: self.history.capacity,
            retained: self.history.events.len(),
            evicted: self.history.evicted,
            truncated: self.history.truncated,
            dropped: self.history.dropped,
        }
    }
}

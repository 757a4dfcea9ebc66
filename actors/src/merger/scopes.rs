//! The Agent-scope table, which the merger owns (the only one: the energy actor learns
//! of starts and ends from the merger): scopes start and end by message, in mailbox
//! order with the polls, so every mark copied under a scope lies between its start and
//! end events.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_model::events::{PipelineEvent, ScopeCategory, ScopeEvent, ScopeKind};

use crate::scope_boundary::{BoundaryAt, ScopeBoundary};

/// The name of the scope every event of a pipeline sits in.
pub const ROOT_SCOPE_NAME: &str = "wattline";

/// A scope event under `root` (the root's own events have no parent; everything else
/// is an Agent scope, under `parent` when it is nested in one, else under the root).
pub fn scope_event(
    root: Uuid,
    uuid: Uuid,
    parent: Option<Uuid>,
    name: &Arc<str>,
    timestamp: DateTime<Utc>,
    category: ScopeCategory,
    mut attributes: Vec<&'static str>,
) -> PipelineEvent {
    let is_root = uuid == root;
    attributes.sort_unstable();
    attributes.dedup();
    PipelineEvent::Scope(ScopeEvent {
        uuid,
        parent_uuid: (!is_root).then(|| parent.unwrap_or(root)),
        timestamp,
        name: Arc::clone(name),
        scope_category: category,
        kind: if is_root {
            ScopeKind::Custom
        } else {
            ScopeKind::Agent
        },
        attributes,
    })
}

/// `now`, or a microsecond after `earlier` when the clock has not moved past it: an
/// end is strictly later than its start.
pub fn strictly_after(earlier: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    if now > earlier {
        now
    } else {
        earlier + chrono::Duration::microseconds(1)
    }
}

/// One live Agent scope.
#[derive(Debug, Clone)]
pub struct LiveScope {
    /// Its UUID (the parent of its marks).
    pub uuid: Uuid,
    /// Its name.
    pub name: Arc<str>,
    /// When it started.
    pub started: DateTime<Utc>,
    /// The Agent scope it is nested in, if any.
    pub parent: Option<Uuid>,
    /// Its ATOF flags, repeated on its end event.
    pub attributes: Vec<&'static str>,
}

/// The live Agent scopes, in the order they started.
pub struct ScopeTable {
    root: Uuid,
    live: Vec<LiveScope>,
}

impl ScopeTable {
    /// An empty table under the pipeline's root scope `root`.
    pub fn new(root: Uuid) -> Self {
        ScopeTable {
            root,
            live: Vec::new(),
        }
    }

    /// Applies `boundary`: a start or an end event is added to `events`. `false` for
    /// the end of a scope that is not live, which changes nothing.
    pub fn apply(&mut self, boundary: &ScopeBoundary, events: &mut Vec<PipelineEvent>) -> bool {
        match boundary {
            ScopeBoundary::Started {
                uuid,
                name,
                parent,
                extras,
                wall,
                ..
            } => {
                let scope = LiveScope {
                    uuid: *uuid,
                    name: Arc::clone(name),
                    started: (*wall).into(),
                    parent: *parent,
                    attributes: extras.attributes().to_vec(),
                };
                self.start(scope, events);
                true
            }
            ScopeBoundary::Ended {
                uuid, wall, flags, ..
            } => self.end(*uuid, (*wall).into(), flags, events).is_some(),
            // The energy stage's concern: no event.
            ScopeBoundary::WindowCloses { .. } => true,
        }
    }

    /// Adds `scope`'s start event to `events` and copies later marks under it.
    pub fn start(&mut self, scope: LiveScope, events: &mut Vec<PipelineEvent>) {
        events.push(scope_event(
            self.root,
            scope.uuid,
            scope.parent,
            &scope.name,
            scope.started,
            ScopeCategory::Start,
            scope.attributes.clone(),
        ));
        self.live.push(scope);
    }

    /// Ends the live scope `uuid` at `wall` (strictly after its start), adding its
    /// end event with `flags` added to `events`; the end's time, or `None` when it was not live.
    pub fn end(
        &mut self,
        uuid: Uuid,
        wall: DateTime<Utc>,
        flags: &[&'static str],
        events: &mut Vec<PipelineEvent>,
    ) -> Option<DateTime<Utc>> {
        let position = self.live.iter().position(|scope| scope.uuid == uuid)?;
        let scope = self.live.remove(position);
        Some(self.write_end(scope, wall, flags, events))
    }

    /// Ends every live scope at `at` (`wall` on the wall clock, or just after its
    /// start); each one's end, for the energy stage.
    pub fn end_all(
        &mut self,
        at: BoundaryAt,
        wall: DateTime<Utc>,
        events: &mut Vec<PipelineEvent>,
    ) -> Vec<ScopeBoundary> {
        std::mem::take(&mut self.live)
            .into_iter()
            .map(|scope| {
                let uuid = scope.uuid;
                let ended = self.write_end(scope, wall, &[], events);
                ScopeBoundary::Ended {
                    uuid,
                    flags: Vec::new(),
                    at,
                    wall: std::time::SystemTime::from(ended).into(),
                    remote_call: None,
                }
            })
            .collect()
    }

    /// Adds `scope`'s end event at `wall` (strictly after its start) with `flags`
    /// added; the end's time.
    fn write_end(
        &self,
        scope: LiveScope,
        wall: DateTime<Utc>,
        flags: &[&'static str],
        events: &mut Vec<PipelineEvent>,
    ) -> DateTime<Utc> {
        let LiveScope {
            uuid,
            name,
            started,
            parent,
            mut attributes,
        } = scope;
        attributes.extend_from_slice(flags);
        let wall = strictly_after(started, wall);
        events.push(scope_event(
            self.root,
            uuid,
            parent,
            &name,
            wall,
            ScopeCategory::End,
            attributes,
        ));
        wall
    }

    /// Where a poll's mark goes: one copy under each live scope, or one under the root.
    pub fn mark_parents(&self) -> Vec<Uuid> {
        if self.live.is_empty() {
            vec![self.root]
        } else {
            self.live.iter().map(|scope| scope.uuid).collect()
        }
    }
}

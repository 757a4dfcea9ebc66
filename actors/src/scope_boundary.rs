//! A scope's start or end as the API records it: one item on the queue that the
//! merger (which writes the scope's events in order with its polls) and the energy
//! actor (which books it) both read ([`crate::wake_queue`]), so the caller pushes once
//! per boundary. Times are the clocks' raw readings: the readers make calendar times
//! of them, so the caller does not.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use uuid::Uuid;

/// Reader 0 of the boundary queue: the merger.
pub const MERGER_READER: usize = 0;

/// Reader 1 of the boundary queue: the energy actor (its reader is dropped, and so
/// never woken, when the energy component is off).
pub const ENERGY_READER: usize = 1;

/// A scope boundary on its way to the merger and the energy actor.
#[derive(Debug)]
pub enum ScopeBoundary {
    /// An Agent scope went live: its start event goes out, later marks are copied
    /// under it, and energy is attributed to it.
    Started {
        /// Its UUID (the parent of its marks).
        uuid: Uuid,
        /// Its name.
        name: Arc<str>,
        /// The Agent scope it is nested in, if any.
        parent: Option<Uuid>,
        /// Its ATOF flags, repeated on its end event.
        attributes: Vec<&'static str>,
        /// The process that opened it.
        process_id: Option<u32>,
        /// Its weight among the scopes live beside it.
        weight: Option<f64>,
        /// The caller's W3C `traceparent`, checked.
        traceparent: Option<String>,
        /// When it started.
        at: Instant,
        /// The same instant on the wall clock.
        wall: SystemTime,
    },
    /// An Agent scope ended: its end event goes out, with `flags` added.
    Ended {
        /// The scope.
        uuid: Uuid,
        /// ATOF flags added to its end event ([`ENDED_AT_PROGRAM_EXIT`] among them when
        /// its program exited with it open and wattline ended it then).
        ///
        /// [`ENDED_AT_PROGRAM_EXIT`]: wattline_model::events::ENDED_AT_PROGRAM_EXIT
        flags: Vec<&'static str>,
        /// When it ended.
        at: Instant,
        /// The same instant on the wall clock.
        wall: SystemTime,
    },
}

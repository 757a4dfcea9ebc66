//! The merger: turns base-unit readings into the snapshot, converting units in exactly
//! one place.

pub mod actor;
pub mod convert;
pub mod scopes;
pub mod snapshot_builder;
pub mod tick;

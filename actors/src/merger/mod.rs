//! The merger: turns base-unit readings into the snapshot through each category's
//! conversion (`wattline_model::snapshot`, the one place output units are applied).

pub mod actor;
mod boundaries;
pub mod scopes;
pub mod snapshot_builder;
pub mod tick;
pub mod tick_plan;

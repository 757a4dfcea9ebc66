//! wattline's moving parts: the snapshot model and the messages that flow, scope
//! resolution, the OS readers, the samplers and the merger's unit conversion.

#![warn(missing_docs)]

pub mod categories;
pub mod collector;
pub mod diagnostics;
pub mod energy;
pub mod events;
pub mod gpu;
pub mod merger;
pub mod metric_names;
pub mod pipeline;
pub mod platform;
pub mod readings;
pub mod samplers;
pub mod scope;
pub mod snapshot;

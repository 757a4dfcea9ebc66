//! The energy stage: power samples in time order become kWh, cost and gCO2e. The
//! account itself (intervals, windows, attribution, the report) is the
//! `wattline-energy` crate; this module holds what feeds it live:
//! the actor, its inbox, the records made from samples, the RAPL intervals and the
//! settled scopes it announces. The exporters name what it sends.

pub mod actor;
pub mod input;
pub mod rapl_intervals;
pub mod record;
pub mod settled;

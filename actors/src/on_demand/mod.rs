//! On-demand collection (`collect()`): its own actor ([`actor`]) with its own OS
//! samplers, so a collection never waits on a poll and a poll never waits on it.

pub(crate) mod actor;
pub(crate) mod callback;
mod samplers;

pub(crate) use actor::{ON_DEMAND_LIMIT, OnDemandActor, OnDemandArguments, OnDemandMessage};
pub(crate) use callback::SnapshotCallback;

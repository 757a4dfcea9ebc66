//! wattline's moving parts: the OS readers, scope resolution, the sampler actors, the
//! merger, the on-demand actor, the energy actor and the wiring that runs them.
//!
//! Its façade is small: the running pipeline and how it is specified ([`pipeline`]:
//! [`pipeline::RunningPipeline`], [`pipeline::PipelineSpec`], [`pipeline::ScopeStart`],
//! [`pipeline::PipelineHealth`]) and why it fails ([`error::PipelineError`]), what a
//! scope measures ([`scope`]), the one-shot [`Collector`], the measured command's own
//! cgroup ([`command_cgroup`]) and `wattline doctor`'s checks ([`doctor`]). The GPU
//! sources, the records and the energy account are crates of their own
//! (`wattline-gpu`, `wattline-model`, `wattline-energy`); nothing of theirs is offered
//! again here.

#![warn(missing_docs)]

pub(crate) mod categories;
pub mod collector;
pub mod command_cgroup;
#[cfg(test)]
pub(crate) mod diagnostics;
pub mod doctor;
pub(crate) mod energy;
pub mod error;
pub(crate) mod merger;
pub(crate) mod on_demand;
pub(crate) mod panics;
pub mod pipeline;
// The OS readers are this crate's own; the `test-support` feature opens them to its
// integration tests and benchmarks, which point them at fixture trees.
#[cfg(feature = "test-support")]
pub mod platform;
#[cfg(not(feature = "test-support"))]
pub(crate) mod platform;
pub(crate) mod readings;
pub(crate) mod samplers;
pub mod scope;
pub(crate) mod scope_boundary;

// The API other crates build on, by name: the rest stays reachable through its module
// for the crate's integration tests and benchmarks.
pub use collector::Collector;
pub use platform::{ParseError, ReadError, ReadErrorClass};
pub use scope::{ProcessIdentity, ScopeTarget};

/// This host's name, for the `host.name` resource attribute; `None` where the OS does
/// not say (or not here: a failed read is no reason to stop a run).
pub fn host_name() -> Option<String> {
    platform::os::host_name::read_host_name(std::path::Path::new("/"))
        .ok()
        .flatten()
}

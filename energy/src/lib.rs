//! wattline's energy account: the energy stage's records (power readings, counters,
//! RAPL, scope boundaries, the window's start), applied in time order, become the
//! energy/cost report: per meter, per domain, per process, and per Agent scope as its
//! window and its attributed part. Pure and deterministic, with no runtime and no OS:
//! the energy actor feeds it live, and `wattline report` replays a file's records into
//! the same account.

pub mod account;
pub mod attribution;
pub mod folded_scopes;
pub mod integrator;
pub mod quantile_sketch;
pub mod remote_estimate;
pub mod replay;

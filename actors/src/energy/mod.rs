//! The energy stage: power samples in time order become kWh, cost and gCO2e.

pub mod account;
pub mod actor;
pub mod attribution;
pub mod folded_scopes;
pub mod genai;
pub mod input;
pub mod integrator;
pub mod quantile_sketch;
pub mod record;
pub mod replay;
pub mod report;
pub mod semconv;

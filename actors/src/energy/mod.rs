//! The energy stage: power samples in time order become kWh, cost and gCO2e.

pub mod integrator;

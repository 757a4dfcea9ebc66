//! The energy/cost report returned at flush. Its value types are plain data and live in
//! the model (`wattline_model::report`); they are re-exported here so the energy
//! stage's paths keep working. The renderers (table, CSV, HTML) are the root crate's.

pub use wattline_model::report::{
    DeviceEnergy, Distribution, DomainEnergy, EnergyDomain, EnergyReport, EnergyTotals,
    ExporterOutcome, Factor, FoldedScopes, ProcessEnergy, SCOPE_ATTRIBUTION, ScopeEnergy,
    ZoneEnergy,
};

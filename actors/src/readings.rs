//! What travels beside the samplers' base-unit readings: which series a request is
//! for, and how many processes each summed field covered. The readings themselves,
//! one record per category, are data beside the records they convert to
//! (`wattline_model::snapshot`).

use std::collections::BTreeMap;

/// Which sampling series a request belongs to. Each keeps its own baselines for rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplingSeries {
    /// The poll clock's series.
    Polling,
    /// On-demand `collect()` calls.
    OnDemand,
}

impl SamplingSeries {
    /// Index into per-series state arrays.
    pub fn index(self) -> usize {
        match self {
            SamplingSeries::Polling => 0,
            SamplingSeries::OnDemand => 1,
        }
    }
}

/// Coverage of each process-summed field, keyed by canonical path.
pub type FieldCoverage = BTreeMap<&'static str, u64>;

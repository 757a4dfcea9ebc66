//! Which sampling series a reading belongs to: the poll clock's or on-demand
//! `collect()` calls. Every reader that computes rates (the CPU and process samplers,
//! the GPU sources' utilization) keeps its baselines per series, so an on-demand
//! collection never disturbs the polling rates, nor the reverse.

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

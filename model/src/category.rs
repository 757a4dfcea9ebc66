//! The snapshot's categories, listed once.

/// A snapshot category: which metric family a sampler collects. The one list of
/// categories: the snapshot's gauge tables, the samplers' descriptors and the
/// diagnostics' sampler codes are each looked up from it by an exhaustive `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerCategory {
    /// CPU time and frequency.
    Cpu,
    /// Memory usage.
    Memory,
    /// Per-process statistics.
    Process,
    /// Disk I/O.
    Disk,
    /// Network I/O.
    Network,
    /// GPU metrics.
    Gpu,
}

impl SamplerCategory {
    /// Every category, in declaration order.
    pub const ALL: [SamplerCategory; 6] = [
        SamplerCategory::Cpu,
        SamplerCategory::Memory,
        SamplerCategory::Process,
        SamplerCategory::Disk,
        SamplerCategory::Network,
        SamplerCategory::Gpu,
    ];

    /// Every category, in the order of the snapshot (and of its gauges in a mark).
    pub const IN_SNAPSHOT_ORDER: [SamplerCategory; 6] = [
        SamplerCategory::Cpu,
        SamplerCategory::Memory,
        SamplerCategory::Process,
        SamplerCategory::Disk,
        SamplerCategory::Gpu,
        SamplerCategory::Network,
    ];

    /// The category's name segment (`cpu`, `memory`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerCategory::Cpu => "cpu",
            SamplerCategory::Memory => "memory",
            SamplerCategory::Process => "process",
            SamplerCategory::Disk => "disk",
            SamplerCategory::Network => "network",
            SamplerCategory::Gpu => "gpu",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_orders_hold_every_category_once() {
        for order in [SamplerCategory::ALL, SamplerCategory::IN_SNAPSHOT_ORDER] {
            let mut names: Vec<&str> = order.iter().map(|category| category.as_str()).collect();
            names.sort_unstable();
            assert_eq!(
                names,
                ["cpu", "disk", "gpu", "memory", "network", "process"]
            );
        }
    }
}

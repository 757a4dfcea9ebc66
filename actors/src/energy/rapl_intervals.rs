//! RAPL readings as intervals: each CPU package and DRAM zone's counter increase (J)
//! since its previous reading and the time between, sent beside the energy account for
//! the CPU and RAM metrics (the exporters name them). The parts of a package (`core`,
//! `uncore`, `psys`) overlap those and are left out.

use std::collections::HashMap;

use wattline_energy::integrator::counter_delta_joules;
use wattline_model::energy::Nanos;
use wattline_model::energy::RaplZoneReading;
use wattline_model::energy_telemetry::RaplInterval;
use wattline_model::report::EnergyDomain;

/// The last reading per zone: the base of the next interval.
#[derive(Debug, Default)]
pub struct RaplIntervals {
    /// When (ns) and how much (µJ), per zone directory.
    last: HashMap<String, (Nanos, u64)>,
}

impl RaplIntervals {
    /// The intervals the zones read at `at` close. The first reading of a zone only
    /// sets its base; a reading no later than the base closes nothing (never a power
    /// over no time).
    pub fn advance(&mut self, at: Nanos, zones: &[RaplZoneReading]) -> Vec<RaplInterval> {
        let mut out = Vec::new();
        for zone in zones {
            let domain = EnergyDomain::of_rapl_zone(&zone.name);
            if !matches!(domain, EnergyDomain::CpuPackage | EnergyDomain::Dram) {
                continue;
            }
            let previous = self
                .last
                .insert(zone.zone.clone(), (at, zone.energy_microjoules));
            let Some((before_at, before)) = previous.filter(|(before_at, _)| *before_at < at)
            else {
                continue;
            };
            out.push(RaplInterval {
                zone: zone.zone.clone(),
                name: zone.name.clone(),
                domain,
                joules: counter_delta_joules(
                    before,
                    zone.energy_microjoules,
                    1_000_000.0,
                    zone.max_energy_range_microjoules,
                ),
                seconds: (at - before_at) as f64 / 1e9,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(zone: &str, name: &str, microjoules: u64) -> RaplZoneReading {
        RaplZoneReading {
            zone: zone.into(),
            name: name.into(),
            energy_microjoules: microjoules,
            max_energy_range_microjoules: Some(262_143_328_850),
        }
    }

    #[test]
    fn packages_and_dram_give_intervals_wraps_undone_and_parts_left_out() {
        let mut intervals = RaplIntervals::default();
        let first = [
            zone("intel-rapl:0", "package-0", 262_143_000_000),
            zone("intel-rapl:0:0", "core", 5_000_000),
            zone("intel-rapl:0:2", "dram", 1_000_000),
        ];
        assert!(intervals.advance(1_000_000_000, &first).is_empty());
        // Two seconds later: the package counter wrapped (328 850 µJ to the wrap,
        // then 29 671 150 µJ: 30 J in all); DRAM 4 J.
        let second = [
            zone("intel-rapl:0", "package-0", 29_671_150),
            zone("intel-rapl:0:0", "core", 9_000_000),
            zone("intel-rapl:0:2", "dram", 5_000_000),
        ];
        let closed = intervals.advance(3_000_000_000, &second);
        let summary: Vec<(&str, EnergyDomain, f64, f64)> = closed
            .iter()
            .map(|i| (i.name.as_str(), i.domain, i.joules, i.seconds))
            .collect();
        assert_eq!(summary.len(), 2, "{summary:?}");
        assert_eq!(summary[0].0, "package-0");
        assert_eq!(summary[0].1, EnergyDomain::CpuPackage);
        assert!((summary[0].2 - 30.0).abs() < 1e-6);
        assert_eq!(summary[0].3, 2.0);
        assert!((closed[0].watts() - 15.0).abs() < 1e-6);
        assert_eq!(summary[1].1, EnergyDomain::Dram);
        assert!((summary[1].2 - 4.0).abs() < 1e-9);
        assert!(intervals.advance(3_000_000_000, &second).is_empty());
    }
}

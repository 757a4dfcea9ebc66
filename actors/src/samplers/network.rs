//! The network sampler: system-wide interface counters from `/proc/net/dev`, the
//! aggregate of the selected interfaces, and throughput between samples.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use super::{ReadProblems, SampleRequest, SamplerOutput, SeriesBaselines, checked_sum};
use crate::platform::os::net_dev::{NetDevStats, read_net_dev};
use wattline_model::snapshot::{NetworkReading, TrafficReading};

#[derive(Debug, Clone)]
struct NetworkBaseline {
    at: Instant,
    counters: HashMap<String, (u64, u64)>,
}

/// The network sampler's state.
#[derive(Debug)]
pub struct NetworkSampler {
    root: PathBuf,
    selected: Vec<String>,
    baselines: SeriesBaselines<NetworkBaseline>,
}

impl NetworkSampler {
    /// A sampler reading `/proc/net/dev` under `root`; an empty `selected` list takes
    /// every visible interface.
    pub fn new(root: PathBuf, selected: Vec<String>) -> Self {
        NetworkSampler {
            root,
            selected,
            baselines: SeriesBaselines::default(),
        }
    }

    /// Samples the network category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<NetworkReading> {
        let mut problems = ReadProblems::default();
        let visible = match read_net_dev(&self.root) {
            Ok(stats) => stats.unwrap_or_default(),
            Err(error) => {
                problems.add(&error);
                Vec::new()
            }
        };
        let interfaces: Vec<NetDevStats> = visible
            .into_iter()
            .filter(|stats| self.selected.is_empty() || self.selected.contains(&stats.name))
            .collect();
        // Network readings are system-wide: one baseline whatever the process scope.
        let previous = self
            .baselines
            .take(crate::scope::ScopeTarget::Global, request.series);
        let reading = network_reading(&interfaces, previous.as_ref(), request.taken_at);
        self.baselines.store(
            request.series,
            NetworkBaseline {
                at: request.taken_at,
                counters: interfaces
                    .iter()
                    .map(|stats| (stats.name.clone(), (stats.rx_bytes, stats.tx_bytes)))
                    .collect(),
            },
        );
        SamplerOutput {
            reading,
            coverage: Default::default(),
            problems,
        }
    }
}

/// Builds the category from this sample's counters and the previous sample's.
fn network_reading(
    interfaces: &[NetDevStats],
    previous: Option<&NetworkBaseline>,
    now: Instant,
) -> NetworkReading {
    let elapsed = previous.map(|p| now.saturating_duration_since(p.at).as_secs_f64());
    let mut deltas: Vec<Option<(u64, u64)>> = Vec::with_capacity(interfaces.len());
    let records = interfaces
        .iter()
        .map(|stats| {
            let delta = previous.and_then(|p| p.counters.get(&stats.name)).and_then(
                |&(rx_before, tx_before)| {
                    // A counter that went backwards was reset: no rate for this interval.
                    Some((
                        stats.rx_bytes.checked_sub(rx_before)?,
                        stats.tx_bytes.checked_sub(tx_before)?,
                    ))
                },
            );
            deltas.push(delta);
            let traffic = TrafficReading {
                received_bytes: Some(stats.rx_bytes),
                transmitted_bytes: Some(stats.tx_bytes),
                receive_bytes_per_second: delta.and_then(|(rx, _)| rate(rx, elapsed)),
                transmit_bytes_per_second: delta.and_then(|(_, tx)| rate(tx, elapsed)),
                received_packets: Some(stats.rx_packets),
                transmitted_packets: Some(stats.tx_packets),
                receive_errors: Some(stats.rx_errs),
                transmit_errors: Some(stats.tx_errs),
            };
            (stats.name.clone(), traffic)
        })
        .collect();
    let system = if interfaces.is_empty() {
        TrafficReading::default()
    } else {
        let sum = |field: fn(&NetDevStats) -> u64| checked_sum(interfaces.iter().map(field));
        // Every selected interface needs a usable interval for the aggregate rate.
        let all_deltas: Option<Vec<(u64, u64)>> = deltas.iter().copied().collect();
        let (rx_rate, tx_rate) = match all_deltas {
            Some(deltas) => (
                checked_sum(deltas.iter().map(|d| d.0)).and_then(|rx| rate(rx, elapsed)),
                checked_sum(deltas.iter().map(|d| d.1)).and_then(|tx| rate(tx, elapsed)),
            ),
            None => (None, None),
        };
        TrafficReading {
            received_bytes: sum(|s| s.rx_bytes),
            transmitted_bytes: sum(|s| s.tx_bytes),
            receive_bytes_per_second: rx_rate,
            transmit_bytes_per_second: tx_rate,
            received_packets: sum(|s| s.rx_packets),
            transmitted_packets: sum(|s| s.tx_packets),
            receive_errors: sum(|s| s.rx_errs),
            transmit_errors: sum(|s| s.tx_errs),
        }
    };
    NetworkReading {
        system,
        interfaces: records,
    }
}

fn rate(delta: u64, elapsed_seconds: Option<f64>) -> Option<f64> {
    let elapsed = elapsed_seconds.filter(|e| *e > 0.0)?;
    Some(delta as f64 / elapsed).filter(|r| r.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn stats(name: &str, rx_bytes: u64, tx_bytes: u64) -> NetDevStats {
        NetDevStats {
            name: name.into(),
            rx_bytes,
            rx_packets: 1,
            rx_errs: 0,
            tx_bytes,
            tx_packets: 2,
            tx_errs: 0,
        }
    }

    fn baseline(at: Instant, entries: &[(&str, u64, u64)]) -> NetworkBaseline {
        NetworkBaseline {
            at,
            counters: entries
                .iter()
                .map(|(n, rx, tx)| (n.to_string(), (*rx, *tx)))
                .collect(),
        }
    }

    #[test]
    fn first_sample_has_totals_but_no_throughput() {
        let reading = network_reading(&[stats("lo", 100, 50)], None, Instant::now());
        assert_eq!(reading.system.received_bytes, Some(100));
        assert_eq!(reading.system.receive_bytes_per_second, None);
        assert_eq!(reading.interfaces[0].1.transmit_bytes_per_second, None);
    }

    #[test]
    fn second_sample_has_per_interface_and_system_rates() {
        let start = Instant::now();
        let previous = baseline(start, &[("lo", 100, 50), ("eth0", 0, 0)]);
        let now = start + Duration::from_secs(2);
        let reading = network_reading(
            &[stats("lo", 300, 150), stats("eth0", 40, 20)],
            Some(&previous),
            now,
        );
        assert_eq!(
            reading.interfaces[0].1.receive_bytes_per_second,
            Some(100.0)
        );
        assert_eq!(reading.system.receive_bytes_per_second, Some(120.0));
        assert_eq!(reading.system.transmit_bytes_per_second, Some(60.0));
        assert_eq!(reading.system.received_packets, Some(2));
    }

    #[test]
    fn a_reset_nulls_that_interval_and_the_aggregate() {
        let start = Instant::now();
        let previous = baseline(start, &[("lo", 100, 50), ("eth0", 500, 500)]);
        let reading = network_reading(
            &[stats("lo", 300, 150), stats("eth0", 10, 600)],
            Some(&previous),
            start + Duration::from_secs(1),
        );
        assert_eq!(reading.interfaces[1].1.receive_bytes_per_second, None);
        assert_eq!(
            reading.interfaces[0].1.receive_bytes_per_second,
            Some(200.0)
        );
        assert_eq!(reading.system.receive_bytes_per_second, None);
        assert_eq!(reading.system.received_bytes, Some(310));
    }

    #[test]
    fn a_new_interface_nulls_system_throughput_until_its_second_reading() {
        let start = Instant::now();
        let previous = baseline(start, &[("lo", 100, 50)]);
        let reading = network_reading(
            &[stats("lo", 200, 50), stats("veth1", 10, 10)],
            Some(&previous),
            start + Duration::from_secs(1),
        );
        assert_eq!(
            reading.interfaces[0].1.receive_bytes_per_second,
            Some(100.0)
        );
        assert_eq!(reading.interfaces[1].1.receive_bytes_per_second, None);
        assert_eq!(reading.system.receive_bytes_per_second, None);
    }

    #[test]
    fn no_selected_interface_leaves_the_system_record_null() {
        let reading = network_reading(&[], None, Instant::now());
        assert!(reading.interfaces.is_empty());
        assert_eq!(reading.system, TrafficReading::default());
    }
}

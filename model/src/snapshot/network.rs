//! The network category: its base-unit reading (what the sampler reports), its snapshot
//! record in output units with the conversion between them, and the gauges a mark
//! carries for the record, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{BandwidthUnit, CountUnit, DataUnit};

use super::convert::{bandwidth, count, data};
use super::{Measurement, MeasurementScope, Snapshot};
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::metric_measurements::AttributeValue;
use crate::semconv::{SemconvEquivalent, SemconvShape};
use wattline_config::resource_metrics::NetworkTrafficUnits;

/// Traffic counters of one network record.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NetworkTrafficMetrics {
    /// Bytes received.
    pub received_data: Option<Measurement<DataUnit>>,
    /// Bytes sent.
    pub transmitted_data: Option<Measurement<DataUnit>>,
    /// Receive rate since the previous sample.
    pub receive_throughput: Option<Measurement<BandwidthUnit>>,
    /// Send rate since the previous sample.
    pub transmit_throughput: Option<Measurement<BandwidthUnit>>,
    /// Packets received.
    pub received_packets: Option<Measurement<CountUnit>>,
    /// Packets sent.
    pub transmitted_packets: Option<Measurement<CountUnit>>,
    /// Receive errors.
    pub receive_errors: Option<Measurement<CountUnit>>,
    /// Send errors.
    pub transmit_errors: Option<Measurement<CountUnit>>,
}

/// One selected interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkInterfaceMetrics {
    /// Interface name.
    pub name: String,
    /// Its counters.
    pub traffic: NetworkTrafficMetrics,
}

/// The network category: always system-wide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkMetrics {
    /// Always `global`.
    pub measurement_scope: MeasurementScope,
    /// The aggregate of the selected interfaces.
    pub system: NetworkTrafficMetrics,
    /// One record per selected visible interface.
    pub interfaces: Vec<NetworkInterfaceMetrics>,
}

/// The system-wide network record's gauges.
const NETWORK_SYSTEM_GAUGES: &[Gauge<NetworkTrafficMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.network.system.received_data",
        description: "Data received",
        value: |traffic| whole_base(&traffic.received_data),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.network.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("network.io.direction", "receive")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmitted_data",
        description: "Data sent",
        value: |traffic| whole_base(&traffic.transmitted_data),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.network.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("network.io.direction", "transmit")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.network.system.received_packets",
        description: "Packets received",
        value: |traffic| whole_base(&traffic.received_packets),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmitted_packets",
        description: "Packets sent",
        value: |traffic| whole_base(&traffic.transmitted_packets),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.system.receive_errors",
        description: "Receive errors",
        value: |traffic| whole_base(&traffic.receive_errors),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmit_errors",
        description: "Send errors",
        value: |traffic| whole_base(&traffic.transmit_errors),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.system.receive_throughput",
        description: "Receive rate since the previous poll",
        value: |traffic| whole_base(&traffic.receive_throughput),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.system.transmit_throughput",
        description: "Send rate since the previous poll",
        value: |traffic| whole_base(&traffic.transmit_throughput),
        semconv: None,
    },
];

/// Each selected interface's gauges, under its name.
const NETWORK_INTERFACE_GAUGES: &[Gauge<NetworkTrafficMetrics>] = &[
    Gauge {
        name: "nemo.relay.resource.network.interface.received_data",
        description: "Data received",
        value: |traffic| whole_base(&traffic.received_data),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.network.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("network.io.direction", "receive")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmitted_data",
        description: "Data sent",
        value: |traffic| whole_base(&traffic.transmitted_data),
        semconv: Some(SemconvEquivalent {
            process: None,
            system: Some("system.network.io"),
            unit: "By",
            shape: SemconvShape::Total,
            attribute: Some(("network.io.direction", "transmit")),
        }),
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.received_packets",
        description: "Packets received",
        value: |traffic| whole_base(&traffic.received_packets),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmitted_packets",
        description: "Packets sent",
        value: |traffic| whole_base(&traffic.transmitted_packets),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.receive_errors",
        description: "Receive errors",
        value: |traffic| whole_base(&traffic.receive_errors),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmit_errors",
        description: "Send errors",
        value: |traffic| whole_base(&traffic.transmit_errors),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.receive_throughput",
        description: "Receive rate since the previous poll",
        value: |traffic| whole_base(&traffic.receive_throughput),
        semconv: None,
    },
    Gauge {
        name: "nemo.relay.resource.network.interface.transmit_throughput",
        description: "Send rate since the previous poll",
        value: |traffic| whole_base(&traffic.transmit_throughput),
        semconv: None,
    },
];

/// The network category's part of a mark.
pub fn network_marks(snapshot: &Snapshot, mark: &mut MarkBuilder) {
    if let Some(network) = &snapshot.network {
        mark.gauges(NETWORK_SYSTEM_GAUGES, &network.system, &[]);
        for interface in &network.interfaces {
            let name = [(
                "nemo_relay.resource.network.interface_name",
                AttributeValue::String(interface.name.clone()),
            )];
            mark.gauges(NETWORK_INTERFACE_GAUGES, &interface.traffic, &name);
        }
    }
}

/// The semantic-convention equivalent of the network gauge named `mark`, if any.
pub(super) fn network_semconv(mark: &str) -> Option<&'static SemconvEquivalent> {
    semconv_in(NETWORK_SYSTEM_GAUGES, mark).or_else(|| semconv_in(NETWORK_INTERFACE_GAUGES, mark))
}

/// Traffic of one network record in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrafficReading {
    /// Bytes received.
    pub received_bytes: Option<u64>,
    /// Bytes sent.
    pub transmitted_bytes: Option<u64>,
    /// Receive rate, bytes per second.
    pub receive_bytes_per_second: Option<f64>,
    /// Send rate, bytes per second.
    pub transmit_bytes_per_second: Option<f64>,
    /// Packets received.
    pub received_packets: Option<u64>,
    /// Packets sent.
    pub transmitted_packets: Option<u64>,
    /// Receive errors.
    pub receive_errors: Option<u64>,
    /// Send errors.
    pub transmit_errors: Option<u64>,
}

/// The network category in base units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetworkReading {
    /// Aggregate of the selected interfaces.
    pub system: TrafficReading,
    /// Selected visible interfaces, by name.
    pub interfaces: Vec<(String, TrafficReading)>,
}

fn traffic(reading: &TrafficReading, units: &NetworkTrafficUnits) -> NetworkTrafficMetrics {
    NetworkTrafficMetrics {
        received_data: data(reading.received_bytes, units.received_data),
        transmitted_data: data(reading.transmitted_bytes, units.transmitted_data),
        receive_throughput: bandwidth(reading.receive_bytes_per_second, units.receive_throughput),
        transmit_throughput: bandwidth(
            reading.transmit_bytes_per_second,
            units.transmit_throughput,
        ),
        received_packets: count(reading.received_packets, CountUnit::Packets),
        transmitted_packets: count(reading.transmitted_packets, CountUnit::Packets),
        receive_errors: count(reading.receive_errors, CountUnit::Errors),
        transmit_errors: count(reading.transmit_errors, CountUnit::Errors),
    }
}

/// The network category in output units; always `global` scope.
pub fn network_metrics(
    reading: &NetworkReading,
    system_units: &NetworkTrafficUnits,
    interface_units: &NetworkTrafficUnits,
) -> NetworkMetrics {
    NetworkMetrics {
        measurement_scope: MeasurementScope::Global,
        system: traffic(&reading.system, system_units),
        interfaces: reading
            .interfaces
            .iter()
            .map(|(name, reading)| NetworkInterfaceMetrics {
                name: name.clone(),
                traffic: traffic(reading, interface_units),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_config::units::MeasurementValue::{Decimal, Integer};

    #[test]
    fn network_system_and_interface_units_are_separate() {
        let reading = NetworkReading {
            system: TrafficReading {
                received_bytes: Some(2_000_000),
                receive_bytes_per_second: Some(125_000.0),
                ..TrafficReading::default()
            },
            interfaces: vec![(
                "lo".into(),
                TrafficReading {
                    received_bytes: Some(1_048_576),
                    ..TrafficReading::default()
                },
            )],
        };
        let system_units = NetworkTrafficUnits {
            received_data: DataUnit::Megabytes,
            receive_throughput: BandwidthUnit::MegabitsPerSecond,
            ..NetworkTrafficUnits::default()
        };
        let interface_units = NetworkTrafficUnits {
            received_data: DataUnit::Mebibytes,
            ..NetworkTrafficUnits::default()
        };
        let metrics = network_metrics(&reading, &system_units, &interface_units);
        assert_eq!(metrics.measurement_scope, MeasurementScope::Global);
        assert_eq!(
            metrics.system.received_data,
            Some(Measurement::new(Integer(2), DataUnit::Megabytes))
        );
        assert_eq!(
            metrics.system.receive_throughput,
            Some(Measurement::new(
                Decimal(1.0),
                BandwidthUnit::MegabitsPerSecond
            ))
        );
        assert_eq!(
            metrics.interfaces[0].traffic.received_data,
            Some(Measurement::new(Integer(1), DataUnit::Mebibytes))
        );
        assert_eq!(metrics.system.transmitted_data, None);
    }
}

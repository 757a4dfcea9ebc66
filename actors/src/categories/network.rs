//! The network category: the conversion from its base-unit reading
//! (`crate::readings`) to its snapshot record (whose mark gauges are beside it in
//! `wattline_model::snapshot`), and its descriptor.

use wattline_config::resource_metrics::NetworkTrafficUnits;
use wattline_config::units::CountUnit;

use super::{CategoryDescriptor, factory};
use crate::diagnostics::SamplerCategory;
use crate::merger::convert::{bandwidth, count, data};
use crate::readings::{NetworkReading, TrafficReading};
use crate::samplers::{CategoryReading, network::NetworkSampler};
use wattline_model::snapshot::{
    MeasurementScope, NetworkInterfaceMetrics, NetworkMetrics, NetworkTrafficMetrics,
};

/// The network category's descriptor.
pub(crate) const DESCRIPTOR: CategoryDescriptor = CategoryDescriptor {
    category: SamplerCategory::Network,
    enabled: |config| config.network.enabled,
    os_sampler: Some(|root, config| {
        let root = root.to_path_buf();
        let interfaces = config.network.interfaces.clone();
        factory(move || NetworkSampler::new(root.clone(), interfaces.clone()))
    }),
    fill: |snapshot, reading, units| {
        if let CategoryReading::Network(reading) = reading {
            snapshot.network = Some(network_metrics(
                &reading,
                &units.network.system,
                &units.network.interface,
            ));
        }
    },
};

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
    use wattline_config::units::*;
    use wattline_model::snapshot::*;

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

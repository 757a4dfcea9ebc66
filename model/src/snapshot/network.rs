//! The network category's snapshot records and the gauges a mark carries for
//! them, one full metric name per row.

use serde::{Deserialize, Serialize};
use wattline_config::units::{BandwidthUnit, CountUnit, DataUnit};

use super::{Measurement, MeasurementScope, Snapshot};
use crate::events::AttributeValue;
use crate::marks::{Gauge, MarkBuilder, semconv_in, whole_base};
use crate::semconv::{SemconvEquivalent, SemconvShape};

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

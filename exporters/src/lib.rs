//! wattline exporters.

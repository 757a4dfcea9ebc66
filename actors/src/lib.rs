//! wattline actors.

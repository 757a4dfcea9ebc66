//! wattline.

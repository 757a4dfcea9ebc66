//! The devices a run counts, as device selectors, and where that choice came from:
//! the record a report and an event file carry. Matching selectors against devices is
//! the GPU sources' (`wattline_gpu::visible_devices`).

use serde::{Deserialize, Serialize};

/// The selector that selects every device.
pub const ALL_DEVICES: &str = "all";
/// The selector that selects no device.
pub const NO_DEVICE: &str = "none";

/// `--gpus`, the flag of `wattline run`.
pub const GPUS_FLAG_ORIGIN: &str = "--gpus";
/// The CUDA runtime's variable.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// The NVIDIA container runtime's variable.
pub const NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// The configuration's selector, `[components.config.gpu] devices`.
pub const CONFIG_DEVICES_ORIGIN: &str = "resource_metrics gpu.devices";

/// The devices a run counts and where that choice came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuSelection {
    /// Device selectors (see the module's documentation); empty selects every device.
    pub selectors: Vec<String>,
    /// Where they came from: `--gpus`, `CUDA_VISIBLE_DEVICES`,
    /// `NVIDIA_VISIBLE_DEVICES` or `resource_metrics gpu.devices`.
    pub origin: String,
    /// The value as it was given (the variable's or the flag's text).
    pub given: String,
}

impl GpuSelection {
    /// Whether this selection can select no device at all.
    pub fn selects_nothing(&self) -> bool {
        !self.selectors.is_empty()
            && self
                .selectors
                .iter()
                .all(|selector| is_no_device_word(selector))
    }

    /// `CUDA_VISIBLE_DEVICES=0,1` style, for reports.
    pub fn describe(&self) -> String {
        if self.origin == GPUS_FLAG_ORIGIN {
            format!("{} {}", self.origin, self.given)
        } else if self.origin == CONFIG_DEVICES_ORIGIN {
            format!("{} = {:?}", self.origin, self.selectors)
        } else {
            format!("{}={}", self.origin, self.given)
        }
    }
}

/// `none` (or `void`, as the NVIDIA container runtime also accepts): no device.
pub fn is_no_device_word(selector: &str) -> bool {
    let selector = selector.trim();
    selector.eq_ignore_ascii_case(NO_DEVICE) || selector.eq_ignore_ascii_case("void")
}

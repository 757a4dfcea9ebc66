//! GPU reading: the [`GpuSource`] trait a program implements to plug in its own
//! backend, the records a source returns, and the built-in sources (NVML, the
//! `nvidia-smi` tool and its power stream, Linux DRM) with the device selection a run
//! counts.
//!
//! This is the library's façade over two crates: the sources and the trait are
//! `wattline-gpu`'s, the records they return ([`GpuSample`], [`GpuDeviceReading`],
//! [`GpuProcessReading`], [`GpuVendor`]), the [`SamplingSeries`] a request belongs to
//! and the [`GpuSelection`](visible_devices::GpuSelection) are the model's
//! (`wattline-model`), which the snapshot, the energy account and the exporters read.

pub use wattline_gpu::selection::{CompositeGpuSource, GpuSourceEnv, select_default_sources};
pub use wattline_gpu::visible_devices::selector_matches;
pub use wattline_gpu::*;
pub use wattline_model::series::SamplingSeries;
pub use wattline_model::snapshot::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};

/// Which GPUs a measured command can use, as device selectors: the matching and the
/// readers of `--gpus`, `CUDA_VISIBLE_DEVICES` and `NVIDIA_VISIBLE_DEVICES` (from
/// `wattline-gpu`), and the selection itself with its words and origins (from the
/// model).
pub mod visible_devices {
    pub use wattline_gpu::visible_devices::*;
    pub use wattline_model::gpu_selection::{
        ALL_DEVICES, CONFIG_DEVICES_ORIGIN, CUDA_VISIBLE_DEVICES, GPUS_FLAG_ORIGIN, GpuSelection,
        NO_DEVICE, NVIDIA_VISIBLE_DEVICES, is_no_device_word,
    };
}

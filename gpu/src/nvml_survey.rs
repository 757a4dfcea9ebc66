//! NVML as `wattline doctor` reports it: whether the library loads and starts, the
//! driver's version, the devices, and how many of them have the energy counter.
//! NVML is opened as the NVML source opens it ([`open_nvml`]), so what the doctor
//! says is what a run finds.

use nvml_wrapper::error::NvmlError;

use crate::nvml::{NvmlConfig, open_nvml};

/// What NVML says of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlSurvey {
    /// The driver's version; `None` where NVML does not say.
    pub driver: Option<String>,
    /// How many devices NVML lists (0 where it cannot count them).
    pub devices: u32,
    /// How many of them answer the total-energy counter (Volta and newer).
    pub with_energy_counter: u32,
}

/// Why NVML could not be surveyed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlSurveyError {
    /// The library (`libnvidia-ml.so.1`) could not be loaded.
    #[error("NVML library not found: {0}")]
    LibraryNotFound(String),
    /// The library loaded but NVML did not start (no kernel module, a mismatched
    /// driver).
    #[error("NVML did not start: {0}")]
    NotStarted(String),
}

/// Opens NVML from where `config` says and counts its devices and their energy
/// counters.
pub fn survey_nvml(config: &NvmlConfig) -> Result<NvmlSurvey, NvmlSurveyError> {
    let nvml = open_nvml(config).map_err(|error| match error {
        NvmlError::LibloadingError(_) => NvmlSurveyError::LibraryNotFound(error.to_string()),
        other => NvmlSurveyError::NotStarted(other.to_string()),
    })?;
    let devices = nvml.device_count().unwrap_or(0);
    let mut with_energy_counter = 0;
    for index in 0..devices {
        if let Ok(device) = nvml.device_by_index(index)
            && device.total_energy_consumption().is_ok()
        {
            with_energy_counter += 1;
        }
    }
    Ok(NvmlSurvey {
        driver: nvml.sys_driver_version().ok(),
        devices,
        with_energy_counter,
    })
}

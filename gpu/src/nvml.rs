//! NVIDIA readings through NVML, loaded at run time with `nvml-wrapper`.
//!
//! The binary runs without a driver: the library is opened on the first sample (or
//! by [`NvmlSource::try_init`]); when that fails, [`GpuEvent::NvmlUnavailable`] is
//! recorded, the sample is `None`, and loading is tried again no sooner than the
//! retry delay (60 s by default). A call the device does not support (or a symbol
//! the library lacks) leaves its field `None` and is reported once per call kind.
//!
//! Process compute use comes from NVML's process samples since the previous
//! timestamp of the same series and device; the first sample of a series has none.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nvml_wrapper::Device;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::device::{SampleValue, UsedGpuMemory};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_POWER_INSTANT;

use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::{GpuDeviceReading, GpuProcessReading, GpuSample, GpuVendor};

use crate::dense_power::{DensePower, DenseSampling};
use crate::events::{GpuEvent, GpuEventSink};
use crate::visible_devices::{DeviceIdentity, needs_mig_instances, selectors_select_device};
use crate::{GpuSampleRequest, GpuSource, PowerProbe, PowerSampleSink};

/// The library's file name where no path is configured.
#[cfg(windows)]
pub const DEFAULT_LIBRARY: &str = "nvml.dll";
/// The library's file name where no path is configured.
#[cfg(not(windows))]
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// Default delay before loading NVML again after a failure.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_secs(60);

/// Where NVML is loaded from and how often a failed load is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlConfig {
    /// Library to open; `None` uses the platform name (`libnvidia-ml.so.1`, `nvml.dll`).
    pub library_path: Option<PathBuf>,
    /// Least time between two load attempts.
    pub retry_delay: Duration,
}

impl Default for NvmlConfig {
    fn default() -> Self {
        Self {
            library_path: None,
            retry_delay: DEFAULT_RETRY_DELAY,
        }
    }
}

/// Loads and initialises NVML from where `config` says: the one place the library is
/// opened (the sampler's source, the dense probe and the doctor).
pub fn open_nvml(config: &NvmlConfig) -> Result<Nvml, NvmlError> {
    let mut builder = Nvml::builder();
    if let Some(path) = &config.library_path {
        builder.lib_path(path.as_os_str());
    }
    builder.init()
}

/// Reports unsupported calls once per kind and logs other call errors.
struct CallReporter {
    sink: Arc<dyn GpuEventSink>,
    unsupported: HashSet<&'static str>,
}

impl CallReporter {
    fn value<T>(&mut self, call: &'static str, result: Result<T, NvmlError>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(NvmlError::NotSupported) | Err(NvmlError::FailedToLoadSymbol(_)) => {
                if self.unsupported.insert(call) {
                    tracing::debug!(call, "NVML call not supported on this device or driver");
                    self.sink.record(GpuEvent::NvmlCallNotSupported {
                        call: call.to_owned(),
                    });
                }
                None
            }
            Err(error) => {
                tracing::debug!(call, %error, "NVML call failed");
                None
            }
        }
    }
}

/// [`GpuSource`] reading NVIDIA devices and processes through NVML.
pub struct NvmlSource {
    config: NvmlConfig,
    nvml: Option<Nvml>,
    next_attempt: Option<Instant>,
    failed_attempts: u64,
    reporter: CallReporter,
    /// Last NVML process-sample timestamp (µs) per series and device UUID.
    baselines: HashMap<(SamplingSeries, String), u64>,
    /// Why the library is not in use, in words, while it is not.
    unavailable: Option<String>,
    /// Devices (UUIDs) whose power the energy stage takes from
    /// `nvmlDeviceGetPowerUsage`: their driver lacks the instantaneous field, it read
    /// 0 W beside a nonzero mean, or the dense probe reads them so (one series, one
    /// kind of figure). Not asked for the field again while NVML stays loaded.
    without_instant_power: HashSet<String>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource")
            .field("config", &self.config)
            .field("loaded", &self.nvml.is_some())
            .field("next_attempt", &self.next_attempt)
            .finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// A source that loads NVML on first use.
    pub fn new(config: NvmlConfig, sink: Arc<dyn GpuEventSink>) -> Self {
        Self {
            config,
            nvml: None,
            next_attempt: None,
            failed_attempts: 0,
            reporter: CallReporter {
                sink,
                unsupported: HashSet::new(),
            },
            baselines: HashMap::new(),
            unavailable: None,
            without_instant_power: HashSet::new(),
        }
    }

    /// Whether NVML is loaded and initialised.
    pub fn is_ready(&self) -> bool {
        self.nvml.is_some()
    }

    /// Load NVML now unless it is loaded or the retry delay since the last failure has
    /// not passed. Returns whether NVML is ready.
    pub fn try_init(&mut self) -> bool {
        if self.nvml.is_some() {
            return true;
        }
        let now = Instant::now();
        if self.next_attempt.is_some_and(|at| now < at) {
            return false;
        }
        match open_nvml(&self.config) {
            Ok(nvml) => {
                if self.failed_attempts > 0 {
                    tracing::info!("NVML loaded after {} failed attempts", self.failed_attempts);
                }
                self.nvml = Some(nvml);
                self.next_attempt = None;
                self.unavailable = None;
                // A reloaded library may be a new driver.
                self.without_instant_power.clear();
                true
            }
            Err(error) => {
                self.unavailable = Some(match &error {
                    NvmlError::LibloadingError(_) => format!(
                        "NVML library not found ({})",
                        self.config.library_path.as_ref().map_or_else(
                            || DEFAULT_LIBRARY.to_owned(),
                            |p| p.display().to_string()
                        )
                    ),
                    other => format!("NVML did not start: {other}"),
                });
                self.mark_unavailable(now, error.to_string());
                false
            }
        }
    }

    fn mark_unavailable(&mut self, now: Instant, detail: String) {
        self.nvml = None;
        self.failed_attempts += 1;
        self.next_attempt = Some(now + self.config.retry_delay);
        if self.failed_attempts == 1 {
            tracing::info!(
                %detail,
                "NVML unavailable: no NVIDIA readings through NVML; trying again in {:?}",
                self.config.retry_delay
            );
        } else {
            tracing::debug!(%detail, attempts = self.failed_attempts, "NVML still unavailable");
        }
        self.reporter
            .sink
            .record(GpuEvent::NvmlUnavailable { detail });
    }

    fn read(&mut self, request: &GpuSampleRequest) -> Result<GpuSample, NvmlError> {
        let taken_at = Instant::now();
        let Some(nvml) = self.nvml.as_ref() else {
            return Err(NvmlError::Uninitialized);
        };
        let reporter = &mut self.reporter;
        let baselines = &mut self.baselines;
        let without_instant_power = &mut self.without_instant_power;
        let count = nvml.device_count()?;
        let mut sample = GpuSample {
            devices: Vec::new(),
            processes: Vec::new(),
            taken_at,
        };
        for position in 0..count {
            let device = match nvml.device_by_index(position) {
                Ok(device) => device,
                Err(error) => {
                    tracing::debug!(position, %error, "NVML device handle unavailable");
                    continue;
                }
            };
            let uuid = match device.uuid() {
                Ok(uuid) => uuid,
                Err(error) => {
                    tracing::debug!(position, %error, "NVML device without UUID skipped");
                    continue;
                }
            };
            let index = reporter.value("index", device.index());
            let mig = read_mig_layout(&device, &request.device_selectors);
            let identity = DeviceIdentity {
                identifier: &uuid,
                index,
                mig_instances: &mig.instances,
            };
            if !request.selects(&identity) {
                continue;
            }
            if request.device_metrics {
                let mut reading =
                    read_device(reporter, &device, &uuid, index, without_instant_power);
                reading.mig_enabled = mig.enabled;
                sample.devices.push(reading);
            }
            if request.process_metrics {
                let key = (request.series, uuid.clone());
                let baseline = baselines.get(&key).copied();
                let (processes, next_baseline) =
                    read_processes(reporter, &device, &uuid, index, request, baseline);
                baselines.insert(key, next_baseline);
                sample.processes.extend(processes);
            }
        }
        Ok(sample)
    }
}

impl GpuSource for NvmlSource {
    fn name(&self) -> &str {
        "nvml"
    }

    fn unavailable_reason(&self) -> Option<String> {
        self.unavailable.clone()
    }

    /// A probe thread with its own NVML handle (NVML counts its initialisations), so
    /// the dense reads never wait on this source's full samples.
    fn start_dense_power(
        &mut self,
        period: Duration,
        selectors: &[String],
        sink: Arc<dyn PowerSampleSink>,
    ) -> Option<DensePower> {
        if !self.is_ready() {
            return None;
        }
        match NvmlPowerProbe::open(&self.config, selectors) {
            Ok(probe) => {
                if !probe.reads_instant_power {
                    // The full reads join the dense ones' figure: a series of means
                    // with an instant reading among them would be cut by a shape
                    // that is neither.
                    self.without_instant_power
                        .extend(probe.devices.iter().map(|(_, uuid, _)| uuid.clone()));
                }
                let probe: Box<dyn PowerProbe> = Box::new(probe);
                Some(DensePower::holding(DenseSampling::start(
                    vec![probe],
                    period,
                    sink,
                )))
            }
            Err(error) => {
                tracing::info!(%error, "no dense NVML power reads: the energy stage uses the full samples");
                None
            }
        }
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        if !self.try_init() {
            return None;
        }
        match self.read(request) {
            Ok(sample) => Some(sample),
            Err(
                error @ (NvmlError::Uninitialized
                | NvmlError::DriverNotLoaded
                | NvmlError::LibRmVersionMismatch
                | NvmlError::LibloadingError(_)),
            ) => {
                self.unavailable = Some(format!("NVML stopped answering: {error}"));
                self.mark_unavailable(Instant::now(), error.to_string());
                None
            }
            Err(error) => {
                tracing::debug!(%error, "NVML sample failed");
                None
            }
        }
    }
}

/// Dense power reads through NVML: power and the energy counter of the selected
/// devices, nothing else.
pub struct NvmlPowerProbe {
    nvml: Nvml,
    /// NVML position, UUID and name of each selected device.
    devices: Vec<(u32, String, Option<String>)>,
    /// Whether power is read from the instantaneous field (every selected device gave
    /// a plausible one when the probe opened), else from `nvmlDeviceGetPowerUsage`.
    /// All or none: the readings of one probe carry one field's name.
    reads_instant_power: bool,
}

impl NvmlPowerProbe {
    /// Opens NVML and lists the devices `selectors` select.
    pub fn open(config: &NvmlConfig, selectors: &[String]) -> Result<Self, NvmlError> {
        let nvml = open_nvml(config)?;
        let mut devices = Vec::new();
        for position in 0..nvml.device_count()? {
            let Ok(device) = nvml.device_by_index(position) else {
                continue;
            };
            let Ok(uuid) = device.uuid() else {
                continue;
            };
            let index = device.index().ok();
            let instances = if needs_mig_instances(selectors) {
                read_mig_instances(&device)
            } else {
                Vec::new()
            };
            let identity = DeviceIdentity {
                identifier: &uuid,
                index,
                mig_instances: &instances,
            };
            if selectors_select_device(selectors, &identity) {
                devices.push((position, uuid, device.name().ok()));
            }
        }
        let reads_instant_power = !devices.is_empty()
            && devices.iter().all(|(position, _, _)| {
                nvml.device_by_index(*position).is_ok_and(|device| {
                    let instant = read_instant_power(&device).ok();
                    let usage = device.power_usage().ok().map(milliwatts_to_watts);
                    instant_power_is_plausible(instant, usage)
                })
            });
        Ok(NvmlPowerProbe {
            nvml,
            devices,
            reads_instant_power,
        })
    }
}

impl PowerProbe for NvmlPowerProbe {
    fn source(&self) -> &str {
        "nvml"
    }

    fn power_field(&self) -> &'static str {
        if self.reads_instant_power {
            INSTANT_POWER_NAME
        } else {
            "nvmlDeviceGetPowerUsage"
        }
    }

    fn read(&mut self) -> Option<GpuSample> {
        let taken_at = Instant::now();
        let mut devices = Vec::with_capacity(self.devices.len());
        for (position, uuid, name) in &self.devices {
            let Ok(device) = self.nvml.device_by_index(*position) else {
                continue;
            };
            let mut reading = GpuDeviceReading::new(GpuVendor::Nvidia, uuid.clone());
            reading.name.clone_from(name);
            let (counter, counter_at) =
                timed_again_if_slow(|| device.total_energy_consumption(), SLOW_COUNTER_READ);
            reading.total_energy_millijoules = counter.ok();
            let (power, power_at) = if self.reads_instant_power {
                let (power, at) = timed(|| read_instant_power(&device));
                (power.ok(), at)
            } else {
                let (power, at) = timed(|| device.power_usage());
                (power.ok().map(milliwatts_to_watts), at)
            };
            reading.power_draw_watts = power;
            reading.power_read_at = Some(energy_read_at(&reading, counter_at, power_at));
            devices.push(reading);
        }
        (!devices.is_empty()).then_some(GpuSample {
            devices,
            processes: Vec::new(),
            taken_at,
        })
    }
}

/// A board's MIG mode and, where a selector needs them, its instances' UUIDs.
struct MigLayout {
    /// `Some(true)` with MIG mode on; `None` where the board cannot tell (no MIG).
    enabled: Option<bool>,
    instances: Vec<String>,
}

/// Boards without MIG answer "not supported", which is no news: not reported.
fn read_mig_layout(device: &Device<'_>, selectors: &[String]) -> MigLayout {
    let enabled = device.mig_mode().ok().map(|mode| mode.current == 1);
    let instances = if enabled == Some(true) && needs_mig_instances(selectors) {
        read_mig_instances(device)
    } else {
        Vec::new()
    };
    MigLayout { enabled, instances }
}

/// The UUIDs of the MIG instances on a board with MIG mode on; empty otherwise.
fn read_mig_instances(device: &Device<'_>) -> Vec<String> {
    let Ok(slots) = device.mig_device_count() else {
        return Vec::new();
    };
    (0..slots)
        .filter_map(|slot| device.mig_device_by_index(slot).ok())
        .filter_map(|instance| instance.uuid().ok())
        .collect()
}

/// Runs one driver call and gives the instant halfway through it: when inside the call
/// the driver took the value is unknown, and the middle errs least.
fn timed<T>(call: impl FnOnce() -> T) -> (T, Instant) {
    let before = Instant::now();
    let value = call();
    (value, before + before.elapsed() / 2)
}

/// A counter read that took longer than this is made again: its instant is uncertain
/// by half its length (a driver that waited on a lock or a busy device, a thread
/// preempted), and intervals are cut at these instants. A 20 ms stall at the read
/// right after `run` starts its command put 6 J of a 640 W device on the wrong side
/// of the window's opening: 2% of a 1 s run.
const SLOW_COUNTER_READ: Duration = Duration::from_millis(5);

/// [`timed`], made again once when the call was slower than `slow`: the quicker
/// answer is kept (an error only where both failed or the retry did).
fn timed_again_if_slow<T, E>(
    mut call: impl FnMut() -> Result<T, E>,
    slow: Duration,
) -> (Result<T, E>, Instant) {
    let before = Instant::now();
    let first = call();
    let took = before.elapsed();
    if took <= slow || first.is_err() {
        return (first, before + took / 2);
    }
    let again = Instant::now();
    let second = call();
    let took_again = again.elapsed();
    if second.is_ok() && took_again < took {
        (second, again + took_again / 2)
    } else {
        (first, before + took / 2)
    }
}

/// The instant a device's energy is as of: the counter's read where it has one (the
/// intervals are between counter values), else the power's.
fn energy_read_at(reading: &GpuDeviceReading, counter_at: Instant, power_at: Instant) -> Instant {
    if reading.total_energy_millijoules.is_some() {
        counter_at
    } else {
        power_at
    }
}

/// NVML's field for the board's power at the instant it is read, mW. The energy stage
/// takes it over `nvmlDeviceGetPowerUsage`, which on Ampere (but GA100) and newer
/// boards is the mean of the last second: a step in power reaches it over a second,
/// and the readings cut intervals 100 ms long by the shape they draw. Asked with
/// scope 0 (`NVML_POWER_SCOPE_GPU`, the wrapper zeroes it): the board, as
/// `nvidia-smi` shows it; a Grace Hopper module's own scope is not read.
const INSTANT_POWER_FIELD: FieldId = FieldId(NVML_FI_DEV_POWER_INSTANT);

/// The name the reports give the instantaneous power field.
const INSTANT_POWER_NAME: &str = "NVML_FI_DEV_POWER_INSTANT";

/// Reads `device`'s instantaneous power, W.
fn read_instant_power(device: &Device<'_>) -> Result<f64, NvmlError> {
    let mut values = device.field_values_for(&[INSTANT_POWER_FIELD])?;
    let sample = values.pop().ok_or(NvmlError::NotSupported)??;
    // An impossible value is this read's failure, not the field's absence.
    sample_milliwatts_to_watts(sample.value?).ok_or(NvmlError::Unknown)
}

/// A field's value in milliwatts, whatever type the driver gave it, as watts; `None`
/// where it cannot be power (negative, not finite).
fn sample_milliwatts_to_watts(value: SampleValue) -> Option<f64> {
    let milliwatts = match value {
        SampleValue::F64(value) => value,
        SampleValue::U32(value) => f64::from(value),
        SampleValue::U64(value) => value as f64,
        SampleValue::I64(value) => value as f64,
    };
    (milliwatts.is_finite() && milliwatts >= 0.0).then(|| milliwatts / 1000.0)
}

/// Whether an instantaneous power reading can be believed beside the one-second mean
/// read with it: a field that reads 0 W while the mean does not is one the board
/// answers without measuring (a board at work or idle draws power), and a trapezoid
/// over it would count no energy.
fn instant_power_is_plausible(instant_watts: Option<f64>, usage_watts: Option<f64>) -> bool {
    match (instant_watts, usage_watts) {
        (None, _) => false,
        (Some(instant), Some(usage)) => instant > 0.0 || usage <= 0.0,
        (Some(_), None) => true,
    }
}

/// Whether `error` says the driver or the board does not give a field (so it is not
/// asked again), rather than that this one read failed. A driver older than the field
/// answers "invalid argument" for its id.
fn driver_lacks_field(error: &NvmlError) -> bool {
    matches!(
        error,
        NvmlError::NotSupported
            | NvmlError::InvalidArg
            | NvmlError::FailedToLoadSymbol(_)
            | NvmlError::UnexpectedVariant(_)
    )
}

fn read_device(
    reporter: &mut CallReporter,
    device: &Device<'_>,
    uuid: &str,
    index: Option<u32>,
    without_instant_power: &mut HashSet<String>,
) -> GpuDeviceReading {
    let mut reading = GpuDeviceReading::new(GpuVendor::Nvidia, uuid);
    reading.device_index = index;
    // Energy and power first, stamped: the intervals are between these reads, and the
    // gauges' calls would put milliseconds between the sample's instant and them.
    read_energy_and_power(reporter, device, uuid, without_instant_power, &mut reading);
    read_gauges(reporter, device, &mut reading);
    reading
}

/// The energy counter, the instantaneous power (where the board gives a plausible
/// one) and the gauges' power, with the instant the energy stage books them at.
fn read_energy_and_power(
    reporter: &mut CallReporter,
    device: &Device<'_>,
    uuid: &str,
    without_instant_power: &mut HashSet<String>,
    reading: &mut GpuDeviceReading,
) {
    let (counter, counter_at) =
        timed_again_if_slow(|| device.total_energy_consumption(), SLOW_COUNTER_READ);
    reading.total_energy_millijoules = reporter.value("total_energy_consumption", counter);
    let instant = (!without_instant_power.contains(uuid))
        .then(|| timed(|| read_instant_power(device)))
        .and_then(|(instant, at)| match instant {
            Ok(watts) => Some((watts, at)),
            Err(error) => {
                if driver_lacks_field(&error) {
                    tracing::debug!(
                        uuid,
                        %error,
                        "no instantaneous power field: the energy stage uses power usage"
                    );
                    without_instant_power.insert(uuid.to_owned());
                }
                None
            }
        });
    // The gauges' power is the reference's call, the mean of the last second on
    // Ampere and newer boards; the energy stage takes the instant figure above.
    let (power, power_at) = timed(|| device.power_usage());
    reading.power_draw_watts = reporter
        .value("power_usage", power)
        .map(milliwatts_to_watts);
    let instant = instant.filter(|(watts, _)| {
        let plausible = instant_power_is_plausible(Some(*watts), reading.power_draw_watts);
        if !plausible {
            tracing::debug!(
                uuid,
                "the instantaneous power field reads 0 W beside a nonzero mean: not used"
            );
            without_instant_power.insert(uuid.to_owned());
        }
        plausible
    });
    reading.instant_power_watts = instant.map(|(watts, _)| watts);
    reading.power_field = if reading.instant_power_watts.is_some() {
        Some(INSTANT_POWER_NAME)
    } else {
        reading.power_draw_watts.map(|_| "nvmlDeviceGetPowerUsage")
    };
    let power_at = instant.map_or(power_at, |(_, at)| at);
    reading.power_read_at = Some(energy_read_at(reading, counter_at, power_at));
}

/// The gauges read after power: name, memory, utilization, limits, temperature,
/// clocks, fan, performance state, throttle reasons and ECC counts.
fn read_gauges(reporter: &mut CallReporter, device: &Device<'_>, reading: &mut GpuDeviceReading) {
    reading.name = reporter.value("name", device.name());
    if let Some(memory) = reporter.value("memory_info", device.memory_info()) {
        reading.memory_used_bytes = Some(memory.used);
        reading.memory_total_bytes = Some(memory.total);
    }
    if let Some(rates) = reporter.value("utilization_rates", device.utilization_rates()) {
        reading.compute_utilization_percent = Some(f64::from(rates.gpu));
        reading.memory_utilization_percent = Some(f64::from(rates.memory));
    }
    reading.power_limit_watts = reporter
        .value("enforced_power_limit", device.enforced_power_limit())
        .map(milliwatts_to_watts);
    reading.temperature_celsius = reporter
        .value("temperature", device.temperature(TemperatureSensor::Gpu))
        .map(f64::from);
    reading.sm_clock_mhz = reporter
        .value("clock_info_sm", device.clock_info(Clock::SM))
        .map(f64::from);
    reading.memory_clock_mhz = reporter
        .value("clock_info_memory", device.clock_info(Clock::Memory))
        .map(f64::from);
    reading.fan_speed_percent = reporter
        .value("fan_speed", device.fan_speed(0))
        .map(f64::from);
    reading.performance_state = reporter
        .value("performance_state", device.performance_state())
        .and_then(|state| u8::try_from(state.as_c()).ok())
        .filter(|state| *state <= 15);
    if let Some(reasons) = reporter.value(
        "current_throttle_reasons",
        device.current_throttle_reasons(),
    ) {
        // The reference's flags are the software reasons; the hardware ones are kept
        // beside them.
        reading.throttle_thermal = Some(reasons.contains(ThrottleReasons::SW_THERMAL_SLOWDOWN));
        reading.throttle_hw_thermal = Some(reasons.contains(ThrottleReasons::HW_THERMAL_SLOWDOWN));
        reading.throttle_power = Some(reasons.contains(ThrottleReasons::SW_POWER_CAP));
        reading.throttle_hw_power_brake =
            Some(reasons.contains(ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN));
        reading.throttle_hw_slowdown = Some(reasons.contains(ThrottleReasons::HW_SLOWDOWN));
    }
    reading.ecc_corrected = reporter.value(
        "total_ecc_errors",
        device.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile),
    );
    reading.ecc_uncorrected = reporter.value(
        "total_ecc_errors",
        device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
    );
}

fn milliwatts_to_watts(milliwatts: u32) -> f64 {
    f64::from(milliwatts) / 1000.0
}

/// Process records of one device, and the baseline for the next sample of the series.
fn read_processes(
    reporter: &mut CallReporter,
    device: &Device<'_>,
    uuid: &str,
    index: Option<u32>,
    request: &GpuSampleRequest,
    baseline: Option<u64>,
) -> (Vec<GpuProcessReading>, u64) {
    // pid -> memory (bytes), from both lists; a process in both is counted once.
    let mut memory: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    let lists = [
        (
            "running_compute_processes",
            device.running_compute_processes(),
        ),
        (
            "running_graphics_processes",
            device.running_graphics_processes(),
        ),
    ];
    for (call, list) in lists {
        for process in reporter.value(call, list).unwrap_or_default() {
            if !request.processes.contains(process.pid) {
                continue;
            }
            let used = match process.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            };
            let entry = memory.entry(process.pid).or_insert(None);
            *entry = match (*entry, used) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
    }

    let (utilization, next_baseline) = match baseline {
        // First sample of this series on this device: only set the baseline.
        None => (None, now_micros()),
        Some(since) => match device.process_utilization_stats(since) {
            Ok(samples) => {
                let mut newest = since;
                let mut sums: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
                for sample in samples.iter().filter(|sample| sample.timestamp > since) {
                    newest = newest.max(sample.timestamp);
                    let slot = sums.entry(sample.pid).or_insert((0.0, 0));
                    slot.0 += f64::from(sample.sm_util);
                    slot.1 += 1;
                }
                let means: BTreeMap<u32, f64> = sums
                    .into_iter()
                    .map(|(pid, (sum, n))| (pid, (sum / f64::from(n)).clamp(0.0, 100.0)))
                    .collect();
                (Some(means), newest)
            }
            // No process had any activity since the baseline.
            Err(NvmlError::NotFound) => (Some(BTreeMap::new()), since),
            Err(error) => {
                let _ = reporter.value::<()>("process_utilization_stats", Err(error));
                (None, since)
            }
        },
    };

    if let Some(means) = &utilization {
        for pid in means.keys() {
            if request.processes.contains(*pid) {
                memory.entry(*pid).or_insert(None);
            }
        }
    }
    let records = memory
        .into_iter()
        .map(|(pid, used)| GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: uuid.to_owned(),
            device_index: index,
            process_id: pid,
            memory_used_bytes: used,
            // NVML lists only processes that were active; a listed process with no
            // sample used no compute in the window.
            compute_utilization_percent: utilization
                .as_ref()
                .map(|means| means.get(&pid).copied().unwrap_or(0.0)),
        })
        .collect();
    (records, next_baseline)
}

/// Wall-clock microseconds since the Unix epoch: NVML's process-sample time base.
fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_slow_read_is_made_again_and_the_quicker_answer_kept_with_its_instant() {
        let calls = Cell::new(0);
        let first_returned = Cell::new(None);
        let (value, at) = timed_again_if_slow(
            || {
                calls.set(calls.get() + 1);
                if calls.get() == 1 {
                    // The driver stalls on the first read.
                    std::thread::sleep(Duration::from_millis(300));
                    first_returned.set(Some(Instant::now()));
                    Ok::<_, ()>(1)
                } else {
                    Ok(2)
                }
            },
            Duration::from_millis(5),
        );
        assert_eq!((value, calls.get()), (Ok(2), 2));
        assert!(at >= first_returned.get().unwrap(), "stamped by the retry");
    }

    #[test]
    fn a_quick_read_or_a_failed_one_is_made_once_and_a_failed_retry_keeps_the_first() {
        let calls = Cell::new(0);
        let (value, _) = timed_again_if_slow(
            || {
                calls.set(calls.get() + 1);
                Ok::<_, ()>(7)
            },
            Duration::from_secs(3600),
        );
        assert_eq!((value, calls.get()), (Ok(7), 1));
        calls.set(0);
        let (value, _) = timed_again_if_slow(
            || {
                calls.set(calls.get() + 1);
                Err::<u64, _>("not supported")
            },
            Duration::ZERO,
        );
        assert_eq!((value, calls.get()), (Err("not supported"), 1));
        calls.set(0);
        let (value, _) = timed_again_if_slow(
            || {
                calls.set(calls.get() + 1);
                if calls.get() == 1 {
                    std::thread::sleep(Duration::from_millis(1));
                    Ok(5)
                } else {
                    Err("lost")
                }
            },
            Duration::ZERO,
        );
        assert_eq!((value, calls.get()), (Ok(5), 2));
    }

    #[test]
    fn a_power_field_in_any_of_the_drivers_types_is_milliwatts_and_only_its_absence_is_kept() {
        for (value, watts) in [
            (SampleValue::U32(612_345), 612.345),
            (SampleValue::U64(90_000), 90.0),
            (SampleValue::I64(1_500), 1.5),
            (SampleValue::F64(250.0), 0.25),
        ] {
            assert_eq!(sample_milliwatts_to_watts(value), Some(watts));
        }
        assert_eq!(sample_milliwatts_to_watts(SampleValue::I64(-1)), None);
        assert_eq!(sample_milliwatts_to_watts(SampleValue::F64(f64::NAN)), None);
        assert!(driver_lacks_field(&NvmlError::InvalidArg));
        assert!(!driver_lacks_field(&NvmlError::Unknown));
        assert!(!driver_lacks_field(&NvmlError::GpuLost));
    }

    #[test]
    fn an_instant_power_of_0_w_beside_a_nonzero_mean_is_not_believed() {
        assert!(instant_power_is_plausible(Some(612.0), Some(350.0)));
        assert!(instant_power_is_plausible(Some(0.0), Some(0.0)));
        assert!(instant_power_is_plausible(Some(80.0), None));
        assert!(!instant_power_is_plausible(Some(0.0), Some(350.0)));
        assert!(!instant_power_is_plausible(None, Some(350.0)));
    }
}

//! Every metric name the pipeline emits beyond the resource marks, in one place: the
//! `gen_ai.*` names of the GPU/energy spec and wattline's own `wattline.*` additions.
//! The naming table ([`crate::telemetry_names`]) sends the energy stage's series under
//! these, and the exporters map them there; tests keep the literal names, so a renamed
//! constant is caught on the wire.

/// `gen_ai.co2.emissions`.
pub const CO2_EMISSIONS: &str = "gen_ai.co2.emissions";
/// `gen_ai.co2.emissions_rate`.
pub const CO2_EMISSIONS_RATE: &str = "gen_ai.co2.emissions_rate";
/// `gen_ai.energy.consumed`.
pub const ENERGY_CONSUMED: &str = "gen_ai.energy.consumed";
/// `gen_ai.energy.total`.
pub const ENERGY_TOTAL: &str = "gen_ai.energy.total";
/// `gen_ai.gpu.aggregate.max_temperature`.
pub const GPU_AGGREGATE_MAX_TEMPERATURE: &str = "gen_ai.gpu.aggregate.max_temperature";
/// `gen_ai.gpu.aggregate.mean_utilization`.
pub const GPU_AGGREGATE_MEAN_UTILIZATION: &str = "gen_ai.gpu.aggregate.mean_utilization";
/// `gen_ai.gpu.aggregate.total_memory_used`.
pub const GPU_AGGREGATE_TOTAL_MEMORY_USED: &str = "gen_ai.gpu.aggregate.total_memory_used";
/// `gen_ai.gpu.aggregate.total_power`.
pub const GPU_AGGREGATE_TOTAL_POWER: &str = "gen_ai.gpu.aggregate.total_power";
/// `gen_ai.gpu.clock.memory`.
pub const GPU_CLOCK_MEMORY: &str = "gen_ai.gpu.clock.memory";
/// `gen_ai.gpu.clock.sm`.
pub const GPU_CLOCK_SM: &str = "gen_ai.gpu.clock.sm";
/// `gen_ai.gpu.ecc.errors.corrected`.
pub const GPU_ECC_ERRORS_CORRECTED: &str = "gen_ai.gpu.ecc.errors.corrected";
/// `gen_ai.gpu.ecc.errors.uncorrected`.
pub const GPU_ECC_ERRORS_UNCORRECTED: &str = "gen_ai.gpu.ecc.errors.uncorrected";
/// `gen_ai.gpu.fan.speed`.
pub const GPU_FAN_SPEED: &str = "gen_ai.gpu.fan.speed";
/// `gen_ai.gpu.memory.total`.
pub const GPU_MEMORY_TOTAL: &str = "gen_ai.gpu.memory.total";
/// `gen_ai.gpu.memory.used`.
pub const GPU_MEMORY_USED: &str = "gen_ai.gpu.memory.used";
/// `gen_ai.gpu.memory.utilization`.
pub const GPU_MEMORY_UTILIZATION: &str = "gen_ai.gpu.memory.utilization";
/// `gen_ai.gpu.performance.state`.
pub const GPU_PERFORMANCE_STATE: &str = "gen_ai.gpu.performance.state";
/// `gen_ai.gpu.power`.
pub const GPU_POWER: &str = "gen_ai.gpu.power";
/// `gen_ai.gpu.power.limit`.
pub const GPU_POWER_LIMIT: &str = "gen_ai.gpu.power.limit";
/// `gen_ai.gpu.temperature`.
pub const GPU_TEMPERATURE: &str = "gen_ai.gpu.temperature";
/// `gen_ai.gpu.throttle.hw_slowdown`.
pub const GPU_THROTTLE_HW_SLOWDOWN: &str = "gen_ai.gpu.throttle.hw_slowdown";
/// `gen_ai.gpu.throttle.power`.
pub const GPU_THROTTLE_POWER: &str = "gen_ai.gpu.throttle.power";
/// `gen_ai.gpu.throttle.thermal`.
pub const GPU_THROTTLE_THERMAL: &str = "gen_ai.gpu.throttle.thermal";
/// `gen_ai.gpu.utilization`.
pub const GPU_UTILIZATION: &str = "gen_ai.gpu.utilization";
/// `gen_ai.power.consumption`.
pub const POWER_CONSUMPTION: &str = "gen_ai.power.consumption";
/// `gen_ai.power.cost`.
pub const POWER_COST: &str = "gen_ai.power.cost";
/// Per-device energy of an interval by wattline's best figure (the hardware counter
/// where readable, else the trapezoid), kWh; with [`METHOD_ATTRIBUTE`]. Beside the
/// spec's `gen_ai.energy.consumed`, which is always the trapezoid.
pub const WATTLINE_ENERGY_CONSUMED: &str = "wattline.energy.consumed";
/// The sum of [`WATTLINE_ENERGY_CONSUMED`] over the devices of a sample, kWh (GPU).
pub const WATTLINE_ENERGY_TOTAL: &str = "wattline.energy.total";
/// The cost of [`WATTLINE_ENERGY_TOTAL`], in the configured currency.
pub const WATTLINE_ENERGY_COST: &str = "wattline.energy.cost";
/// The CO2 of [`WATTLINE_ENERGY_TOTAL`] times the carbon intensity, gCO2e.
pub const WATTLINE_CO2_EMISSIONS: &str = "wattline.co2.emissions";
/// Hardware thermal slowdown of a device, 1 or 0 (the reference's
/// `gen_ai.gpu.throttle.thermal` is the software reason only).
pub const WATTLINE_GPU_THROTTLE_HW_THERMAL: &str = "wattline.gpu.throttle.hw_thermal";
/// Hardware power brake slowdown of a device, 1 or 0 (the reference's
/// `gen_ai.gpu.throttle.power` is the software power cap only).
pub const WATTLINE_GPU_THROTTLE_HW_POWER_BRAKE: &str = "wattline.gpu.throttle.hw_power_brake";
/// Per-device interval length, s; with [`METHOD_ATTRIBUTE`].
pub const INTERVAL_DURATION: &str = "wattline.energy.interval_duration";
/// `counter` or `trapezoid`: which figure an interval's energy is.
pub const METHOD_ATTRIBUTE: &str = "wattline.energy.method";

//! Parser for `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` answers.
//!
//! Pure text in, readings out: the collector (`nvidia_smi_collector`) runs the tool.
//! One line per device, values separated by `", "`, in the order of the query.
//! Memory comes in MiB and is converted to bytes (the only conversion: the reading
//! types are in bytes). A bracketed value (`[N/A]`, `[Not Supported]`,
//! `[Unknown Error]`, ...) or a bare `N/A` leaves that field `None` for that device.

use thiserror::Error;
use wattline_model::snapshot::{GpuDeviceReading, GpuVendor};

/// The `--format` argument the collector passes.
pub const FORMAT_ARGUMENT: &str = "--format=csv,noheader,nounits";

/// The full query, with the throttle fields under their historical
/// `clocks_throttle_reasons` names (accepted by every driver up to at least 535).
pub const FULL_QUERY_FIELDS: [&str; 20] = [
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.current.sm",
    "clocks.current.memory",
    "fan.speed",
    "pstate",
    "clocks_throttle_reasons.sw_thermal_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown",
    "clocks_throttle_reasons.sw_power_cap",
    "clocks_throttle_reasons.hw_slowdown",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
];

/// The full query with the throttle fields under their newer `clocks_event_reasons`
/// names, tried when a driver rejects a `clocks_throttle_reasons` field.
pub const FULL_QUERY_FIELDS_EVENT_REASONS: [&str; 20] = [
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.current.sm",
    "clocks.current.memory",
    "fan.speed",
    "pstate",
    "clocks_event_reasons.sw_thermal_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.sw_power_cap",
    "clocks_event_reasons.hw_slowdown",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
];

/// The core set every driver knows: identity, utilisation, memory, temperature, power.
pub const CORE_QUERY_FIELDS: [&str; 8] = [
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
];

/// The driver's instantaneous power, W, which newer drivers know. On boards from
/// Ampere on, `power.draw` is the mean of the last second, so a step in power reaches
/// it as a one-second ramp.
pub const INSTANT_POWER_FIELD: &str = "power.draw.instant";

/// The field lists the full query can take, largest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldList {
    /// [`FULL_QUERY_FIELDS`].
    Full,
    /// [`FULL_QUERY_FIELDS_EVENT_REASONS`].
    FullEventReasons,
    /// [`CORE_QUERY_FIELDS`].
    Core,
}

impl FieldList {
    /// The field names, in query order.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            FieldList::Full => &FULL_QUERY_FIELDS,
            FieldList::FullEventReasons => &FULL_QUERY_FIELDS_EVENT_REASONS,
            FieldList::Core => &CORE_QUERY_FIELDS,
        }
    }
}

/// What the collector asks for: a field list, and [`INSTANT_POWER_FIELD`] after it
/// while the driver knows that field. The answer's `power.draw` feeds the power gauge
/// (the reference's figure); its instantaneous power, where there is one, feeds the
/// energy integral, as the `nvidia-smi` power stream's readings do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QueryFieldSet {
    /// The field list.
    pub list: FieldList,
    /// Whether [`INSTANT_POWER_FIELD`] is asked for after the list.
    pub instant_power: bool,
}

impl QueryFieldSet {
    /// The first query tried: the full list, with the instantaneous power.
    pub const FIRST: QueryFieldSet = QueryFieldSet {
        list: FieldList::Full,
        instant_power: true,
    };

    /// The field names, in query order.
    pub fn fields(self) -> Vec<&'static str> {
        let mut fields = self.list.fields().to_vec();
        if self.instant_power {
            fields.push(INSTANT_POWER_FIELD);
        }
        fields
    }

    /// `--query-gpu=<fields joined by commas>`.
    pub fn query_argument(self) -> String {
        format!("--query-gpu={}", self.fields().join(","))
    }

    /// The two arguments to pass to `nvidia-smi`.
    pub fn arguments(self) -> [String; 2] {
        [self.query_argument(), FORMAT_ARGUMENT.to_owned()]
    }

    /// The set to use after the tool rejected `unknown_field`; `None` when there is
    /// nothing smaller to fall back to. A rejected [`INSTANT_POWER_FIELD`] is dropped
    /// and the list kept; a rejected `clocks_throttle_reasons.*` field first tries the
    /// renamed `clocks_event_reasons.*`; anything else goes to the core list.
    pub fn after_unknown_field(self, unknown_field: &str) -> Option<QueryFieldSet> {
        if unknown_field == INSTANT_POWER_FIELD && self.instant_power {
            return Some(QueryFieldSet {
                instant_power: false,
                ..self
            });
        }
        let list = match self.list {
            FieldList::Full if unknown_field.starts_with("clocks_throttle_reasons.") => {
                FieldList::FullEventReasons
            }
            FieldList::Full | FieldList::FullEventReasons => FieldList::Core,
            FieldList::Core => return None,
        };
        Some(QueryFieldSet { list, ..self })
    }
}

/// What an answer of the tool means.
#[derive(Debug, Clone, PartialEq)]
pub enum SmiAnswer {
    /// One reading per line.
    Devices(Vec<GpuDeviceReading>),
    /// "No devices were found": no NVIDIA GPU on this host.
    NoDevices,
    /// The driver does not know this field.
    UnknownField(String),
    /// Nothing but white space: a failure, never "no GPU".
    Empty,
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SmiParseError {
    /// A line has the wrong number of values for the query.
    #[error("line {line}: expected {expected} values, found {found}")]
    FieldCount {
        /// 1-based line number.
        line: usize,
        /// Fields in the query.
        expected: usize,
        /// Values on the line.
        found: usize,
    },
    /// A value is not what its field holds.
    #[error("line {line}: field {field} has an unreadable value {value:?}")]
    InvalidValue {
        /// 1-based line number.
        line: usize,
        /// The field name.
        field: String,
        /// The text found.
        value: String,
    },
    /// A line has no UUID, so the device cannot be identified.
    #[error("line {line}: no device UUID")]
    MissingIdentifier {
        /// 1-based line number.
        line: usize,
    },
    /// The query has no `uuid` field (a programming error in the caller).
    #[error("the query has no uuid field")]
    NoUuidInQuery,
    /// The query has a field this parser does not know.
    #[error("unsupported query field {0}")]
    UnsupportedField(String),
}

/// Interpret one answer (`stdout`, or stdout and stderr joined) of a query for
/// `fields`: no devices, unknown field, empty, or device lines.
pub fn interpret_answer(text: &str, fields: &[&str]) -> Result<SmiAnswer, SmiParseError> {
    if let Some(field) = unknown_field_in(text) {
        return Ok(SmiAnswer::UnknownField(field));
    }
    if says_no_devices(text) {
        return Ok(SmiAnswer::NoDevices);
    }
    if text.trim().is_empty() {
        return Ok(SmiAnswer::Empty);
    }
    parse_rows(text, fields).map(SmiAnswer::Devices)
}

/// The field named in a `Field "x" is not a valid field to query.` answer.
pub fn unknown_field_in(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        if !line.contains("is not a valid field to query") {
            return None;
        }
        // The tool quotes the name with ASCII quotes; some Windows consoles show
        // typographic ones.
        let mut parts = line.split(['"', '\u{201c}', '\u{201d}']);
        parts.next()?;
        let name = parts.next()?.trim();
        if name.is_empty() {
            None
        } else {
            Some(name.to_owned())
        }
    })
}

/// Whether the tool said it found no device.
pub fn says_no_devices(text: &str) -> bool {
    text.lines()
        .any(|line| line.trim().eq_ignore_ascii_case("No devices were found"))
}

/// Parse device lines answering a query for `fields`.
pub fn parse_rows(text: &str, fields: &[&str]) -> Result<Vec<GpuDeviceReading>, SmiParseError> {
    let kinds = fields
        .iter()
        .map(|name| {
            SmiField::from_name(name).ok_or_else(|| SmiParseError::UnsupportedField((*name).into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let power_draw_name = kinds
        .iter()
        .zip(fields)
        .find(|(kind, _)| **kind == SmiField::PowerDraw)
        .map(|(_, name)| {
            if *name == "power.draw.average" {
                "power.draw.average"
            } else {
                "power.draw"
            }
        });
    let Some(uuid_position) = kinds.iter().position(|kind| *kind == SmiField::Uuid) else {
        return Err(SmiParseError::NoUuidInQuery);
    };
    let mut readings = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line_number = number + 1;
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() {
            continue;
        }
        let values: Vec<&str> = line.split(',').map(str::trim).collect();
        if values.len() != kinds.len() {
            return Err(SmiParseError::FieldCount {
                line: line_number,
                expected: kinds.len(),
                found: values.len(),
            });
        }
        let uuid = values[uuid_position];
        if is_missing(uuid) || uuid.is_empty() {
            return Err(SmiParseError::MissingIdentifier { line: line_number });
        }
        let mut reading = GpuDeviceReading::new(GpuVendor::Nvidia, uuid);
        let mut flags = ThrottleFlags::default();
        for ((kind, value), name) in kinds.iter().zip(&values).zip(fields) {
            let invalid = || SmiParseError::InvalidValue {
                line: line_number,
                field: (*name).to_owned(),
                value: (*value).to_owned(),
            };
            kind.apply(value, &mut reading, &mut flags)
                .map_err(|()| invalid())?;
        }
        // The figure the energy stage takes, named per device: an answer can hold an
        // instantaneous figure for one board and only the mean for another.
        reading.power_field = if reading.instant_power_watts.is_some() {
            Some(INSTANT_POWER_FIELD)
        } else if reading.power_draw_watts.is_some() {
            power_draw_name
        } else {
            None
        };
        reading.throttle_thermal = flags.sw_thermal;
        reading.throttle_hw_thermal = flags.hw_thermal;
        reading.throttle_power = flags.sw_power_cap;
        reading.throttle_hw_slowdown = flags.hw_slowdown;
        readings.push(reading);
    }
    Ok(readings)
}

/// The throttle reasons of one line, each `None` where the tool said `[N/A]`.
#[derive(Debug, Default)]
struct ThrottleFlags {
    sw_thermal: Option<bool>,
    hw_thermal: Option<bool>,
    sw_power_cap: Option<bool>,
    hw_slowdown: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SmiField {
    Index,
    Uuid,
    Name,
    UtilizationGpu,
    UtilizationMemory,
    MemoryUsed,
    MemoryTotal,
    Temperature,
    PowerDraw,
    InstantPower,
    PowerLimit,
    ClockSm,
    ClockMemory,
    FanSpeed,
    Pstate,
    SwThermal,
    HwThermal,
    SwPowerCap,
    HwSlowdown,
    EccCorrected,
    EccUncorrected,
}

const BYTES_PER_MIB: u64 = 1024 * 1024;

impl SmiField {
    fn from_name(name: &str) -> Option<Self> {
        let reason = name
            .strip_prefix("clocks_throttle_reasons.")
            .or_else(|| name.strip_prefix("clocks_event_reasons."));
        if let Some(reason) = reason {
            return match reason {
                "sw_thermal_slowdown" => Some(SmiField::SwThermal),
                "hw_thermal_slowdown" => Some(SmiField::HwThermal),
                "sw_power_cap" => Some(SmiField::SwPowerCap),
                "hw_slowdown" => Some(SmiField::HwSlowdown),
                _ => None,
            };
        }
        Some(match name {
            "index" => SmiField::Index,
            "uuid" | "gpu_uuid" => SmiField::Uuid,
            "name" | "gpu_name" => SmiField::Name,
            "utilization.gpu" => SmiField::UtilizationGpu,
            "utilization.memory" => SmiField::UtilizationMemory,
            "memory.used" => SmiField::MemoryUsed,
            "memory.total" => SmiField::MemoryTotal,
            "temperature.gpu" => SmiField::Temperature,
            "power.draw" | "power.draw.average" => SmiField::PowerDraw,
            INSTANT_POWER_FIELD => SmiField::InstantPower,
            "power.limit" => SmiField::PowerLimit,
            "clocks.current.sm" | "clocks.sm" => SmiField::ClockSm,
            "clocks.current.memory" | "clocks.mem" => SmiField::ClockMemory,
            "fan.speed" => SmiField::FanSpeed,
            "pstate" => SmiField::Pstate,
            "ecc.errors.corrected.volatile.total" => SmiField::EccCorrected,
            "ecc.errors.uncorrected.volatile.total" => SmiField::EccUncorrected,
            _ => return None,
        })
    }

    /// Store `value` in `reading`; `Err(())` when the value is unreadable.
    fn apply(
        self,
        value: &str,
        reading: &mut GpuDeviceReading,
        flags: &mut ThrottleFlags,
    ) -> Result<(), ()> {
        if is_missing(value) {
            return Ok(());
        }
        match self {
            SmiField::Uuid => {}
            SmiField::Index => reading.device_index = Some(value.parse().map_err(|_| ())?),
            SmiField::Name => reading.name = Some(value.to_owned()),
            SmiField::UtilizationGpu => reading.compute_utilization_percent = Some(number(value)?),
            SmiField::UtilizationMemory => {
                reading.memory_utilization_percent = Some(number(value)?);
            }
            SmiField::MemoryUsed => reading.memory_used_bytes = Some(mebibytes(value)?),
            SmiField::MemoryTotal => reading.memory_total_bytes = Some(mebibytes(value)?),
            SmiField::Temperature => reading.temperature_celsius = Some(number(value)?),
            SmiField::PowerDraw => reading.power_draw_watts = Some(number(value)?),
            SmiField::InstantPower => reading.instant_power_watts = Some(number(value)?),
            SmiField::PowerLimit => reading.power_limit_watts = Some(number(value)?),
            SmiField::ClockSm => reading.sm_clock_mhz = Some(number(value)?),
            SmiField::ClockMemory => reading.memory_clock_mhz = Some(number(value)?),
            SmiField::FanSpeed => reading.fan_speed_percent = Some(number(value)?),
            SmiField::Pstate => reading.performance_state = pstate(value)?,
            SmiField::SwThermal => flags.sw_thermal = Some(active(value)?),
            SmiField::HwThermal => flags.hw_thermal = Some(active(value)?),
            SmiField::SwPowerCap => flags.sw_power_cap = Some(active(value)?),
            SmiField::HwSlowdown => flags.hw_slowdown = Some(active(value)?),
            SmiField::EccCorrected => reading.ecc_corrected = Some(value.parse().map_err(|_| ())?),
            SmiField::EccUncorrected => {
                reading.ecc_uncorrected = Some(value.parse().map_err(|_| ())?);
            }
        }
        Ok(())
    }
}

/// `[N/A]`, `[Not Supported]`, `[Unknown Error]`, any bracketed note, or a bare `N/A`.
fn is_missing(value: &str) -> bool {
    (value.starts_with('[') && value.ends_with(']')) || value.eq_ignore_ascii_case("N/A")
}

fn number(value: &str) -> Result<f64, ()> {
    match value.parse::<f64>() {
        Ok(parsed) if parsed.is_finite() => Ok(parsed),
        _ => Err(()),
    }
}

fn mebibytes(value: &str) -> Result<u64, ()> {
    if let Ok(whole) = value.parse::<u64>() {
        return whole.checked_mul(BYTES_PER_MIB).ok_or(());
    }
    let parsed = number(value)?;
    if parsed < 0.0 {
        return Err(());
    }
    let bytes = (parsed * BYTES_PER_MIB as f64).round();
    // `u64::MAX as f64` is 2^64, one past the largest u64: it overflows too.
    if bytes >= u64::MAX as f64 {
        return Err(());
    }
    Ok(bytes as u64)
}

/// `P0`..`P15`; `Unknown` is no value.
fn pstate(value: &str) -> Result<Option<u8>, ()> {
    if value.eq_ignore_ascii_case("unknown") {
        return Ok(None);
    }
    let digits = value
        .strip_prefix('P')
        .or_else(|| value.strip_prefix('p'))
        .ok_or(())?;
    match digits.parse::<u8>() {
        Ok(state) if state <= 15 => Ok(Some(state)),
        _ => Err(()),
    }
}

fn active(value: &str) -> Result<bool, ()> {
    if value.eq_ignore_ascii_case("Active") {
        Ok(true)
    } else if value.eq_ignore_ascii_case("Not Active") {
        Ok(false)
    } else {
        Err(())
    }
}

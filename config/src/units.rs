//! Output unit types, one per measurement family, and the conversions from base units.
//!
//! Samplers report base units (bytes, microseconds, logical processors, percent); the
//! merger applies these conversions once. The rules come from the spec: decimal storage
//! units step by 1000, binary ones by 1024, a byte has 8 bits, one logical processor is
//! 1000 millicores and 100% is a fraction of 1. An integer reading whose conversion
//! divides evenly stays an integer; otherwise the result is a decimal. A non-finite
//! result is no reading at all (`None`, written as `null`).

use serde::{Deserialize, Serialize};

/// A measured number: an exact integer or a decimal.
///
/// Serialized as a bare JSON/TOML number, so `{"value": 120}` and `{"value": 0.5}`
/// both read back as the variant they were written from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MeasurementValue {
    /// An exact whole number.
    Integer(u64),
    /// A number that can carry a fraction.
    Decimal(f64),
}

impl MeasurementValue {
    /// The value as an `f64` (lossy above 2^53 for integers).
    pub fn as_f64(self) -> f64 {
        match self {
            MeasurementValue::Integer(value) => value as f64,
            MeasurementValue::Decimal(value) => value,
        }
    }
}

/// Multiplies `value` by `numerator / denominator`, keeping an integer when the result is
/// exact, a decimal otherwise; `None` when the result is not finite.
fn scale(value: MeasurementValue, numerator: u128, denominator: u128) -> Option<MeasurementValue> {
    match value {
        MeasurementValue::Integer(integer) => {
            let product = u128::from(integer) * numerator;
            if product.is_multiple_of(denominator)
                && let Ok(exact) = u64::try_from(product / denominator)
            {
                return Some(MeasurementValue::Integer(exact));
            }
            finite(product as f64 / denominator as f64)
        }
        MeasurementValue::Decimal(decimal) => {
            finite(decimal * numerator as f64 / denominator as f64)
        }
    }
}

fn finite(value: f64) -> Option<MeasurementValue> {
    value
        .is_finite()
        .then_some(MeasurementValue::Decimal(value))
}

/// Forces a decimal: for measurements whose unit can produce fractions in the mark.
pub fn as_decimal(value: MeasurementValue) -> Option<f64> {
    let decimal = value.as_f64();
    decimal.is_finite().then_some(decimal)
}

macro_rules! unit_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// The unit's snake_case name, as written in snapshots and marks.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The unit called `name` (its snake_case name, as in marks), if any.
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str(self.name())
            }
        }
    };
}

unit_enum!(
    /// Units for CPU time, throttled time and pressure stall time. Base: microseconds.
    DurationUnit {
        /// 1 µs.
        Microseconds => "microseconds",
        /// 1000 µs.
        Milliseconds => "milliseconds",
        /// 1 000 000 µs.
        Seconds => "seconds",
        /// 60 s.
        Minutes => "minutes",
    }
);

unit_enum!(
    /// Units for memory, GPU memory and filesystem capacity. Base: bytes.
    CapacityUnit {
        /// 1 byte.
        Bytes => "bytes",
        /// 1000 bytes.
        Kilobytes => "kilobytes",
        /// 1000² bytes.
        Megabytes => "megabytes",
        /// 1000³ bytes.
        Gigabytes => "gigabytes",
        /// 1000⁴ bytes.
        Terabytes => "terabytes",
        /// 1024 bytes.
        Kibibytes => "kibibytes",
        /// 1024² bytes.
        Mebibytes => "mebibytes",
        /// 1024³ bytes.
        Gibibytes => "gibibytes",
        /// 1024⁴ bytes.
        Tebibytes => "tebibytes",
    }
);

unit_enum!(
    /// Units for disk and network data totals. Base: bytes. Same names as capacity, a
    /// separate type so a data field cannot take a capacity setting by mistake.
    DataUnit {
        /// 1 byte.
        Bytes => "bytes",
        /// 1000 bytes.
        Kilobytes => "kilobytes",
        /// 1000² bytes.
        Megabytes => "megabytes",
        /// 1000³ bytes.
        Gigabytes => "gigabytes",
        /// 1000⁴ bytes.
        Terabytes => "terabytes",
        /// 1024 bytes.
        Kibibytes => "kibibytes",
        /// 1024² bytes.
        Mebibytes => "mebibytes",
        /// 1024³ bytes.
        Gibibytes => "gibibytes",
        /// 1024⁴ bytes.
        Tebibytes => "tebibytes",
    }
);

unit_enum!(
    /// Units for disk and network transfer rates. Base: bytes per second.
    BandwidthUnit {
        /// Bytes per second.
        BytesPerSecond => "bytes_per_second",
        /// 1024 bytes per second.
        KibibytesPerSecond => "kibibytes_per_second",
        /// 1024² bytes per second.
        MebibytesPerSecond => "mebibytes_per_second",
        /// 1024³ bytes per second.
        GibibytesPerSecond => "gibibytes_per_second",
        /// Bits per second (8 a byte).
        BitsPerSecond => "bits_per_second",
        /// 10⁶ bits per second.
        MegabitsPerSecond => "megabits_per_second",
        /// 10⁹ bits per second.
        GigabitsPerSecond => "gigabits_per_second",
    }
);

unit_enum!(
    /// Units for CPU consumption and effective CPU capacity. Base: logical processors.
    CpuUnit {
        /// One hardware thread at full capacity.
        LogicalProcessors => "logical_processors",
        /// A thousandth of a logical processor.
        Millicores => "millicores",
    }
);

unit_enum!(
    /// Units for GPU compute use. Base: percent.
    UtilizationUnit {
        /// 0–100.
        Percentage => "percentage",
        /// 0–1.
        Fraction => "fraction",
    }
);

unit_enum!(
    /// Fixed units of counted things; these are named, not configurable.
    CountUnit {
        /// Processes.
        Processes => "processes",
        /// Threads.
        Threads => "threads",
        /// Open file descriptors.
        FileDescriptors => "file_descriptors",
        /// Windows kernel handles.
        Handles => "handles",
        /// Events.
        Events => "events",
        /// Read or write operations.
        Operations => "operations",
        /// Network packets.
        Packets => "packets",
        /// Network errors.
        Errors => "errors",
    }
);

const KILO: u128 = 1000;
const KIBI: u128 = 1024;

fn storage_factor_bytes(decimal_power: u32, binary_power: u32) -> u128 {
    if decimal_power > 0 {
        KILO.pow(decimal_power)
    } else {
        KIBI.pow(binary_power)
    }
}

impl DurationUnit {
    /// Microseconds in one of this unit.
    pub fn microseconds_per_unit(self) -> u128 {
        match self {
            DurationUnit::Microseconds => 1,
            DurationUnit::Milliseconds => 1_000,
            DurationUnit::Seconds => 1_000_000,
            DurationUnit::Minutes => 60_000_000,
        }
    }

    /// Converts a duration in microseconds to this unit.
    pub fn from_microseconds(self, value: MeasurementValue) -> Option<MeasurementValue> {
        scale(value, 1, self.microseconds_per_unit())
    }
}

/// Bytes in one unit of a storage family (shared by capacity and data).
fn bytes_per_storage_unit(name: &str) -> u128 {
    match name {
        "kilobytes" => storage_factor_bytes(1, 0),
        "megabytes" => storage_factor_bytes(2, 0),
        "gigabytes" => storage_factor_bytes(3, 0),
        "terabytes" => storage_factor_bytes(4, 0),
        "kibibytes" => storage_factor_bytes(0, 1),
        "mebibytes" => storage_factor_bytes(0, 2),
        "gibibytes" => storage_factor_bytes(0, 3),
        "tebibytes" => storage_factor_bytes(0, 4),
        _ => 1,
    }
}

impl CapacityUnit {
    /// Bytes in one of this unit.
    pub fn bytes_per_unit(self) -> u128 {
        bytes_per_storage_unit(self.name())
    }

    /// Converts bytes to this unit (filesystem capacity: no truncation).
    pub fn from_bytes(self, value: MeasurementValue) -> Option<MeasurementValue> {
        scale(value, 1, bytes_per_storage_unit(self.name()))
    }

    /// Converts a memory reading: bytes are first truncated to whole KiB, as the spec
    /// requires for memory and GPU memory, then converted to this unit.
    pub fn from_memory_bytes(self, bytes: u64) -> Option<MeasurementValue> {
        let whole_kibibytes = bytes / 1024;
        scale(
            MeasurementValue::Integer(whole_kibibytes),
            KIBI,
            bytes_per_storage_unit(self.name()),
        )
    }
}

impl DataUnit {
    /// Bytes in one of this unit.
    pub fn bytes_per_unit(self) -> u128 {
        bytes_per_storage_unit(self.name())
    }

    /// Converts bytes to this unit.
    pub fn from_bytes(self, value: MeasurementValue) -> Option<MeasurementValue> {
        scale(value, 1, bytes_per_storage_unit(self.name()))
    }
}

impl BandwidthUnit {
    /// Converts bytes per second to this unit.
    pub fn from_bytes_per_second(self, value: MeasurementValue) -> Option<MeasurementValue> {
        let (numerator, denominator) = match self {
            BandwidthUnit::BytesPerSecond => (1, 1),
            BandwidthUnit::KibibytesPerSecond => (1, KIBI),
            BandwidthUnit::MebibytesPerSecond => (1, KIBI.pow(2)),
            BandwidthUnit::GibibytesPerSecond => (1, KIBI.pow(3)),
            BandwidthUnit::BitsPerSecond => (8, 1),
            BandwidthUnit::MegabitsPerSecond => (8, KILO.pow(2)),
            BandwidthUnit::GigabitsPerSecond => (8, KILO.pow(3)),
        };
        scale(value, numerator, denominator)
    }
}

impl CpuUnit {
    /// Logical processors in one of this unit.
    pub fn logical_processors_per_unit(self) -> f64 {
        match self {
            CpuUnit::LogicalProcessors => 1.0,
            CpuUnit::Millicores => 0.001,
        }
    }

    /// Converts logical processors to this unit.
    pub fn from_logical_processors(self, value: MeasurementValue) -> Option<MeasurementValue> {
        match self {
            CpuUnit::LogicalProcessors => scale(value, 1, 1),
            CpuUnit::Millicores => scale(value, 1000, 1),
        }
    }
}

impl UtilizationUnit {
    /// Converts a percentage (0–100) to this unit.
    pub fn from_percent(self, value: MeasurementValue) -> Option<MeasurementValue> {
        match self {
            UtilizationUnit::Percentage => scale(value, 1, 1),
            UtilizationUnit::Fraction => scale(value, 1, 100),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MeasurementValue::{Decimal, Integer};

    #[test]
    fn exact_integer_conversions_stay_integers() {
        assert_eq!(
            DurationUnit::Milliseconds.from_microseconds(Integer(150_000)),
            Some(Integer(150))
        );
        assert_eq!(
            CapacityUnit::Kibibytes.from_bytes(Integer(2048)),
            Some(Integer(2))
        );
        assert_eq!(
            DataUnit::Kilobytes.from_bytes(Integer(3000)),
            Some(Integer(3))
        );
        assert_eq!(
            CpuUnit::Millicores.from_logical_processors(Integer(2)),
            Some(Integer(2000))
        );
    }

    #[test]
    fn inexact_conversions_become_decimals() {
        assert_eq!(
            DurationUnit::Milliseconds.from_microseconds(Integer(1_500)),
            Some(Decimal(1.5))
        );
        assert_eq!(
            DurationUnit::Minutes.from_microseconds(Integer(90_000_000)),
            Some(Decimal(1.5))
        );
        assert_eq!(
            CapacityUnit::Kilobytes.from_bytes(Integer(1024)),
            Some(Decimal(1.024))
        );
        assert_eq!(
            UtilizationUnit::Fraction.from_percent(Integer(50)),
            Some(Decimal(0.5))
        );
        assert_eq!(
            UtilizationUnit::Fraction.from_percent(Integer(100)),
            Some(Integer(1))
        );
    }

    #[test]
    fn binary_and_decimal_storage_differ() {
        let bytes = Integer(1_048_576);
        assert_eq!(DataUnit::Mebibytes.from_bytes(bytes), Some(Integer(1)));
        assert_eq!(
            DataUnit::Megabytes.from_bytes(bytes),
            Some(Decimal(1.048576))
        );
        assert_eq!(
            DataUnit::Tebibytes.from_bytes(Integer(1u64 << 40)),
            Some(Integer(1))
        );
        assert_eq!(
            DataUnit::Terabytes.from_bytes(Integer(1_000_000_000_000)),
            Some(Integer(1))
        );
    }

    #[test]
    fn bits_are_eight_per_byte() {
        assert_eq!(
            BandwidthUnit::BitsPerSecond.from_bytes_per_second(Integer(3)),
            Some(Integer(24))
        );
        assert_eq!(
            BandwidthUnit::MegabitsPerSecond.from_bytes_per_second(Integer(125_000)),
            Some(Integer(1))
        );
        assert_eq!(
            BandwidthUnit::GigabitsPerSecond.from_bytes_per_second(Decimal(125_000_000.0)),
            Some(Decimal(1.0))
        );
        assert_eq!(
            BandwidthUnit::KibibytesPerSecond.from_bytes_per_second(Decimal(512.0)),
            Some(Decimal(0.5))
        );
    }

    #[test]
    fn memory_truncates_to_whole_kibibytes_first() {
        // 1535 bytes is 1 KiB after truncation, so 1024 bytes, never 1535.
        assert_eq!(
            CapacityUnit::Bytes.from_memory_bytes(1535),
            Some(Integer(1024))
        );
        assert_eq!(
            CapacityUnit::Kibibytes.from_memory_bytes(1535),
            Some(Integer(1))
        );
        assert_eq!(
            CapacityUnit::Kilobytes.from_memory_bytes(2047),
            Some(Decimal(1.024))
        );
        assert_eq!(
            CapacityUnit::Mebibytes.from_memory_bytes(1_572_864),
            Some(Decimal(1.5))
        );
        assert_eq!(
            CapacityUnit::Kibibytes.from_memory_bytes(1023),
            Some(Integer(0))
        );
    }

    #[test]
    fn non_finite_results_are_unavailable() {
        assert_eq!(
            CpuUnit::LogicalProcessors.from_logical_processors(Decimal(f64::NAN)),
            None
        );
        assert_eq!(
            BandwidthUnit::BitsPerSecond.from_bytes_per_second(Decimal(f64::INFINITY)),
            None
        );
        assert_eq!(
            UtilizationUnit::Percentage.from_percent(Decimal(f64::NEG_INFINITY)),
            None
        );
        assert_eq!(as_decimal(Decimal(f64::NAN)), None);
    }

    #[test]
    fn large_integers_do_not_overflow() {
        assert_eq!(
            DurationUnit::Microseconds.from_microseconds(Integer(u64::MAX)),
            Some(Integer(u64::MAX))
        );
        assert_eq!(
            BandwidthUnit::BitsPerSecond.from_bytes_per_second(Integer(u64::MAX)),
            Some(Decimal(u64::MAX as f64 * 8.0))
        );
    }

    #[test]
    fn unit_names_are_snake_case() {
        assert_eq!(
            BandwidthUnit::MegabitsPerSecond.name(),
            "megabits_per_second"
        );
        assert_eq!(CountUnit::FileDescriptors.name(), "file_descriptors");
        let parsed: CpuUnit = serde_json::from_str("\"logical_processors\"").unwrap();
        assert_eq!(parsed, CpuUnit::LogicalProcessors);
    }

    #[test]
    fn units_are_found_by_their_names_with_their_factors() {
        assert_eq!(
            CapacityUnit::from_name("mebibytes"),
            Some(CapacityUnit::Mebibytes)
        );
        assert_eq!(CapacityUnit::from_name("mebibyte"), None);
        assert_eq!(CapacityUnit::Kibibytes.bytes_per_unit(), 1024);
        assert_eq!(CapacityUnit::Gigabytes.bytes_per_unit(), 1_000_000_000);
        assert_eq!(CpuUnit::from_name("millicores"), Some(CpuUnit::Millicores));
        assert_eq!(CpuUnit::Millicores.logical_processors_per_unit(), 0.001);
        for unit in [DurationUnit::Microseconds, DurationUnit::Minutes] {
            assert_eq!(DurationUnit::from_name(unit.name()), Some(unit));
        }
    }
}

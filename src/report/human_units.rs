//! Figures for people: an energy or a power written in the unit its size calls for
//! (mJ, J, Wh, kWh, MWh; mW, W, kW) with three significant figures, so a short run
//! reads `2.56 kJ`-sized numbers as `2560 J` rather than `0.000712 kWh`. The table,
//! the live line, `compare` and the HTML page use these; JSON, CSV and the wire keep
//! their fixed units.

/// Joules in one watt-hour.
const JOULES_PER_WATT_HOUR: f64 = 3_600.0;

/// The energy units, smallest first: each unit's size in joules and its symbol.
const ENERGY_UNITS: [(f64, &str); 5] = [
    (1e-3, "mJ"),
    (1.0, "J"),
    (JOULES_PER_WATT_HOUR, "Wh"),
    (JOULES_PER_WATT_HOUR * 1e3, "kWh"),
    (JOULES_PER_WATT_HOUR * 1e6, "MWh"),
];

/// The power units, smallest first: each unit's size in watts and its symbol.
const POWER_UNITS: [(f64, &str); 3] = [(1e-3, "mW"), (1.0, "W"), (1e3, "kW")];

/// `kwh` in the unit its size calls for, with three significant figures: `0 J`,
/// `712 mJ`, `2560 J`, `1.23 Wh`, `45.6 kWh`. A value that is not finite is written
/// as it is (`NaN kWh`).
pub fn energy_text(kwh: f64) -> String {
    if !kwh.is_finite() {
        return format!("{kwh} kWh");
    }
    scaled_text(kwh * JOULES_PER_WATT_HOUR * 1e3, &ENERGY_UNITS, "J")
}

/// `watts` in the unit its size calls for, with three significant figures: `0 W`,
/// `250 mW`, `583 W`, `1.40 kW`.
pub fn power_text(watts: f64) -> String {
    if !watts.is_finite() {
        return format!("{watts} W");
    }
    scaled_text(watts, &POWER_UNITS, "W")
}

/// A finite `value` (in the unit of size 1 among `units`: joules or watts) in the
/// largest unit it is at least one of (the smallest below that), with three
/// significant figures; zero in `zero_unit`.
fn scaled_text(value: f64, units: &[(f64, &str)], zero_unit: &str) -> String {
    if value == 0.0 {
        return format!("0 {zero_unit}");
    }
    let magnitude = value.abs();
    let mut index = units
        .iter()
        .rposition(|(size, _)| magnitude >= *size)
        .unwrap_or(0);
    let mut text = three_significant_figures(value / units[index].0);
    // Rounding can carry a value to the next unit's size (999.7 mJ writes as 1000):
    // write it in that unit instead.
    if index + 1 < units.len() {
        let rounded: f64 = text.parse().unwrap_or(0.0);
        if rounded.abs() * units[index].0 >= units[index + 1].0 {
            index += 1;
            text = three_significant_figures(value / units[index].0);
        }
    }
    format!("{text} {}", units[index].1)
}

/// `value` rounded to three significant figures, with no exponent: `2563.2` is
/// `2560`, `1.2345` is `1.23`, `0.5` is `0.500`.
pub fn three_significant_figures(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = 2 - magnitude;
    if decimals >= 0 {
        // Rounding may carry into one more digit (9.996 → 10.00): one decimal fewer.
        let text = format!("{value:.*}", decimals as usize);
        let digits = text.trim_start_matches('-').replace('.', "");
        let significant = digits.trim_start_matches('0').len();
        if significant > 3 && decimals > 0 {
            return format!("{value:.*}", decimals as usize - 1);
        }
        text
    } else {
        let step = 10f64.powi(-decimals);
        format!("{:.0}", (value / step).round() * step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kWh from joules, so each expected text reads from its input.
    fn kwh(joules: f64) -> f64 {
        joules / 3_600_000.0
    }

    #[test]
    fn energy_takes_the_unit_its_size_calls_for() {
        assert_eq!(energy_text(0.0), "0 J");
        assert_eq!(energy_text(kwh(0.000_5)), "0.500 mJ");
        assert_eq!(energy_text(kwh(0.712)), "712 mJ");
        assert_eq!(energy_text(kwh(1.0)), "1.00 J");
        // The short run: 0.000712 kWh is 2563.2 J.
        assert_eq!(energy_text(0.000_712), "2560 J");
        assert_eq!(energy_text(kwh(3_600.0)), "1.00 Wh");
        assert_eq!(energy_text(kwh(3_600.0 * 12.345)), "12.3 Wh");
        assert_eq!(energy_text(1.0), "1.00 kWh");
        assert_eq!(energy_text(456.7), "457 kWh");
        assert_eq!(energy_text(2_500.0), "2.50 MWh");
        assert_eq!(energy_text(-0.002), "-2.00 Wh");
    }

    #[test]
    fn a_value_that_rounds_up_to_the_next_unit_is_written_in_it() {
        // 999.7 mJ rounds to 1000 mJ: 1.00 J.
        assert_eq!(energy_text(kwh(0.999_7)), "1.00 J");
        // 999.96 W rounds to 1000 W: 1.00 kW.
        assert_eq!(power_text(999.96), "1.00 kW");
    }

    #[test]
    fn power_takes_the_unit_its_size_calls_for() {
        assert_eq!(power_text(0.0), "0 W");
        assert_eq!(power_text(0.25), "250 mW");
        assert_eq!(power_text(583.0), "583 W");
        assert_eq!(power_text(58.34), "58.3 W");
        assert_eq!(power_text(1_400.0), "1.40 kW");
        assert_eq!(power_text(f64::NAN), "NaN W");
    }

    #[test]
    fn three_significant_figures_round_half_away_and_carry() {
        assert_eq!(three_significant_figures(2_563.2), "2560");
        assert_eq!(three_significant_figures(1.2345), "1.23");
        assert_eq!(three_significant_figures(0.5), "0.500");
        assert_eq!(three_significant_figures(9.996), "10.0");
        assert_eq!(three_significant_figures(99.96), "100");
        assert_eq!(three_significant_figures(-0.012_34), "-0.0123");
    }
}

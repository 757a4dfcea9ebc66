//! An energy figure's receipt in words, as every renderer writes it: `±` as people read
//! it, and the interval itself where there is room.

use wattline_model::receipt::{EnergyReceipt, Resolution};

use super::human_units::energy_text;

/// `±1.4%`: the farther end of the 95% interval from `kwh`, as a share of it (the
/// interval may be lopsided: a gap only adds); `, unresolved` for a window shorter
/// than its sources resolve.
pub fn plus_minus_text(kwh: f64, receipt: &EnergyReceipt) -> String {
    let farther = (receipt.high_kwh - kwh).max(kwh - receipt.low_kwh).max(0.0);
    let share = if kwh > 0.0 {
        farther / kwh * 100.0
    } else {
        f64::INFINITY
    };
    let mut text = if !share.is_finite() {
        format!("±{}", energy_text(farther))
    } else if share < 10.0 {
        format!("±{share:.1}%")
    } else {
        format!("±{share:.0}%")
    };
    if receipt.resolution == Resolution::Unresolved {
        text.push_str(", unresolved");
    }
    text
}

/// `1.97 kJ–2.03 kJ by instant power`: the 95% interval and the method.
pub fn interval_text(receipt: &EnergyReceipt) -> String {
    let mut text = format!(
        "{}–{} by {}",
        energy_text(receipt.low_kwh),
        energy_text(receipt.high_kwh),
        receipt.method.as_str()
    );
    if receipt.resolution == Resolution::Unresolved {
        text.push_str(", unresolved");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::receipt::ReceiptMethod;

    fn receipt(low: f64, high: f64, resolution: Resolution) -> EnergyReceipt {
        EnergyReceipt {
            method: ReceiptMethod::InstantPower,
            low_kwh: low,
            high_kwh: high,
            resolution,
        }
    }

    #[test]
    fn plus_minus_is_the_farther_end_as_a_share() {
        // 1 kWh within 0.98 to 1.03: the farther end is 3% away.
        assert_eq!(
            plus_minus_text(1.0, &receipt(0.98, 1.03, Resolution::Resolved)),
            "±3.0%"
        );
        assert_eq!(
            plus_minus_text(1.0, &receipt(0.5, 1.4, Resolution::Unresolved)),
            "±50%, unresolved"
        );
    }
}

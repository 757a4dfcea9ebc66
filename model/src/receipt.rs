//! An energy figure's receipt: how it was obtained, a 95% interval that the true
//! energy lies in, and whether its sources could resolve it at all. Every measured
//! figure of the report carries one, so a reader can tell a figure good to a percent
//! from one its sources could barely see.

use serde::{Deserialize, Serialize};

/// How a figure was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptMethod {
    /// A hardware energy counter (NVML's total energy, RAPL).
    Counter,
    /// Instantaneous power readings, integrated between them.
    InstantPower,
    /// Averaged power readings (a 1 s mean: `nvmlDeviceGetPowerUsage`, `power.draw`),
    /// integrated between them.
    AveragedPower,
    /// Some intervals by one method, some by another.
    Mixed,
    /// A share of measured energy, by wattline's attribution rule: a definition, not a
    /// measurement; its interval is the measured figure's, scaled.
    Attributed,
}

impl ReceiptMethod {
    /// `counter`, `instant power`, `averaged power`, `mixed`, `attributed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptMethod::Counter => "counter",
            ReceiptMethod::InstantPower => "instant power",
            ReceiptMethod::AveragedPower => "averaged power",
            ReceiptMethod::Mixed => "mixed",
            ReceiptMethod::Attributed => "attributed",
        }
    }

    /// The method of two parts together: the same, or mixed.
    pub fn and(self, other: ReceiptMethod) -> ReceiptMethod {
        if self == other {
            self
        } else {
            ReceiptMethod::Mixed
        }
    }
}

/// Whether a figure's sources could resolve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Longer than what its sources resolve.
    Resolved,
    /// Shorter than its sources resolve (a counter's update period, the time between
    /// power readings, an average's window): its figure is kept, its interval is wide.
    Unresolved,
}

/// A figure's receipt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EnergyReceipt {
    /// How it was obtained.
    pub method: ReceiptMethod,
    /// The low end of the 95% interval, kWh.
    pub low_kwh: f64,
    /// The high end of the 95% interval, kWh.
    pub high_kwh: f64,
    /// Whether its sources could resolve it.
    pub resolution: Resolution,
}

impl EnergyReceipt {
    /// Whether `kwh` lies in the interval.
    pub fn contains(&self, kwh: f64) -> bool {
        self.low_kwh <= kwh && kwh <= self.high_kwh
    }

    /// Half the interval's width as a share of `kwh` (the `±` a table prints); `None`
    /// for a figure of zero.
    pub fn relative_half_width(&self, kwh: f64) -> Option<f64> {
        (kwh > 0.0).then(|| (self.high_kwh - self.low_kwh) / 2.0 / kwh)
    }

    /// This receipt for a share `fraction` of its figure, by attribution.
    pub fn attributed(&self, fraction: f64) -> EnergyReceipt {
        EnergyReceipt {
            method: ReceiptMethod::Attributed,
            low_kwh: self.low_kwh * fraction,
            high_kwh: self.high_kwh * fraction,
            resolution: self.resolution,
        }
    }
}

//! The live one-line status `wattline run` shows on a terminal: elapsed time, CPU,
//! memory, GPU power and energy so far, from the events the pipeline emits.

use std::sync::Mutex;

use wattline::events::{EventSink, MetricMeasurement, PipelineEvent};

/// The latest figures, updated from events.
#[derive(Debug, Default, Clone)]
pub struct StatusFigures {
    /// Logical processors in use.
    pub cpu: Option<f64>,
    /// Memory, KiB (resident for process scopes, system used for global).
    pub memory_kib: Option<f64>,
    /// Total GPU power, W.
    pub gpu_watts: Option<f64>,
    /// GPU energy so far, kWh.
    pub energy_kwh: f64,
}

/// An event sink that keeps [`StatusFigures`].
#[derive(Debug, Default)]
pub struct StatusSink {
    figures: Mutex<StatusFigures>,
}

impl StatusSink {
    /// A copy of the latest figures.
    pub fn figures(&self) -> StatusFigures {
        match self.figures.lock() {
            Ok(figures) => figures.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn update(&self, measurements: &[MetricMeasurement]) {
        let mut figures = match self.figures.lock() {
            Ok(figures) => figures,
            Err(poisoned) => poisoned.into_inner(),
        };
        for measurement in measurements {
            let value = measurement.value.as_f64();
            match measurement.name.as_str() {
                "nemo.relay.resource.cpu.consumption_rate" => figures.cpu = Some(value),
                "nemo.relay.resource.memory.resident" => figures.memory_kib = Some(value),
                "nemo.relay.resource.memory.system.used" if figures.memory_kib.is_none() => {
                    figures.memory_kib = Some(value)
                }
                "gen_ai.gpu.aggregate.total_power" => figures.gpu_watts = Some(value),
                "gen_ai.energy.total" => figures.energy_kwh += value,
                _ => {}
            }
        }
    }
}

impl EventSink for StatusSink {
    fn send(&self, event: PipelineEvent) {
        match &event {
            PipelineEvent::Mark(mark) => self.update(&mark.data.measurements),
            PipelineEvent::Metrics { measurements, .. } => self.update(measurements),
            PipelineEvent::Scope(_) => {}
        }
    }
}

/// The status line for `elapsed` seconds.
pub fn status_line(elapsed: f64, figures: &StatusFigures) -> String {
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    format!(
        "wattline {elapsed:>6.1}s  cpu {}  mem {}  gpu {}  energy {:.6} kWh",
        or_dash(figures.cpu.map(|c| format!("{c:.2}"))),
        or_dash(figures.memory_kib.map(|k| format!("{:.0} MiB", k / 1024.0))),
        or_dash(figures.gpu_watts.map(|w| format!("{w:.0} W"))),
        figures.energy_kwh
    )
}

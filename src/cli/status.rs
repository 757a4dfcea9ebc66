//! The live one-line status `wattline run` shows on a terminal: elapsed time, CPU,
//! memory, GPU power and energy so far, from the events the pipeline emits.

use std::sync::Mutex;

use wattline::events::{EventSink, MetricMeasurement, PipelineEvent};
use wattline::metric_names as names;

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
    /// The first and latest CPU time of the scope seen in a poll, ms, with the poll's
    /// time.
    pub cpu_time_ms: Option<CpuTimeSpan>,
    /// Sum and count of the consumption rates seen, for the average.
    pub cpu_rates: (f64, u64),
    /// The highest memory figure seen in a poll, KiB.
    pub peak_memory_kib: Option<f64>,
    /// The scope the polls measured.
    pub scope: Option<String>,
}

/// (poll time, CPU time ms) at the first and the latest poll.
pub type CpuTimeSpan = (
    (chrono::DateTime<chrono::Utc>, f64),
    (chrono::DateTime<chrono::Utc>, f64),
);

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

    fn update(&self, at: chrono::DateTime<chrono::Utc>, measurements: &[MetricMeasurement]) {
        let mut figures = match self.figures.lock() {
            Ok(figures) => figures,
            Err(poisoned) => poisoned.into_inner(),
        };
        for measurement in measurements {
            let value = measurement.value.as_f64();
            match measurement.name.as_str() {
                "nemo.relay.resource.cpu.consumption_rate" => {
                    figures.cpu = Some(value);
                    figures.cpu_rates = (figures.cpu_rates.0 + value, figures.cpu_rates.1 + 1);
                }
                "nemo.relay.resource.cpu.total_time"
                    if measurement.unit.as_deref() == Some("milliseconds") =>
                {
                    let first = figures.cpu_time_ms.map_or((at, value), |(first, _)| first);
                    figures.cpu_time_ms = Some((first, (at, value)));
                }
                "nemo.relay.resource.sample_count" => {
                    if let Some(wattline::events::AttributeValue::String(scope)) = measurement
                        .attributes
                        .as_ref()
                        .and_then(|a| a.get("nemo_relay.resource.measurement_scope"))
                    {
                        figures.scope = Some(scope.clone());
                    }
                }
                "nemo.relay.resource.memory.resident" => {
                    figures.memory_kib = Some(value);
                    figures.peak_memory_kib = Some(
                        figures
                            .peak_memory_kib
                            .map_or(value, |peak| peak.max(value)),
                    );
                }
                // Global scope has no resident figure: system memory in use instead.
                "nemo.relay.resource.memory.system.used"
                    if !measurements
                        .iter()
                        .any(|m| m.name == "nemo.relay.resource.memory.resident") =>
                {
                    figures.memory_kib = Some(value);
                    figures.peak_memory_kib = Some(
                        figures
                            .peak_memory_kib
                            .map_or(value, |peak| peak.max(value)),
                    );
                }
                names::GPU_AGGREGATE_TOTAL_POWER => figures.gpu_watts = Some(value),
                // The best figure, as the report at the end shows.
                names::WATTLINE_ENERGY_TOTAL => figures.energy_kwh += value,
                _ => {}
            }
        }
    }
}

impl EventSink for StatusSink {
    fn send(&self, event: PipelineEvent) {
        match &event {
            PipelineEvent::Mark(mark) => self.update(mark.timestamp, &mark.data.measurements),
            PipelineEvent::MarkCopies(copies) => {
                self.update(copies.timestamp, &copies.data.measurements)
            }
            PipelineEvent::Metrics {
                timestamp,
                measurements,
            } => self.update(*timestamp, measurements),
            PipelineEvent::Scope(_)
            | PipelineEvent::Energy { .. }
            | PipelineEvent::ScopeEnergy { .. } => {}
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

/// A one-paragraph summary of what the polls saw, printed above the energy report.
pub fn resource_summary(elapsed: f64, figures: &StatusFigures) -> Option<String> {
    let scope = figures.scope.clone()?;
    let memory_label = if scope == "global" {
        "peak system memory in use"
    } else {
        "peak resident memory"
    };
    let mut parts = vec![format!("measured {scope} scope for {elapsed:.1} s")];
    let (rate_sum, rates) = figures.cpu_rates;
    if rates > 0 {
        let polls = if rates == 1 { "poll" } else { "polls" };
        parts.push(format!(
            "average CPU use {:.2} logical processors over {rates} {polls}",
            rate_sum / rates as f64
        ));
    }
    // Process scopes: the tree's lifetime CPU time. (In global scope that sum falls as
    // processes exit, so only the rate above is shown.)
    if let Some((_, (_, last))) = figures.cpu_time_ms.filter(|_| scope != "global") {
        parts.push(format!("CPU time {:.2} s at the last poll", last / 1000.0));
    }
    if let Some(peak) = figures.peak_memory_kib {
        parts.push(format!("{memory_label} {:.0} MiB", peak / 1024.0));
    }
    Some(format!("{}\n", parts.join("; ")))
}

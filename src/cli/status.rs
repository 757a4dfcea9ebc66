//! The live one-line status `wattline run` shows on a terminal: elapsed time, CPU,
//! memory, GPU power and energy so far, from the events the pipeline emits. Power and
//! energy come from the energy account's own records as they are taken (the dense
//! power stream included), so they show within a second of the first reading, and
//! the energy is the account's, as the report at the end gives it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use wattline::config::units::CapacityUnit;
use wattline::events::{EventSink, PipelineEvent};
use wattline::metric_measurements::MetricMeasurement;
use wattline::report::human_units::{energy_text, power_text, three_significant_figures};
use wattline::snapshot::GpuSample;
use wattline_energy::account::EnergyAccount;
use wattline_model::energy::EnergyRecord;

/// The latest figures, updated from events.
#[derive(Debug, Default, Clone)]
pub struct StatusFigures {
    /// Logical processors in use.
    pub cpu: Option<f64>,
    /// Memory, bytes (resident for process scopes, system used for global).
    pub memory_bytes: Option<f64>,
    /// The unit memory is configured in (the marks' unit), for showing it.
    pub memory_unit: Option<CapacityUnit>,
    /// Total GPU power, W.
    pub gpu_watts: Option<f64>,
    /// Energy so far over every measured domain, kWh; `None` before any was measured.
    pub energy_kwh: Option<f64>,
    /// The first and latest CPU time of the scope seen in a poll, ms, with the poll's
    /// time.
    pub cpu_time_ms: Option<CpuTimeSpan>,
    /// Sum and count of the consumption rates seen, for the average.
    pub cpu_rates: (f64, u64),
    /// The highest memory figure seen in a poll, bytes.
    pub peak_memory_bytes: Option<f64>,
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
    energy: Mutex<EnergyFeed>,
}

/// The energy account rebuilt from the pipeline's energy records (those that shape
/// the totals: no scope is booked twice), as `wattline report` rebuilds it from a
/// file, and each GPU source's latest total power.
#[derive(Debug, Default)]
struct EnergyFeed {
    account: Option<EnergyAccount>,
    watts_by_source: BTreeMap<String, f64>,
}

impl EnergyFeed {
    fn apply(&mut self, record: &EnergyRecord) {
        // The line shows totals only: the scopes are the energy actor's to book, not
        // booked a second time here.
        if matches!(
            record,
            EnergyRecord::ScopeStarted { .. } | EnergyRecord::ScopeEnded { .. }
        ) {
            return;
        }
        match (&mut self.account, record) {
            (None, EnergyRecord::Started { at, wall, settings }) => {
                self.account = Some(EnergyAccount::new((**settings).clone(), *at, *wall));
            }
            (Some(account), record) => {
                account.apply(record);
            }
            (None, _) => {}
        }
        if let EnergyRecord::Power(power) = record {
            let watts: Option<f64> = power.devices.as_ref().and_then(|devices| {
                let read: Vec<f64> = devices.iter().filter_map(|device| device.watts).collect();
                (!read.is_empty()).then(|| read.iter().sum())
            });
            match watts {
                Some(watts) => self.watts_by_source.insert(power.source.clone(), watts),
                None => self.watts_by_source.remove(&power.source),
            };
        }
    }

    /// Total GPU power over the sources that answered last time; `None` when none did.
    fn gpu_watts(&self) -> Option<f64> {
        (!self.watts_by_source.is_empty()).then(|| self.watts_by_source.values().sum())
    }

    /// Energy over every measured domain up to the newest record.
    fn energy_kwh(&self) -> Option<f64> {
        let account = self.account.as_ref()?;
        let at = account.newest();
        account.report(at, account.wall_time(at)).total.energy_kwh
    }
}

impl StatusSink {
    /// A copy of the latest figures.
    pub fn figures(&self) -> StatusFigures {
        let mut figures = match self.figures.lock() {
            Ok(figures) => figures.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        let energy = match self.energy.lock() {
            Ok(energy) => energy,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(watts) = energy.gpu_watts() {
            figures.gpu_watts = Some(watts);
        }
        figures.energy_kwh = energy.energy_kwh();
        figures
    }

    fn apply_energy(&self, record: &EnergyRecord) {
        match self.energy.lock() {
            Ok(mut energy) => energy.apply(record),
            Err(poisoned) => poisoned.into_inner().apply(record),
        }
    }

    /// A GPU gauge sample's power over the devices that reported one: the figure shown
    /// without energy records (the energy account's own win where present).
    fn gpu_sample(&self, sample: &GpuSample) {
        let read: Vec<f64> = sample
            .devices
            .iter()
            .filter_map(|device| device.power_draw_watts)
            .collect();
        if read.is_empty() {
            return;
        }
        let mut figures = match self.figures.lock() {
            Ok(figures) => figures,
            Err(poisoned) => poisoned.into_inner(),
        };
        figures.gpu_watts = Some(read.iter().sum());
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
                    if let Some(wattline::metric_measurements::AttributeValue::String(scope)) =
                        measurement
                            .attributes
                            .as_ref()
                            .and_then(|a| a.get("nemo_relay.resource.measurement_scope"))
                    {
                        figures.scope = Some(scope.clone());
                    }
                }
                "nemo.relay.resource.memory.resident" => figures.memory(measurement),
                // Global scope has no resident figure: system memory in use instead.
                "nemo.relay.resource.memory.system.used"
                    if !measurements
                        .iter()
                        .any(|m| m.name == "nemo.relay.resource.memory.resident") =>
                {
                    figures.memory(measurement)
                }
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
            PipelineEvent::GpuTelemetry { telemetry, .. } => self.gpu_sample(&telemetry.sample),
            PipelineEvent::Energy { record, .. } => self.apply_energy(record),
            PipelineEvent::Scope(_)
            | PipelineEvent::ScopeEnergy { .. }
            | PipelineEvent::RaplIntervals { .. } => {}
        }
    }
}

impl StatusFigures {
    /// Takes a memory measurement, in whatever capacity unit its mark carries
    /// (kibibytes when it names none, the spec's default).
    fn memory(&mut self, measurement: &MetricMeasurement) {
        let unit = measurement
            .unit
            .as_deref()
            .and_then(CapacityUnit::from_name)
            .unwrap_or(CapacityUnit::Kibibytes);
        let bytes = measurement.value.as_f64() * unit.bytes_per_unit() as f64;
        self.memory_unit = Some(unit);
        self.memory_bytes = Some(bytes);
        self.peak_memory_bytes = Some(self.peak_memory_bytes.map_or(bytes, |peak| peak.max(bytes)));
    }

    /// `bytes` in the configured memory unit, with its symbol.
    fn memory_text(&self, bytes: f64) -> String {
        let unit = self.memory_unit.unwrap_or(CapacityUnit::Kibibytes);
        let value = bytes / unit.bytes_per_unit() as f64;
        let number = if value.abs() >= 1000.0 {
            format!("{value:.0}")
        } else {
            three_significant_figures(value)
        };
        format!("{number} {}", capacity_symbol(unit))
    }
}

/// The symbol a person reads for a capacity unit.
fn capacity_symbol(unit: CapacityUnit) -> &'static str {
    match unit.name() {
        "kilobytes" => "kB",
        "megabytes" => "MB",
        "gigabytes" => "GB",
        "terabytes" => "TB",
        "kibibytes" => "KiB",
        "mebibytes" => "MiB",
        "gibibytes" => "GiB",
        "tebibytes" => "TiB",
        _ => "B",
    }
}

/// The status line for `elapsed` seconds: power and energy in units chosen by size,
/// memory in the configured unit.
pub fn status_line(elapsed: f64, figures: &StatusFigures) -> String {
    let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".into());
    format!(
        "wattline {elapsed:>6.1}s  cpu {}  mem {}  gpu {}  energy {}",
        or_dash(figures.cpu.map(|c| format!("{c:.2}"))),
        or_dash(figures.memory_bytes.map(|bytes| figures.memory_text(bytes))),
        or_dash(figures.gpu_watts.map(power_text)),
        or_dash(figures.energy_kwh.map(energy_text)),
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
    if let Some(peak) = figures.peak_memory_bytes {
        parts.push(format!("{memory_label} {}", figures.memory_text(peak)));
    }
    Some(format!("{}\n", parts.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline::metric_measurements::{MetricKind, MetricValue, MetricValueType};
    use wattline_config::energy::EnergySettings;
    use wattline_model::energy::{DevicePower, PowerRecord};

    const SECOND: u64 = 1_000_000_000;

    fn memory(name: &str, value: u64, unit: &str) -> PipelineEvent {
        PipelineEvent::Metrics {
            timestamp: chrono::Utc::now(),
            measurements: vec![MetricMeasurement {
                name: name.into(),
                kind: MetricKind::Gauge,
                value_type: MetricValueType::U64,
                value: MetricValue::U64(value),
                unit: Some(unit.into()),
                description: None,
                attributes: None,
                boundaries: None,
            }],
        }
    }

    fn energy(record: EnergyRecord) -> PipelineEvent {
        PipelineEvent::Energy {
            timestamp: chrono::Utc::now(),
            record,
        }
    }

    fn power(at: u64, watts: &[f64]) -> EnergyRecord {
        let devices = watts
            .iter()
            .enumerate()
            .map(|(index, watts)| DevicePower {
                power_field: None,
                id: format!("GPU-{index}"),
                name: None,
                watts: Some(*watts),
                counter_millijoules: None,
                shares: None,
                mig_enabled: None,
                at: None,
            })
            .collect();
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at,
            devices: Some(devices),
            power_field: None,
        })
    }

    #[test]
    fn memory_shows_in_the_unit_its_marks_carry() {
        let sink = StatusSink::default();
        sink.send(memory(
            "nemo.relay.resource.memory.resident",
            512,
            "mebibytes",
        ));
        assert!(status_line(1.0, &sink.figures()).contains("mem 512 MiB"));
        // 2 GB in megabytes, the configured unit, not read as KiB.
        sink.send(memory(
            "nemo.relay.resource.memory.resident",
            2_000,
            "megabytes",
        ));
        let figures = sink.figures();
        assert!(status_line(1.0, &figures).contains("mem 2000 MB"));
        assert_eq!(figures.peak_memory_bytes, Some(2e9));
        let summary = resource_summary(
            1.0,
            &StatusFigures {
                scope: Some("process_tree".into()),
                ..figures
            },
        )
        .unwrap();
        assert!(
            summary.contains("peak resident memory 2000 MB"),
            "{summary}"
        );
    }

    #[test]
    fn a_gpu_samples_power_shows_until_an_energy_record_gives_it() {
        use std::sync::Arc;
        use wattline::snapshot::{GpuDeviceReading, GpuVendor};
        use wattline_model::energy_telemetry::{EnergyFactors, GpuTelemetry};
        let sink = StatusSink::default();
        // Two devices at 100 W and 150 W and one that read no power: 250 W.
        let mut sample = GpuSample::empty();
        for (id, watts) in [
            ("GPU-0", Some(100.0)),
            ("GPU-1", Some(150.0)),
            ("GPU-2", None),
        ] {
            let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, id);
            device.power_draw_watts = watts;
            sample.devices.push(device);
        }
        sink.send(PipelineEvent::GpuTelemetry {
            timestamp: chrono::Utc::now(),
            telemetry: Box::new(GpuTelemetry {
                sample: Arc::new(sample),
                intervals: Vec::new(),
                factors: Arc::new(EnergyFactors::of(&EnergySettings::default())),
            }),
        });
        let line = status_line(0.2, &sink.figures());
        assert!(line.contains("gpu 250 W"), "{line}");
        // The energy account's figure wins once it has one.
        let account = EnergyAccount::new(EnergySettings::default(), 0, chrono::Utc::now());
        sink.send(energy(account.started_record()));
        sink.send(energy(power(0, &[40.0])));
        let line = status_line(0.3, &sink.figures());
        assert!(line.contains("gpu 40.0 W"), "{line}");
    }

    #[test]
    fn power_and_energy_come_from_the_energy_records_as_they_are_taken() {
        let sink = StatusSink::default();
        let line = status_line(0.2, &sink.figures());
        assert!(line.ends_with("gpu -  energy -"), "{line}");
        let account = EnergyAccount::new(EnergySettings::default(), 0, chrono::Utc::now());
        sink.send(energy(account.started_record()));
        sink.send(energy(EnergyRecord::MeasuringFrom {
            at: 0,
            wall: account.wall_time(0),
        }));
        // Two devices at 100 W and 150 W, read at 0 s and again at 0.5 s: 250 W, and
        // 250 W × 0.5 s = 125 J.
        sink.send(energy(power(0, &[100.0, 150.0])));
        // A step: the energy actor books it; the line's account does not again.
        sink.send(energy(EnergyRecord::ScopeStarted {
            uuid: uuid::Uuid::from_u128(1),
            name: "step".into(),
            at: SECOND / 4,
            wall: account.wall_time(SECOND / 4),
            parent: None,
            process_id: None,
            weight: None,
            traceparent: None,
        }));
        sink.send(energy(power(SECOND / 2, &[100.0, 150.0])));
        let line = status_line(0.6, &sink.figures());
        assert!(line.contains("gpu 250 W"), "{line}");
        assert!(line.ends_with("energy 125 J"), "{line}");
        let feed = sink.energy.lock().unwrap();
        let booked = feed.account.as_ref().unwrap();
        let at = booked.newest();
        assert!(
            booked
                .report(at, booked.wall_time(at))
                .agent_scopes
                .is_empty()
        );
    }
}

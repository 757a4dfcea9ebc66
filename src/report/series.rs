//! A run's time series, for pictures of it: power over time per GPU and per RAPL zone
//! (CPU package, DRAM), and the CPU use and memory of the measured scope. A transform
//! only: [`SeriesBuilder`] takes resource marks and energy records in the order an ATOF
//! file (or the live event stream) holds them; reading the file is
//! [`crate::report_and_series_from_atof`]'s, recording a live run [`SeriesRecorder`]'s.
//! The power lines follow the energy account's rules: a reading stamped at or before a
//! newer one of the same line adds nothing, and a failed sample is a gap.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use wattline_config::units::{CapacityUnit, CpuUnit};
use wattline_energy::integrator::counter_delta_joules;
use wattline_model::energy::{EnergyRecord, Nanos, PowerRecord};
use wattline_model::events::{EventSink, PipelineEvent, RESOURCE_MARK_NAME};
use wattline_model::metric_measurements::{AttributeValue, MetricMeasurement};
use wattline_model::report::EnergyDomain;
use wattline_model::report::EnergyReport;

/// CPU use of the measured scope since the previous poll.
const CPU_CONSUMPTION_RATE: &str = "nemo.relay.resource.cpu.consumption_rate";
/// Resident memory of the measured processes (process scopes).
const MEMORY_RESIDENT: &str = "nemo.relay.resource.memory.resident";
/// System memory in use (global scope, which has no resident figure).
const MEMORY_SYSTEM_USED: &str = "nemo.relay.resource.memory.system.used";
/// The attribute every resource gauge carries naming the measured scope.
const MEASUREMENT_SCOPE_ATTRIBUTE: &str = "nemo_relay.resource.measurement_scope";

/// The most points a line keeps. Past it, neighbouring points are merged pairwise (and
/// later readings averaged in pairs, fours, ...): a long run costs at most this many
/// points per line (about 128 KiB), still finer than any chart draws.
pub const MAX_POINTS_PER_LINE: usize = 4096;

/// One point of a line: a reading, or the start of a gap (`value` `None`) where the
/// source failed, so that a line is never drawn across time nothing was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesPoint {
    /// When it was measured (for merged points: the middle of the readings).
    pub at: DateTime<Utc>,
    /// The reading in the line's unit; `None` for a gap.
    pub value: Option<f64>,
}

/// One line of a chart: a GPU, or a RAPL zone.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerLine {
    /// The device's backend identifier, or the RAPL zone directory (`intel-rapl:0`).
    pub id: String,
    /// How a legend names it (`NVIDIA H200 GPU-3f2b9c1e`, `package-0 (intel-rapl:0)`).
    pub label: String,
    /// What it is the power of.
    pub domain: EnergyDomain,
    /// Power, W, oldest first.
    pub points: Vec<SeriesPoint>,
}

/// Which memory figure [`RunSeries::memory`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryFigure {
    /// Resident memory of the measured processes (process scopes).
    Resident,
    /// System memory in use (the global scope has no resident figure).
    SystemUsed,
}

/// The time series of one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunSeries {
    /// GPU power per device, W.
    pub gpu_power: Vec<PowerLine>,
    /// Power per RAPL CPU package and DRAM zone, W: counter deltas over the time
    /// between two readings, placed at the middle of it. Parts of a package (`core`,
    /// `uncore`, `psys`) are left out, as the totals leave them out.
    pub cpu_power: Vec<PowerLine>,
    /// CPU use of the measured scope, logical processors, one point per poll (the
    /// first poll has no rate).
    pub cpu_use: Vec<SeriesPoint>,
    /// Memory of the measured scope, bytes, one point per poll.
    pub memory: Vec<SeriesPoint>,
    /// Which memory figure `memory` holds; `None` when no poll had one.
    pub memory_figure: Option<MemoryFigure>,
    /// The measured scope the polls named (`global`, `process_tree`, ...).
    pub scope: Option<String>,
}

impl RunSeries {
    /// Whether any power line holds a reading.
    pub fn has_power(&self) -> bool {
        self.gpu_power
            .iter()
            .chain(&self.cpu_power)
            .any(|line| has_readings(&line.points))
    }
}

/// Whether `points` hold at least one reading (not only gaps).
pub fn has_readings(points: &[SeriesPoint]) -> bool {
    points.iter().any(|point| point.value.is_some())
}

/// The readings a stored point does not average yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    sum: f64,
    count: usize,
}

/// A line being built: in time order, bounded by [`MAX_POINTS_PER_LINE`].
#[derive(Debug, Clone)]
struct LineBuilder {
    points: Vec<SeriesPoint>,
    /// Readings each stored point averages; doubles at every halving, so every point
    /// stands for the same number of readings.
    stride: usize,
    pending: Option<Pending>,
}

impl Default for LineBuilder {
    fn default() -> Self {
        LineBuilder {
            points: Vec::new(),
            stride: 1,
            pending: None,
        }
    }
}

fn midpoint(first: DateTime<Utc>, last: DateTime<Utc>) -> DateTime<Utc> {
    first + (last - first) / 2
}

impl LineBuilder {
    fn newest(&self) -> Option<DateTime<Utc>> {
        self.pending
            .map(|pending| pending.last)
            .or_else(|| self.points.last().map(|point| point.at))
    }

    /// Adds a reading, or a gap (`None`). One stamped at or before the newest is left
    /// out, as the energy account leaves it out.
    fn push(&mut self, at: DateTime<Utc>, value: Option<f64>) {
        if self.newest().is_some_and(|newest| at <= newest) {
            return;
        }
        match value {
            Some(value) => {
                let pending = self.pending.get_or_insert(Pending {
                    first: at,
                    last: at,
                    sum: 0.0,
                    count: 0,
                });
                pending.last = at;
                pending.sum += value;
                pending.count += 1;
                if pending.count >= self.stride {
                    self.flush();
                }
            }
            None => {
                self.flush();
                if self.points.last().is_none_or(|last| last.value.is_some()) {
                    self.store(SeriesPoint { at, value: None });
                }
            }
        }
    }

    fn flush(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.store(SeriesPoint {
                at: midpoint(pending.first, pending.last),
                value: Some(pending.sum / pending.count as f64),
            });
        }
    }

    fn store(&mut self, point: SeriesPoint) {
        self.points.push(point);
        if self.points.len() >= MAX_POINTS_PER_LINE {
            self.halve();
        }
    }

    /// Merges neighbouring points pairwise. A pair holding a gap stays a gap, so time
    /// without readings never looks measured.
    fn halve(&mut self) {
        let merged = self
            .points
            .chunks(2)
            .filter_map(|pair| match pair {
                [first, second] => Some(SeriesPoint {
                    at: midpoint(first.at, second.at),
                    value: first
                        .value
                        .zip(second.value)
                        .map(|(first, second)| (first + second) / 2.0),
                }),
                [single] => Some(*single),
                _ => None,
            })
            .collect();
        self.points = merged;
        self.stride *= 2;
    }

    fn finish(&self) -> Vec<SeriesPoint> {
        let mut copy = self.clone();
        copy.flush();
        copy.points
    }
}

/// What the builder knows of one power line besides its points.
#[derive(Debug, Clone)]
struct PowerLineBuilder {
    label: String,
    domain: EnergyDomain,
    /// The GPU backend that read it (a failed sample of that backend is a gap here).
    source: String,
    line: LineBuilder,
}

/// The last counter reading of a RAPL zone.
#[derive(Debug, Clone, Copy)]
struct RaplCounter {
    at: Nanos,
    microjoules: u64,
}

/// Builds a [`RunSeries`] from resource marks and energy records, in file order.
#[derive(Debug, Clone, Default)]
pub struct SeriesBuilder {
    /// The energy records' clock: monotonic nanoseconds and the wall-clock time then.
    clock: Option<(Nanos, DateTime<Utc>)>,
    gpu: BTreeMap<String, PowerLineBuilder>,
    rapl: BTreeMap<String, PowerLineBuilder>,
    rapl_counters: BTreeMap<String, RaplCounter>,
    cpu_use: LineBuilder,
    memory: LineBuilder,
    memory_figure: Option<MemoryFigure>,
    scope: Option<String>,
}

impl SeriesBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        SeriesBuilder::default()
    }

    /// Adds one resource mark's measurements (`nemo.relay.resource_metrics`). Copies of
    /// a mark under Agent scopes carry the same timestamp and add nothing. A figure the
    /// poll could not read (`null`, so absent) is a gap.
    pub fn push_resource_mark(&mut self, at: DateTime<Utc>, measurements: &[MetricMeasurement]) {
        let named = |name: &str| measurements.iter().find(|m| m.name == name);
        let scope = measurements.iter().find_map(|m| {
            match m.attributes.as_ref()?.get(MEASUREMENT_SCOPE_ATTRIBUTE)? {
                AttributeValue::String(scope) => Some(scope.clone()),
                _ => None,
            }
        });
        let processors = named(CPU_CONSUMPTION_RATE).and_then(|rate| {
            let unit = CpuUnit::from_name(rate.unit.as_deref()?)?;
            Some(rate.value.as_f64() * unit.logical_processors_per_unit())
        });
        self.cpu_use
            .push(at, processors.filter(|processors| processors.is_finite()));
        // One figure per line: the global scope has no resident figure, the process
        // scopes' system figure is not theirs.
        let figure = match scope.as_deref() {
            Some("global") => MemoryFigure::SystemUsed,
            _ => MemoryFigure::Resident,
        };
        let name = match figure {
            MemoryFigure::Resident => MEMORY_RESIDENT,
            MemoryFigure::SystemUsed => MEMORY_SYSTEM_USED,
        };
        let bytes = named(name).and_then(|memory| {
            let unit = CapacityUnit::from_name(memory.unit.as_deref()?)?;
            Some(memory.value.as_f64() * unit.bytes_per_unit() as f64)
        });
        self.memory
            .push(at, bytes.filter(|bytes| bytes.is_finite()));
        self.memory_figure = Some(figure);
        if scope.is_some() {
            self.scope = scope;
        }
    }

    /// Adds one energy record. Readings before the first [`EnergyRecord::Started`]
    /// have no clock to place them by and are left out (the pipeline writes it first).
    pub fn push_energy(&mut self, record: &EnergyRecord) {
        match record {
            EnergyRecord::Started { at, wall, .. } => self.clock = Some((*at, *wall)),
            EnergyRecord::Power(power) => self.push_power(power),
            EnergyRecord::Rapl { at, zones } => {
                for zone in zones {
                    let domain = EnergyDomain::of_rapl_zone(&zone.name);
                    if !domain.is_counted() {
                        continue;
                    }
                    let Some((between, watts)) = self.rapl_watts(
                        &zone.zone,
                        *at,
                        zone.energy_microjoules,
                        zone.max_energy_range_microjoules,
                    ) else {
                        continue;
                    };
                    self.rapl
                        .entry(zone.zone.clone())
                        .or_insert_with(|| PowerLineBuilder {
                            label: format!("{} ({})", zone.name, zone.zone),
                            domain,
                            source: "rapl".into(),
                            line: LineBuilder::default(),
                        })
                        .line
                        .push(between, Some(watts));
                }
            }
            _ => {}
        }
    }

    /// The mean power of a RAPL zone since its previous reading, and the middle of
    /// that time; `None` for its first reading or one not newer than the last.
    fn rapl_watts(
        &mut self,
        zone: &str,
        at: Nanos,
        microjoules: u64,
        wrap_at: Option<u64>,
    ) -> Option<(DateTime<Utc>, f64)> {
        let before = self.rapl_counters.get(zone).copied();
        if before.is_some_and(|before| at <= before.at) {
            return None;
        }
        self.rapl_counters
            .insert(zone.to_string(), RaplCounter { at, microjoules });
        let before = before?;
        let seconds = (at - before.at) as f64 / 1e9;
        let joules = counter_delta_joules(before.microjoules, microjoules, 1_000_000.0, wrap_at);
        Some((
            midpoint(self.wall_time(before.at)?, self.wall_time(at)?),
            joules / seconds,
        ))
    }

    /// `None` where the time falls outside chrono's range (a file's clock can sit at
    /// its edge): such a reading has no place on the time axis.
    fn wall_time(&self, at: Nanos) -> Option<DateTime<Utc>> {
        let (origin, wall) = self.clock?;
        let offset = i64::try_from(at).ok()? - i64::try_from(origin).ok()?;
        wall.checked_add_signed(chrono::Duration::nanoseconds(offset))
    }

    fn push_power(&mut self, record: &PowerRecord) {
        let Some(at) = self.wall_time(record.at) else {
            return;
        };
        let Some(devices) = &record.devices else {
            // A failed sample: a gap for every device this backend has read.
            for line in self.gpu.values_mut().filter(|l| l.source == record.source) {
                line.line.push(at, None);
            }
            return;
        };
        for device in devices {
            let line = self
                .gpu
                .entry(device.id.clone())
                .or_insert_with(|| PowerLineBuilder {
                    label: device.id.clone(),
                    domain: EnergyDomain::Gpu,
                    source: record.source.clone(),
                    line: LineBuilder::default(),
                });
            if let Some(name) = &device.name {
                line.label = format!("{name} {}", short_identifier(&device.id));
            }
            line.source.clone_from(&record.source);
            let watts = device.watts.filter(|w| w.is_finite() && *w >= 0.0);
            line.line.push(at, watts);
        }
        // A device of this backend missing from its answer observed nothing.
        for (id, line) in &mut self.gpu {
            if line.source == record.source && !devices.iter().any(|d| &d.id == id) {
                line.line.push(at, None);
            }
        }
    }

    /// The series so far (the builder can take more).
    pub fn finish(&self) -> RunSeries {
        let lines = |lines: &BTreeMap<String, PowerLineBuilder>| {
            lines
                .iter()
                .map(|(id, line)| PowerLine {
                    id: id.clone(),
                    label: line.label.clone(),
                    domain: line.domain,
                    points: line.line.finish(),
                })
                .collect()
        };
        RunSeries {
            gpu_power: lines(&self.gpu),
            cpu_power: lines(&self.rapl),
            cpu_use: self.cpu_use.finish(),
            memory: self.memory.finish(),
            memory_figure: self.memory_figure,
            scope: self.scope.clone(),
        }
    }
}

/// The first 12 characters of a device identifier, as the report table shows them.
fn short_identifier(identifier: &str) -> String {
    identifier.chars().take(12).collect()
}

/// Records a live run's series from the pipeline's events (an [`EventSink`]).
///
/// Why in memory rather than a temporary ATOF file read back after the run: the events
/// the charts need already pass through the pipeline's sinks, and keeping just their
/// numbers costs a bounded amount of memory ([`MAX_POINTS_PER_LINE`] per line) with no
/// disk, no second parse, and no dependence on the ATOF exporter (off, or dropping
/// events under load). The recorder feeds the same [`SeriesBuilder`] an ATOF file's
/// marks feed, so `wattline run --html` and `wattline report FILE --html` draw the same
/// series from the same events.
#[derive(Debug, Default)]
pub struct SeriesRecorder {
    builder: Mutex<SeriesBuilder>,
}

impl SeriesRecorder {
    /// The series recorded so far.
    pub fn series(&self) -> RunSeries {
        match self.builder.lock() {
            Ok(builder) => builder.finish(),
            Err(poisoned) => poisoned.into_inner().finish(),
        }
    }
}

impl EventSink for SeriesRecorder {
    fn send(&self, event: PipelineEvent) {
        let mut builder = match self.builder.lock() {
            Ok(builder) => builder,
            Err(poisoned) => poisoned.into_inner(),
        };
        match &event {
            PipelineEvent::Mark(mark) if mark.name == RESOURCE_MARK_NAME => {
                builder.push_resource_mark(mark.timestamp, &mark.data.measurements);
            }
            PipelineEvent::MarkCopies(copies) if copies.name == RESOURCE_MARK_NAME => {
                builder.push_resource_mark(copies.timestamp, &copies.data.measurements);
            }
            PipelineEvent::Energy { record, .. } => builder.push_energy(record),
            _ => {}
        }
    }
}

/// The block characters of a sparkline, lowest first.
const SPARK_LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// `points` over `[from, to]` as `width` block characters, each the mean of the
/// readings in its slice of time (a slice with none repeats the reading before it), from
/// `▁` for the lowest to `█` for the highest; a space where the line is in a gap or has
/// not started. A flat line is drawn at mid height.
pub fn sparkline(
    points: &[SeriesPoint],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    width: usize,
) -> String {
    let span = (to - from).num_nanoseconds().unwrap_or(0).max(1) as f64;
    let mut sums = vec![(0.0, 0usize); width];
    for point in points {
        let Some(value) = point.value else { continue };
        let offset = (point.at - from).num_nanoseconds().unwrap_or(0) as f64;
        if !(0.0..=span).contains(&offset) {
            continue;
        }
        let slot = ((offset / span * width as f64) as usize).min(width.saturating_sub(1));
        sums[slot].0 += value;
        sums[slot].1 += 1;
    }
    // A report's window can end past chrono's range (a file's clock at its edge).
    let slot_end = |slot: usize| {
        let offset =
            chrono::Duration::nanoseconds((span * (slot + 1) as f64 / width as f64) as i64);
        from.checked_add_signed(offset)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    };
    let values: Vec<Option<f64>> = (0..width)
        .map(|slot| match sums[slot] {
            (sum, count) if count > 0 => Some(sum / count as f64),
            _ => points
                .iter()
                .take_while(|point| point.at < slot_end(slot))
                .last()
                .and_then(|point| point.value),
        })
        .collect();
    let readings = values.iter().flatten();
    let low = readings.clone().copied().fold(f64::INFINITY, f64::min);
    let high = readings.copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|value| match value {
            None => ' ',
            Some(_) if high - low < 1e-9 => SPARK_LEVELS[3],
            Some(value) => {
                let level = ((value - low) / (high - low) * 7.0).round() as usize;
                SPARK_LEVELS[level.min(7)]
            }
        })
        .collect()
}

/// Characters of each sparkline in [`power_sparklines`].
pub const SPARKLINE_WIDTH: usize = 40;

/// One line per power line with readings: its label, a sparkline over the report's
/// window, and its lowest and highest reading; empty when no power was read. For the
/// table report.
pub fn power_sparklines(report: &EnergyReport, series: &RunSeries) -> String {
    let lines: Vec<&PowerLine> = series
        .gpu_power
        .iter()
        .chain(&series.cpu_power)
        .filter(|line| has_readings(&line.points))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("power over the run (▁ lowest to █ highest reading of each):\n");
    for line in lines {
        let readings = line.points.iter().filter_map(|point| point.value);
        let low = readings.clone().fold(f64::INFINITY, f64::min);
        let high = readings.fold(f64::NEG_INFINITY, f64::max);
        let domain = match line.domain {
            EnergyDomain::Gpu => "GPU",
            _ => "CPU",
        };
        out.push_str(&format!(
            "{domain} {:<36} {} {low:.1}-{high:.1} W\n",
            line.label.chars().take(36).collect::<String>(),
            sparkline(
                &line.points,
                report.started_at,
                report.ended_at,
                SPARKLINE_WIDTH
            )
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::energy::DevicePower;
    use wattline_model::metric_measurements::{MetricKind, MetricValue, MetricValueType};

    fn start() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn at_seconds(seconds: f64) -> DateTime<Utc> {
        start() + chrono::Duration::milliseconds((seconds * 1000.0) as i64)
    }

    fn started() -> EnergyRecord {
        // The clock: monotonic 1 s is the wall-clock start.
        EnergyRecord::Started {
            at: 1_000_000_000,
            wall: start(),
            settings: Box::default(),
        }
    }

    fn nanos(seconds: f64) -> Nanos {
        1_000_000_000 + (seconds * 1e9) as Nanos
    }

    fn power(seconds: f64, devices: Option<Vec<(&str, Option<f64>)>>) -> EnergyRecord {
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: nanos(seconds),
            devices: devices.map(|devices| {
                devices
                    .into_iter()
                    .map(|(id, watts)| DevicePower {
                        power_field: None,
                        id: id.into(),
                        name: Some("NVIDIA H200".into()),
                        watts,
                        counter_millijoules: None,
                        shares: None,
                        mig_enabled: None,
                        at: None,
                    })
                    .collect()
            }),
            power_field: None,
        })
    }

    fn gauge(name: &str, value: f64, unit: &str) -> MetricMeasurement {
        MetricMeasurement {
            name: name.into(),
            kind: MetricKind::Gauge,
            value_type: MetricValueType::F64,
            value: MetricValue::F64(value),
            unit: Some(unit.into()),
            description: None,
            attributes: Some(BTreeMap::from([(
                MEASUREMENT_SCOPE_ATTRIBUTE.to_string(),
                AttributeValue::String("process_tree".into()),
            )])),
            boundaries: None,
        }
    }

    fn values(points: &[SeriesPoint]) -> Vec<Option<f64>> {
        points.iter().map(|point| point.value).collect()
    }

    #[test]
    fn gpu_power_follows_each_device_with_gaps_where_a_sample_failed() {
        let mut builder = SeriesBuilder::new();
        builder.push_energy(&power(0.0, Some(vec![("GPU-a", Some(100.0))])));
        builder.push_energy(&started());
        builder.push_energy(&power(0.1, Some(vec![("GPU-a", Some(100.0))])));
        builder.push_energy(&power(
            0.2,
            Some(vec![("GPU-a", Some(200.0)), ("GPU-b", Some(50.0))]),
        ));
        builder.push_energy(&power(0.3, None));
        // A stale answer (stamped before the newest reading) adds nothing.
        builder.push_energy(&power(0.25, Some(vec![("GPU-a", Some(999.0))])));
        builder.push_energy(&power(0.4, Some(vec![("GPU-a", Some(300.0))])));
        let series = builder.finish();
        assert_eq!(series.gpu_power.len(), 2);
        let a = &series.gpu_power[0];
        assert_eq!(a.id, "GPU-a");
        assert_eq!(a.label, "NVIDIA H200 GPU-a");
        assert_eq!(a.domain, EnergyDomain::Gpu);
        assert_eq!(
            values(&a.points),
            [Some(100.0), Some(200.0), None, Some(300.0)],
            "the reading before the clock is left out"
        );
        assert_eq!(a.points[0].at, at_seconds(0.1));
        assert_eq!(a.points[3].at, at_seconds(0.4));
        let b = &series.gpu_power[1];
        assert_eq!(
            values(&b.points),
            [Some(50.0), None],
            "missing from the last answer: a gap"
        );
        assert!(series.has_power());
    }

    #[test]
    fn rapl_power_is_the_counter_delta_over_the_time_between_readings() {
        // As an ATOF file holds it (the reading type is private to the actors crate).
        let rapl = |seconds: f64, package: u64, core: u64| -> EnergyRecord {
            serde_json::from_value(serde_json::json!({
                "record": "rapl",
                "at": nanos(seconds),
                "zones": [
                    {"zone": "intel-rapl:0", "name": "package-0", "energy_microjoules": package,
                     "max_energy_range_microjoules": 1_000_000_000u64},
                    {"zone": "intel-rapl:0:0", "name": "core", "energy_microjoules": core,
                     "max_energy_range_microjoules": 1_000_000_000u64},
                ],
            }))
            .unwrap()
        };
        let mut builder = SeriesBuilder::new();
        builder.push_energy(&started());
        builder.push_energy(&rapl(0.0, 999_000_000, 0));
        builder.push_energy(&rapl(0.5, 24_000_000, 5_000_000));
        builder.push_energy(&rapl(1.0, 59_000_000, 9_000_000));
        let series = builder.finish();
        assert_eq!(
            series.cpu_power.len(),
            1,
            "a part of a package is not drawn"
        );
        let package = &series.cpu_power[0];
        assert_eq!(package.label, "package-0 (intel-rapl:0)");
        assert_eq!(package.domain, EnergyDomain::CpuPackage);
        // 25 J across the wrap in 0.5 s, then 35 J in 0.5 s.
        let watts: Vec<f64> = package.points.iter().filter_map(|p| p.value).collect();
        assert_eq!(watts.len(), 2);
        assert!((watts[0] - 50.0).abs() < 1e-9, "{watts:?}");
        assert!((watts[1] - 70.0).abs() < 1e-9, "{watts:?}");
        assert_eq!(
            package.points[0].at,
            at_seconds(0.25),
            "placed mid-interval"
        );
    }

    #[test]
    fn cpu_and_memory_come_from_resource_marks_in_base_units() {
        let mut builder = SeriesBuilder::new();
        let mark = |rate: f64, kib: f64| {
            vec![
                gauge(CPU_CONSUMPTION_RATE, rate, "millicores"),
                gauge(MEMORY_RESIDENT, kib, "kibibytes"),
                gauge(MEMORY_SYSTEM_USED, 1e9, "kibibytes"),
            ]
        };
        builder.push_resource_mark(at_seconds(0.2), &mark(1500.0, 2048.0));
        // The same poll copied under an Agent scope.
        builder.push_resource_mark(at_seconds(0.2), &mark(1500.0, 2048.0));
        builder.push_resource_mark(at_seconds(0.4), &mark(500.0, 4096.0));
        let series = builder.finish();
        assert_eq!(values(&series.cpu_use), [Some(1.5), Some(0.5)]);
        assert_eq!(
            values(&series.memory),
            [Some(2048.0 * 1024.0), Some(4096.0 * 1024.0)],
            "resident, not system memory, where the scope has it"
        );
        assert_eq!(series.memory_figure, Some(MemoryFigure::Resident));
        assert_eq!(series.scope.as_deref(), Some("process_tree"));

        // A poll that could not read the resident figure is a gap, never the system's.
        builder.push_resource_mark(
            at_seconds(0.6),
            &[gauge(MEMORY_SYSTEM_USED, 1e9, "kibibytes")],
        );
        let series = builder.finish();
        assert_eq!(values(&series.memory)[2], None);
        assert_eq!(values(&series.cpu_use)[2], None);

        let mut global = SeriesBuilder::new();
        let mut system = gauge(MEMORY_SYSTEM_USED, 1.0, "gibibytes");
        system.attributes = Some(BTreeMap::from([(
            MEASUREMENT_SCOPE_ATTRIBUTE.to_string(),
            AttributeValue::String("global".into()),
        )]));
        global.push_resource_mark(at_seconds(0.2), &[system]);
        let series = global.finish();
        assert_eq!(values(&series.memory), [Some(1024.0 * 1024.0 * 1024.0)]);
        assert_eq!(series.memory_figure, Some(MemoryFigure::SystemUsed));
        assert_eq!(series.scope.as_deref(), Some("global"));
        assert!(!has_readings(&series.cpu_use), "the first poll has no rate");
        assert!(!series.has_power());
    }

    #[test]
    fn a_long_line_is_bounded_and_keeps_its_shape_and_gaps() {
        let mut line = LineBuilder::default();
        let readings = MAX_POINTS_PER_LINE * 10;
        for index in 0..readings {
            let value = if index == readings / 2 {
                None
            } else if index < readings / 2 {
                Some(100.0)
            } else {
                Some(300.0)
            };
            line.push(at_seconds(index as f64 * 0.1), value);
        }
        let points = line.finish();
        assert!(points.len() <= MAX_POINTS_PER_LINE, "{}", points.len());
        assert!(points.len() > MAX_POINTS_PER_LINE / 4, "{}", points.len());
        let gap = points.iter().position(|p| p.value.is_none()).unwrap();
        assert!(points[..gap].iter().all(|p| p.value == Some(100.0)));
        assert!(points[gap + 1..].iter().all(|p| p.value == Some(300.0)));
        assert!(points.windows(2).all(|pair| pair[0].at < pair[1].at));
    }

    #[test]
    fn a_sparkline_spans_lowest_to_highest_with_gaps_blank() {
        let points: Vec<SeriesPoint> = [
            (0.5, Some(100.0)),
            (1.5, Some(200.0)),
            (2.5, None),
            (5.5, Some(300.0)),
            (7.5, Some(150.0)),
        ]
        .into_iter()
        .map(|(seconds, value)| SeriesPoint {
            at: at_seconds(seconds),
            value,
        })
        .collect();
        let line = sparkline(&points, at_seconds(0.0), at_seconds(8.0), 8);
        assert_eq!(
            line, "▁▅   ██▃",
            "a slot without readings repeats the last, unless a gap"
        );
        assert_eq!(line.chars().count(), 8);
        let flat = [SeriesPoint {
            at: at_seconds(1.0),
            value: Some(42.0),
        }];
        assert_eq!(
            sparkline(&flat, at_seconds(0.0), at_seconds(2.0), 4),
            "  ▄▄"
        );
    }
}

//! The energy account: [`EnergyRecord`]s in time order become per-meter (GPU device,
//! RAPL zone), per-domain, per-Agent-scope and per-process energy, cost and CO2.
//!
//! Every figure is the same sum over the same intervals, clipped to a window: the run
//! from [`EnergyRecord::MeasuringFrom`] to the report's instant, each scope from its
//! start to its end. An interval that straddles a boundary contributes the part of its
//! energy inside it (power taken as linear between the interval's ends, or shaped by
//! the counter's energy where there is one: `power_shape`; by time for a
//! counter-only meter), so the parts of an interval add up to it, a reading at a
//! boundary (the window's opening has one) makes its part exact, and a scope that spans
//! the whole run equals the run's total.
//!
//! A reading is taken once: a source's reading no later than its newest one (a cached
//! answer seen again) adds nothing, and neither does a failure observed before it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_config::energy::EnergySettings;

use crate::attribution::{Claimant, divide, usable_weight};
use crate::folded_scopes::FoldedScopeAggregates;
use crate::integrator::{EnergySource, JOULES_PER_KILOWATT_HOUR, shared_counter_delta_joules};
use wattline_model::energy::{
    EnergyRecord, Nanos, PowerRecord, ProcessShares, RaplZoneReading, ShareBasis,
};
use wattline_model::energy_telemetry::ClosedInterval;
use wattline_model::gpu_selection::GpuSelection;
use wattline_model::remote_call::{RemoteCall, RemoteEstimateTotals};
use wattline_model::report::EnergyDomain;
use wattline_model::scope_energy::SettledScope;
use wattline_model::trace_context::ScopeTrace;

mod domain_joules;
mod late_boundaries;
mod power_shape;
mod pricing;
mod reporting;
mod settling;
mod uncertainty;

use self::domain_joules::DomainJoules;
use self::power_shape::PowerShape;
use self::pricing::Pricing;
use self::uncertainty::{GPU_COUNTER, IntervalError, RAPL_COUNTER, ReadingModel};

/// A scope boundary as the account books it.
// Built and moved into the scope list at once: boxing the scope would allocate for
// every step started.
#[allow(clippy::large_enum_variant)]
enum Boundary {
    /// A scope went live (at its `start`).
    Start(ScopeAccount),
    /// The live scope at `index` in the account's list ended at `at`.
    End {
        index: usize,
        at: Nanos,
        wall: DateTime<Utc>,
    },
}

/// How long intervals are kept after they closed, so a report as of an earlier instant
/// (the flush call, before its fresh reading arrived) can take their tail back out.
const RECENT_HORIZON: Nanos = 120 * 1_000_000_000;

fn seconds(nanos: f64) -> f64 {
    nanos / 1e9
}

/// A hardware energy counter's value and how to read it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Counter {
    value: u64,
    units_per_joule: f64,
    wrap_at: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    at: Nanos,
    watts: Option<f64>,
    counter: Option<Counter>,
}

/// A meter's gap, once a reading closed it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ClosedGap {
    from: Nanos,
    to: Nanos,
    /// The most power the meter may have drawn during it, W.
    watts: f64,
    /// The variance its two edges add (J²).
    edge_variance: f64,
}

/// One closed interval of one meter.
#[derive(Debug, Clone, PartialEq)]
struct Segment {
    start: Point,
    end: Point,
    trapezoid_joules: Option<f64>,
    counter_joules: Option<f64>,
    shares: Option<ProcessShares>,
    /// Where the window opened when it was booked: its attributed part starts there.
    booked_from: Nanos,
    /// What its energy's error depends on.
    error: IntervalError,
}

impl Segment {
    fn length(&self) -> f64 {
        (self.end.at - self.start.at) as f64
    }

    fn best_joules(&self) -> f64 {
        self.counter_joules.or(self.trapezoid_joules).unwrap_or(0.0)
    }

    /// The power at `at` inside it: its readings' line, or its mean without them.
    fn watts_at(&self, at: Nanos) -> f64 {
        match (self.start.watts, self.end.watts) {
            (Some(p0), Some(p1)) => {
                let x = (at.saturating_sub(self.start.at) as f64 / self.length()).clamp(0.0, 1.0);
                p0 + (p1 - p0) * x
            }
            _ => self.error.mean_watts,
        }
    }

    /// What the lag of its figure shifts into the window `[from, to]` at the window's
    /// edges inside it (J, signed): the lag times the power at a start edge, less it
    /// at an end edge.
    fn edge_lag_joules(&self, from: Nanos, to: Nanos) -> f64 {
        let lag = self.error.lag_seconds();
        if lag == 0.0 {
            return 0.0;
        }
        let mut joules = 0.0;
        if from >= self.start.at && from < self.end.at {
            joules += lag * self.watts_at(from);
        }
        if to > self.start.at && to <= self.end.at {
            joules -= lag * self.watts_at(to);
        }
        joules
    }

    /// The variance (J²) of the energy of its part inside the window `[from, to]`,
    /// with the window's edges that fall inside it.
    fn part_variance(&self, from: Nanos, to: Nanos) -> f64 {
        let (a, b) = (from.max(self.start.at), to.min(self.end.at));
        let starts = from >= self.start.at && from < self.end.at;
        let ends = to > self.start.at && to <= self.end.at;
        if b <= a && !(starts || ends) {
            return 0.0;
        }
        let offset = |at: Nanos| seconds(at.saturating_sub(self.start.at) as f64);
        self.error
            .part_variance(offset(a), offset(b.max(a)), starts, ends)
    }

    /// The fractions of this interval's energy and of its time inside `[from, to]`.
    fn fractions(&self, from: Nanos, to: Nanos) -> Fractions {
        let (a, b) = (from.max(self.start.at), to.min(self.end.at));
        if b <= a {
            return Fractions::default();
        }
        let length = self.length();
        // The time from the nanoseconds themselves: exact, however short the part.
        let time = (b - a) as f64 / length;
        let (a, b) = (
            (a - self.start.at) as f64 / length,
            (b - self.start.at) as f64 / length,
        );
        let (p0, p1) = (self.start.watts, self.end.watts);
        let linear = PowerShape::linear(p0, p1);
        let counted = self
            .counter_joules
            .and_then(|joules| PowerShape::with_mean(p0, p1, joules / seconds(length)));
        let by = |shape: Option<PowerShape>| shape.map_or(time, |s| s.energy_between(a, b));
        Fractions {
            energy: by(counted.or(linear)),
            linear_energy: by(linear),
            time,
        }
    }
}

/// The part of one interval inside a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Fractions {
    /// Of its best energy (and its counter's): cut by the power's shape, which a
    /// counter's energy refines (see `power_shape`).
    energy: f64,
    /// Of its trapezoid's energy: cut with power linear, the trapezoid's own shape.
    linear_energy: f64,
    /// Of its length.
    time: f64,
}

/// Sums over the intervals (or parts of intervals) inside one window.
#[derive(Debug, Clone, Default, PartialEq)]
struct Tally {
    best_joules: f64,
    /// The variance of `best_joules`' error (J²), edges inside intervals included.
    variance: f64,
    /// The variance a window edge at its first and at its last reading would add.
    first_edge_variance: Option<f64>,
    last_edge_variance: f64,
    trapezoid_joules: f64,
    counter_joules: f64,
    covered_nanos: f64,
    intervals: u64,
    counter_intervals: u64,
    trapezoid_intervals: u64,
}

impl Tally {
    fn add(&mut self, segment: &Segment, fractions: Fractions, sign: f64, variance: f64) {
        if fractions.time <= 0.0 {
            return;
        }
        self.variance += sign * variance;
        if sign > 0.0 {
            self.first_edge_variance
                .get_or_insert(segment.error.edge_variance());
            self.last_edge_variance = segment.error.edge_variance();
        }
        self.best_joules += sign * segment.best_joules() * fractions.energy;
        self.trapezoid_joules +=
            sign * segment.trapezoid_joules.unwrap_or(0.0) * fractions.linear_energy;
        self.counter_joules += sign * segment.counter_joules.unwrap_or(0.0) * fractions.energy;
        self.covered_nanos += sign * segment.length() * fractions.time;
        // A part taken back out still leaves part of the interval in the window.
        if sign > 0.0 {
            self.intervals += 1;
            self.counter_intervals += u64::from(segment.counter_joules.is_some());
            self.trapezoid_intervals += u64::from(segment.trapezoid_joules.is_some());
        }
    }

    /// Mean length of the intervals in the window, s.
    fn mean_interval_seconds(&self) -> Option<f64> {
        (self.intervals > 0).then(|| seconds(self.covered_nanos) / self.intervals as f64)
    }

    /// Takes an interval back out of the counts (its energy is already taken out).
    fn forget(&mut self, segment: &Segment) {
        self.intervals = self.intervals.saturating_sub(1);
        self.counter_intervals = self
            .counter_intervals
            .saturating_sub(u64::from(segment.counter_joules.is_some()));
        self.trapezoid_intervals = self
            .trapezoid_intervals
            .saturating_sub(u64::from(segment.trapezoid_joules.is_some()));
    }

    fn method(&self) -> EnergySource {
        if self.counter_intervals == 0 {
            EnergySource::trapezoid(self.mean_interval_seconds().unwrap_or(f64::INFINITY))
        } else if self.counter_intervals == self.intervals {
            EnergySource::Counter
        } else {
            EnergySource::Mixed
        }
    }
}

#[derive(Debug)]
struct Meter {
    name: Option<String>,
    source: String,
    last: Option<Point>,
    shares: Option<ProcessShares>,
    run: Tally,
    processes: BTreeMap<u32, f64>,
    basis: Option<ShareBasis>,
    recent: VecDeque<Segment>,
    readings: u64,
    gaps: u64,
    max_watts: Option<f64>,
    power_fields: BTreeSet<String>,
    /// Seen as a MIG-enabled board in any reading (dense reads do not say).
    shared_board: bool,
    /// Its number in the account, in the order meters were first read: what a scope's
    /// coverage is kept under.
    number: u32,
    /// How much its power moves from one reading to the next: a running mean of the
    /// squared difference, W².
    roughness: Option<f64>,
    /// Its power readings of the last averaging window (for an averaged field), and a
    /// running mean of the squared change of the readings across one window, W².
    window_readings: VecDeque<(Nanos, f64)>,
    window_change: Option<f64>,
    /// The reading before a gap, while the gap lasts.
    gap_from: Option<Point>,
    /// The gap the newest reading closed: from, to, the most power taken for it, and
    /// the variance its two edges add.
    closed_gap: Option<ClosedGap>,
    /// The most energy the meter may have drawn in its gaps so far (J), and the
    /// variance the gaps' edges add (a counter's or an average's lag at each).
    unseen_joules: f64,
    gap_variance: f64,
    /// The longest interval between two readings it was read at, s.
    longest_interval: f64,
    /// Its first power reading, W.
    first_power: Option<f64>,
    /// The mean power of its newest interval, W (the movement of a meter without power
    /// readings is that of its intervals' means).
    last_mean_watts: Option<f64>,
    /// The difference of the readings of its newest interval, W.
    last_difference: Option<f64>,
    /// Its lowest power (reading or interval mean), W.
    min_watts: Option<f64>,
    /// How its newest interval's readings behave.
    model: Option<ReadingModel>,
}

impl Meter {
    fn new(name: Option<String>, source: &str, number: u32) -> Self {
        Meter {
            name,
            source: source.to_owned(),
            last: None,
            shares: None,
            run: Tally::default(),
            processes: BTreeMap::new(),
            basis: None,
            recent: VecDeque::new(),
            readings: 0,
            gaps: 0,
            max_watts: None,
            power_fields: BTreeSet::new(),
            shared_board: false,
            number,
            roughness: None,
            window_readings: VecDeque::new(),
            window_change: None,
            gap_from: None,
            closed_gap: None,
            unseen_joules: 0.0,
            gap_variance: 0.0,
            longest_interval: 0.0,
            first_power: None,
            last_mean_watts: None,
            last_difference: None,
            min_watts: None,
            model: None,
        }
    }

    /// Adds a reading whose power (if any) behaves as `power_model`; returns the
    /// interval it closed.
    fn add(&mut self, mut point: Point, power_model: ReadingModel) -> Option<Segment> {
        if let Some(watts) = point.watts {
            self.max_watts = Some(self.max_watts.map_or(watts, |max| max.max(watts)));
        }
        self.readings += 1;
        if self.first_power.is_none() {
            self.first_power = point.watts;
        }
        if self.last.is_none() {
            self.close_gap(&point);
        }
        if matches!(power_model, ReadingModel::AveragedPower { .. })
            && let Some(watts) = point.watts
        {
            self.note_window_change(point.at, watts, power_model);
        }
        let closed = self.last.map(|start| {
            let length = seconds((point.at - start.at) as f64);
            let trapezoid_joules = match (start.watts, point.watts) {
                (Some(p0), Some(p1)) => Some((p0 + p1) / 2.0 * length),
                _ => None,
            };
            let counter_joules = match (start.counter, point.counter) {
                (Some(before), Some(after)) => Some(
                    shared_counter_delta_joules(
                        before.value,
                        after.value,
                        after.units_per_joule,
                        after.wrap_at.or(before.wrap_at),
                    )
                    .unwrap_or_else(|| {
                        // Read out of order: the higher value stays the baseline.
                        point.counter = Some(before);
                        0.0
                    }),
                ),
                _ => None,
            };
            let model = match counter_joules {
                Some(_) if self.source == "rapl" => RAPL_COUNTER,
                Some(_) => GPU_COUNTER,
                None => power_model,
            };
            // The readings' own power where there is any: a counter's interval mean
            // jumps with its updates.
            let error =
                self.interval_error(start, point, model, trapezoid_joules.or(counter_joules));
            Segment {
                start,
                end: point,
                trapezoid_joules,
                counter_joules,
                shares: self.shares.clone(),
                booked_from: 0,
                error,
            }
        });
        self.last = Some(point);
        closed
    }

    /// What the error of the interval from `start` to `end` (of `joules`) depends on;
    /// keeps the meter's movement up to date.
    fn interval_error(
        &mut self,
        start: Point,
        end: Point,
        model: ReadingModel,
        joules: Option<f64>,
    ) -> IntervalError {
        let length = seconds((end.at - start.at) as f64);
        self.longest_interval = self.longest_interval.max(length);
        let mean_watts = joules
            .filter(|_| length > 0.0)
            .map(|joules| joules / length)
            .unwrap_or(0.0);
        let difference = match (start.watts, end.watts) {
            (Some(p0), Some(p1)) => (p1 - p0).abs(),
            _ => self
                .last_mean_watts
                .map_or(0.0, |last| (mean_watts - last).abs()),
        };
        // What moves between readings unseen shows as a difference that comes back at
        // once (a burst a reading caught, jitter): the smaller of two successive
        // differences. A step, seen, moves one of them only.
        // A first difference, with none before it, is taken for a change.
        let unseen = difference.min(self.last_difference.unwrap_or(0.0));
        self.last_difference = Some(difference);
        let roughness = match self.roughness {
            Some(mean) => 0.9 * mean + 0.1 * unseen.powi(2),
            None => unseen.powi(2),
        };
        self.roughness = Some(roughness);
        self.last_mean_watts = Some(mean_watts);
        let lowest = start
            .watts
            .into_iter()
            .chain(end.watts)
            .fold(mean_watts, f64::min);
        self.min_watts = Some(self.min_watts.map_or(lowest, |min| min.min(lowest)));
        self.max_watts = Some(self.max_watts.map_or(mean_watts, |max| max.max(mean_watts)));
        self.model = Some(model);
        IntervalError {
            model,
            seconds: length,
            difference_watts: difference,
            roughness_watts: roughness.sqrt(),
            mean_watts,
            window_change_watts: self.window_change.unwrap_or(0.0).sqrt(),
        }
    }

    /// Keeps the running mean of how much an averaged reading changes across one
    /// averaging window, from a reading of `watts` at `at`.
    fn note_window_change(&mut self, at: Nanos, watts: f64, model: ReadingModel) {
        let ReadingModel::AveragedPower { window_seconds } = model else {
            return;
        };
        let window = (window_seconds * 1e9) as Nanos;
        while self
            .window_readings
            .front()
            .is_some_and(|(then, _)| at.saturating_sub(*then) > window)
        {
            let Some((_, then_watts)) = self.window_readings.pop_front() else {
                break;
            };
            let change = (watts - then_watts).powi(2);
            let mean = self.window_change.unwrap_or(change);
            self.window_change = Some(0.9 * mean + 0.1 * change);
        }
        self.window_readings.push_back((at, watts));
    }

    /// The recent intervals that end after `at`, in order. They are kept in the order
    /// they ended, so they are found by bisection: a settled scope (`at` =
    /// [`Nanos::MAX`]) looks at none, not at two minutes of them.
    fn after(&self, at: Nanos) -> impl Iterator<Item = &Segment> {
        let first = self.recent.partition_point(|s| s.end.at <= at);
        self.recent.range(first..)
    }

    fn gap(&mut self) {
        if let Some(last) = self.last.take() {
            self.gaps += 1;
            self.gap_from = Some(last);
            self.last_difference = None;
        }
    }

    /// A reading at `point` after a gap closes it: the most power the meter may have
    /// drawn during it is the higher of the readings either side, and twice its usual
    /// movement above that.
    fn close_gap(&mut self, point: &Point) {
        let Some(before) = self.gap_from.take() else {
            return;
        };
        let roughness = self.roughness.unwrap_or(0.0).sqrt();
        let bound = before
            .watts
            .into_iter()
            .chain(point.watts)
            .chain(self.last_mean_watts)
            .fold(0.0, f64::max)
            + 2.0 * roughness;
        self.unseen_joules += seconds(point.at.saturating_sub(before.at) as f64) * bound;
        let edges = self.model.map_or(0.0, |model| {
            2.0 * IntervalError {
                model,
                seconds: 0.0,
                difference_watts: 0.0,
                roughness_watts: roughness,
                mean_watts: self.last_mean_watts.unwrap_or(0.0),
                window_change_watts: self.window_change.unwrap_or(0.0).sqrt(),
            }
            .edge_variance()
        });
        self.gap_variance += edges;
        self.closed_gap = Some(ClosedGap {
            from: before.at,
            to: point.at,
            watts: bound,
            edge_variance: edges,
        });
    }

    /// Books the part of a closed interval from `from` on.
    fn book(&mut self, segment: &Segment, from: Nanos) {
        let fractions = segment.fractions(from, Nanos::MAX);
        let variance = segment.part_variance(from, Nanos::MAX);
        self.run.add(segment, fractions, 1.0, variance);
        if fractions.time <= 0.0 {
            return;
        }
        if let Some(shares) = &segment.shares {
            for (pid, share) in &shares.processes {
                *self.processes.entry(*pid).or_default() +=
                    segment.best_joules() * fractions.energy * share;
            }
        }
    }
}

#[derive(Debug, Default)]
struct SourceAccount {
    newest: Option<Nanos>,
    devices: BTreeSet<String>,
    answered: bool,
}

#[derive(Debug)]
struct ScopeAccount {
    uuid: Uuid,
    name: std::sync::Arc<str>,
    parent: Option<Uuid>,
    process_id: Option<u32>,
    /// As the caller gave it (the report shows it); attribution uses [`usable_weight`].
    weight: Option<f64>,
    start: Nanos,
    started_wall: DateTime<Utc>,
    end: Option<(Nanos, DateTime<Utc>)>,
    /// Window energy: every counted domain's energy while the scope was live (J).
    joules: DomainJoules,
    /// Attributed energy, its children's included (J).
    attributed: DomainJoules,
    /// The variance of its window energy's error (J²), per domain.
    variance: DomainJoules,
    /// The most energy its counted meters may have drawn in their gaps while it was
    /// live (J), and those gaps' seconds.
    unseen_joules: f64,
    gap_seconds: f64,
    /// What its meters' lag shifts into its window at its edges (J, signed).
    lag_joules: f64,
    /// Its final figures were announced (see [`EnergyAccount::announce_settled_scopes`]).
    announced: bool,
    /// Where its span sits; moved into its announcement when it is retired (only
    /// live scopes are parents).
    trace: Option<ScopeTrace>,
    /// Per counted meter (by [`Meter::number`]), the seconds of its window that
    /// readings covered: a meter or two, found by a scan.
    covered: Vec<(u32, f64)>,
    /// The model call to another machine it stood for, with its estimate.
    remote_call: Option<Box<RemoteCall>>,
}

impl ScopeAccount {
    /// The seconds of its window that meter `number`'s readings covered.
    fn covered_seconds(&self, number: u32) -> f64 {
        self.covered
            .iter()
            .find(|(meter, _)| *meter == number)
            .map_or(0.0, |(_, seconds)| *seconds)
    }

    /// Adds `seconds` covered by meter `number`'s readings.
    fn add_covered(&mut self, number: u32, seconds: f64) {
        match self.covered.iter_mut().find(|(meter, _)| *meter == number) {
            Some((_, covered)) => *covered += seconds,
            None => self.covered.push((number, seconds)),
        }
    }

    fn until(&self) -> Nanos {
        self.end.map_or(Nanos::MAX, |(at, _)| at)
    }

    fn claimant(&self) -> Claimant {
        Claimant {
            uuid: self.uuid,
            parent: self.parent,
            start: self.start,
            until: self.until(),
            process_id: self.process_id,
            weight: usable_weight(self.weight),
        }
    }
}

/// Energy accounting for one pipeline (or one replayed file).
#[derive(Debug)]
pub struct EnergyAccount {
    settings: EnergySettings,
    /// What the settings price energy at, worked out once.
    pricing: Pricing,
    clock: (Nanos, DateTime<Utc>),
    measuring_from: Option<(Nanos, DateTime<Utc>)>,
    sources: BTreeMap<String, SourceAccount>,
    meters: BTreeMap<(EnergyDomain, String), Meter>,
    /// Scopes that can still receive energy, in start order.
    scopes: Vec<ScopeAccount>,
    /// Empty between calls: the buffer [`EnergyAccount::retire_scopes`] moves the
    /// scopes it retires through.
    retiring: Vec<ScopeAccount>,
    /// Scopes no later interval can reach, in the order they were retired: kept for
    /// the report only, the newest `scopes_in_detail` of them.
    finished_scopes: VecDeque<ScopeAccount>,
    /// No finished scope ends later than this (the latest end of any retired so far): a
    /// late boundary at or after it reaches none of them, and need not look.
    finished_until: Nanos,
    /// The finished scopes older than those.
    folded_scopes: FoldedScopeAggregates,
    /// Per counted domain, the run's energy no scope held (J).
    unattributed: BTreeMap<EnergyDomain, f64>,
    gpu_configured: Option<String>,
    gpu_unavailable: Option<String>,
    gpu_selection: Option<GpuSelection>,
    cpu_unavailable: Option<String>,
    last_report: Option<(Nanos, DateTime<Utc>)>,
    newest: Nanos,
    /// The end of the newest interval booked into the scopes: a boundary stamped
    /// before it reaches intervals already divided (see `late_boundaries`).
    booked_until: Nanos,
    /// Boundaries stamped as early as this may still come
    /// ([`EnergyRecord::LateBoundariesFrom`]): no step ending after it settles before
    /// the final report.
    late_boundaries_from: Option<Nanos>,
    /// Scopes whose figures became final since the last
    /// [`EnergyAccount::take_settled_scopes`]; `None` unless announcing was asked for (a
    /// replay does not, so it keeps nothing extra).
    settled: Option<Vec<SettledScope>>,
    /// Every remote call's estimate, summed as the scopes end; `None` before the first.
    remote_estimates: Option<RemoteEstimateTotals>,
}

impl EnergyAccount {
    /// An account whose clock reads `wall` at monotonic `at`.
    pub fn new(mut settings: EnergySettings, at: Nanos, wall: DateTime<Utc>) -> Self {
        // The started record carries the region's row: a replay keeps this figure.
        settings.pin_carbon_region();
        EnergyAccount {
            pricing: Pricing::of(&settings),
            settings,
            clock: (at, wall),
            measuring_from: None,
            sources: BTreeMap::new(),
            meters: BTreeMap::new(),
            scopes: Vec::new(),
            retiring: Vec::new(),
            finished_scopes: VecDeque::new(),
            finished_until: 0,
            folded_scopes: FoldedScopeAggregates::default(),
            unattributed: BTreeMap::new(),
            gpu_configured: None,
            gpu_unavailable: None,
            gpu_selection: None,
            cpu_unavailable: None,
            last_report: None,
            newest: at,
            booked_until: 0,
            late_boundaries_from: None,
            settled: None,
            remote_estimates: None,
        }
    }

    /// An account rebuilt from `records` (a file's, in order); `None` when they hold no
    /// [`EnergyRecord::Started`].
    pub fn replay(records: impl IntoIterator<Item = EnergyRecord>) -> Option<Self> {
        let mut account: Option<EnergyAccount> = None;
        for record in records {
            match (&mut account, record) {
                (None, EnergyRecord::Started { at, wall, settings }) => {
                    account = Some(EnergyAccount::new(*settings, at, wall));
                }
                (Some(account), record) => {
                    account.apply(&record);
                }
                (None, _) => {}
            }
        }
        account
    }

    /// The factors in force.
    pub fn settings(&self) -> &EnergySettings {
        &self.settings
    }

    /// The record that opens a file's energy records: the clock and the factors.
    pub fn started_record(&self) -> EnergyRecord {
        EnergyRecord::Started {
            at: self.clock.0,
            wall: self.clock.1,
            settings: Box::new(self.settings.clone()),
        }
    }

    /// Wall-clock time of monotonic `at`.
    ///
    /// A replayed file's clock can sit anywhere chrono reaches (up to year 262142): a
    /// time past that range is the range's edge, never a panic.
    pub fn wall_time(&self, at: Nanos) -> DateTime<Utc> {
        let (origin, wall) = self.clock;
        let offset = i128::from(at) - i128::from(origin);
        let offset = i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX });
        let edge = if offset < 0 {
            DateTime::<Utc>::MIN_UTC
        } else {
            DateTime::<Utc>::MAX_UTC
        };
        wall.checked_add_signed(chrono::Duration::nanoseconds(offset))
            .unwrap_or(edge)
    }

    /// The latest report instant, when one was taken.
    pub fn last_report(&self) -> Option<(Nanos, DateTime<Utc>)> {
        self.last_report
    }

    /// The newest instant any record carried.
    pub fn newest(&self) -> Nanos {
        self.newest
    }

    /// Applies one record; returns the GPU intervals a power record closed.
    pub fn apply(&mut self, record: &EnergyRecord) -> Vec<ClosedInterval> {
        if let Some(at) = record.at() {
            self.newest = self.newest.max(at);
        }
        match record {
            EnergyRecord::Started { .. } => {}
            EnergyRecord::MeasuringFrom { at, wall } => self.measuring_from = Some((*at, *wall)),
            EnergyRecord::Power(power) => return self.add_power(power),
            EnergyRecord::Rapl { at, zones } => self.add_rapl(*at, zones),
            EnergyRecord::ScopeStarted {
                uuid,
                name,
                at,
                wall,
                parent,
                process_id,
                weight,
                traceparent,
            } => {
                let trace = self.scope_trace(*uuid, *parent, traceparent.as_deref());
                self.book_boundary(Boundary::Start(ScopeAccount {
                    uuid: *uuid,
                    name: std::sync::Arc::clone(name),
                    parent: *parent,
                    process_id: *process_id,
                    weight: *weight,
                    start: *at,
                    started_wall: *wall,
                    end: None,
                    joules: DomainJoules::default(),
                    attributed: DomainJoules::default(),
                    variance: DomainJoules::default(),
                    unseen_joules: 0.0,
                    gap_seconds: 0.0,
                    lag_joules: 0.0,
                    announced: false,
                    trace: Some(trace),
                    covered: Vec::new(),
                    remote_call: None,
                }));
            }
            EnergyRecord::ScopeEnded {
                uuid,
                at,
                wall,
                remote_call,
            } => {
                // The newest scopes are at the end: most ends find theirs soon.
                if let Some(index) = self
                    .scopes
                    .iter()
                    .rposition(|s| s.uuid == *uuid && s.end.is_none())
                {
                    if let Some(call) = remote_call {
                        self.remote_estimates.get_or_insert_default().add(call);
                        self.scopes[index].remote_call = Some(call.clone());
                    }
                    self.book_boundary(Boundary::End {
                        index,
                        at: *at,
                        wall: *wall,
                    });
                    // Retired at once when no open reading reaches back to its end (with
                    // no meter at all, always): without readings nothing else would.
                    if *at <= self.settle_limit(*at) {
                        let scope = self.scopes.remove(index);
                        self.finish(scope);
                    }
                }
            }
            EnergyRecord::GpuStatus {
                configured,
                unavailable,
                selection,
            } => {
                self.gpu_configured = Some(configured.clone());
                self.gpu_unavailable.clone_from(unavailable);
                self.gpu_selection.clone_from(selection);
            }
            EnergyRecord::CpuStatus { unavailable } => {
                self.cpu_unavailable.clone_from(unavailable);
            }
            EnergyRecord::LateBoundariesFrom { at } => {
                self.late_boundaries_from =
                    Some(self.late_boundaries_from.map_or(*at, |from| from.min(*at)));
            }
            EnergyRecord::Report { at, wall } => self.last_report = Some((*at, *wall)),
        }
        Vec::new()
    }

    /// Whether `record` is a reading (or failure) the account has already seen past:
    /// a cached answer taken again, or a failure observed before the newest reading.
    pub fn is_stale(&self, record: &PowerRecord) -> bool {
        self.sources
            .get(&record.source)
            .and_then(|source| source.newest)
            .is_some_and(|newest| record.at <= newest)
    }

    fn add_power(&mut self, record: &PowerRecord) -> Vec<ClosedInterval> {
        if self.is_stale(record) {
            // A cached answer seen again: only its process shares (read for this
            // scope) are news, for the intervals still to come.
            for device in record.devices.iter().flatten() {
                if let (Some(shares), Some(meter)) = (
                    &device.shares,
                    self.meters.get_mut(&(EnergyDomain::Gpu, device.id.clone())),
                ) {
                    meter.shares = Some(shares.clone());
                    meter.basis = shares.basis.or(meter.basis);
                }
            }
            return Vec::new();
        }
        let source = self.sources.entry(record.source.clone()).or_default();
        source.newest = Some(record.at);
        let known: Vec<String> = source.devices.iter().cloned().collect();
        if let Some(devices) = &record.devices {
            source.answered = true;
            source.devices.extend(devices.iter().map(|d| d.id.clone()));
        }
        let Some(devices) = &record.devices else {
            for id in known {
                if let Some(meter) = self.meters.get_mut(&(EnergyDomain::Gpu, id)) {
                    meter.gap();
                }
            }
            return Vec::new();
        };
        let mut closed = Vec::new();
        for device in devices {
            let number = next_meter_number(&self.meters);
            let meter = self
                .meters
                .entry((EnergyDomain::Gpu, device.id.clone()))
                .or_insert_with(|| Meter::new(None, &record.source, number));
            if device.name.is_some() {
                meter.name.clone_from(&device.name);
            }
            meter.shared_board |= device.mig_enabled == Some(true);
            if let Some(shares) = &device.shares {
                meter.shares = Some(shares.clone());
                meter.basis = shares.basis.or(meter.basis);
            }
            // A device with no power reading has no energy: never integrate over it.
            let Some(watts) = device.watts.filter(|w| w.is_finite() && *w >= 0.0) else {
                meter.gap();
                continue;
            };
            let at = device.at.unwrap_or(record.at);
            // Another backend's reading of this device already went past this one.
            if meter.last.is_some_and(|last| at <= last.at) {
                continue;
            }
            let point = Point {
                at,
                watts: Some(watts),
                counter: device.counter_millijoules.map(|value| Counter {
                    value,
                    units_per_joule: 1000.0,
                    wrap_at: Some(u64::MAX),
                }),
            };
            if let Some(field) = device.power_field.as_ref().or(record.power_field.as_ref()) {
                meter.power_fields.insert(field.clone());
            }
            let power_model = uncertainty::power_model(
                device
                    .power_field
                    .as_deref()
                    .or(record.power_field.as_deref()),
            );
            let segment = meter.add(point, power_model);
            let closed_gap = meter.closed_gap.take();
            if let Some(gap) = closed_gap {
                self.book_gap(EnergyDomain::Gpu, gap);
            }
            if let Some(segment) = segment {
                closed.push(ClosedInterval {
                    device: device.id.clone(),
                    kilowatt_hours: segment.best_joules() / JOULES_PER_KILOWATT_HOUR,
                    trapezoid_kilowatt_hours: segment
                        .trapezoid_joules
                        .map(|joules| joules / JOULES_PER_KILOWATT_HOUR),
                    seconds: seconds(segment.length()),
                    counter: segment.counter_joules.is_some(),
                });
                self.book(EnergyDomain::Gpu, &device.id, segment);
            }
        }
        // A known device missing from this answer observed nothing: a gap for it.
        for id in known {
            if !devices.iter().any(|d| d.id == id)
                && let Some(meter) = self.meters.get_mut(&(EnergyDomain::Gpu, id))
            {
                meter.gap();
            }
        }
        self.retire_scopes(record.at);
        closed
    }

    fn add_rapl(&mut self, at: Nanos, zones: &[RaplZoneReading]) {
        for zone in zones {
            let domain = EnergyDomain::of_rapl_zone(&zone.name);
            let number = next_meter_number(&self.meters);
            let meter = self
                .meters
                .entry((domain, zone.zone.clone()))
                .or_insert_with(|| Meter::new(Some(zone.name.clone()), "rapl", number));
            if meter.last.is_some_and(|last| at <= last.at) {
                continue;
            }
            let point = Point {
                at,
                watts: None,
                counter: Some(Counter {
                    value: zone.energy_microjoules,
                    units_per_joule: 1_000_000.0,
                    wrap_at: zone.max_energy_range_microjoules,
                }),
            };
            let segment = meter.add(point, RAPL_COUNTER);
            if let Some(gap) = meter.closed_gap.take() {
                self.book_gap(domain, gap);
            }
            if let Some(segment) = segment {
                self.book(domain, &zone.zone, segment);
            }
        }
        self.retire_scopes(at);
    }

    /// A meter's gap from `from` to `to`, when it may have drawn up to `watts`: the
    /// live scopes it overlaps may hold that much more energy than measured.
    fn book_gap(&mut self, domain: EnergyDomain, gap: ClosedGap) {
        if !domain.is_counted() {
            return;
        }
        for scope in &mut self.scopes {
            let overlap = seconds(
                gap.to
                    .min(scope.until())
                    .saturating_sub(gap.from.max(scope.start)) as f64,
            );
            if overlap > 0.0 {
                scope.unseen_joules += overlap * gap.watts;
                scope.gap_seconds += overlap;
                scope.variance.add(domain, gap.edge_variance);
            }
        }
    }

    /// Books a closed interval into the run, the scopes, and the recent list.
    fn book(&mut self, domain: EnergyDomain, id: &str, mut segment: Segment) {
        let from = self.measuring_from.map_or(0, |(at, _)| at);
        segment.booked_from = from;
        let Some(meter) = self.meters.get_mut(&(domain, id.to_owned())) else {
            return;
        };
        meter.book(&segment, from);
        let number = meter.number;
        // Sub-zones (core, uncore) are inside their package: they count for none.
        if domain.is_counted() {
            for scope in &mut self.scopes {
                let Fractions { energy, time, .. } = segment.fractions(scope.start, scope.until());
                scope.joules.add(domain, segment.best_joules() * energy);
                let variance = segment.part_variance(scope.start, scope.until());
                if variance > 0.0 {
                    scope.variance.add(domain, variance);
                }
                scope.lag_joules += segment.edge_lag_joules(scope.start, scope.until());
                if time > 0.0 {
                    scope.add_covered(number, seconds(segment.length() * time));
                }
            }
            let claimants: Vec<Claimant> = self.scopes.iter().map(ScopeAccount::claimant).collect();
            let division = divide_segment(&segment, from, Nanos::MAX, &claimants);
            for (scope, inclusive) in self.scopes.iter_mut().zip(&division.inclusive) {
                if *inclusive != 0.0 {
                    scope.attributed.add(domain, *inclusive);
                }
            }
            *self.unattributed.entry(domain).or_default() += division.unattributed;
            self.booked_until = self.booked_until.max(segment.end.at);
        }
        let newest = segment.end.at;
        // Kept in the order they end (see `Meter::after`): one that ends before the
        // newest kept (a reading after a gap, from another backend) goes in its place.
        let place = meter.recent.partition_point(|s| s.end.at <= newest);
        meter.recent.insert(place, segment);
        let newest = meter.recent.back().map_or(newest, |s| s.end.at);
        while meter
            .recent
            .front()
            .is_some_and(|s| s.end.at.saturating_add(RECENT_HORIZON) < newest)
        {
            meter.recent.pop_front();
        }
    }

    /// The earliest instant a later interval can still start from: every meter's open
    /// reading, or `now`.
    fn horizon(&self, now: Nanos) -> Nanos {
        self.meters
            .values()
            .filter_map(|m| m.last.map(|p| p.at))
            .min()
            .unwrap_or(now)
            .min(now)
    }

    /// The latest end a scope can have and settle now: no later interval reaches back
    /// before every meter's open reading (the horizon), and no boundary stamped before
    /// [`EnergyRecord::LateBoundariesFrom`] can still come.
    fn settle_limit(&self, now: Nanos) -> Nanos {
        let horizon = self.horizon(now);
        self.late_boundaries_from
            .map_or(horizon, |from| horizon.min(from))
    }

    /// Scopes that ended before every meter's open reading, and before any boundary
    /// still to come, can receive no more.
    fn retire_scopes(&mut self, now: Nanos) {
        let horizon = self.settle_limit(now);
        let retired = |scope: &ScopeAccount| scope.end.is_some_and(|(end, _)| end <= horizon);
        // Most readings retire nothing: the list is left as it is.
        if !self.scopes.iter().any(retired) {
            return;
        }
        // Taken out in place, into a buffer kept between calls: neither list is
        // rebuilt (and regrown) on every reading that retires a step.
        let mut done = std::mem::take(&mut self.retiring);
        done.extend(self.scopes.extract_if(.., |scope| retired(scope)));
        for scope in done.drain(..) {
            self.finish(scope);
        }
        self.retiring = done;
    }

    /// Keeps a retired scope for the report, folding the oldest past
    /// `scopes_in_detail` into their name's aggregate; announces its final figures
    /// when asked to.
    fn finish(&mut self, mut scope: ScopeAccount) {
        if self.settled.is_some() && !scope.announced {
            let trace = scope.trace.take();
            let settled = self.settled_scope(&scope, trace);
            if let Some(pending) = &mut self.settled {
                pending.push(settled);
            }
        }
        self.finished_until = self.finished_until.max(scope.until());
        self.finished_scopes.push_back(scope);
        while self.finished_scopes.len() > self.settings.config.scopes_in_detail {
            let Some(oldest) = self.finished_scopes.pop_front() else {
                break;
            };
            let (end, _) = oldest.end.unwrap_or((oldest.start, oldest.started_wall));
            // Retired: no interval after the horizon reaches it, so its figure is final.
            let attributed: f64 = oldest.attributed.values().sum();
            self.folded_scopes.fold(
                &oldest.name,
                attributed / JOULES_PER_KILOWATT_HOUR,
                seconds(end.saturating_sub(oldest.start) as f64),
            );
        }
    }
}

/// The number a meter first read now gets: how many there are (none is ever removed).
fn next_meter_number(meters: &BTreeMap<(EnergyDomain, String), Meter>) -> u32 {
    u32::try_from(meters.len()).unwrap_or(u32::MAX)
}

/// The attributed energy of the intervals' parts after a report's instant, to be
/// taken back out: per scope (in the order given) and unattributed, by domain (J).
#[derive(Debug, Default)]
struct LateAttribution {
    scopes: Vec<DomainJoules>,
    unattributed: BTreeMap<EnergyDomain, f64>,
}

impl EnergyAccount {
    /// What the recent intervals attributed after `after`, which a report as of
    /// `after` leaves out.
    fn late_attribution(&self, scopes: &[&ScopeAccount], after: Nanos) -> LateAttribution {
        let claimants: Vec<Claimant> = scopes.iter().map(|scope| scope.claimant()).collect();
        let mut late = LateAttribution {
            scopes: vec![DomainJoules::default(); scopes.len()],
            unattributed: BTreeMap::new(),
        };
        for ((domain, _), meter) in &self.meters {
            if !domain.is_counted() {
                continue;
            }
            for segment in meter.after(after) {
                let division = divide_segment(segment, after, Nanos::MAX, &claimants);
                for (slot, joules) in late.scopes.iter_mut().zip(&division.inclusive) {
                    if *joules != 0.0 {
                        slot.add(*domain, *joules);
                    }
                }
                *late.unattributed.entry(*domain).or_default() += division.unattributed;
            }
        }
        late
    }
}

/// Divides the part of `segment` inside `[from, to]` among `claimants`.
fn divide_segment(
    segment: &Segment,
    from: Nanos,
    to: Nanos,
    claimants: &[Claimant],
) -> super::attribution::Division {
    let joules = segment.best_joules();
    divide(
        from.max(segment.start.at),
        to.min(segment.end.at),
        |a, b| joules * segment.fractions(a, b).energy,
        claimants,
        segment.shares.as_ref().map(|shares| &shares.processes),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::energy::DevicePower;

    fn reading(seconds: u64) -> EnergyRecord {
        source_reading("nvml", seconds, Some(100.0))
    }

    /// A scope's start at `at` and its end at `end` (ns), no parent, weight or trace.
    fn scope_records(uuid: Uuid, name: &str, at: Nanos, end: Nanos) -> [EnergyRecord; 2] {
        let wall = Utc::now();
        [
            EnergyRecord::ScopeStarted {
                uuid,
                name: name.into(),
                at,
                wall,
                parent: None,
                process_id: None,
                weight: None,
                traceparent: None,
            },
            EnergyRecord::ScopeEnded {
                uuid,
                at: end,
                wall,
                remote_call: None,
            },
        ]
    }

    /// A reading of device `GPU-a` at 100 W from `source` at `seconds`, or a failed
    /// read (no devices) when `watts` is `None`.
    fn source_reading(source: &str, seconds: u64, watts: Option<f64>) -> EnergyRecord {
        EnergyRecord::Power(PowerRecord {
            source: source.into(),
            at: seconds * 1_000_000_000,
            devices: watts.map(|watts| {
                vec![DevicePower {
                    power_field: None,
                    id: "GPU-a".into(),
                    name: None,
                    watts: Some(watts),
                    counter_millijoules: None,
                    shares: None,
                    mig_enabled: None,
                    at: None,
                }]
            }),
            power_field: None,
        })
    }

    #[test]
    fn intervals_closed_out_of_order_are_kept_in_end_order_and_a_report_takes_their_tails_out() {
        let wall = Utc::now();
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        // nvml: 0-4 s and 4-12 s; its next read fails (a gap). A second backend then
        // reads the same device from 5 s: its intervals 5-7 s and 7-9 s end before the
        // newest kept (12 s).
        for record in [
            source_reading("nvml", 0, Some(100.0)),
            source_reading("nvml", 4, Some(100.0)),
            source_reading("nvml", 12, Some(100.0)),
            source_reading("nvml", 13, None),
            source_reading("smi", 5, Some(100.0)),
            source_reading("smi", 7, Some(100.0)),
            source_reading("smi", 9, Some(100.0)),
        ] {
            account.apply(&record);
        }
        let meter = account.meters.values().next().unwrap();
        let ends: Vec<u64> = meter
            .recent
            .iter()
            .map(|s| s.end.at / 1_000_000_000)
            .collect();
        assert_eq!(ends, vec![4, 7, 9, 12]);
        // As of 8 s, 100 W everywhere: 0-8 s of nvml (800 J) and 5-8 s of smi (300 J);
        // the tails after 8 s (4 s of nvml, 1 s of smi) are taken back out.
        let report = account.report(8_000_000_000, wall);
        let joules = report.devices[0].energy_kwh * JOULES_PER_KILOWATT_HOUR;
        assert!((joules - 1_100.0).abs() < 1e-6, "{joules} J");
    }

    #[test]
    fn settled_scopes_are_drained_in_order_into_the_callers_buffer_and_only_once() {
        let wall = Utc::now();
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.announce_settled_scopes();
        let step = |account: &mut EnergyAccount, n: u64| {
            let uuid = Uuid::from_u128(u128::from(n) + 1);
            for record in scope_records(uuid, &format!("step-{n}"), n * 10, n * 10 + 5) {
                account.apply(&record);
            }
        };
        let names = |settled: &[SettledScope]| -> Vec<String> {
            settled.iter().map(|s| s.energy.name.clone()).collect()
        };
        step(&mut account, 0);
        step(&mut account, 1);
        let mut buffer = Vec::with_capacity(64);
        account.drain_settled_scopes_into(&mut buffer);
        assert_eq!(names(&buffer), ["step-0", "step-1"]);
        // Each one's trace went with it: a trace of its own, under its UUID.
        assert_eq!(
            buffer[1].trace.as_ref().map(|t| t.trace_id.as_str()),
            Some("00000000000000000000000000000002")
        );
        account.drain_settled_scopes_into(&mut buffer);
        assert_eq!(buffer.len(), 2, "nothing is drained twice");
        // A buffer still holding scopes is appended to, in order.
        step(&mut account, 2);
        account.drain_settled_scopes_into(&mut buffer);
        assert_eq!(names(&buffer), ["step-0", "step-1", "step-2"]);
        // An emptied buffer (which trades places with the account's list) gets only
        // what settled since.
        buffer.clear();
        step(&mut account, 3);
        account.drain_settled_scopes_into(&mut buffer);
        assert_eq!(names(&buffer), ["step-3"]);
        assert!(account.take_settled_scopes().is_empty());
    }

    #[test]
    fn a_settled_scope_says_no_coverage_where_nothing_measured_it() {
        let wall = Utc::now();
        // No meter at all: nothing covered the step, and nothing measured it.
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.announce_settled_scopes();
        for record in scope_records(Uuid::from_u128(1), "alone", 0, 1_000_000_000) {
            account.apply(&record);
        }
        let settled = account.take_settled_scopes();
        assert_eq!(settled.len(), 1);
        assert_eq!(settled[0].coverage, None);
        assert_eq!(settled[0].energy.energy_kwh, None);
        // A GPU that answered without a power figure: not measured, as the report says.
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.announce_settled_scopes();
        account.apply(&source_reading("nvml", 0, None));
        let mut no_power = source_reading("nvml", 1, Some(100.0));
        if let EnergyRecord::Power(power) = &mut no_power {
            power.devices.as_mut().unwrap()[0].watts = None;
        }
        account.apply(&no_power);
        for record in scope_records(Uuid::from_u128(2), "unmeasured", 0, 500_000_000) {
            account.apply(&record);
        }
        let settled = account.take_settled_scopes();
        let energy = &settled[0].energy;
        assert_eq!(
            (energy.gpu_energy_kwh, energy.energy_kwh),
            (None, None),
            "{energy:?}"
        );
        assert_eq!(energy.attributed_gpu_energy_kwh, None);
        assert_eq!(settled[0].coverage, None);
        let report = account.report(1_000_000_000, wall);
        assert_eq!(report.devices.len(), 0);
        assert_eq!(report.total.energy_kwh, None);
        // A step of no length under a meter: no share of nothing.
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.announce_settled_scopes();
        account.apply(&reading(0));
        for record in scope_records(Uuid::from_u128(3), "instant", 500, 500) {
            account.apply(&record);
        }
        account.apply(&reading(1));
        let settled = account.take_settled_scopes();
        assert_eq!(settled[0].coverage, None, "{:?}", settled[0]);
    }

    #[test]
    fn a_single_reading_has_no_mean_power() {
        let wall = Utc::now();
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.apply(&reading(1));
        let report = account.report(2_000_000_000, wall);
        assert_eq!(report.devices[0].mean_watts, None);
        assert_eq!(report.devices[0].covered_seconds, 0.0);
    }

    #[test]
    fn a_child_scope_sits_in_its_own_parents_trace() {
        // Two live scopes: the first under a caller's span, the second in a trace of
        // its own; a child of the second is in the second's trace, under its span.
        let wall = Utc::now();
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, wall);
        account.announce_settled_scopes();
        let (caller, parent, child) = (
            Uuid::from_u128(0xa),
            Uuid::from_u128(0xb),
            Uuid::from_u128(0xc),
        );
        let start = |uuid, parent, traceparent: Option<&str>| EnergyRecord::ScopeStarted {
            uuid,
            name: "step".into(),
            at: 0,
            wall,
            parent,
            process_id: None,
            weight: None,
            traceparent: traceparent.map(str::to_owned),
        };
        account.apply(&start(
            caller,
            None,
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ));
        account.apply(&start(parent, None, None));
        account.apply(&start(child, Some(parent), None));
        for uuid in [child, parent, caller] {
            account.apply(&EnergyRecord::ScopeEnded {
                uuid,
                at: 1,
                wall,
                remote_call: None,
            });
        }
        let settled = account.take_settled_scopes();
        let trace = |uuid| {
            settled
                .iter()
                .find(|scope| scope.energy.uuid == uuid)
                .and_then(|scope| scope.trace.clone())
                .unwrap()
        };
        assert_eq!(trace(child).trace_id, trace(parent).trace_id);
        assert_eq!(trace(child).parent_span_id, Some(trace(parent).span_id));
        assert_ne!(trace(child).trace_id, trace(caller).trace_id);
    }

    #[test]
    fn recent_intervals_are_kept_for_two_minutes_only() {
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, Utc::now());
        for second in 0..=600 {
            account.apply(&reading(second));
        }
        let meter = account.meters.values().next().unwrap();
        // Intervals of 1 s ending within 120 s of the newest: 121 of them.
        assert_eq!(meter.recent.len(), 121);
    }

    #[test]
    fn without_any_reading_an_ended_scope_is_retired_at_its_end_and_memory_stays_bounded() {
        // No GPU and no RAPL: no reading would ever retire a scope, so its end does.
        let mut settings = EnergySettings::default();
        settings.config.scopes_in_detail = 100;
        let mut account = EnergyAccount::new(settings, 0, Utc::now());
        for n in 0..10_000u64 {
            let uuid = Uuid::from_u128(u128::from(n) + 1);
            let name = format!("step-{}", n % 3);
            for record in scope_records(uuid, &name, n * 1_000, n * 1_000 + 500) {
                account.apply(&record);
            }
        }
        assert!(account.scopes.is_empty());
        assert_eq!(account.finished_scopes.len(), 100);
        assert_eq!(account.folded_scopes.count(), 9_900);
    }

    #[test]
    fn an_ended_scope_no_reading_can_reach_is_retired() {
        let mut account = EnergyAccount::new(EnergySettings::default(), 0, Utc::now());
        account.apply(&reading(0));
        for record in scope_records(Uuid::now_v7(), "step", 1_000_000_000, 2_000_000_000) {
            account.apply(&record);
        }
        account.apply(&reading(1));
        assert_eq!(
            account.scopes.len(),
            1,
            "still reachable by the open interval"
        );
        account.apply(&reading(3));
        assert!(account.scopes.is_empty());
        assert_eq!(account.finished_scopes.len(), 1);
    }
}

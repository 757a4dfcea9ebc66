//! The account's report as of an instant: each meter's, domain's and scope's energy
//! with what lies after that instant taken back out, priced and turned into CO2.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use wattline_config::energy::CarbonIntensity;

use super::domain_joules::DomainJoules;
use super::pricing::Pricing;
use super::uncertainty::ReadingModel;
use super::uncertainty::receipt;
use super::{EnergyAccount, LateAttribution, Meter, ScopeAccount, Tally, seconds};
use crate::integrator::{EnergySource, JOULES_PER_KILOWATT_HOUR};
use wattline_model::energy::Nanos;
use wattline_model::receipt::{EnergyReceipt, ReceiptMethod, Resolution};
use wattline_model::report::{
    DeviceEnergy, DomainEnergy, EnergyDomain, EnergyReport, EnergyTotals, Factor, ProcessEnergy,
    SCOPE_ATTRIBUTION, ScopeEnergy, ZoneEnergy,
};
use wattline_model::scope_energy::SettledScope;
use wattline_model::trace_context::ScopeTrace;

fn kwh(joules: f64) -> f64 {
    joules / JOULES_PER_KILOWATT_HOUR
}

/// What a scope's figures depend on besides the scope.
#[derive(Clone, Copy)]
struct ScopeFigures<'a> {
    /// The report's instant.
    at: Nanos,
    /// Whether any domain was measured.
    measured: bool,
    /// Whether the GPU was.
    gpu_measured: bool,
    /// The counted domains.
    domains: &'a [EnergyDomain],
}

/// What the meters add up to as of the report's instant.
#[derive(Default)]
struct MeterFigures {
    devices: Vec<DeviceEnergy>,
    zones: Vec<ZoneEnergy>,
    processes: Vec<ProcessEnergy>,
    /// Per counted domain: its joules, each meter's method, and its error's parts.
    domain_joules: BTreeMap<EnergyDomain, (f64, Vec<EnergySource>)>,
    domain_errors: BTreeMap<EnergyDomain, ErrorParts>,
}

/// What a figure's receipt is made of: the variance of its error (J²), the most its
/// meters may have missed in gaps (J), the methods, and the window's resolution.
#[derive(Debug, Clone, Copy, Default)]
struct ErrorParts {
    variance: f64,
    unseen_joules: f64,
    method: Option<ReceiptMethod>,
    unresolved: bool,
    /// For a window its sources do not resolve: the energy at the meters' lowest and
    /// highest power over its length (J), which its interval holds.
    power_range: Option<(f64, f64)>,
    /// A known offset of an average's figure (J), either way: the interval widens by it.
    lag_joules: f64,
}

impl ErrorParts {
    fn and(self, other: ErrorParts) -> ErrorParts {
        ErrorParts {
            variance: self.variance + other.variance,
            unseen_joules: self.unseen_joules + other.unseen_joules,
            method: match (self.method, other.method) {
                (Some(a), Some(b)) => Some(a.and(b)),
                (a, b) => a.or(b),
            },
            unresolved: self.unresolved || other.unresolved,
            power_range: match (self.power_range, other.power_range) {
                (Some(a), Some(b)) => Some((a.0 + b.0, a.1 + b.1)),
                (a, b) => a.or(b),
            },
            lag_joules: self.lag_joules + other.lag_joules,
        }
    }

    fn receipt(self, joules: f64) -> Option<EnergyReceipt> {
        let resolution = if self.unresolved {
            Resolution::Unresolved
        } else {
            Resolution::Resolved
        };
        let mut receipt = receipt(
            joules,
            self.variance,
            self.unseen_joules,
            self.method?,
            resolution,
        );
        if let Some((low, high)) = self.power_range {
            receipt.low_kwh = receipt.low_kwh.min(kwh(low));
            receipt.high_kwh = receipt.high_kwh.max(kwh(high));
        }
        receipt.low_kwh = (receipt.low_kwh - kwh(self.lag_joules)).max(0.0);
        receipt.high_kwh += kwh(self.lag_joules);
        Some(receipt)
    }
}

impl EnergyAccount {
    /// The report as of monotonic `at` (wall-clock `wall`): intervals, or their parts,
    /// after `at` are left out, even when their readings have already arrived.
    pub fn report(&self, at: Nanos, wall: DateTime<Utc>) -> EnergyReport {
        let config = &self.settings.config;
        let from = self.measuring_from.map_or(0, |(at, _)| at);
        let carbon = self.settings.carbon_intensity();
        let pricing = self.pricing;
        let meters = self.meter_figures(at, from, &pricing);
        let mut scopes: Vec<&ScopeAccount> =
            self.finished_scopes.iter().chain(&self.scopes).collect();
        scopes.sort_by_key(|scope| scope.start);
        let late = self.late_attribution(&scopes, at.max(from));
        let unattributed = |domain: &EnergyDomain| {
            kwh(self.unattributed.get(domain).copied().unwrap_or(0.0)
                - late.unattributed.get(domain).copied().unwrap_or(0.0))
        };
        let mut domains = domain_energies(&meters.domain_joules, unattributed, &pricing);
        let mut all_errors = ErrorParts::default();
        for domain in &mut domains {
            let errors = meters
                .domain_errors
                .get(&domain.domain)
                .copied()
                .unwrap_or_default();
            domain.receipt = errors.receipt(domain.energy_kwh * JOULES_PER_KILOWATT_HOUR);
            all_errors = all_errors.and(errors);
        }
        let domain_kwh = |domain: EnergyDomain| {
            domains
                .iter()
                .find(|d| d.domain == domain)
                .map(|d| d.energy_kwh)
        };
        let measured = !domains.is_empty();
        let gpu_measured = domain_kwh(EnergyDomain::Gpu).is_some();
        let counted: Vec<EnergyDomain> = domains.iter().map(|d| d.domain).collect();
        let answering: Vec<&str> = self
            .sources
            .iter()
            .filter(|(_, source)| source.answered)
            .map(|(name, _)| name.as_str())
            .collect();
        EnergyReport {
            started_at: self.measuring_from.map_or(self.clock.1, |(_, wall)| wall),
            ended_at: wall,
            gpu_source: (!answering.is_empty()).then(|| answering.join("+")),
            gpu_source_configured: self.gpu_configured.clone(),
            gpu_unavailable: (!gpu_measured)
                .then(|| self.gpu_unavailable_reason(!answering.is_empty()))
                .flatten(),
            gpu_selection: self.gpu_selection.clone(),
            cpu_unavailable: domain_kwh(EnergyDomain::CpuPackage)
                .is_none()
                .then(|| self.cpu_unavailable.clone())
                .flatten(),
            total: EnergyTotals {
                receipt: (!domains.is_empty())
                    .then(|| {
                        let joules: f64 = domains.iter().map(|d| d.energy_kwh).sum();
                        all_errors.receipt(joules * JOULES_PER_KILOWATT_HOUR)
                    })
                    .flatten(),
                ..totals(&domains, config.pue, &pricing)
            },
            agent_scopes: self.scope_energies(
                &scopes,
                &late,
                ScopeFigures {
                    at,
                    measured,
                    gpu_measured,
                    domains: &counted,
                },
                &pricing,
            ),
            scope_attribution: Some(SCOPE_ATTRIBUTION.to_owned()),
            remote_estimates: self.remote_estimates.clone(),
            folded_scopes: self.folded_scopes.summaries(),
            domains,
            devices: meters.devices,
            cpu_zones: meters.zones,
            processes: meters.processes,
            cost_per_kwh: Factor {
                value: pricing.price,
                unit: format!("{}/kWh", config.currency),
                origin: self.settings.cost_origin.clone(),
                region: None,
            },
            currency: config.currency.clone(),
            carbon_intensity: config.co2_tracking.then(|| carbon_factor(&carbon)),
            pue: Factor {
                value: config.pue,
                unit: "ratio".into(),
                origin: self.settings.pue_origin.clone(),
                region: None,
            },
            ignored_variables: self.settings.ignored_variables.clone(),
            diagnostics: None,
            exporter_drops: Vec::new(),
            exporters: Vec::new(),
            replay_notes: Vec::new(),
            last_sample_missing: None,
            health: Vec::new(),
        }
    }

    /// Every meter's energy in the window from `from` to `at`: GPU devices (and their
    /// processes), RAPL zones, and the counted domains' sums.
    fn meter_figures(&self, at: Nanos, from: Nanos, pricing: &Pricing) -> MeterFigures {
        let mut figures = MeterFigures::default();
        for ((domain, id), meter) in &self.meters {
            if meter.readings == 0 {
                continue;
            }
            let (run, process_joules) = meter.as_of(at, from);
            let errors = meter.error_parts(&run, seconds(at.saturating_sub(from) as f64));
            if domain.is_counted() {
                let slot = figures.domain_joules.entry(*domain).or_default();
                slot.0 += run.best_joules;
                slot.1.push(run.method());
                let error = figures.domain_errors.entry(*domain).or_default();
                *error = error.and(errors);
            }
            match domain {
                EnergyDomain::Gpu => {
                    let attributed: f64 = process_joules.values().sum();
                    for (pid, joules) in &process_joules {
                        figures.processes.push(ProcessEnergy {
                            process_id: *pid,
                            device_identifier: id.clone(),
                            gpu_energy_kwh: kwh(*joules),
                            basis: meter.basis,
                        });
                    }
                    let mut device = meter.device_energy(id, &run, attributed, pricing);
                    device.receipt = errors.receipt(run.best_joules);
                    figures.devices.push(device);
                }
                _ => figures.zones.push(ZoneEnergy {
                    zone: id.clone(),
                    name: meter.name.clone().unwrap_or_else(|| id.clone()),
                    domain: *domain,
                    energy_kwh: kwh(run.best_joules),
                    covered_seconds: seconds(run.covered_nanos),
                    readings: meter.readings,
                }),
            }
        }
        figures
    }

    /// Every Agent scope's energy (`scopes`, in start order), window and attributed,
    /// with what lies after the report's instant taken back out (`late`, the
    /// attributed part of it, in the same order). Totals only when anything was
    /// measured; GPU energy only when the GPU was.
    fn scope_energies(
        &self,
        scopes: &[&ScopeAccount],
        late: &LateAttribution,
        figures: ScopeFigures<'_>,
        pricing: &Pricing,
    ) -> Vec<ScopeEnergy> {
        scopes
            .iter()
            .zip(&late.scopes)
            .map(|(scope, late_attributed)| {
                self.scope_energy(scope, late_attributed, &figures, pricing)
            })
            .collect()
    }

    /// One scope's figures as of `figures.at`, less `late_attributed` (what its
    /// attributed energy holds after that instant).
    fn scope_energy(
        &self,
        scope: &ScopeAccount,
        late_attributed: &DomainJoules,
        figures: &ScopeFigures<'_>,
        pricing: &Pricing,
    ) -> ScopeEnergy {
        let ScopeFigures {
            at,
            measured,
            gpu_measured,
            domains,
        } = *figures;
        let mut joules = scope.joules.clone();
        for ((domain, _), meter) in &self.meters {
            if !domain.is_counted() {
                continue;
            }
            for segment in meter.after(at) {
                let energy = segment.fractions(at.max(scope.start), scope.until()).energy;
                joules.add(*domain, -(segment.best_joules() * energy));
            }
        }
        let gpu = joules.get(EnergyDomain::Gpu).map(kwh);
        let total = measured.then(|| kwh(joules.values().sum::<f64>()));
        let window_receipt = measured
            .then(|| self.scope_error_parts(scope, at, domains))
            .and_then(|parts| parts.receipt(joules.values().sum::<f64>()));
        let attributed = |domain: &EnergyDomain| {
            scope.attributed.get(*domain).unwrap_or(0.0)
                - late_attributed.get(*domain).unwrap_or(0.0)
        };
        let attributed_total = measured.then(|| kwh(domains.iter().map(attributed).sum::<f64>()));
        ScopeEnergy {
            uuid: scope.uuid,
            name: scope.name.to_string(),
            parent_uuid: scope.parent,
            process_id: scope.process_id,
            weight: scope.weight,
            attributed_gpu_energy_kwh: gpu_measured.then(|| kwh(attributed(&EnergyDomain::Gpu))),
            attributed_energy_kwh: attributed_total,
            attributed_cost: attributed_total.map(|kwh| pricing.cost(kwh)),
            attributed_co2_grams: attributed_total.and_then(|kwh| pricing.co2(kwh)),
            gpu_energy_kwh: gpu.filter(|_| gpu_measured),
            energy_kwh: total,
            receipt: window_receipt,
            attributed_receipt: window_receipt.zip(total).zip(attributed_total).map(
                |((receipt, window), attributed)| {
                    receipt.attributed(if window > 0.0 {
                        attributed / window
                    } else {
                        0.0
                    })
                },
            ),
            cost: total.map(|kwh| pricing.cost(kwh)),
            co2_grams: total.and_then(|kwh| pricing.co2(kwh)),
            started_at: scope.started_wall,
            ended_at: scope.end.map(|(_, wall)| wall),
            remote_call: scope.remote_call.clone(),
        }
    }

    /// The parts of `scope`'s window receipt as of `at`, over the counted `domains`.
    fn scope_error_parts(
        &self,
        scope: &ScopeAccount,
        at: Nanos,
        domains: &[EnergyDomain],
    ) -> ErrorParts {
        let duration = seconds(scope.until().min(at).saturating_sub(scope.start) as f64);
        let variance: f64 = domains
            .iter()
            .filter_map(|domain| scope.variance.get(*domain))
            .sum();
        let mut parts = ErrorParts {
            variance,
            unseen_joules: scope.unseen_joules,
            lag_joules: scope.lag_joules.abs(),
            ..ErrorParts::default()
        };
        for ((domain, _), meter) in &self.meters {
            if meter.readings > 0 && domains.contains(domain) {
                parts = parts.and(meter.scope_error_parts(scope, duration));
            }
        }
        parts
    }

    /// A retired scope's final figures: no interval after its end can reach it, so
    /// nothing is taken back out.
    pub(super) fn settled_scope(
        &self,
        scope: &ScopeAccount,
        trace: Option<ScopeTrace>,
    ) -> SettledScope {
        let counted = self.counted_domains();
        let figures = ScopeFigures {
            at: Nanos::MAX,
            measured: !counted.is_empty(),
            gpu_measured: counted.contains(&EnergyDomain::Gpu),
            domains: &counted,
        };
        let energy = self.scope_energy(scope, &DomainJoules::default(), &figures, &self.pricing);
        self.settled_with(energy, scope, trace)
    }

    /// `energy` with what a reader needs to trust it: the attribution, each counted
    /// domain's method, the meters counted and the currency; `trace` is the scope's.
    pub(super) fn settled_with(
        &self,
        energy: ScopeEnergy,
        scope: &ScopeAccount,
        trace: Option<ScopeTrace>,
    ) -> SettledScope {
        let mut methods: BTreeMap<EnergyDomain, Vec<EnergySource>> = BTreeMap::new();
        let mut meters = Vec::new();
        // The seconds of the step the worst-covered meter's readings covered.
        let mut least_covered = f64::INFINITY;
        for ((domain, id), meter) in &self.meters {
            if meter.readings == 0 || !domain.is_counted() {
                continue;
            }
            methods.entry(*domain).or_default().push(meter.run.method());
            meters.push(id.clone());
            least_covered = least_covered.min(scope.covered_seconds(meter.number));
        }
        // The worst-covered meter's share of the window: 1 when readings surround the
        // whole step on every meter, less where a meter had a gap inside it.
        let duration = scope
            .end
            .map(|(end, _)| seconds(end.saturating_sub(scope.start) as f64));
        let coverage = duration
            .filter(|d| *d > 0.0 && !meters.is_empty())
            .map(|d| (least_covered / d).clamp(0.0, 1.0));
        SettledScope {
            energy,
            attribution: SCOPE_ATTRIBUTION.to_owned(),
            methods: methods
                .into_iter()
                .map(|(domain, methods)| (domain, combined_method(&methods)))
                .collect(),
            meters,
            currency: self.settings.config.currency.clone(),
            ended_at_program_exit: false,
            trace,
            coverage,
        }
    }

    /// The counted domains some meter has read, as a report lists them.
    fn counted_domains(&self) -> Vec<EnergyDomain> {
        let mut domains: Vec<EnergyDomain> = self
            .meters
            .iter()
            .filter(|((domain, _), meter)| meter.readings > 0 && domain.is_counted())
            .map(|((domain, _), _)| *domain)
            .collect();
        domains.dedup();
        domains
    }

    /// Why no GPU energy was measured: a selection that leaves every device out says
    /// so before the sources' own reasons.
    fn gpu_unavailable_reason(&self, sources_answered: bool) -> Option<String> {
        match &self.gpu_selection {
            Some(selection) if selection.selects_nothing() => Some(format!(
                "no GPU is selected ({}): none counted",
                selection.describe()
            )),
            Some(selection) if sources_answered => Some(format!(
                "no device matched the selection ({})",
                selection.describe()
            )),
            _ => self.gpu_unavailable.clone(),
        }
    }
}

impl Meter {
    /// The run's tally and each process's joules in the window from `from` to `at`:
    /// the intervals, or their parts, after `at` taken back out.
    fn as_of(&self, at: Nanos, from: Nanos) -> (Tally, BTreeMap<u32, f64>) {
        let mut run = self.run.clone();
        let mut process_joules = self.processes.clone();
        for segment in self.after(at) {
            let fractions = segment.fractions(at.max(from), Nanos::MAX);
            // What was booked of it goes, and the part before `at` comes back with the
            // window's edge at `at`.
            let variance =
                segment.part_variance(from, Nanos::MAX) - segment.part_variance(from, at);
            run.add(segment, fractions, -1.0, variance);
            if fractions.time > 0.0 && fractions.time >= segment.fractions(from, Nanos::MAX).time {
                // The whole of its part in the window lies after the report.
                run.forget(segment);
            }
            if let Some(shares) = &segment.shares {
                for (pid, share) in &shares.processes {
                    *process_joules.entry(*pid).or_default() -=
                        segment.best_joules() * fractions.energy * share;
                }
            }
        }
        (run, process_joules)
    }

    /// The GPU device `id`'s figures from its `run` in the window, of which
    /// `attributed` joules went to processes.
    fn device_energy(
        &self,
        id: &str,
        run: &Tally,
        attributed: f64,
        pricing: &Pricing,
    ) -> DeviceEnergy {
        let energy_kwh = kwh(run.best_joules);
        DeviceEnergy {
            device_identifier: id.to_owned(),
            name: self.name.clone(),
            source: self.source.clone(),
            energy_kwh,
            receipt: None,
            energy_source: run.method(),
            counter_kwh: (run.counter_intervals > 0 && run.counter_intervals == run.intervals)
                .then(|| kwh(run.counter_joules)),
            trapezoid_kwh: (run.trapezoid_intervals > 0).then(|| kwh(run.trapezoid_joules)),
            mean_watts: (run.covered_nanos > 0.0)
                .then(|| run.trapezoid_joules / seconds(run.covered_nanos)),
            max_watts: self.max_watts,
            covered_seconds: seconds(run.covered_nanos),
            readings: self.readings,
            sampling_rate_hz: run
                .mean_interval_seconds()
                .filter(|mean| *mean > 0.0)
                .map(|mean| 1.0 / mean),
            gaps: self.gaps,
            cost: pricing.cost(energy_kwh),
            co2_grams: pricing.co2(energy_kwh),
            attribution: self.basis,
            power_fields: self.power_fields.iter().cloned().collect(),
            attributed_kwh: kwh(attributed),
            unattributed_kwh: energy_kwh - kwh(attributed),
            shared_board_power: self.shared_board,
        }
    }
}

impl Meter {
    /// The parts of the receipt of `run`, this meter's tally over a window of
    /// `window_seconds`: its intervals' and edges' variance, the most it may have
    /// missed while not read, and its method.
    fn error_parts(&self, run: &Tally, window_seconds: f64) -> ErrorParts {
        let Some(model) = self.model else {
            return ErrorParts::default();
        };
        let method = match run.method() {
            EnergySource::Mixed => ReceiptMethod::Mixed,
            EnergySource::Counter => ReceiptMethod::Counter,
            _ => model.method(),
        };
        let resolution = model.resolution_seconds(self.longest_interval);
        // An average's lag at the window's first reading is as large as anywhere: its
        // running statistics start from nothing there.
        let first_edge = match model {
            ReadingModel::AveragedPower { .. } => run.last_edge_variance,
            _ => run.first_edge_variance.unwrap_or(0.0),
        };
        // A lagging figure (a counter's, an average's) is off by its lag times the
        // change of power from the first reading to the last (it counts that long of
        // the power from before the first reading, and leaves as much out at the end):
        // known from the readings, it widens the interval.
        let lag_seconds = model.lag_seconds();
        let last_power = self
            .last
            .and_then(|last| last.watts)
            .or(self.last_mean_watts);
        let lag_joules = match (self.first_power, last_power) {
            (Some(first), Some(last)) => lag_seconds * (last - first).abs(),
            _ => 0.0,
        };
        ErrorParts {
            variance: run.variance + first_edge + run.last_edge_variance + self.gap_variance,
            unseen_joules: self.unseen_joules,
            method: Some(method),
            unresolved: window_seconds < resolution,
            power_range: None,
            lag_joules,
        }
    }

    /// The parts of `scope`'s receipt on this meter, `duration` seconds long: the
    /// most it may have missed while not read, its method, and whether it resolves a
    /// window that short (the variance is the scope's own).
    fn scope_error_parts(&self, scope: &ScopeAccount, duration: f64) -> ErrorParts {
        let Some(model) = self.model else {
            return ErrorParts::default();
        };
        // Time neither read nor in a gap the meter knows of (before its first reading).
        let unknown = (duration - scope.covered_seconds(self.number) - scope.gap_seconds).max(0.0);
        let resolution = model.resolution_seconds(self.longest_interval);
        let unresolved = duration < resolution;
        ErrorParts {
            variance: 0.0,
            unseen_joules: unknown * self.max_watts.unwrap_or(0.0),
            method: Some(model.method()),
            unresolved,
            lag_joules: 0.0,
            power_range: unresolved.then(|| {
                (
                    duration * self.min_watts.unwrap_or(0.0),
                    duration * self.max_watts.unwrap_or(0.0),
                )
            }),
        }
    }
}

/// Each counted domain's energy, priced, with the method its meters share (or
/// `mixed`).
fn domain_energies(
    domain_joules: &BTreeMap<EnergyDomain, (f64, Vec<EnergySource>)>,
    unattributed_kwh: impl Fn(&EnergyDomain) -> f64,
    pricing: &Pricing,
) -> Vec<DomainEnergy> {
    domain_joules
        .iter()
        .map(|(domain, (joules, methods))| {
            let energy_kwh = kwh(*joules);
            DomainEnergy {
                domain: *domain,
                energy_kwh,
                receipt: None,
                method: combined_method(methods),
                unattributed_kwh: unattributed_kwh(domain),
                cost: pricing.cost(energy_kwh),
                co2_grams: pricing.co2(energy_kwh),
            }
        })
        .collect()
}

/// The run's totals over the counted `domains`, and at the facility (times `pue`).
fn totals(domains: &[DomainEnergy], pue: f64, pricing: &Pricing) -> EnergyTotals {
    let domain_kwh = |domain: EnergyDomain| {
        domains
            .iter()
            .find(|d| d.domain == domain)
            .map(|d| d.energy_kwh)
    };
    let energy_kwh =
        (!domains.is_empty()).then(|| domains.iter().map(|d| d.energy_kwh).sum::<f64>());
    EnergyTotals {
        energy_kwh,
        receipt: None,
        gpu_energy_kwh: domain_kwh(EnergyDomain::Gpu),
        cpu_energy_kwh: domain_kwh(EnergyDomain::CpuPackage),
        dram_energy_kwh: domain_kwh(EnergyDomain::Dram),
        cost: energy_kwh.map(|kwh| pricing.cost(kwh)),
        co2_grams: energy_kwh.and_then(|kwh| pricing.co2(kwh)),
        pue,
        facility_energy_kwh: energy_kwh.map(|kwh| kwh * pue),
        facility_cost: energy_kwh.map(|kwh| kwh * pue * pricing.price),
    }
}

/// The carbon intensity in force, as the report states it.
fn carbon_factor(carbon: &CarbonIntensity) -> Factor {
    Factor {
        value: carbon.gco2e_per_kwh,
        unit: "gCO2e/kWh".into(),
        origin: carbon.origin.clone(),
        region: carbon.region.clone(),
    }
}

/// The method a domain's meters share, or `mixed` when they differ.
fn combined_method(methods: &[EnergySource]) -> EnergySource {
    match methods.first() {
        Some(first) if methods.iter().all(|m| m == first) => *first,
        Some(_) => EnergySource::Mixed,
        None => EnergySource::SparseTrapezoid,
    }
}

//! The concurrent-steps fixture: runs whose every per-step figure is known by hand, so
//! each layer that shows a step's energy (the report in every format, `compare`, the
//! span, the histograms, the `wattline.scope_energy` mark, the Python and Node report
//! objects) can be held to a window *and* an attributed value that differ.
//!
//! The schedules and the hand-worked figures live in
//! `tests/fixtures/concurrent_steps/expected.json` (each figure with its arithmetic),
//! which the Python and Node suites read too; the event files beside it are these
//! records, written by [`write_fixture_files`]. [`closed_form`] is a second, plain
//! statement of the attribution rule (constant power, a sweep over the boundaries),
//! checked against the hand figures and then used where a schedule's times come from
//! a live run.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_model::energy::{
    DevicePower, EnergyRecord, Nanos, PowerRecord, ProcessShares, RaplZoneReading, ShareBasis,
};

/// Joules in a kWh.
pub const JOULES_PER_KWH: f64 = 3.6e6;

/// The fixture folder.
pub fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/concurrent_steps")
}

/// Everything `expected.json` holds.
#[derive(Debug, Clone, Deserialize)]
pub struct Fixture {
    /// GPU power, W, constant over the run.
    pub gpu_watts: f64,
    /// CPU package power, W, from the start until `cpu_until_seconds`; 0 after.
    pub cpu_watts: f64,
    pub cpu_until_seconds: f64,
    /// Readings every second from 0 to this, s.
    pub seconds: u32,
    pub cost_per_kwh: f64,
    pub currency: String,
    pub gco2e_per_kwh: f64,
    /// The runs, by name (`base`, `reweighted`, `base_folded`).
    pub runs: Vec<FixtureRun>,
}

/// One run of the fixture: its steps, its process shares, and its figures by hand.
#[derive(Debug, Clone, Deserialize)]
pub struct FixtureRun {
    pub name: String,
    /// The event file's name in the fixture folder.
    pub file: String,
    /// `scopes_in_detail` of its energy settings.
    pub scopes_in_detail: usize,
    /// The GPU readings' process shares (`[pid, share]`), or none read.
    pub shares: Option<Vec<(u32, f64)>>,
    pub steps: Vec<Step>,
    /// Per domain, the energy no scope held, J.
    pub unattributed_gpu_joules: f64,
    pub unattributed_cpu_joules: f64,
}

/// One step of a schedule, with its figures worked by hand.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    pub name: String,
    pub process: u32,
    pub weight: f64,
    pub from: f64,
    pub to: f64,
    pub parent: Option<String>,
    /// In the report's detail (`false`: folded into its name's aggregate).
    pub detailed: bool,
    pub window_gpu_joules: f64,
    pub window_cpu_joules: f64,
    pub attributed_gpu_joules: f64,
    pub attributed_cpu_joules: f64,
    /// How the attributed figures were worked out, in words.
    #[serde(default)]
    pub derivation: String,
}

impl Step {
    /// Window energy over every domain, J.
    pub fn window_joules(&self) -> f64 {
        self.window_gpu_joules + self.window_cpu_joules
    }

    /// Attributed energy over every domain, J.
    pub fn attributed_joules(&self) -> f64 {
        self.attributed_gpu_joules + self.attributed_cpu_joules
    }

    pub fn seconds(&self) -> f64 {
        self.to - self.from
    }
}

impl Fixture {
    /// `expected.json`, read.
    pub fn load() -> Fixture {
        let path = folder().join("expected.json");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    }

    pub fn run(&self, name: &str) -> &FixtureRun {
        self.runs
            .iter()
            .find(|run| run.name == name)
            .unwrap_or_else(|| panic!("no run {name} in the fixture"))
    }

    /// Cost of `joules`, in the fixture's currency.
    pub fn cost(&self, joules: f64) -> f64 {
        joules / JOULES_PER_KWH * self.cost_per_kwh
    }

    /// gCO2e of `joules`.
    pub fn co2_grams(&self, joules: f64) -> f64 {
        joules / JOULES_PER_KWH * self.gco2e_per_kwh
    }

    /// CPU package power at `seconds`.
    fn cpu_watts_at(&self, seconds: f64) -> f64 {
        if seconds < self.cpu_until_seconds {
            self.cpu_watts
        } else {
            0.0
        }
    }

    /// The run's wall clock at its monotonic 0.
    pub fn epoch_wall() -> DateTime<Utc> {
        "2026-12-01T12:00:00Z".parse().unwrap()
    }

    /// The energy records of `run`, in the order the energy actor would book them:
    /// the opening records, then per second the readings and the boundaries at or
    /// before it, and the report at the end.
    pub fn records(&self, run: &FixtureRun) -> Vec<EnergyRecord> {
        let wall = |seconds: f64| {
            Self::epoch_wall() + chrono::Duration::nanoseconds(nanos(seconds) as i64)
        };
        let mut settings = EnergySettings::default();
        settings.config.cost_per_kwh = self.cost_per_kwh;
        settings.config.currency = self.currency.clone();
        settings.config.carbon_intensity = self.gco2e_per_kwh;
        settings.config.co2_tracking = true;
        settings.config.scopes_in_detail = run.scopes_in_detail;
        settings.cost_origin = FactorOrigin::Code;
        settings.carbon_intensity_origin = FactorOrigin::Code;
        settings.co2_tracking_origin = FactorOrigin::Code;
        let mut records = vec![
            EnergyRecord::Started {
                at: 0,
                wall: wall(0.0),
                settings: Box::new(settings),
            },
            EnergyRecord::MeasuringFrom {
                at: 0,
                wall: wall(0.0),
            },
        ];
        // Boundaries in time order; at a reading's instant the boundary comes first.
        let mut boundaries: Vec<(f64, EnergyRecord)> = Vec::new();
        for step in &run.steps {
            let uuid = step_uuid(run, &step.name);
            boundaries.push((
                step.from,
                EnergyRecord::ScopeStarted {
                    uuid,
                    name: step.name.as_str().into(),
                    at: nanos(step.from),
                    wall: wall(step.from),
                    parent: step.parent.as_deref().map(|parent| step_uuid(run, parent)),
                    process_id: Some(step.process),
                    weight: Some(step.weight),
                    traceparent: None,
                },
            ));
            boundaries.push((
                step.to,
                EnergyRecord::ScopeEnded {
                    uuid,
                    at: nanos(step.to),
                    wall: wall(step.to),
                    remote_call: None,
                },
            ));
        }
        boundaries.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut pending = boundaries.into_iter().peekable();
        let mut cpu_joules = 0.0;
        for second in 0..=self.seconds {
            let at = f64::from(second);
            while let Some((_, record)) = pending.next_if(|(t, _)| *t <= at) {
                records.push(record);
            }
            if second > 0 {
                cpu_joules += self.cpu_watts_at(at - 1.0);
            }
            records.push(self.gpu_reading(run, at));
            records.push(EnergyRecord::Rapl {
                at: nanos(at),
                zones: vec![RaplZoneReading {
                    zone: "intel-rapl:0".into(),
                    name: "package-0".into(),
                    // An arbitrary start: only differences count.
                    energy_microjoules: 5_000_000_000 + (cpu_joules * 1e6).round() as u64,
                    max_energy_range_microjoules: Some(262_143_328_850),
                }],
            });
        }
        let end = f64::from(self.seconds);
        records.extend(pending.map(|(_, record)| record));
        records.push(EnergyRecord::Report {
            at: nanos(end),
            wall: wall(end),
        });
        records
    }

    fn gpu_reading(&self, run: &FixtureRun, at: f64) -> EnergyRecord {
        EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: nanos(at),
            devices: Some(vec![DevicePower {
                power_field: None,
                id: "GPU-fixture-0".into(),
                name: Some("Fixture GPU".into()),
                watts: Some(self.gpu_watts),
                counter_millijoules: None,
                shares: run.shares.as_ref().map(|shares| ProcessShares {
                    basis: Some(ShareBasis::Memory),
                    processes: shares.iter().copied().collect(),
                }),
                mig_enabled: None,
                at: None,
            }]),
            power_field: Some("nvmlDeviceGetPowerUsage".into()),
        })
    }
}

/// Seconds as the account's nanoseconds.
fn nanos(seconds: f64) -> Nanos {
    (seconds * 1e9).round() as Nanos
}

/// A stable UUID per step of a run, so the event files do not change when rewritten.
pub fn step_uuid(run: &FixtureRun, name: &str) -> uuid::Uuid {
    let index = run
        .steps
        .iter()
        .position(|step| step.name == name)
        .unwrap_or_else(|| panic!("no step {name} in run {}", run.name));
    uuid::Uuid::from_u128(0x0193_0000_0000_7000_8000_0000_0000_0000 + index as u128 + 1)
}

/// Writes each run's event file into the fixture folder.
pub fn write_fixture_files(fixture: &Fixture) {
    for run in &fixture.runs {
        std::fs::write(folder().join(&run.file), atof_text(fixture, run)).unwrap();
    }
}

/// The event file of `run`: one ATOF energy mark per record.
pub fn atof_text(fixture: &Fixture, run: &FixtureRun) -> String {
    let stamped = Fixture::epoch_wall();
    fixture
        .records(run)
        .iter()
        .map(|record| {
            let line =
                wattline_exporters::atof::render_energy_record(stamped, None, record).unwrap();
            format!("{line}\n")
        })
        .collect()
}

/// One step of a schedule as [`closed_form`] takes it: when it was live, its weight,
/// its parent (by position) and its process.
#[derive(Debug, Clone, Copy)]
pub struct Live {
    pub from: f64,
    pub to: f64,
    pub weight: f64,
    pub parent: Option<usize>,
    pub process: u32,
}

/// Per step, (window, attributed) joules at a constant `watts` over `[start, end]`:
/// the rule of `docs/src/energy.md`, written out plainly. Between any two boundaries
/// the live set is fixed; the innermost live steps (no live child) receive, by process
/// share when `shares` are given (each process's share to its own innermost steps),
/// else the whole; among receivers by weight; each parent also counts what its live
/// descendants received.
pub fn closed_form(
    steps: &[Live],
    watts: f64,
    shares: Option<&[(u32, f64)]>,
    start: f64,
    end: f64,
) -> Vec<(f64, f64)> {
    let mut cuts: Vec<f64> = steps
        .iter()
        .flat_map(|step| [step.from, step.to])
        .chain([start, end])
        .map(|t| t.clamp(start, end))
        .collect();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let mut figures: Vec<(f64, f64)> = steps
        .iter()
        .map(|step| {
            (
                watts * (step.to.min(end) - step.from.max(start)).max(0.0),
                0.0,
            )
        })
        .collect();
    for stretch in cuts.windows(2) {
        let (a, b) = (stretch[0], stretch[1]);
        let energy = watts * (b - a);
        let live = |i: usize| steps[i].from <= a && steps[i].to >= b;
        let innermost: Vec<usize> = (0..steps.len())
            .filter(|&i| {
                live(i) && !(0..steps.len()).any(|j| live(j) && steps[j].parent == Some(i))
            })
            .collect();
        let portions: Vec<(Option<u32>, f64)> = match shares {
            None => vec![(None, energy)],
            Some(shares) => shares
                .iter()
                .map(|&(process, share)| (Some(process), energy * share))
                .collect(),
        };
        for (process, amount) in portions {
            let receivers: Vec<usize> = innermost
                .iter()
                .copied()
                .filter(|&i| process.is_none_or(|p| steps[i].process == p))
                .collect();
            let total_weight: f64 = receivers.iter().map(|&i| steps[i].weight).sum();
            for &receiver in &receivers {
                let part = amount * steps[receiver].weight / total_weight;
                let mut next = Some(receiver);
                while let Some(step) = next {
                    figures[step].1 += part;
                    next = steps[step].parent.filter(|&parent| live(parent));
                }
            }
        }
    }
    figures
}

impl FixtureRun {
    /// The schedule as [`closed_form`] takes it.
    pub fn live_steps(&self) -> Vec<Live> {
        self.steps
            .iter()
            .map(|step| Live {
                from: step.from,
                to: step.to,
                weight: step.weight,
                parent: step
                    .parent
                    .as_ref()
                    .map(|parent| self.steps.iter().position(|s| &s.name == parent).unwrap()),
                process: step.process,
            })
            .collect()
    }

    pub fn step(&self, name: &str) -> &Step {
        self.steps
            .iter()
            .find(|step| step.name == name)
            .unwrap_or_else(|| panic!("no step {name} in run {}", self.name))
    }
}

/// Whether `actual` is `expected` to within 1e-9 of it (or 1e-12 absolute, for 0).
pub fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() <= 1e-9 * expected.abs().max(1e-3)
}

/// Asserts [`close`], naming `what`.
#[track_caller]
pub fn assert_close(what: &str, actual: f64, expected: f64) {
    assert!(
        close(actual, expected),
        "{what}: {actual} where the hand-worked figure is {expected}"
    );
}

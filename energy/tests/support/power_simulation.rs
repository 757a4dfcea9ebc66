//! A truth nobody can argue with: a GPU's power drawn at 1 ms resolution (idle,
//! steady load, ramps, short bursts, noise), read by stand-ins for the sources
//! wattline meets, each with the behaviour that decides its error: an energy counter
//! that moves every 100 ms in whole millijoules; instant power with jitter; a 1 s
//! average; `nvidia-smi`'s mean of 25 ms windows; failed reads. Random Agent scope
//! schedules ride on top. The records go through the real energy account, and each
//! figure is compared with the trace's own energy.

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_model::energy::{DevicePower, EnergyRecord, Nanos, PowerRecord};

/// The device every stand-in reads.
pub const DEVICE: &str = "GPU-simulated";

/// A small, seedable generator (splitmix64): the same seed, the same case.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(1e-300);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Log-uniform in [low, high].
    pub fn log_uniform(&mut self, low: f64, high: f64) -> f64 {
        (low.ln() + (high.ln() - low.ln()) * self.unit()).exp()
    }
}

/// The true power, one value per millisecond, and its running energy.
pub struct TruePower {
    /// W during each millisecond.
    watts: Vec<f64>,
    /// J from 0 to the start of each millisecond (one more entry than `watts`).
    cumulative: Vec<f64>,
}

impl TruePower {
    /// `seconds` of a GPU's power: idle stretches, steady loads at random levels,
    /// ramps between them, short bursts, and a little noise. How bursty and noisy is
    /// set so that the trapezoid of instant readings every 100 ms errs as it did on a
    /// real H200 against NVML's counter (−0.03% to +0.56% over 25–35 s stepped loads)
    /// for long steps, and more for short ones.
    pub fn generate(rng: &mut Rng, seconds: f64) -> Self {
        let total = (seconds * 1000.0).ceil() as usize;
        let idle = rng.uniform(55.0, 100.0);
        let mut watts = Vec::with_capacity(total);
        let mut level = idle;
        let noise = rng.uniform(0.0, 0.02);
        while watts.len() < total {
            let next = if rng.chance(0.3) {
                idle
            } else {
                rng.uniform(150.0, 700.0)
            };
            // A ramp (a clock or a batch size changing) or a step (a kernel starting).
            let ramp = if rng.chance(0.4) {
                rng.uniform(20.0, 800.0) as usize
            } else {
                0
            };
            for i in 0..ramp {
                watts.push(level + (next - level) * (i as f64 + 0.5) / ramp as f64);
            }
            level = next;
            let hold = rng.log_uniform(100.0, 8000.0) as usize;
            for _ in 0..hold {
                watts.push(level);
            }
        }
        watts.truncate(total);
        // Bursts: a few to tens of milliseconds, a fifth to three fifths above the
        // level around them.
        let bursts = (seconds * rng.uniform(0.0, 0.5)) as usize;
        for _ in 0..bursts {
            let length = rng.uniform(5.0, 30.0) as usize;
            let start = (rng.unit() * total.saturating_sub(length) as f64) as usize;
            let share = rng.uniform(0.2, 0.6);
            for w in &mut watts[start..(start + length).min(total)] {
                *w *= 1.0 + share;
            }
        }
        // Noise, correlated over about 10 ms as a board's regulators give it.
        let mut wander = 0.0;
        for w in &mut watts {
            wander = 0.9 * wander + 0.1 * rng.normal();
            *w = (*w * (1.0 + noise * wander * 3.0)).max(0.0);
        }
        let mut cumulative = Vec::with_capacity(total + 1);
        let mut sum = 0.0;
        cumulative.push(0.0);
        for w in &watts {
            sum += w / 1000.0;
            cumulative.push(sum);
        }
        TruePower { watts, cumulative }
    }

    pub fn seconds(&self) -> f64 {
        self.watts.len() as f64 / 1000.0
    }

    /// The power at `t` s.
    pub fn watts_at(&self, t: f64) -> f64 {
        let index = ((t * 1000.0) as usize).min(self.watts.len() - 1);
        self.watts[index]
    }

    /// J from 0 to `t` s (exact for the piecewise-constant trace).
    fn energy_to(&self, t: f64) -> f64 {
        let ms = (t * 1000.0).clamp(0.0, self.watts.len() as f64);
        let whole = ms.floor() as usize;
        let part = ms - whole as f64;
        let within = if whole < self.watts.len() {
            self.watts[whole] / 1000.0 * part
        } else {
            0.0
        };
        self.cumulative[whole] + within
    }

    /// J between `a` and `b` s.
    pub fn energy(&self, a: f64, b: f64) -> f64 {
        self.energy_to(b) - self.energy_to(a)
    }
}

/// A source's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// NVML's energy counter (whole millijoules, moving every 100 ms) with instant
    /// power beside it.
    Counter,
    /// Instant power, with jitter.
    Instant,
    /// A trailing 1 s mean (`nvmlDeviceGetPowerUsage` on Ampere and newer).
    Averaged,
    /// `nvidia-smi`'s figure: the mean of a 25 ms window at each read.
    NvidiaSmi,
}

impl SourceKind {
    pub const ALL: [SourceKind; 4] = [
        SourceKind::Counter,
        SourceKind::Instant,
        SourceKind::Averaged,
        SourceKind::NvidiaSmi,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SourceKind::Counter => "counter",
            SourceKind::Instant => "instant power",
            SourceKind::Averaged => "averaged power",
            SourceKind::NvidiaSmi => "nvidia-smi",
        }
    }

    fn source(self) -> &'static str {
        match self {
            SourceKind::NvidiaSmi => "nvidia-smi",
            _ => "nvml",
        }
    }

    fn power_field(self) -> &'static str {
        match self {
            SourceKind::Counter | SourceKind::Instant => "NVML_FI_DEV_POWER_INSTANT",
            SourceKind::Averaged => "nvmlDeviceGetPowerUsage",
            SourceKind::NvidiaSmi => "power.draw.instant",
        }
    }
}

/// How the stand-in reads.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    pub kind: SourceKind,
    /// Seconds between reads.
    pub period: f64,
    /// The share of reads that fail.
    pub dropouts: f64,
}

/// One Agent scope of a schedule: its start and end, s.
#[derive(Debug, Clone, Copy)]
pub struct SimulatedScope {
    pub uuid: Uuid,
    pub start: f64,
    pub end: f64,
}

/// One case: the trace, the sampling, the scopes, and the records the account is fed.
pub struct Case {
    pub truth: TruePower,
    pub sampling: Sampling,
    pub scopes: Vec<SimulatedScope>,
    pub records: Vec<EnergyRecord>,
    /// The first and last successful reads, s: the device's measured window.
    pub first_read: f64,
    pub last_read: f64,
}

fn nanos(seconds: f64) -> Nanos {
    (seconds * 1e9).round() as Nanos
}

fn wall(epoch: DateTime<Utc>, seconds: f64) -> DateTime<Utc> {
    epoch + chrono::Duration::nanoseconds(nanos(seconds) as i64)
}

impl Case {
    /// A random case of source `kind`, from `seed`.
    pub fn generate(seed: u64, kind: SourceKind, epoch: DateTime<Utc>) -> Case {
        let mut rng = Rng::new(seed);
        let seconds = rng.uniform(4.0, 20.0);
        let truth = TruePower::generate(&mut rng, seconds);
        let sampling = Sampling {
            kind,
            period: 0.1,
            dropouts: if rng.chance(0.5) {
                0.0
            } else {
                rng.uniform(0.01, 0.05)
            },
        };
        let scopes = schedule(&mut rng, truth.seconds());
        let (reads, first_read, last_read) = reads(&mut rng, &truth, sampling);
        let mut timed: Vec<(f64, u8, EnergyRecord)> = reads
            .into_iter()
            .map(|(t, record)| (t, 1, EnergyRecord::Power(record)))
            .collect();
        for (index, scope) in scopes.iter().enumerate() {
            timed.push((
                scope.start,
                0,
                EnergyRecord::ScopeStarted {
                    uuid: scope.uuid,
                    name: format!("step {index}").into(),
                    at: nanos(scope.start),
                    wall: wall(epoch, scope.start),
                    parent: None,
                    process_id: None,
                    weight: None,
                    traceparent: None,
                },
            ));
            timed.push((
                scope.end,
                0,
                EnergyRecord::ScopeEnded {
                    uuid: scope.uuid,
                    at: nanos(scope.end),
                    wall: wall(epoch, scope.end),
                    remote_call: None,
                },
            ));
        }
        timed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let records = timed.into_iter().map(|(_, _, record)| record).collect();
        Case {
            truth,
            sampling,
            scopes,
            records,
            first_read,
            last_read,
        }
    }
}

/// One to six scopes, 20 ms to 8 s long (log-uniform), anywhere inside the trace.
fn schedule(rng: &mut Rng, seconds: f64) -> Vec<SimulatedScope> {
    let count = 1 + (rng.unit() * 6.0) as usize;
    (0..count)
        .map(|_| {
            let length = rng.log_uniform(0.02, 8.0).min(seconds - 1.2);
            let start = rng.uniform(0.5, seconds - 0.6 - length);
            SimulatedScope {
                uuid: Uuid::from_u64_pair(rng.next_u64(), rng.next_u64()),
                start,
                end: start + length,
            }
        })
        .collect()
}

/// Every read of the stand-in over the trace: its time and record; the first and the
/// last successful read's times.
fn reads(
    rng: &mut Rng,
    truth: &TruePower,
    sampling: Sampling,
) -> (Vec<(f64, PowerRecord)>, f64, f64) {
    // The counter moves at its own instants, a phase unknown to the reader.
    let counter_phase = rng.uniform(0.0, 0.1);
    let jitter = rng.uniform(0.002, 0.015);
    let mut out = Vec::new();
    let (mut first, mut last) = (f64::NAN, f64::NAN);
    let mut t = rng.uniform(0.01, sampling.period);
    let end = truth.seconds() - 0.01;
    while t < end {
        let record = if rng.chance(sampling.dropouts) {
            None
        } else {
            let watts = match sampling.kind {
                SourceKind::Counter | SourceKind::Instant => {
                    truth.watts_at(t) * (1.0 + jitter * rng.normal())
                }
                SourceKind::Averaged => truth.energy((t - 1.0).max(0.0), t) / t.min(1.0),
                SourceKind::NvidiaSmi => truth.energy((t - 0.025).max(0.0), t) / t.min(0.025),
            };
            let counter_millijoules = (sampling.kind == SourceKind::Counter).then(|| {
                let updated = ((t - counter_phase) / 0.1).floor() * 0.1 + counter_phase;
                (truth.energy(0.0, updated.max(0.0)) * 1000.0).floor() as u64
            });
            if first.is_nan() {
                first = t;
            }
            last = t;
            Some(vec![DevicePower {
                id: DEVICE.into(),
                name: Some("Simulated GPU".into()),
                watts: Some(watts.max(0.0)),
                counter_millijoules,
                shares: None,
                mig_enabled: None,
                at: None,
                power_field: Some(sampling.kind.power_field().into()),
            }])
        };
        out.push((
            t,
            PowerRecord {
                source: sampling.kind.source().into(),
                at: nanos(t),
                devices: record,
                power_field: None,
            },
        ));
        // A reader's period wanders by a few milliseconds.
        t += sampling.period + rng.uniform(-0.003, 0.003);
    }
    (out, first, last)
}

//! Power that moves, for the energy tests: a trace of two devices' power over
//! wall-clock time, written to a file that the stand-ins read (the fake NVML built with
//! `FAKE_POWER_TRACE`, and `fake-smi/power_trace.py`), and integrated here, by the
//! test, to give the energy a run must report. wattline's own figures never enter the
//! expected value.
//!
//! A trace is piecewise linear between its rows (two rows at one instant make a step)
//! and repeats every `period` seconds from its `epoch` (Unix seconds).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::StandIn;

/// Two devices' power, W, at `t` seconds into the period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub t: f64,
    pub watts: [f64; 2],
}

#[derive(Debug, Clone)]
pub struct PowerTrace {
    pub epoch: f64,
    pub period: f64,
    pub rows: Vec<Row>,
}

/// Unix time now, s.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A small deterministic generator (an LCG), so a trace is the same on every run.
struct Lcg(u64);

impl Lcg {
    /// A number in `[0, 1)`.
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    fn between(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next()
    }
}

impl PowerTrace {
    /// A triangle ramp of 7 s: device 0 climbs from 90 W to 650 W over 3.5 s and
    /// falls back; device 1 falls from 620 W to 110 W and climbs back.
    pub fn ramp() -> Self {
        Self::from_rows(
            7.0,
            vec![
                Row {
                    t: 0.0,
                    watts: [90.0, 620.0],
                },
                Row {
                    t: 3.5,
                    watts: [650.0, 110.0],
                },
                Row {
                    t: 7.0,
                    watts: [90.0, 620.0],
                },
            ],
        )
    }

    /// A square wave of 1.3 s, steps at an instant: device 0 at 640 W for 0.7 s, then
    /// 90 W; device 1 in the opposite phase, 75 W then 410 W.
    pub fn square() -> Self {
        Self::from_rows(1.3, square_rows(1.3, 0.7, [640.0, 75.0], [90.0, 410.0]))
    }

    /// A training loop's rhythm whose period divides the 5 s collection interval:
    /// device 0 at 700 W for 1.25 s, then 175 W; device 1 at 520 W, then 130 W. A
    /// sampler that only reads every 5 s lands on one phase every time.
    pub fn rhythm() -> Self {
        Self::from_rows(2.5, square_rows(2.5, 1.25, [700.0, 520.0], [175.0, 130.0]))
    }

    /// A recorded-looking trace of 41.3 s: plateaus of 0.08 to 2 s at levels between
    /// 60 and 700 W, stepping at an instant, with ±4% noise every 50 ms.
    pub fn irregular() -> Self {
        let period = 41.3;
        let mut random = Lcg(0x005e_ed0f_7a11);
        let mut rows = Vec::new();
        let mut t = 0.0;
        let mut level = [300.0, 450.0];
        while t < period {
            let until = (t + random.between(0.08, 2.0)).min(period);
            let mut at = t;
            while at < until {
                let noise = [random.between(-0.04, 0.04), random.between(-0.04, 0.04)];
                rows.push(Row {
                    t: at,
                    watts: [level[0] * (1.0 + noise[0]), level[1] * (1.0 + noise[1])],
                });
                at += 0.05;
            }
            rows.push(Row {
                t: until,
                watts: level,
            });
            t = until;
            level = [random.between(60.0, 700.0), random.between(60.0, 700.0)];
            if t < period {
                rows.push(Row { t, watts: level });
            }
        }
        // The period closes where it opened, so the repeat is continuous.
        let first = rows[0].watts;
        rows.push(Row {
            t: period,
            watts: first,
        });
        Self::from_rows(period, rows)
    }

    /// Constant power.
    pub fn constant(watts: [f64; 2]) -> Self {
        Self::from_rows(1.0, vec![Row { t: 0.0, watts }, Row { t: 1.0, watts }])
    }

    fn from_rows(period: f64, rows: Vec<Row>) -> Self {
        // The epoch a little before now, so every reading of the run lies after it.
        PowerTrace {
            epoch: unix_now() - 0.25,
            period,
            rows,
        }
    }

    /// The trace file the stand-ins read.
    pub fn write(&self, path: &Path) {
        let mut text = format!("epoch {:.6}\nperiod {}\n", self.epoch, self.period);
        for row in &self.rows {
            text.push_str(&format!(
                "{:.6} {:.6} {:.6}\n",
                row.t, row.watts[0], row.watts[1]
            ));
        }
        std::fs::write(path, text).unwrap();
    }

    /// Device `device`'s energy over one period, J.
    fn period_joules(&self, device: usize) -> f64 {
        self.rows
            .windows(2)
            .map(|pair| {
                (pair[0].watts[device] + pair[1].watts[device]) / 2.0 * (pair[1].t - pair[0].t)
            })
            .sum()
    }

    /// Energy of `device` from the epoch to Unix time `at`, J: whole periods, then the
    /// trapezoids of the rows before `at` and the part of the row it falls in (exact
    /// for a piecewise-linear trace).
    fn joules_since_epoch(&self, device: usize, at: f64) -> f64 {
        let since = at - self.epoch;
        let cycles = (since / self.period).floor();
        let x = since - cycles * self.period;
        let mut joules = cycles * self.period_joules(device);
        for pair in self.rows.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.t <= x {
                joules += (a.watts[device] + b.watts[device]) / 2.0 * (b.t - a.t);
            } else if a.t <= x {
                let power =
                    a.watts[device] + (b.watts[device] - a.watts[device]) * (x - a.t) / (b.t - a.t);
                joules += (a.watts[device] + power) / 2.0 * (x - a.t);
                break;
            }
        }
        joules
    }

    /// Device `device`'s energy between Unix times `from` and `to`, J.
    pub fn joules(&self, device: usize, from: f64, to: f64) -> f64 {
        self.joules_since_epoch(device, to) - self.joules_since_epoch(device, from)
    }

    /// The steps (two rows at one instant) of `device` between Unix times `from` and
    /// `to`: (Unix time, |change| W).
    pub fn steps(&self, device: usize, from: f64, to: f64) -> Vec<(f64, f64)> {
        let mut steps = Vec::new();
        let first_cycle = ((from - self.epoch) / self.period).floor() as i64;
        let last_cycle = ((to - self.epoch) / self.period).floor() as i64;
        for cycle in first_cycle..=last_cycle {
            let base = self.epoch + cycle as f64 * self.period;
            for pair in self.rows.windows(2) {
                let at = base + pair[0].t;
                if pair[0].t == pair[1].t && at > from && at < to {
                    steps.push((at, (pair[1].watts[device] - pair[0].watts[device]).abs()));
                }
            }
        }
        steps
    }

    /// How far a trapezoid over readings `interval` seconds apart can be off on the
    /// steps of `device` between `from` and `to`, J: a step's error is |change| ×
    /// (interval/2 − where in the interval it fell), uniform, so its standard deviation
    /// is |change| × interval / √12; independent steps add in quadrature; four
    /// standard deviations.
    pub fn step_sampling_error(&self, device: usize, from: f64, to: f64, interval: f64) -> f64 {
        let variance: f64 = self
            .steps(device, from, to)
            .iter()
            .map(|(_, change)| (change * interval).powi(2) / 12.0)
            .sum();
        4.0 * variance.sqrt()
    }

    /// How far the window's opening, somewhere in Unix times `from..=to`, can move the
    /// energy of a step that falls near it, J: the first reading after the command
    /// starts comes when the pipeline has spawned, the one before it from preparing, up
    /// to `gap` seconds apart; the interval between them is cut by linear
    /// interpolation, which can be off by up to half a step's size times the gap for
    /// each step within `gap` of the opening.
    pub fn start_edge_error(&self, device: usize, from: f64, to: f64, gap: f64) -> f64 {
        self.steps(device, from - gap, to + gap)
            .iter()
            .map(|(_, change)| change * gap / 2.0)
            .sum()
    }

    /// The trace's mean power of `device` over one period, W.
    pub fn mean_watts(&self, device: usize) -> f64 {
        self.period_joules(device) / self.period
    }
}

/// A square wave's rows: `high` for the first `high_for` seconds of each period, then
/// `low`, each step at an instant.
fn square_rows(period: f64, high_for: f64, high: [f64; 2], low: [f64; 2]) -> Vec<Row> {
    vec![
        Row {
            t: 0.0,
            watts: high,
        },
        Row {
            t: high_for,
            watts: high,
        },
        Row {
            t: high_for,
            watts: low,
        },
        Row {
            t: period,
            watts: low,
        },
        Row {
            t: period,
            watts: high,
        },
    ]
}

/// Where the run reads power from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// The fake NVML: power and the energy counter.
    Nvml,
    /// The fake NVML of a driver without the energy counter: power only.
    NvmlPowerOnly,
    /// The stand-in `nvidia-smi`.
    NvidiaSmi,
}

/// A GPU stand-in following `trace`, ready to measure a run.
pub struct Gpu {
    pub stand_in: StandIn,
    pub trace: PowerTrace,
    pub source: Source,
}

impl Gpu {
    pub fn new(source: Source, trace: PowerTrace) -> Self {
        let stand_in = StandIn::new();
        match source {
            Source::Nvml => {
                trace.write(&stand_in.path().join("trace"));
                super::build_fake_nvml(stand_in.path(), &["-DFAKE_POWER_TRACE"]);
            }
            Source::NvmlPowerOnly => {
                trace.write(&stand_in.path().join("trace"));
                super::build_fake_nvml(
                    stand_in.path(),
                    &["-DFAKE_POWER_TRACE", "-DFAKE_NO_ENERGY_SYMBOL"],
                );
            }
            Source::NvidiaSmi => {
                trace.write(&stand_in.path().join("trace"));
                stand_in.install_smi_fixture("power_trace.py");
            }
        }
        Gpu {
            stand_in,
            trace,
            source,
        }
    }

    /// Compute processes for the stand-in `nvidia-smi`: (device index, pid, MiB); the
    /// pid `parent` is the process that runs the stand-in (wattline).
    pub fn with_processes(self, processes: &[(usize, &str, u64)]) -> Self {
        let lines: String = processes
            .iter()
            .map(|(device, pid, mib)| format!("{device} {pid} {mib}\n"))
            .collect();
        std::fs::write(self.stand_in.path().join("apps"), lines).unwrap();
        self
    }

    pub fn command(&self) -> Command {
        let home = self.stand_in.path().join("home");
        let mut command = super::wattline(&home);
        let system = "/usr/local/bin:/usr/bin:/bin";
        match self.source {
            Source::Nvml | Source::NvmlPowerOnly => command
                .env("PATH", system)
                .env("LD_LIBRARY_PATH", self.stand_in.path())
                .env("FAKE_NVML_POWER_TRACE", self.stand_in.path().join("trace")),
            Source::NvidiaSmi => command
                .env(
                    "PATH",
                    format!("{}:{system}", self.stand_in.path().display()),
                )
                .env_remove("LD_LIBRARY_PATH"),
        };
        command
    }
}

pub struct Run {
    pub report: Value,
    /// The command's own start and end, Unix seconds.
    pub start: f64,
    pub end: f64,
    /// The longest the command can have lived before its first act (from its exec),
    /// s, as it says: its CPU time and run-queue delay since its fork; `None` where the
    /// kernel does not give the delay.
    pub before_first_act: Option<f64>,
    pub wattline_pid: u32,
}

/// Builds `tests/fixtures/stamp_edges.c` into `folder`: a command whose first and last
/// acts print the wall clock.
fn build_edge_stamper(folder: &Path) -> PathBuf {
    let program = folder.join("stamp-edges");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stamp_edges.c");
    let status = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(&program)
        .arg(source)
        .status()
        .expect("the system C compiler (cc) runs");
    assert!(status.success(), "stamp_edges.c did not compile");
    program
}

/// `wattline run --report json [extra] -- stamp-edges SECONDS`: the command stamps its
/// own first and last acts, and says how long it can have lived before the first
/// (`tests/fixtures/stamp_edges.c`).
pub fn run_measured(gpu: &Gpu, seconds: f64, extra: &[&str]) -> Run {
    let stamper = build_edge_stamper(gpu.stand_in.path());
    let mut command = gpu.command();
    command
        .args(["run", "--quiet", "--report", "json"])
        .args(extra);
    command.arg("--").arg(stamper).arg(seconds.to_string());
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let wattline_pid = child.id();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "wattline run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut lines = stdout.splitn(4, '\n');
    let start = lines.next().unwrap().trim().parse::<f64>().unwrap();
    let before_first_act = match lines.next().unwrap().trim() {
        "-" => None,
        nanos => Some(nanos.parse::<f64>().unwrap() / 1e9),
    };
    let end = lines.next().unwrap().trim().parse::<f64>().unwrap();
    let report: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert!(end - start >= seconds);
    Run {
        report,
        start,
        end,
        before_first_act,
        wattline_pid,
    }
}

//! Dense power sampling: each [`PowerProbe`] on a thread of its own (its reads block
//! on driver calls, so never on the async runtime), on a fixed grid of
//! `power_sample_millis`, feeding every reading to the energy stage. A grid that fell
//! behind skips to its next point rather than bursting.
//!
//! Each read is dithered around its grid point (up to a quarter period either way):
//! a workload whose rhythm is a multiple of the period would otherwise meet the grid
//! at the same phases every cycle, and the trapezoid's error at its power steps would
//! add up instead of cancelling.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::power::{PowerProbe, PowerSample, PowerSampleSink, SamplePart};

/// Dense power reading a source has started; dropping it stops it (threads end
/// after their current read, a streaming child is killed).
#[derive(Default)]
pub struct DensePower {
    parts: Vec<Box<dyn Send>>,
}

impl std::fmt::Debug for DensePower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DensePower")
            .field("parts", &self.parts.len())
            .finish()
    }
}

impl DensePower {
    /// Holds `part` (anything that stops its reading when dropped).
    pub fn holding(part: impl Send + 'static) -> Self {
        DensePower {
            parts: vec![Box::new(part)],
        }
    }

    /// Holds the parts of both.
    pub fn join(mut self, other: DensePower) -> Self {
        self.parts.extend(other.parts);
        self
    }

    /// Whether anything reads.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

/// The running probe threads; dropping it stops them.
#[derive(Debug)]
pub struct DenseSampling {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DenseSampling {
    /// Starts one thread per probe, each reading every `period` into `sink`.
    pub fn start(
        probes: Vec<Box<dyn PowerProbe>>,
        period: Duration,
        sink: Arc<dyn PowerSampleSink>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = probes
            .into_iter()
            .filter_map(|probe| {
                let (stop, sink) = (Arc::clone(&stop), Arc::clone(&sink));
                std::thread::Builder::new()
                    .name(format!("wattline-power-{}", probe.source()))
                    .spawn(move || run_probe(probe, period, &stop, sink.as_ref()))
                    .map_err(|error| tracing::warn!(%error, "no dense power thread"))
                    .ok()
            })
            .collect();
        DenseSampling { stop, threads }
    }

    /// How many probe threads run.
    pub fn probes(&self) -> usize {
        self.threads.len()
    }

    /// Stops every thread after its current read; does not wait.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        for thread in &self.threads {
            thread.thread().unpark();
        }
    }
}

impl Drop for DenseSampling {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run_probe(
    mut probe: Box<dyn PowerProbe>,
    period: Duration,
    stop: &AtomicBool,
    sink: &dyn PowerSampleSink,
) {
    let period = period.max(Duration::from_millis(1));
    let mut dither = Dither::seeded();
    let mut grid = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let asked = Instant::now();
        let sample = probe.read();
        let part = SamplePart {
            source: probe.source().to_owned(),
            at: sample.as_ref().map_or(asked, |sample| sample.taken_at),
            sample,
        };
        let mut reading = PowerSample::from_part(part, false);
        reading.dense = true;
        reading.power_field = Some(probe.power_field());
        sink.send(reading);
        grid += period;
        let now = Instant::now();
        if grid < now {
            // Behind (a slow driver call): back onto the grid, no burst.
            let behind = now.duration_since(grid).as_nanos() / period.as_nanos();
            grid += period * u32::try_from(behind + 1).unwrap_or(u32::MAX);
        }
        let next = dither.around(grid, period);
        // Parked so that stop() wakes it at once.
        while !stop.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::park_timeout(next - now);
        }
    }
}

/// A small xorshift generator: dithering needs spread, not cryptographic quality.
struct Dither(u64);

impl Dither {
    fn seeded() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9_7F4A_7C15, |elapsed| elapsed.as_nanos() as u64);
        Dither(seed | 1)
    }

    /// A point within a quarter `period` of `grid`, either side, spread evenly.
    fn around(&mut self, grid: Instant, period: Duration) -> Instant {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let unit = (self.0 >> 11) as f64 / (1_u64 << 53) as f64;
        let offset = period.mul_f64(0.5 * unit);
        // grid - period/4 + [0, period/2)
        (grid + offset).checked_sub(period / 4).unwrap_or(grid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dithered_points_stay_within_a_quarter_period_and_spread() {
        let mut dither = Dither::seeded();
        let (grid, period) = (
            Instant::now() + Duration::from_secs(1),
            Duration::from_millis(100),
        );
        let offsets: Vec<f64> = (0..2000)
            .map(|_| {
                let at = dither.around(grid, period);
                if at >= grid {
                    at.duration_since(grid).as_secs_f64()
                } else {
                    -grid.duration_since(at).as_secs_f64()
                }
            })
            .collect();
        assert!(offsets.iter().all(|o| o.abs() <= 0.025 + 1e-9));
        let mean = offsets.iter().sum::<f64>() / offsets.len() as f64;
        assert!(mean.abs() < 0.002, "centred on the grid: {mean}");
        assert!(offsets.iter().any(|o| *o < -0.02) && offsets.iter().any(|o| *o > 0.02));
    }
}

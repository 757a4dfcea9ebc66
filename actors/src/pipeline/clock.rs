//! The poll clock (fixed rate, never bursting: a tick that finds the previous poll
//! still running is missed and counted) and the energy stage's own sampling clock.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::registry::SamplerRegistry;
use crate::diagnostics::{PipelineCode, PipelineDiagnostics, SamplerCategory, SamplerFailure};
use crate::energy::actor::EnergyMessage;
use crate::merger::actor::MergerMessage;
use crate::platform::ReadErrorClass;
use crate::platform::os::rapl::read_rapl_zones;
use crate::readings::SamplingSeries;
use crate::samplers::actor::SamplerMessage;
use crate::samplers::gpu::GpuSourceStatus;

/// Ticks that were not run because the previous poll was still running or the clock
/// fell behind.
#[derive(Debug, Default)]
pub struct MissedTicks(pub AtomicU64);

/// Runs the poll clock until `cancel`: the first poll at once, then one every `period`
/// on a fixed grid.
pub fn spawn_poll_clock(
    merger: ActorRef<MergerMessage>,
    period: Duration,
    in_flight: Arc<AtomicBool>,
    missed: Arc<MissedTicks>,
    diagnostics: Option<PipelineDiagnostics>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval_at(Instant::now(), period);
        // Skip: after a stall the clock returns to its grid instead of bursting.
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut previous: Option<Instant> = None;
        loop {
            let scheduled = tokio::select! {
                _ = cancel.cancelled() => return,
                scheduled = interval.tick() => scheduled,
            };
            let mut skipped = previous.map_or(0, |previous| {
                let steps = scheduled.saturating_duration_since(previous).as_nanos()
                    / period.as_nanos().max(1);
                u64::try_from(steps.saturating_sub(1)).unwrap_or(u64::MAX)
            });
            previous = Some(scheduled);
            if in_flight.swap(true, Ordering::AcqRel) {
                skipped += 1;
            } else if merger
                .cast(MergerMessage::Tick {
                    series: SamplingSeries::Polling,
                    reply: None,
                })
                .is_err()
            {
                return;
            }
            if skipped > 0 {
                missed.0.fetch_add(skipped, Ordering::Relaxed);
                if let (Some(diagnostics), Some(count)) =
                    (&diagnostics, std::num::NonZeroU64::new(skipped))
                {
                    let code = PipelineCode::TickMissed;
                    let _ = diagnostics.record_counted(
                        code,
                        code.allowed_classes().first().copied(),
                        count,
                        "the previous poll was still running",
                    );
                }
            }
        }
    })
}

/// Reads RAPL for the energy stage and explains, once and loudly, a counter that is
/// there but unreadable.
#[derive(Debug)]
pub struct RaplReader {
    root: PathBuf,
    diagnostics: Option<PipelineDiagnostics>,
    explained: AtomicBool,
}

impl RaplReader {
    /// A reader under `root` recording into `diagnostics`.
    pub fn new(root: PathBuf, diagnostics: Option<PipelineDiagnostics>) -> Self {
        RaplReader {
            root,
            diagnostics,
            explained: AtomicBool::new(false),
        }
    }

    /// Reads every zone on a blocking worker and sends what was readable, and why the
    /// rest was not, to the energy actor.
    pub async fn read_into(&self, energy: &ActorRef<EnergyMessage>) {
        let root = self.root.clone();
        let Ok(((zones, errors), at, present)) = tokio::task::spawn_blocking(move || {
            // Stamped when read, not when the answer reaches the async side.
            let read = read_rapl_zones(&root);
            let at = std::time::Instant::now();
            (read, at, root.join("sys/class/powercap").is_dir())
        })
        .await
        else {
            return;
        };
        let unavailable = rapl_unavailable(&zones, &errors, present);
        self.record_problems(&errors, unavailable.as_deref());
        let _ = energy.cast(EnergyMessage::CpuStatus(unavailable));
        if !zones.is_empty() {
            let _ = energy.cast(EnergyMessage::Rapl(at, zones));
        }
    }

    /// Records each unreadable counter in diagnostics, and warns once per pipeline
    /// with the cause and fix; returns whether this call warned.
    fn record_problems(
        &self,
        errors: &[crate::platform::ReadError],
        unavailable: Option<&str>,
    ) -> bool {
        let Some(error) = errors.first() else {
            return false;
        };
        let warned = !self.explained.swap(true, Ordering::Relaxed);
        if warned {
            tracing::warn!(
                "CPU energy is not measured: {}",
                unavailable.unwrap_or("RAPL counters unreadable")
            );
        }
        if let Some(diagnostics) = &self.diagnostics {
            let failure = if error.class() == ReadErrorClass::PermissionDenied {
                SamplerFailure::PermissionDenied
            } else {
                SamplerFailure::ReadFailed
            };
            let _ = diagnostics.record_sampler_failure(
                SamplerCategory::Cpu,
                failure,
                &format!(
                    "RAPL counter {} unreadable: {error}",
                    error.path().display()
                ),
            );
        }
        warned
    }
}

/// Why CPU energy is not read, with the fix, when it is not.
fn rapl_unavailable(
    zones: &[crate::platform::os::rapl::RaplZoneReading],
    errors: &[crate::platform::ReadError],
    present: bool,
) -> Option<String> {
    if zones.iter().any(|zone| zone.name.starts_with("package")) {
        return None;
    }
    if let Some(error) = errors.first() {
        return Some(if error.class() == ReadErrorClass::PermissionDenied {
            format!(
                "the RAPL counter {} is readable by root only (Linux 5.10 and later): run as root, or grant read access to /sys/class/powercap/*/energy_uj",
                error.path().display()
            )
        } else {
            format!("the RAPL counter could not be read: {error}")
        });
    }
    Some(if present {
        "no RAPL package zone under /sys/class/powercap".to_owned()
    } else {
        "this machine exposes no RAPL powercap interface (/sys/class/powercap)".to_owned()
    })
}

/// Takes one energy sample now: a GPU power sample (forwarded by the GPU sampler to the
/// energy actor; fresh, measured after this call, when `fresh` is given) and the RAPL
/// counters. Returns the GPU source's status.
pub async fn sample_energy_now(
    registry: &SamplerRegistry,
    energy: &ActorRef<EnergyMessage>,
    rapl: &RaplReader,
    timeout: Duration,
    fresh: bool,
) -> Option<GpuSourceStatus> {
    let mut status = None;
    if let Some(gpu) = registry.get(SamplerCategory::Gpu) {
        let limit = fresh.then_some(timeout);
        // The call waits a little longer than the source may, so its answer is seen.
        let call_limit = timeout.saturating_mul(2) + Duration::from_secs(1);
        if let Ok(ractor::rpc::CallResult::Success(answer)) = gpu
            .call(
                |reply| SamplerMessage::SamplePower(limit, reply),
                Some(call_limit),
            )
            .await
        {
            status = answer;
        }
    }
    if let Some(status) = &status {
        let _ = energy.cast(EnergyMessage::GpuStatus(status.clone()));
    }
    rapl.read_into(energy).await;
    status
}

/// Runs the energy clock until `cancel`: a sample at once, then one every `period`.
pub fn spawn_energy_clock(
    registry: SamplerRegistry,
    energy: ActorRef<EnergyMessage>,
    rapl: Arc<RaplReader>,
    period: Duration,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval_at(Instant::now(), period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = interval.tick() => {}
            }
            sample_energy_now(&registry, &energy, &rapl, period, false).await;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ReadError;

    #[test]
    fn an_unreadable_rapl_counter_is_explained_with_its_cause_and_fix() {
        let denied = ReadError::PermissionDenied {
            path: "/sys/class/powercap/intel-rapl:0/energy_uj".into(),
        };
        let reason = rapl_unavailable(&[], &[denied], true).unwrap();
        assert!(reason.contains("intel-rapl:0/energy_uj"), "{reason}");
        assert!(reason.contains("run as root"), "{reason}");
        assert!(
            reason.contains("/sys/class/powercap/*/energy_uj"),
            "{reason}"
        );
        assert!(
            rapl_unavailable(&[], &[], false)
                .unwrap()
                .contains("no RAPL")
        );
    }

    #[test]
    fn an_unreadable_rapl_counter_is_recorded_every_time_and_warned_about_once() {
        let (context, components) = crate::pipeline::open_diagnostics(Some(Default::default()))
            .unwrap()
            .unwrap();
        let reader = RaplReader::new("/".into(), Some(components));
        let denied = || ReadError::PermissionDenied {
            path: "/sys/class/powercap/intel-rapl:0/energy_uj".into(),
        };
        assert!(!reader.record_problems(&[], None), "nothing to say");
        assert!(reader.record_problems(&[denied()], Some("why")));
        assert!(
            !reader.record_problems(&[denied()], Some("why")),
            "warned once"
        );
        let snapshot = context.snapshot().unwrap();
        let recorded: Vec<&str> = snapshot
            .recent_events
            .iter()
            .map(|event| event.code.as_str())
            .collect();
        assert_eq!(
            recorded,
            vec![
                "sampler.cpu.permission_denied",
                "sampler.cpu.permission_denied"
            ]
        );
        assert!(
            snapshot.recent_events[0]
                .detail
                .as_deref()
                .is_some_and(|detail| detail.contains("intel-rapl:0/energy_uj"))
        );
    }
}

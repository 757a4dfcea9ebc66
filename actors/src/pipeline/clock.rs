//! The poll clock (fixed rate, never bursting: a tick that finds the previous poll
//! still running is missed and counted) and the energy stage's own sampling clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::oneshot::{self, error::TryRecvError};

use crate::samplers::rapl::RaplReader;
use std::time::Duration;

use ractor::ActorRef;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::energy::input::{EnergyInbox, EnergyInput};
use crate::merger::actor::MergerMessage;
use crate::samplers::actor::{Outstanding, PowerRequest, SamplerMessage};
use crate::samplers::gpu::GpuSourceStatus;
use crate::samplers::registry::SamplerRegistry;
use wattline_diagnostics::{PipelineCode, PipelineDiagnostics};
use wattline_model::category::SamplerCategory;

/// Ticks that were not run because the previous poll was still running or the clock
/// fell behind.
#[derive(Debug, Default)]
pub struct MissedTicks(pub AtomicU64);

/// Runs the poll clock until `cancel`: the first poll at once, then one every `period`
/// on a fixed grid.
pub fn spawn_poll_clock(
    merger: ActorRef<MergerMessage>,
    period: Duration,
    missed: Arc<MissedTicks>,
    diagnostics: Option<PipelineDiagnostics>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval_at(Instant::now(), period);
        // Skip: after a stall the clock returns to its grid instead of bursting.
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut previous: Option<Instant> = None;
        // The poll in flight: its sender is dropped when the merger is done with it.
        let mut in_flight: Option<oneshot::Receiver<()>> = None;
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
            let still_running = in_flight
                .as_mut()
                .is_some_and(|done| matches!(done.try_recv(), Err(TryRecvError::Empty)));
            if still_running {
                skipped += 1;
            } else {
                let (done, finished) = oneshot::channel();
                if merger.cast(MergerMessage::Poll { done }).is_err() {
                    return;
                }
                in_flight = Some(finished);
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

/// Takes one energy sample now: a GPU power sample (forwarded by the GPU sampler to the
/// energy actor; fresh, measured after this call, when `fresh` is given) and the RAPL
/// counters. With `slot`, at most one such request is outstanding at a time (the
/// energy clock's); without, the request is always sent (the flush's last sample).
/// Returns the GPU source's status (`None` without a GPU sampler), or why the GPU
/// sample was not taken.
pub async fn sample_energy_now(
    registry: &SamplerRegistry,
    energy: &EnergyInbox,
    rapl: &RaplReader,
    timeout: Duration,
    fresh: bool,
    slot: Option<&Arc<AtomicBool>>,
) -> Result<Option<GpuSourceStatus>, String> {
    let outcome = match registry.get(SamplerCategory::Gpu) {
        None => Ok(None),
        Some(gpu) => {
            let outstanding = slot.map(Outstanding::claim);
            if matches!(outstanding, Some(None)) {
                Err("an earlier power request is still being read".to_owned())
            } else {
                // The call waits a little longer than the source may, so its answer
                // is seen; the sampler skips the request once nobody waits.
                let call_limit = timeout.saturating_mul(2) + Duration::from_secs(1);
                let request = PowerRequest {
                    fresh: fresh.then_some(timeout),
                    deadline: std::time::Instant::now() + call_limit,
                    outstanding: outstanding.flatten(),
                };
                match gpu
                    .call(
                        |reply| SamplerMessage::SamplePower(request, reply),
                        Some(call_limit),
                    )
                    .await
                {
                    Ok(ractor::rpc::CallResult::Success(answer)) => Ok(answer),
                    Ok(ractor::rpc::CallResult::Timeout) => Err(format!(
                        "the GPU sampler did not answer within {} ms",
                        call_limit.as_millis()
                    )),
                    Ok(ractor::rpc::CallResult::SenderError) | Err(_) => {
                        Err("the GPU sampler is restarting or stopped".to_owned())
                    }
                }
            }
        }
    };
    if let Ok(Some(status)) = &outcome {
        energy.send(EnergyInput::GpuStatus {
            status: status.clone(),
        });
    }
    if let Some(read) = rapl.read().await {
        energy.send(EnergyInput::CpuStatus {
            unavailable: read.unavailable,
        });
        if !read.zones.is_empty() {
            energy.send(EnergyInput::Rapl {
                at: read.at,
                zones: read.zones,
            });
        }
    }
    outcome
}

/// Runs the energy clock until `cancel`: a sample at once, then one every `period`.
pub fn spawn_energy_clock(
    registry: SamplerRegistry,
    energy: EnergyInbox,
    rapl: Arc<RaplReader>,
    period: Duration,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut interval = tokio::time::interval_at(Instant::now(), period);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let slot = Arc::new(AtomicBool::new(false));
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = interval.tick() => {}
            }
            if let Err(reason) =
                sample_energy_now(&registry, &energy, &rapl, period, false, Some(&slot)).await
            {
                tracing::debug!(%reason, "energy clock: no GPU power sample this period");
            }
        }
    })
}

//! A sampler actor: owns one category's sampler and answers sample requests, running
//! the OS reads on a blocking worker so the async runtime never waits on `/proc`.
//!
//! Work stays bounded when a source is slower than the period: every request carries
//! its deadline and one that expired while queued is skipped, not served late; and a
//! caller keeps at most one request of a kind outstanding per sampler
//! ([`Outstanding`]), so no backlog builds up behind a slow read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::samplers::{CategoryReading, CategorySampler, SampleRequest, SamplerOutput};

/// A sampler's one outstanding request of a kind: claimed before sending, released
/// when the sampler has answered or skipped it, or when the message is dropped with
/// the actor.
#[derive(Debug)]
pub struct Outstanding(Arc<AtomicBool>);

impl Outstanding {
    /// Claims `slot`; `None` while an earlier request holds it.
    pub fn claim(slot: &Arc<AtomicBool>) -> Option<Self> {
        (!slot.swap(true, Ordering::AcqRel)).then(|| Outstanding(Arc::clone(slot)))
    }
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A request for one tick's sample.
pub struct TickRequest {
    /// The tick.
    pub request: SampleRequest,
    /// After this instant nobody waits for the answer: the request is skipped.
    pub deadline: Instant,
    /// The caller's slot for this sampler, held until the request is done.
    #[expect(dead_code, reason = "held for its Drop, which frees the slot")]
    pub outstanding: Option<Outstanding>,
}

/// A request for the energy stage's power sample (GPU only).
pub struct PowerRequest {
    /// Measure afresh (waiting at most this long) instead of taking the source's
    /// latest answer.
    pub fresh: Option<Duration>,
    /// After this instant nobody waits for the answer: the request is skipped.
    pub deadline: Instant,
    /// The caller's slot for this sampler, held until the request is done; `None`
    /// for a request that must be served (the flush's last sample).
    #[expect(dead_code, reason = "held for its Drop, which frees the slot")]
    pub outstanding: Option<Outstanding>,
}

/// Messages a sampler actor answers.
pub enum SamplerMessage {
    /// Sample one tick and reply with the category's output.
    Sample(TickRequest, RpcReplyPort<SamplerOutput<CategoryReading>>),
    /// Take a power sample for the energy stage (GPU only); replies with the GPU
    /// source's status when done.
    SamplePower(
        PowerRequest,
        RpcReplyPort<Option<crate::samplers::gpu::GpuSourceStatus>>,
    ),
}

/// Whether a request can still be of use: before its deadline, with someone waiting.
fn still_wanted<T>(deadline: Instant, reply: &RpcReplyPort<T>) -> bool {
    Instant::now() < deadline && !reply.is_closed()
}

/// The actor. Its state is the sampler (taken out while a blocking read runs).
pub struct SamplerActor;

/// The sampler actor's state.
pub struct SamplerState {
    sampler: Option<Box<dyn CategorySampler>>,
}

/// Why a sampler actor stopped.
#[derive(Debug, thiserror::Error)]
pub enum SamplerActorError {
    /// The sampler panicked while reading; the supervisor restarts it.
    #[error("the {category} sampler panicked: {detail}")]
    Panicked {
        /// The category.
        category: &'static str,
        /// The panic's message, when it had one.
        detail: String,
    },
}

impl Actor for SamplerActor {
    type Msg = SamplerMessage;
    type State = SamplerState;
    type Arguments = Box<dyn CategorySampler>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        sampler: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SamplerState {
            sampler: Some(sampler),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some(mut sampler) = state.sampler.take() else {
            return Ok(());
        };
        let category = sampler.category().as_str();
        match message {
            SamplerMessage::Sample(tick, reply) => {
                if !still_wanted(tick.deadline, &reply) {
                    tracing::debug!(category, "expired tick request skipped");
                    state.sampler = Some(sampler);
                    return Ok(());
                }
                let request = tick.request;
                let joined = tokio::task::spawn_blocking(move || {
                    let output = sampler.sample_category(&request);
                    (sampler, output)
                })
                .await;
                match joined {
                    Ok((sampler, output)) => {
                        state.sampler = Some(sampler);
                        // The merger may have stopped waiting (deadline): nothing to do.
                        let _ = reply.send(output);
                    }
                    Err(error) => return Err(panicked(category, error)),
                }
            }
            SamplerMessage::SamplePower(power, reply) => {
                if !still_wanted(power.deadline, &reply) {
                    tracing::debug!(category, "expired power request skipped");
                    state.sampler = Some(sampler);
                    return Ok(());
                }
                let fresh = power.fresh;
                let joined = tokio::task::spawn_blocking(move || {
                    let status = sampler.sample_power(fresh);
                    (sampler, status)
                })
                .await;
                match joined {
                    Ok((sampler, status)) => {
                        state.sampler = Some(sampler);
                        let _ = reply.send(status);
                    }
                    Err(error) => return Err(panicked(category, error)),
                }
            }
        }
        Ok(())
    }
}

fn panicked(category: &'static str, error: tokio::task::JoinError) -> ActorProcessingErr {
    let detail = match error.try_into_panic() {
        Ok(payload) => crate::panics::panic_message(payload.as_ref()),
        Err(error) => error.to_string(),
    };
    Box::new(SamplerActorError::Panicked { category, detail })
}

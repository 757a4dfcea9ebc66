//! A sampler actor: owns one category's sampler and answers sample requests, running
//! the OS reads on a blocking worker so the async runtime never waits on `/proc`.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use crate::samplers::{CategoryReading, CategorySampler, SampleRequest, SamplerOutput};

/// Messages a sampler actor answers.
pub enum SamplerMessage {
    /// Sample one tick and reply with the category's output.
    Sample(SampleRequest, RpcReplyPort<SamplerOutput<CategoryReading>>),
    /// Take a power sample for the energy stage (GPU only), fresh (measured after the
    /// request, waiting at most the given time) when asked; replies with the GPU
    /// source's status when done.
    SamplePower(
        Option<std::time::Duration>,
        RpcReplyPort<Option<crate::samplers::gpu::GpuSourceStatus>>,
    ),
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
            SamplerMessage::Sample(request, reply) => {
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
            SamplerMessage::SamplePower(fresh, reply) => {
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
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into()),
        Err(error) => error.to_string(),
    };
    Box::new(SamplerActorError::Panicked { category, detail })
}

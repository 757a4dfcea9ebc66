//! The energy actor: receives every GPU power sample and RAPL reading in time order,
//! keeps the energy account, publishes the `gen_ai.*` values, and makes the report.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use uuid::Uuid;
use wattline_config::energy::EnergySettings;

use crate::energy::account::EnergyAccount;
use crate::energy::report::EnergyReport;
use crate::events::{EventSink, PipelineEvent};
use crate::platform::linux::rapl::RaplZoneReading;
use crate::samplers::gpu::{PowerSample, PowerSampleSink};

/// Messages the energy actor answers.
pub enum EnergyMessage {
    /// A GPU sample (or a failed one).
    Power(PowerSample),
    /// RAPL readings taken at an instant.
    Rapl(Instant, Vec<RaplZoneReading>),
    /// An Agent scope went live.
    ScopeStarted(Uuid, String, Instant, DateTime<Utc>),
    /// An Agent scope ended.
    ScopeEnded(Uuid, Instant, DateTime<Utc>),
    /// The GPU source in use.
    GpuSource(Option<String>),
    /// The report as of now.
    Report(RpcReplyPort<EnergyReport>),
}

/// What the energy actor starts with.
pub struct EnergyArguments {
    /// Factors and interval.
    pub settings: EnergySettings,
    /// Where `gen_ai.*` metric batches go.
    pub sink: Arc<dyn EventSink>,
}

/// The actor.
pub struct EnergyActor;

/// Its state.
pub struct EnergyState {
    account: EnergyAccount,
    sink: Arc<dyn EventSink>,
}

impl Actor for EnergyActor {
    type Msg = EnergyMessage;
    type State = EnergyState;
    type Arguments = EnergyArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        for variable in &arguments.settings.ignored_variables {
            tracing::info!(
                variable,
                "accepted, has no effect: wattline uses one carbon-intensity factor"
            );
        }
        Ok(EnergyState {
            account: EnergyAccount::new(arguments.settings, Utc::now()),
            sink: arguments.sink,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EnergyMessage::Power(power) => {
                let measurements = state.account.add_gpu_sample(power.sample.as_deref());
                if !measurements.is_empty() {
                    state.sink.send(PipelineEvent::Metrics {
                        timestamp: power.observed_at,
                        measurements,
                    });
                }
            }
            EnergyMessage::Rapl(at, zones) => state.account.add_rapl(at, &zones),
            EnergyMessage::ScopeStarted(uuid, name, at, wall) => {
                state.account.scope_started(uuid, &name, at, wall)
            }
            EnergyMessage::ScopeEnded(uuid, at, wall) => state.account.scope_ended(uuid, at, wall),
            EnergyMessage::GpuSource(name) => state.account.set_gpu_source(name),
            EnergyMessage::Report(reply) => {
                let _ = reply.send(state.account.report(Utc::now()));
            }
        }
        Ok(())
    }
}

/// Feeds GPU samples to the energy actor without blocking the sampler.
pub struct EnergyFeed(pub ActorRef<EnergyMessage>);

impl PowerSampleSink for EnergyFeed {
    fn send(&self, sample: PowerSample) {
        if let Err(error) = self.0.cast(EnergyMessage::Power(sample)) {
            tracing::debug!(%error, "energy actor gone; power sample dropped");
        }
    }
}

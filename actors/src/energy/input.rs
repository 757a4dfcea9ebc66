//! What the energy stage is told, by every producer (the GPU sampler's power sink, the
//! energy clock, the merger's scope boundaries), and the one handle they tell it
//! through.

use std::time::Instant;

use chrono::{DateTime, Utc};
use ractor::{ActorRef, RpcReplyPort};

use crate::samplers::gpu::GpuSourceStatus;
use crate::scope_boundary::ScopeBoundary;
use wattline_gpu::{PowerSample, PowerSampleSink};
use wattline_model::energy::RaplZoneReading;
use wattline_model::report::EnergyReport;

/// One thing the energy stage learns: a reading, a boundary or a source's status.
pub enum EnergyInput {
    /// A GPU backend's power sample (or a failed one).
    Power {
        /// The sample, with when it was taken and whether it is a dense reading.
        sample: PowerSample,
    },
    /// RAPL zone counters read at one instant.
    Rapl {
        /// When the counters were read.
        at: Instant,
        /// Each zone's counter.
        zones: Vec<RaplZoneReading>,
    },
    /// The measured window starts here.
    MeasuringFrom {
        /// The window's first instant.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
    },
    /// Agent scopes' starts and ends and the window's close, from the merger, in the
    /// order it took them (the order of their stamps).
    Boundaries(Vec<ScopeBoundary>),
    /// The GPU sources and why they read nothing, when they do not.
    GpuStatus {
        /// The source's status as the GPU sampler last saw it.
        status: GpuSourceStatus,
    },
    /// Why CPU energy is not read, when it is not.
    CpuStatus {
        /// The reason, in words; `None` while RAPL is read.
        unavailable: Option<String>,
    },
}

/// Messages the energy actor answers.
pub enum EnergyMessage {
    /// A reading, boundary or status from one of the producers (sent through an
    /// [`EnergyInbox`]).
    Input(EnergyInput),
    /// The report as of an instant (the flush call's), asked through the merger so
    /// that it comes after every boundary taken before it.
    Report {
        /// The report's instant.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
        /// The run's final report: every scope not yet settled is settled with its
        /// figures as this report has them.
        final_report: bool,
        /// Where the report goes.
        reply: RpcReplyPort<EnergyReport>,
    },
}

/// The energy actor's inbox: every producer sends its [`EnergyInput`] through one of
/// these, and asks for the report through it.
#[derive(Clone)]
pub struct EnergyInbox {
    actor: ActorRef<EnergyMessage>,
}

impl EnergyInbox {
    /// The inbox of the energy actor `actor`.
    pub fn new(actor: ActorRef<EnergyMessage>) -> Self {
        Self { actor }
    }

    /// Sends `input` without waiting. An actor already gone (the pipeline is shutting
    /// down) loses it: that is logged, not an error, since nothing could use it.
    pub fn send(&self, input: EnergyInput) {
        if let Err(error) = self.actor.cast(EnergyMessage::Input(input)) {
            tracing::debug!(%error, "energy actor gone; its input dropped");
        }
    }

    /// Asks for the report as of `at` (wall-clock `wall`), the run's final one when
    /// `final_report`, to be sent to `reply` (dropped, unanswered, when the actor is
    /// gone).
    pub fn report_to(
        &self,
        at: Instant,
        wall: DateTime<Utc>,
        final_report: bool,
        reply: RpcReplyPort<EnergyReport>,
    ) {
        let message = EnergyMessage::Report {
            at,
            wall,
            final_report,
            reply,
        };
        if let Err(error) = self.actor.cast(message) {
            tracing::debug!(%error, "energy actor gone; no report");
        }
    }

    /// The report as of `at` (wall-clock `wall`), the run's final one when
    /// `final_report`; `None` when the actor is gone. It has the boundaries sent to the
    /// actor before, not those still with the merger (the pipeline asks through the
    /// merger).
    #[cfg(test)]
    pub async fn report(
        &self,
        at: Instant,
        wall: DateTime<Utc>,
        final_report: bool,
    ) -> Option<EnergyReport> {
        let message = |reply| EnergyMessage::Report {
            at,
            wall,
            final_report,
            reply,
        };
        match self.actor.call(message, None).await {
            Ok(ractor::rpc::CallResult::Success(report)) => Some(report),
            _ => None,
        }
    }

    /// The actor behind the inbox, to watch its status and stop it.
    pub fn actor(&self) -> &ActorRef<EnergyMessage> {
        &self.actor
    }
}

/// The GPU sampler forwards its power samples here without blocking.
impl PowerSampleSink for EnergyInbox {
    fn send(&self, sample: PowerSample) {
        EnergyInbox::send(self, EnergyInput::Power { sample });
    }
}

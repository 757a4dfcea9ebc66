//! What the energy stage is told, by every producer (the GPU sampler's power sink, the
//! energy clock, the pipeline's scope calls), and the one handle they tell it through.

use std::time::Instant;

use chrono::{DateTime, Utc};
use ractor::rpc::CallResult;
use ractor::{ActorRef, RpcReplyPort};
use uuid::Uuid;

use crate::energy::report::EnergyReport;
use crate::platform::os::rapl::RaplZoneReading;
use crate::samplers::gpu::{GpuSourceStatus, PowerSample, PowerSampleSink};

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
    /// An Agent scope went live.
    ScopeStarted {
        /// The scope's identity.
        uuid: Uuid,
        /// The scope's name.
        name: String,
        /// The live scope it was opened inside.
        parent: Option<Uuid>,
        /// The process that opened it.
        process_id: Option<u32>,
        /// Its weight among the scopes live beside it.
        weight: Option<f64>,
        /// The caller's W3C `traceparent`, checked.
        traceparent: Option<String>,
        /// When it started.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
    },
    /// An Agent scope ended.
    ScopeEnded {
        /// The scope's identity.
        uuid: Uuid,
        /// When it ended.
        at: Instant,
        /// The same instant on the wall clock.
        wall: DateTime<Utc>,
        /// Its program exited with it open, and wattline ended it then.
        ended_at_program_exit: bool,
    },
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
    /// The report as of an instant (the flush call's).
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
pub struct EnergyInbox(ActorRef<EnergyMessage>);

impl EnergyInbox {
    /// The inbox of the energy actor `actor`.
    pub fn new(actor: ActorRef<EnergyMessage>) -> Self {
        Self(actor)
    }

    /// Sends `input` without waiting. An actor already gone (the pipeline is shutting
    /// down) loses it: that is logged, not an error, since nothing could use it.
    pub fn send(&self, input: EnergyInput) {
        if let Err(error) = self.0.cast(EnergyMessage::Input(input)) {
            tracing::debug!(%error, "energy actor gone; its input dropped");
        }
    }

    /// The report as of `at` (wall-clock `wall`), the run's final one when
    /// `final_report`; `None` when the actor is gone.
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
        match self.0.call(message, None).await {
            Ok(CallResult::Success(report)) => Some(report),
            _ => None,
        }
    }

    /// The actor behind the inbox, to watch its status and stop it.
    pub fn actor(&self) -> &ActorRef<EnergyMessage> {
        &self.0
    }
}

/// The GPU sampler forwards its power samples here without blocking.
impl PowerSampleSink for EnergyInbox {
    fn send(&self, sample: PowerSample) {
        EnergyInbox::send(self, EnergyInput::Power { sample });
    }
}

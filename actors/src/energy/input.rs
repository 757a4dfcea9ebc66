//! What the energy stage is told, by every producer (the GPU sampler's power sink, the
//! energy clock, the pipeline's scope calls), and the one handle they tell it through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime};

use chrono::{DateTime, Utc};
use ractor::rpc::CallResult;
use ractor::{ActorRef, RpcReplyPort};
use uuid::Uuid;

use crate::energy::report::EnergyReport;
use crate::platform::os::rapl::RaplZoneReading;
use crate::samplers::gpu::GpuSourceStatus;
use wattline_gpu::{PowerSample, PowerSampleSink};

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
    /// An Agent scope ended, outside the boundary queue (every scope still live when
    /// the pipeline ends them all; starts and ends from the API come by
    /// [`ScopeBoundary`](crate::scope_boundary::ScopeBoundary)).
    ScopeEnded {
        /// The scope's identity.
        uuid: Uuid,
        /// When it ended.
        at: Instant,
        /// The same instant on the wall clock.
        wall: SystemTime,
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
    /// Scope boundaries were queued ([`EnergyInbox::boundaries_queued`]), or the actor's
    /// own wake-up while their queue is held: the actor takes them, as it does before
    /// every message.
    BoundariesQueued,
    /// Answered once every message sent before it is handled: the pipeline asks it
    /// before any scope can start, so no boundary is booked ahead of the readings the
    /// pipeline sent at spawn (a boundary is taken before any message not yet handled).
    Ready(RpcReplyPort<()>),
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

    /// Wakes the actor for the scope boundaries pushed onto its reader of the boundary
    /// queue (the push said to: the first since it released the queue).
    pub fn boundaries_queued(&self) {
        if let Err(error) = self.actor.cast(EnergyMessage::BoundariesQueued) {
            tracing::debug!(%error, "energy actor gone; scope boundaries not taken");
        }
    }

    /// Returns once the actor has handled every message sent before this call (at
    /// once when it is gone).
    pub async fn ready(&self) {
        if let Err(error) = self.actor.call(EnergyMessage::Ready, None).await {
            tracing::debug!(%error, "energy actor gone before it was ready");
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
        match self.actor.call(message, None).await {
            Ok(CallResult::Success(report)) => Some(report),
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

/// Scope boundaries' requests for a power (and counter) reading, served by the
/// pipeline's boundary reader. Many scopes starting or ending at once share the one
/// reading asked for or being read: the others ask for nothing (a scope's boundary is
/// then clipped from the readings on either side of it). The energy actor asks when it
/// takes a batch of boundaries, so the API's callers never wake the reader.
#[derive(Debug, Default)]
pub struct BoundaryReadings {
    /// Set by the ask that wakes the reader; cleared when its reading is in.
    asked: AtomicBool,
    wake: tokio::sync::Notify,
}

impl BoundaryReadings {
    /// Asks for a reading now, unless one is already asked for or being read.
    pub fn ask(&self) {
        if !self.asked.load(Ordering::Relaxed) && !self.asked.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Waits until a reading is asked for (the reader's side).
    pub async fn asked(&self) {
        self.wake.notified().await;
    }

    /// The reading asked for is in: the next ask wakes the reader again.
    pub fn taken(&self) {
        self.asked.store(false, Ordering::Release);
    }
}

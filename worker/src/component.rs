//! [`DiagnosticComponent`]: the handle a worker records one responsibility's
//! observations through, registered once with its complete code list.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nemo_relay_worker_proto::v1::{
    DiagnosticComponentClose, DiagnosticObservation, DiagnosticObservationOutcome,
    DiagnosticObservationSeverity, diagnostic_submission,
};

use crate::delivery::Delivery;
use crate::error::DiagnosticDeliveryError;
use crate::negotiate::Limits;
use crate::queue::OperationKind;

/// A registered component; clones share it, and closing one closes them all. Code
/// ids are the one-based positions of the registration's code list. An inert
/// component (diagnostics unavailable, disabled or unsupported) skips every
/// factory and answers `Ok(())`.
#[derive(Debug, Clone)]
pub struct DiagnosticComponent {
    registered: Option<Arc<Registered>>,
}

#[derive(Debug)]
struct Registered {
    delivery: Arc<Delivery>,
    /// The host's handle for the component.
    handle: u32,
    code_count: u32,
    closed: AtomicBool,
}

impl DiagnosticComponent {
    pub(crate) fn inert() -> DiagnosticComponent {
        DiagnosticComponent { registered: None }
    }

    pub(crate) fn registered(
        delivery: Arc<Delivery>,
        handle: u32,
        code_count: u32,
    ) -> DiagnosticComponent {
        DiagnosticComponent {
            registered: Some(Arc::new(Registered {
                delivery,
                handle,
                code_count,
                closed: AtomicBool::new(false),
            })),
        }
    }

    /// Queues one observation built by `factory`; `Ok(())` means the local queue
    /// admitted it (or the component is inert), not that the host accepted it:
    /// host refusals show in the delivery statistics. The factory runs only when a
    /// queue slot is free. Its `component` field is set to this component's handle.
    ///
    /// Errors: `Full` (the factory was skipped), `Invalid` (count 0, a code outside
    /// `1..=codes`, an unknown outcome or severity value, a producer time before
    /// 1970, correlation over the negotiated bytes, or an encoding over the request
    /// limit), `Closed` (the component or delivery is closed).
    pub fn try_record_lazy<F>(&self, factory: F) -> Result<(), DiagnosticDeliveryError>
    where
        F: FnOnce() -> DiagnosticObservation,
    {
        let Some(registered) = &self.registered else {
            return Ok(());
        };
        if registered.closed.load(Ordering::Acquire) {
            return Err(DiagnosticDeliveryError::Closed);
        }
        let slot = registered.delivery.reserve()?;
        let mut observation = factory();
        observation.component = registered.handle;
        if !is_valid(
            &observation,
            registered.code_count,
            registered.delivery.limits(),
        ) {
            return Err(slot.invalid());
        }
        slot.fill(
            OperationKind::Record,
            diagnostic_submission::Operation::Record(observation),
            None,
        )
    }

    /// Closes the registration on the host, after everything recorded before it;
    /// later records are `Closed`. Closing frees no registration slot of the
    /// session. A second close does nothing.
    pub async fn close(&self) -> Result<(), DiagnosticDeliveryError> {
        let Some(registered) = &self.registered else {
            return Ok(());
        };
        let slot = registered.delivery.reserve()?;
        if registered.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        slot.call(
            OperationKind::CloseComponent,
            diagnostic_submission::Operation::CloseComponent(DiagnosticComponentClose {
                component: registered.handle,
            }),
        )
        .await
        .map(|_| ())
    }
}

/// What the host would refuse as malformed, checked before a slot is spent.
fn is_valid(observation: &DiagnosticObservation, code_count: u32, limits: &Limits) -> bool {
    let correlation = observation.session_id.as_deref().map_or(0, str::len)
        + observation.request_id.as_deref().map_or(0, str::len);
    observation.count > 0
        && (1..=code_count).contains(&observation.code)
        && DiagnosticObservationOutcome::try_from(observation.outcome).is_ok()
        && DiagnosticObservationSeverity::try_from(observation.severity).is_ok()
        && observation
            .observed_unix_micros
            .is_none_or(|micros| micros >= 0)
        && correlation <= limits.max_correlation_bytes
}

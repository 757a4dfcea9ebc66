//! The diagnostics facade a worker records through: [`WorkerDiagnostics`] (one per
//! activation), its [`DiagnosticComponent`]s, code helpers, delivery errors and
//! statistics, and the wire messages an observation is written in.

use std::sync::Arc;
use std::time::Duration;

use nemo_relay_worker_proto::v1::{
    DiagnosticComponentRegistration, DiagnosticReceiptStatus, diagnostic_submission,
};

pub use crate::codes::{builtin_code, extension_code};
pub use crate::component::DiagnosticComponent;
pub use crate::error::DiagnosticDeliveryError;
pub use crate::queue::DiagnosticDeliveryStats;
pub use nemo_relay_worker_proto::v1::{
    DiagnosticCodeDefinition, DiagnosticExtensionDefinition, DiagnosticObservation,
    DiagnosticObservationOutcome, DiagnosticObservationSeverity,
};
/// The built-in codes [`builtin_code`] declares: the host's own list, shared through
/// `wattline-diagnostics`.
pub use wattline_diagnostics::BuiltinDiagnosticCode;

use crate::codes::check_registration;
use crate::delivery::{Delivery, Submitter};
pub use crate::negotiate::DiagnosticAvailability;
use crate::negotiate::Session;
use crate::queue::OperationKind;

/// How long shutdown spends draining queued work.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(2);

/// One negotiated facade per activation; clones share it. When diagnostics are not
/// [`Available`](DiagnosticAvailability::Available) it is inert: components are
/// inert, recording skips its factory and returns `Ok(())`, flush and close return
/// `Ok(())`.
#[derive(Debug, Clone)]
pub struct WorkerDiagnostics {
    availability: DiagnosticAvailability,
    delivery: Option<Arc<Delivery>>,
}

impl WorkerDiagnostics {
    /// An inert facade.
    pub(crate) fn inert(availability: DiagnosticAvailability) -> WorkerDiagnostics {
        WorkerDiagnostics {
            availability,
            delivery: None,
        }
    }

    /// A facade delivering into `session` through `submitter`; starts the delivery
    /// task on the current Tokio runtime.
    pub(crate) fn deliver(session: Session, submitter: Arc<dyn Submitter>) -> WorkerDiagnostics {
        WorkerDiagnostics {
            availability: DiagnosticAvailability::Available,
            delivery: Some(Arc::new(Delivery::start(session, submitter))),
        }
    }

    /// The negotiated availability.
    pub fn availability(&self) -> DiagnosticAvailability {
        self.availability
    }

    /// The SDK-local delivery totals so far (zeros for an inert facade).
    pub fn delivery_stats(&self) -> DiagnosticDeliveryStats {
        self.delivery
            .as_ref()
            .map_or_else(DiagnosticDeliveryStats::default, |delivery| {
                delivery.stats()
            })
    }

    /// Registers one stable component `name` with its complete code list; a code's
    /// one-based position is the `code` its observations carry. Waits for the
    /// host's receipt. An inert facade, or a host with collection off, gives an
    /// inert component.
    ///
    /// Errors: `Invalid` for a declaration the host would refuse (blank name, 0 or
    /// more than 32 codes, an extension name over 32 bytes, a failure extension
    /// without a class …), `Full`, `Rejected` (for example the session's eight
    /// registrations are used), `NotConsumed`, `Uncertain`, `Closed`.
    pub async fn component(
        &self,
        name: &str,
        codes: Vec<DiagnosticCodeDefinition>,
    ) -> Result<DiagnosticComponent, DiagnosticDeliveryError> {
        let Some(delivery) = &self.delivery else {
            return Ok(DiagnosticComponent::inert());
        };
        let registration = DiagnosticComponentRegistration {
            local_name: name.to_owned(),
            codes,
        };
        if let Err(error) = check_registration(&registration, delivery.limits()) {
            delivery.count_lost();
            return Err(error);
        }
        let code_count = registration.codes.len() as u32;
        let receipt = delivery
            .call(
                OperationKind::Register,
                diagnostic_submission::Operation::RegisterComponent(registration),
            )
            .await?;
        if receipt.status == DiagnosticReceiptStatus::Disabled as i32 {
            return Ok(DiagnosticComponent::inert());
        }
        Ok(DiagnosticComponent::registered(
            Arc::clone(delivery),
            receipt.component,
            code_count,
        ))
    }

    /// Waits until everything recorded before the call has been answered by the
    /// host or dropped. A barrier, not a receipt: check
    /// [`delivery_stats`](Self::delivery_stats) for losses.
    ///
    /// Errors: `Uncertain` if any acceptance was uncertain (the session is then
    /// fenced) or the wait timed out; `Closed` once delivery stopped.
    pub async fn flush(&self, timeout: Duration) -> Result<(), DiagnosticDeliveryError> {
        match &self.delivery {
            Some(delivery) => delivery.flush(timeout).await,
            None => Ok(()),
        }
    }

    /// Stops admitting, flushes, closes the session on the host (its components
    /// close with it) and stops delivery, all within `timeout`; what is left then
    /// is dropped. Later operations are `Closed`; a second close does nothing.
    pub async fn close(&self, timeout: Duration) -> Result<(), DiagnosticDeliveryError> {
        match &self.delivery {
            Some(delivery) => delivery.close(timeout).await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use nemo_relay_worker_proto::v1::{DiagnosticSubmission, diagnostic_submission::Operation};

    use super::*;
    use crate::delivery::tests::{Scripted, session};

    fn lookup_codes() -> Vec<DiagnosticCodeDefinition> {
        vec![
            extension_code(DiagnosticExtensionDefinition {
                name: "lookup_failed".into(),
                description: "The lookup backend was unavailable".into(),
                outcome: DiagnosticObservationOutcome::Failure as i32,
                allowed_failure_classes: vec!["unavailable".into()],
            }),
            builtin_code(BuiltinDiagnosticCode::PluginTimeout),
        ]
    }

    fn failure(code: u32, count: u64) -> DiagnosticObservation {
        DiagnosticObservation {
            code,
            count,
            outcome: DiagnosticObservationOutcome::Failure as i32,
            severity: DiagnosticObservationSeverity::Error as i32,
            failure_class: Some("unavailable".into()),
            ..DiagnosticObservation::default()
        }
    }

    #[tokio::test]
    async fn an_inert_facade_skips_factories_and_answers_ok() {
        for availability in [
            DiagnosticAvailability::Disabled,
            DiagnosticAvailability::Unsupported,
            DiagnosticAvailability::Unavailable,
        ] {
            let diagnostics = WorkerDiagnostics::inert(availability);
            assert_eq!(diagnostics.availability(), availability);
            let component = diagnostics
                .component("example.lookup", lookup_codes())
                .await
                .unwrap();
            let mut called = false;
            assert_eq!(
                component.try_record_lazy(|| {
                    called = true;
                    failure(1, 1)
                }),
                Ok(())
            );
            assert!(!called, "{availability:?}: the factory is skipped");
            assert_eq!(component.close().await, Ok(()));
            assert_eq!(diagnostics.flush(Duration::ZERO).await, Ok(()));
            assert_eq!(diagnostics.close(Duration::ZERO).await, Ok(()));
            assert_eq!(
                diagnostics.delivery_stats(),
                DiagnosticDeliveryStats::default()
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_component_records_under_its_handle_and_checks_its_codes() {
        let host = Scripted::new(vec![Ok(DiagnosticReceiptStatus::Registered)]);
        let diagnostics = WorkerDiagnostics::deliver(session(8), host.clone());
        assert_eq!(
            diagnostics.availability(),
            DiagnosticAvailability::Available
        );
        let shown = format!("{diagnostics:?}");
        assert!(
            shown.contains("max_pending: 8") && !shown.contains("\"tok\""),
            "limits shown, token never: {shown}"
        );
        let component = diagnostics
            .component("example.lookup", lookup_codes())
            .await
            .unwrap();
        let mut wrong_component = failure(2, 3);
        wrong_component.component = 99;
        assert_eq!(component.try_record_lazy(|| wrong_component), Ok(()));
        // Invalid before sending: count 0, code 0, code past the declaration,
        // correlation over the negotiated bytes.
        let mut long_correlation = failure(1, 1);
        long_correlation.request_id = Some("r".repeat(1025));
        for invalid in [
            failure(1, 0),
            failure(0, 1),
            failure(3, 1),
            long_correlation,
        ] {
            assert_eq!(
                component.try_record_lazy(|| invalid),
                Err(DiagnosticDeliveryError::Invalid)
            );
        }
        // Over the request size less the header: invalid, not truncated.
        let mut huge = failure(1, 1);
        huge.detail = Some("x".repeat(16 * 1024));
        assert_eq!(
            component.try_record_lazy(|| huge),
            Err(DiagnosticDeliveryError::Invalid)
        );
        diagnostics.flush(Duration::from_secs(5)).await.unwrap();
        let sent: Vec<DiagnosticSubmission> = host.sent();
        assert_eq!(sent.len(), 2, "the registration and one record");
        match &sent[0].operation {
            Some(Operation::RegisterComponent(registration)) => {
                assert_eq!(registration.local_name, "example.lookup");
                assert_eq!(registration.codes, lookup_codes());
            }
            other => panic!("{other:?}"),
        }
        match &sent[1].operation {
            Some(Operation::Record(observation)) => {
                // The host's handle (1 in the script), not what the factory set.
                assert_eq!(observation.component, 1);
                assert_eq!((observation.code, observation.count), (2, 3));
            }
            other => panic!("{other:?}"),
        }
        let stats = diagnostics.delivery_stats();
        assert_eq!((stats.delivered, stats.dropped), (2, 5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_component_refuses_records_and_its_close_is_sent_once() {
        let host = Scripted::new(vec![
            Ok(DiagnosticReceiptStatus::Registered),
            Ok(DiagnosticReceiptStatus::Closed),
        ]);
        let diagnostics = WorkerDiagnostics::deliver(session(8), host.clone());
        let component = diagnostics
            .component("example.lookup", lookup_codes())
            .await
            .unwrap();
        let clone = component.clone();
        assert_eq!(component.close().await, Ok(()));
        assert_eq!(clone.close().await, Ok(()), "closing again does nothing");
        let mut called = false;
        assert_eq!(
            clone.try_record_lazy(|| {
                called = true;
                failure(1, 1)
            }),
            Err(DiagnosticDeliveryError::Closed)
        );
        assert!(!called);
        let closes = host
            .sent()
            .iter()
            .filter(|sent| matches!(sent.operation, Some(Operation::CloseComponent(_))))
            .count();
        assert_eq!(closes, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_skips_the_factory() {
        let host = Scripted::held(vec![Ok(DiagnosticReceiptStatus::Registered)]);
        let diagnostics = WorkerDiagnostics::deliver(session(1), host.clone());
        host.hold.add_permits(1);
        let component = diagnostics
            .component("example.lookup", lookup_codes())
            .await
            .unwrap();
        assert_eq!(component.try_record_lazy(|| failure(1, 1)), Ok(()));
        assert_eq!(component.try_record_lazy(|| failure(1, 2)), Ok(()));
        let mut called = false;
        assert_eq!(
            component.try_record_lazy(|| {
                called = true;
                failure(1, 3)
            }),
            Err(DiagnosticDeliveryError::Full)
        );
        assert!(!called, "the factory is skipped when the queue is full");
        assert_eq!(diagnostics.delivery_stats().dropped, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_registration_is_an_error_and_a_disabled_one_inert() {
        let host = Scripted::new(vec![
            Ok(DiagnosticReceiptStatus::Rejected),
            Ok(DiagnosticReceiptStatus::Disabled),
        ]);
        let diagnostics = WorkerDiagnostics::deliver(session(8), host.clone());
        assert_eq!(
            diagnostics
                .component("example.lookup", lookup_codes())
                .await
                .map(|_| ()),
            Err(DiagnosticDeliveryError::Rejected)
        );
        let inert = diagnostics
            .component("example.other", lookup_codes())
            .await
            .unwrap();
        let mut called = false;
        assert_eq!(
            inert.try_record_lazy(|| {
                called = true;
                failure(1, 1)
            }),
            Ok(())
        );
        assert!(!called);
        assert_eq!(
            diagnostics.component("", lookup_codes()).await.map(|_| ()),
            Err(DiagnosticDeliveryError::Invalid)
        );
        assert_eq!(host.sent().len(), 2, "the invalid one was never sent");
    }
}

//! Diagnostics: counts and storage, lifecycle, and concurrency.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::cell::Cell;
use std::collections::HashSet;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use wattline_diagnostics::{
    Availability, ComponentDeclaration, ComponentState, DiagnosticComponent, DiagnosticError,
    Diagnostics, DiagnosticsLimits, EvidenceDisposition, FailureClass, Observation,
    PipelineDiagnostics, RecordOutcome,
};

use diagnostics_support::*;

// ---------------------------------------------------------------- counts and storage

#[test]
fn counts_add_two_plus_three_is_five() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let first = receipt(
        component.try_record_lazy(|| Observation::failure(1, FailureClass::Unavailable, "a", n(2))),
    );
    let second = receipt(
        component.try_record_lazy(|| Observation::failure(1, FailureClass::NotFound, "b", n(3))),
    );
    assert_eq!(first.code_total, 2);
    assert_eq!(second.code_total, 5);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_failed"), 5);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 0);
    let code = snapshot
        .component("test.mixed")
        .and_then(|c| c.code("op_failed"))
        .expect("code");
    assert_eq!(
        code.last_observed_at,
        Some(snapshot.recent_events[1].recorded_at)
    );
    assert_eq!(snapshot.recent_events[0].count, 2);
    assert_eq!(snapshot.recent_events[1].count, 3);
}

#[test]
fn counts_saturate_instead_of_wrapping() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    receipt(component.try_record_lazy(|| Observation::success(2, "a", NonZeroU64::MAX)));
    let total = receipt(component.try_record_lazy(|| Observation::success(2, "b", n(1))));
    assert_eq!(total.code_total, u64::MAX);
}

#[test]
fn sequence_is_context_wide_in_accepted_order() {
    let diagnostics = context();
    let a = builtin_component(&diagnostics, "seq.a").expect("a");
    let b = builtin_component(&diagnostics, "seq.b").expect("b");
    let record = |c: &DiagnosticComponent| {
        receipt(c.try_record_lazy(|| {
            Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN)
        }))
        .sequence
    };
    let sequences = [record(&a), record(&b), record(&a), record(&b)];
    assert_eq!(sequences, [1, 2, 3, 4]);
    // A refused call does not consume a sequence.
    a.try_record_lazy(|| Observation::success(1, "x", NonZeroU64::MIN))
        .expect_err("mismatch");
    assert_eq!(record(&b), 5);
}

#[test]
fn disabled_context_skips_factories() {
    let diagnostics = Diagnostics::disabled();
    assert_eq!(diagnostics.availability(), Availability::Disabled);
    assert_eq!(diagnostics.capabilities(), None);
    let declaration_ran = Cell::new(false);
    let component = diagnostics
        .component_lazy(|| {
            declaration_ran.set(true);
            ComponentDeclaration {
                name: "disabled.c",
                codes: &[],
            }
        })
        .expect("disabled registration succeeds");
    assert!(!declaration_ran.get(), "declaration factory must not run");
    assert!(!component.is_enabled());
    assert_eq!(component.name(), None);

    let observation_ran = Cell::new(false);
    let outcome = component
        .try_record_lazy(|| {
            observation_ran.set(true);
            Observation::success(1, "x", NonZeroU64::MIN)
        })
        .expect("disabled record succeeds");
    assert_eq!(outcome, RecordOutcome::Disabled);
    assert_eq!(outcome.receipt(), None);
    assert!(!observation_ran.get(), "observation factory must not run");

    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(snapshot.availability, Availability::Disabled);
    assert!(snapshot.components.is_empty());
    assert_eq!(diagnostics.delivery_stats().accepted, 0);

    let enabled = context();
    assert_eq!(enabled.availability(), Availability::Enabled);
    assert_eq!(enabled.capabilities(), Some(DiagnosticsLimits::default()));
}

#[test]
fn ring_overflow_keeps_counters_exact() {
    let capacity = 16;
    let diagnostics = context_with(|l| l.history_capacity = capacity);
    let component = mixed_component(&diagnostics);
    let total = capacity * 10;
    for i in 0..total {
        let detail = format!("event {i}");
        receipt(
            component.try_record_lazy(|| Observation::success(2, detail.as_str(), NonZeroU64::MIN)),
        );
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "test.mixed", "op_completed"),
        total as u64
    );
    assert_eq!(snapshot.recent_events.len(), capacity);
    let newest = snapshot.recent_events.last().expect("newest");
    assert_eq!(
        newest.detail.as_deref(),
        Some(format!("event {}", total - 1).as_str())
    );
    assert_eq!(newest.sequence, total as u64);
    let oldest = snapshot.recent_events.first().expect("oldest");
    assert_eq!(oldest.sequence, (total - capacity + 1) as u64);
    assert_eq!(snapshot.history.capacity, capacity);
    assert_eq!(snapshot.history.retained, capacity);
    assert_eq!(snapshot.history.evicted, (total - capacity) as u64);
}

#[test]
fn zero_history_capacity_drops_evidence_but_counts() {
    let diagnostics = context_with(|l| l.history_capacity = 0);
    let component = mixed_component(&diagnostics);
    let accepted = receipt(component.try_record_lazy(|| Observation::success(2, "x", n(4))));
    assert_eq!(accepted.evidence, EvidenceDisposition::Dropped);
    assert_eq!(accepted.code_total, 4);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert!(snapshot.recent_events.is_empty());
    assert_eq!(snapshot.history.dropped, 1);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 4);
}

#[test]
fn detail_truncated_on_utf8_boundary() {
    let diagnostics = context_with(|l| l.max_detail_bytes = 5);
    let component = mixed_component(&diagnostics);
    // "ééé" is 6 bytes; the 5-byte cap falls inside the third 'é'.
    let cut = receipt(component.try_record_lazy(|| Observation::success(2, "ééé", n(1))));
    assert_eq!(cut.evidence, EvidenceDisposition::Truncated);
    let exact = receipt(component.try_record_lazy(|| Observation::success(2, "abcde", n(1))));
    assert_eq!(exact.evidence, EvidenceDisposition::Retained);
    let none = receipt(component.try_record_lazy(|| {
        let mut observation = Observation::success(2, "", n(1));
        observation.detail = None;
        observation
    }));
    assert_eq!(none.evidence, EvidenceDisposition::Retained);
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let details: Vec<Option<&str>> = snapshot
        .recent_events
        .iter()
        .map(|e| e.detail.as_deref())
        .collect();
    assert_eq!(details, vec![Some("éé"), Some("abcde"), None]);
    assert_eq!(snapshot.history.truncated, 1);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 3);
}

#[test]
fn correlation_ids_are_kept_whole() {
    let diagnostics = context_with(|l| l.max_detail_bytes = 1);
    let component = mixed_component(&diagnostics);
    let request = "request-0123456789";
    receipt(component.try_record_lazy(|| {
        Observation::success(2, "xy", n(1))
            .with_request_id(request)
            .with_session_id(String::from("session-owned"))
    }));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let event = &snapshot.recent_events[0];
    assert_eq!(event.correlation.request_id.as_deref(), Some(request));
    assert_eq!(
        event.correlation.session_id.as_deref(),
        Some("session-owned")
    );
    assert_eq!(event.detail.as_deref(), Some("x"));
}

// ---------------------------------------------------------------- lifecycle

#[test]
fn close_fences_every_clone_and_keeps_counters() {
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let clone = component.clone();
    receipt(clone.try_record_lazy(|| Observation::success(2, "before", n(2))));
    assert!(component.close());
    assert!(clone.is_closed());
    let ran = Cell::new(false);
    let error = clone
        .try_record_lazy(|| {
            ran.set(true);
            Observation::success(2, "after", n(1))
        })
        .expect_err("closed");
    assert_eq!(error, DiagnosticError::Closed);
    assert_eq!(error.reason(), "closed");
    assert!(!ran.get(), "factory must not run on a closed component");
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let row = snapshot.component("test.mixed").expect("row kept");
    assert_eq!(row.state, ComponentState::Closed);
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 2);
    assert_eq!(snapshot.usage.live_components, 0);
}

#[test]
fn last_drop_closes_and_frees_the_slot() {
    let diagnostics = context_with(|l| l.max_live_components = 1);
    let component = mixed_component(&diagnostics);
    receipt(component.try_record_lazy(|| Observation::success(2, "x", n(7))));
    let clone = component.clone();
    drop(component);
    assert!(!clone.is_closed(), "a remaining clone keeps it open");
    assert_eq!(
        builtin_component(&diagnostics, "drop.other")
            .expect_err("slot still held")
            .reason(),
        "component_limit"
    );
    drop(clone);
    let other = builtin_component(&diagnostics, "drop.other").expect("slot freed by last drop");
    assert!(!other.is_closed());
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        snapshot.component("test.mixed").map(|c| c.state),
        Some(ComponentState::Closed)
    );
    assert_eq!(occurrences(&snapshot, "test.mixed", "op_completed"), 7);
}

// ---------------------------------------------------------------- concurrency

#[test]
fn nested_call_from_a_factory_gets_busy() {
    let diagnostics = context();
    let outer = builtin_component(&diagnostics, "busy.outer").expect("outer");
    let inner = builtin_component(&diagnostics, "busy.inner").expect("inner");
    let mut nested: Option<Result<RecordOutcome, DiagnosticError>> = None;
    let mut nested_snapshot_busy = false;
    receipt(outer.try_record_lazy(|| {
        nested = Some(inner.try_record_lazy(|| {
            Observation::failure(1, FailureClass::Unavailable, "x", NonZeroU64::MIN)
        }));
        nested_snapshot_busy = diagnostics.snapshot() == Err(DiagnosticError::Busy);
        Observation::failure(1, FailureClass::Unavailable, "outer", NonZeroU64::MIN)
    }));
    let nested = nested.expect("nested call ran");
    assert_eq!(nested, Err(DiagnosticError::Busy));
    assert_eq!(DiagnosticError::Busy.reason(), "busy");
    assert!(nested_snapshot_busy);
    let stats = diagnostics.delivery_stats();
    assert_eq!((stats.accepted, stats.busy, stats.rejected), (1, 1, 0));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "busy.inner", "plugin.unavailable"),
        0
    );
    assert_eq!(
        occurrences(&snapshot, "busy.outer", "plugin.unavailable"),
        1
    );
}

#[test]
fn concurrent_recording_loses_no_count() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 1000;
    let diagnostics = context();
    let component = mixed_component(&diagnostics);
    let start = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let component = component.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                while !start.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let mut sequences = Vec::with_capacity(PER_THREAD);
                for i in 0..PER_THREAD {
                    loop {
                        let result = component.try_record_lazy(|| {
                            Observation::success(2, format!("t{t} i{i}"), NonZeroU64::MIN)
                        });
                        match result {
                            Ok(RecordOutcome::Recorded(r)) => {
                                sequences.push(r.sequence);
                                break;
                            }
                            Err(DiagnosticError::Busy) => std::thread::yield_now(),
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                }
                sequences
            })
        })
        .collect();
    start.store(true, Ordering::Release);
    let mut all = HashSet::new();
    for handle in handles {
        for sequence in handle.join().expect("thread") {
            assert!(all.insert(sequence), "sequence {sequence} repeated");
        }
    }
    let expected = (THREADS * PER_THREAD) as u64;
    assert_eq!(all.len() as u64, expected);
    assert_eq!(all.iter().copied().max(), Some(expected));
    let snapshot = diagnostics.snapshot().expect("snapshot");
    assert_eq!(
        occurrences(&snapshot, "test.mixed", "op_completed"),
        expected
    );
    assert_eq!(snapshot.delivery.accepted, expected);
    assert_eq!(snapshot.delivery.rejected, 0);
}

#[test]
fn handles_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Diagnostics>();
    assert_send_sync::<DiagnosticComponent>();
    assert_send_sync::<PipelineDiagnostics>();
}

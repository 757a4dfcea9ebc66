//! The native facade a plugin gets (`PluginDiagnostics`): admission budgets per
//! session, as the spec's table says ("Eight live registrations per session", "16
//! cumulative declarations per session", "16 KiB cumulative text per session"), its
//! availability and delivery totals, and a disabled facade that records nothing.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::num::NonZeroU64;

use wattline_diagnostics::{
    Availability, BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode, DiagnosticComponent,
    DiagnosticError, Observation, PluginDiagnostics, RecordOutcome,
};

use diagnostics_support::*;

fn component(
    session: &PluginDiagnostics,
    name: &str,
) -> Result<DiagnosticComponent, DiagnosticError> {
    session.component_lazy(|| ComponentDeclaration {
        name,
        codes: &[DiagnosticCode::Builtin(
            BuiltinDiagnosticCode::PluginUnavailable,
        )],
    })
}

#[test]
fn each_session_has_eight_live_slots_of_its_own() {
    let context = context();
    let first = PluginDiagnostics::new(context.clone(), false);
    let second = PluginDiagnostics::new(context.clone(), false);
    let _firsts: Vec<DiagnosticComponent> = (0..8)
        .map(|i| component(&first, &format!("first.c{i}")).expect("within the first's eight"))
        .collect();
    assert_eq!(
        component(&first, "first.c8").expect_err("the first's ninth"),
        DiagnosticError::ComponentLimit { limit: 8 }
    );
    // The other session's budget is untouched by the first's eight.
    let _seconds: Vec<DiagnosticComponent> = (0..8)
        .map(|i| component(&second, &format!("second.c{i}")).expect("within the second's eight"))
        .collect();
    assert_eq!(first.usage().unwrap().live_components, 8);
    assert_eq!(second.usage().unwrap().live_components, 8);
    assert_eq!(
        context.usage().unwrap().live_components,
        16,
        "the context's usage is every session's"
    );
    // A clone is the same session, not a new budget.
    assert_eq!(
        component(&second.clone(), "second.c8").expect_err("the second's ninth"),
        DiagnosticError::ComponentLimit { limit: 8 }
    );
}

#[test]
fn extension_and_text_budgets_are_per_session_and_cumulative() {
    let context = context();
    let first = PluginDiagnostics::new(context.clone(), false);
    let second = PluginDiagnostics::new(context, false);
    let sixteen = names("e", 16);
    let codes = success_extensions(&sixteen);
    first
        .component_lazy(|| ComponentDeclaration {
            name: "ext.first",
            codes: &codes,
        })
        .expect("sixteen extensions in the first session");
    let one = names("more", 1);
    let one_code = success_extensions(&one);
    assert_eq!(
        first
            .component_lazy(|| ComponentDeclaration {
                name: "ext.more",
                codes: &one_code,
            })
            .expect_err("the first's seventeenth")
            .reason(),
        "extension_limit"
    );
    second
        .component_lazy(|| ComponentDeclaration {
            name: "ext.second",
            codes: &codes,
        })
        .expect("the second session has its own sixteen");
    let text = |session: &PluginDiagnostics| session.usage().unwrap().registration_text_bytes;
    // The same codes under a name one byte longer; the refused one charged nothing.
    assert_eq!(text(&second), text(&first) + 1);
    assert!(text(&first) > "ext.first".len());
}

#[test]
fn the_facade_says_its_availability_and_counts_its_calls() {
    let session = PluginDiagnostics::new(context(), false);
    assert_eq!(session.availability(), Availability::Enabled);
    let lookup = component(&session, "lookup").unwrap();
    let recorded = lookup.try_record_lazy(|| {
        Observation::failure(
            1,
            wattline_diagnostics::FailureClass::Unavailable,
            "down",
            NonZeroU64::MIN,
        )
    });
    assert!(
        matches!(recorded, Ok(RecordOutcome::Recorded(_))),
        "{recorded:?}"
    );
    let refused =
        lookup.try_record_lazy(|| Observation::success(1, "wrong outcome", NonZeroU64::MIN));
    assert!(refused.is_err());
    let stats = session.delivery_stats();
    assert_eq!((stats.accepted, stats.rejected, stats.busy), (1, 1, 0));
}

#[test]
fn a_disabled_facade_records_nothing_and_never_calls_a_factory() {
    let session = PluginDiagnostics::disabled();
    assert_eq!(session.availability(), Availability::Disabled);
    let mut called = false;
    let component = session
        .component_lazy(|| {
            called = true;
            ComponentDeclaration {
                name: "never",
                codes: &[],
            }
        })
        .unwrap();
    assert!(!called);
    assert!(!component.is_enabled());
    assert_eq!(
        component.try_record_lazy(|| unreachable!("no factory call when disabled")),
        Ok(RecordOutcome::Disabled)
    );
    assert_eq!(session.delivery_stats().accepted, 0);
    assert_eq!(session.snapshot().unwrap_err().reason(), "read_not_granted");
}

//! The diagnostics specification's native plugin shape: its Rust native lookup example,
//! unchanged but for the crate path (`nemo_relay_plugin` → `wattline::plugin`, and the
//! `Result` types its page's rendering lost written out), registered through
//! `NativePlugin::register` with `&ctx.runtime()`, records into the pipeline's
//! diagnostics context.

use std::num::NonZeroU64;

use wattline::plugin::PluginRuntime;
use wattline::plugin::diagnostics::{
    ComponentDeclaration, DiagnosticCode, DiagnosticComponent, DiagnosticError, DiagnosticOutcome,
    Diagnostics, FailureClass, Observation, RecordOutcome,
};
use wattline::plugin::{NativePlugin, NativePluginContext, NativePluginError};

// ---- the specification's example, from here ----

/// Register the lookup vocabulary once for this activation.
pub fn register_lookup_diagnostics(
    runtime: &PluginRuntime,
) -> Result<(Diagnostics, DiagnosticComponent), DiagnosticError> {
    let diagnostics = runtime.diagnostics();
    let component = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "example.lookup",
        codes: &[
            DiagnosticCode::Extension {
                name: "lookup_failed",
                description: "The lookup backend was unavailable",
                outcome: DiagnosticOutcome::Failure,
                allowed_classes: &[FailureClass::Unavailable],
            },
            DiagnosticCode::Extension {
                name: "lookup_completed",
                description: "A lookup completed",
                outcome: DiagnosticOutcome::Success,
                allowed_classes: &[],
            },
        ],
    })?;
    Ok((diagnostics, component))
}

/// Record a lookup whose backend is known to be unavailable.
pub fn record_lookup_failure(
    component: &DiagnosticComponent,
    request_id: &str,
) -> Result<RecordOutcome, DiagnosticError> {
    component.try_record_lazy(|| {
        let mut observation = Observation::failure(
            1,
            FailureClass::Unavailable,
            "The lookup backend was unavailable",
            NonZeroU64::MIN,
        );
        observation.correlation.request_id = Some(request_id.into());
        observation
    })
}

/// Record an independently observed successful lookup.
pub fn record_lookup_success(
    component: &DiagnosticComponent,
    request_id: &str,
) -> Result<RecordOutcome, DiagnosticError> {
    component.try_record_lazy(|| {
        let mut observation = Observation::success(2, "A lookup completed", NonZeroU64::MIN);
        observation.correlation.request_id = Some(request_id.into());
        observation
    })
}

// ---- to here ----

/// A native plugin as the specification wires it: the helper called during
/// `register` with `&ctx.runtime()`, its component captured for the callbacks.
#[derive(Default)]
struct LookupPlugin {
    component: Option<DiagnosticComponent>,
}

impl NativePlugin for LookupPlugin {
    fn register(&mut self, ctx: &mut NativePluginContext<'_>) -> Result<(), NativePluginError> {
        let (_diagnostics, component) = register_lookup_diagnostics(&ctx.runtime())?;
        self.component = Some(component);
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_specs_native_example_registers_in_register_and_records_into_the_context() {
    let pipeline = wattline::Pipeline::builder()
        .environment(Default::default())
        .gpu_source(|| None)
        .spawn()
        .await
        .unwrap();
    let mut plugin = LookupPlugin::default();
    pipeline.register_native_plugin(&mut plugin).unwrap();
    let component = plugin.component.as_ref().expect("registered");
    let failed = record_lookup_failure(component, "req-1").unwrap();
    let completed = record_lookup_success(component, "req-2").unwrap();
    assert!(matches!(failed, RecordOutcome::Recorded(_)), "{failed:?}");
    assert!(
        matches!(completed, RecordOutcome::Recorded(_)),
        "{completed:?}"
    );

    let snapshot = pipeline.diagnostics_snapshot().expect("diagnostics are on");
    let lookup = snapshot
        .components
        .iter()
        .find(|component| component.name.ends_with("example.lookup"))
        .expect("the plugin's component is in the context");
    let occurrences = |code: &str| {
        lookup
            .codes
            .iter()
            .find(|row| row.code == code)
            .map(|row| row.occurrences)
    };
    assert_eq!(occurrences("lookup_failed"), Some(1));
    assert_eq!(occurrences("lookup_completed"), Some(1));
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_that_fails_names_why() {
    struct Refusing;
    impl NativePlugin for Refusing {
        fn register(
            &mut self,
            _ctx: &mut NativePluginContext<'_>,
        ) -> Result<(), NativePluginError> {
            Err(NativePluginError::Plugin("no backend configured".into()))
        }
    }
    let pipeline = wattline::Pipeline::builder().spawn().await.unwrap();
    let error = pipeline.register_native_plugin(&mut Refusing).unwrap_err();
    assert_eq!(
        error.to_string(),
        "native plugin registration failed: no backend configured"
    );
    pipeline.shutdown().await.unwrap();
}

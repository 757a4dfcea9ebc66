//! The native plugin shape of the diagnostics specification: a [`NativePlugin`] is
//! registered with a pipeline, and in [`NativePlugin::register`] takes
//! `ctx.runtime()`, whose [`PluginRuntime::diagnostics`] is the facade its
//! diagnostics go through (one native session per registration). Code written for
//! the reference's `nemo_relay_plugin` compiles against `wattline::plugin` instead.
//!
//! ```
//! use wattline::plugin::diagnostics::{ComponentDeclaration, DiagnosticComponent};
//! use wattline::plugin::{NativePlugin, NativePluginContext, NativePluginError};
//!
//! #[derive(Default)]
//! struct Lookup(Option<DiagnosticComponent>);
//!
//! impl NativePlugin for Lookup {
//!     fn register(&mut self, ctx: &mut NativePluginContext<'_>) -> Result<(), NativePluginError> {
//!         let diagnostics = ctx.runtime().diagnostics();
//!         let component = diagnostics.component_lazy(|| ComponentDeclaration {
//!             name: "example.lookup",
//!             codes: &[],
//!         })?;
//!         self.0 = Some(component);
//!         Ok(())
//!     }
//! }
//! # async fn run() -> Result<(), wattline::Error> {
//! let pipeline = wattline::Pipeline::builder().spawn().await?;
//! pipeline.register_native_plugin(&mut Lookup::default())?;
//! # Ok(())
//! # }
//! ```

/// The diagnostics types a native plugin uses, under the names the specification's
/// native example imports: `Diagnostics` is the facade a plugin gets (a native
/// session on the pipeline's context, reading it only when the configuration grants
/// it).
pub mod diagnostics {
    pub use wattline_diagnostics::PluginDiagnostics as Diagnostics;
    pub use wattline_diagnostics::{
        Availability, BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode,
        DiagnosticComponent, DiagnosticError, DiagnosticOutcome, FailureClass, Observation,
        RecordOutcome, Severity,
    };
}

/// Why a native plugin's registration failed: its own message, or a diagnostics error.
#[derive(Debug, thiserror::Error)]
pub enum NativePluginError {
    /// A diagnostics call refused (a declaration over its limits, a closed context).
    #[error(transparent)]
    Diagnostics(#[from] wattline_diagnostics::DiagnosticError),
    /// The plugin's own refusal.
    #[error("{0}")]
    Plugin(String),
}

/// What the host gives a native plugin for its activation.
#[derive(Debug, Clone)]
pub struct PluginRuntime {
    diagnostics: wattline_diagnostics::PluginDiagnostics,
}

impl PluginRuntime {
    /// The diagnostics facade of this activation (a disabled one, whose
    /// `availability()` says so, when the pipeline runs without diagnostics).
    pub fn diagnostics(&self) -> diagnostics::Diagnostics {
        self.diagnostics.clone()
    }
}

/// What [`NativePlugin::register`] is handed.
#[derive(Debug)]
pub struct NativePluginContext<'a> {
    runtime: &'a PluginRuntime,
}

impl NativePluginContext<'_> {
    /// The activation's runtime (a cheap handle): pass `&ctx.runtime()` to helpers
    /// that register diagnostics, as the specification does.
    pub fn runtime(&self) -> PluginRuntime {
        self.runtime.clone()
    }
}

/// A plugin compiled into the host: registered once per activation, synchronously;
/// it keeps what it registers (components) for its callbacks.
pub trait NativePlugin {
    /// Registers the plugin: declare its diagnostics components here.
    fn register(&mut self, ctx: &mut NativePluginContext<'_>) -> Result<(), NativePluginError>;
}

/// Registers `plugin` with a runtime over `diagnostics`.
pub(crate) fn register_native(
    plugin: &mut dyn NativePlugin,
    diagnostics: wattline_diagnostics::PluginDiagnostics,
) -> Result<(), NativePluginError> {
    let runtime = PluginRuntime { diagnostics };
    plugin.register(&mut NativePluginContext { runtime: &runtime })
}

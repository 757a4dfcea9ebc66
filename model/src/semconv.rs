//! The semantic-convention column of the gauge tables: what a resource mark becomes
//! under OpenTelemetry's `process.*` / `system.*` names (v1.44.0). Each row of a
//! category's gauge table (`crate::snapshot`) carries its own equivalent, so a mark's
//! convention name is written once, beside its `nemo.relay.resource.*` name; the
//! exporters look it up with [`crate::snapshot::semconv_equivalent`].

/// How a mark's value becomes a semantic-convention series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemconvShape {
    /// A total (CPU time, bytes moved): a counter of its increments.
    Total,
    /// A level (memory in use, threads): an up-down counter of its changes.
    Level,
}

/// One mark's equivalent under the semantic conventions, per scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SemconvEquivalent {
    /// The name in a process scope (`process.cpu.time`); `None` when the conventions
    /// have no per-process name for it.
    pub process: Option<&'static str>,
    /// The name in `global` scope (`system.cpu.time`); `None` when they have no
    /// system-wide name for it.
    pub system: Option<&'static str>,
    /// The convention's unit (`s`, `By`, `{thread}`).
    pub unit: &'static str,
    /// Whether the mark is a total or a level.
    pub shape: SemconvShape,
    /// The attribute the conventions add (`cpu.mode = user`), if any.
    pub attribute: Option<(&'static str, &'static str)>,
}

//! Typed GPU diagnostics: the events sources report and the sink they report to.
//!
//! Sources never decide how a failure is shown to the user; they record a
//! [`GpuEvent`] on the [`GpuEventSink`] they were given (the integrator wires it to
//! the diagnostics counters) and write the log lines the spec's failure table asks
//! for.

use std::sync::Mutex;

use serde::Serialize;

/// One thing that happened while reading GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GpuEvent {
    /// NVML could not be loaded or initialised; retried no sooner than the retry delay.
    NvmlUnavailable {
        /// What NVML or the loader said.
        detail: String,
    },
    /// An NVML call is not supported by this device or driver; its field stays `None`.
    /// Reported once per call kind.
    NvmlCallNotSupported {
        /// The call (`"fan_speed"`, `"total_energy_consumption"`, ...).
        call: String,
    },
    /// No `nvidia-smi` on the search path; never asked again.
    SmiNotFound,
    /// `nvidia-smi` answered "No devices were found": a host with no NVIDIA GPU.
    SmiNoDevices,
    /// `nvidia-smi` could not be started or exited with an error.
    SmiStartFailed {
        /// What the tool (or the operating system) said.
        message: String,
    },
    /// `nvidia-smi` ran past the collector's timeout and was killed.
    SmiTimeout,
    /// The answer could not be parsed.
    SmiParseFailure {
        /// What was wrong with it.
        detail: String,
    },
    /// The tool exited without printing anything: a failure, never "no GPU".
    SmiEmptyAnswer,
    /// The driver does not know a queried field; the core field set is used from now on.
    SmiDowngradedToCoreFields {
        /// The field the tool rejected.
        unknown_field: String,
    },
    /// A sample after the first answer failed; that interval observes nothing.
    SmiSampleFailed {
        /// What the tool said.
        message: String,
    },
    /// Collection stopped after this many failures in a row.
    SmiStoppedAfterFailures {
        /// Consecutive failures.
        count: u32,
    },
}

/// The event as a sentence, for diagnostics details and logs.
impl std::fmt::Display for GpuEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuEvent::NvmlUnavailable { detail } => {
                write!(f, "NVML could not be loaded or started: {detail}")
            }
            GpuEvent::NvmlCallNotSupported { call } => write!(
                f,
                "the NVML call {call} is not supported by this device or driver"
            ),
            GpuEvent::SmiNotFound => write!(f, "nvidia-smi is not on the search path"),
            GpuEvent::SmiNoDevices => write!(f, "nvidia-smi found no device"),
            GpuEvent::SmiStartFailed { message } => {
                write!(f, "nvidia-smi failed at start: {message}")
            }
            GpuEvent::SmiTimeout => write!(f, "nvidia-smi did not answer before its timeout"),
            GpuEvent::SmiParseFailure { detail } => {
                write!(f, "the nvidia-smi answer could not be read: {detail}")
            }
            GpuEvent::SmiEmptyAnswer => write!(f, "nvidia-smi exited without printing anything"),
            GpuEvent::SmiDowngradedToCoreFields { unknown_field } => write!(
                f,
                "this driver does not know the nvidia-smi field {unknown_field}: using the core fields"
            ),
            GpuEvent::SmiSampleFailed { message } => {
                write!(f, "an nvidia-smi sample failed: {message}")
            }
            GpuEvent::SmiStoppedAfterFailures { count } => write!(
                f,
                "nvidia-smi failed {count} times in a row: GPU collection stopped"
            ),
        }
    }
}

/// How loud an event is, in the diagnostics vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuEventSeverity {
    /// Expected on some hardware; not worth the user's attention.
    Debug,
    /// Explains why a reading is absent.
    Info,
    /// Something that should work does not.
    Warning,
}

impl GpuEvent {
    /// Stable diagnostic code, `gpu.<snake_case>`.
    pub fn code(&self) -> &'static str {
        match self {
            GpuEvent::NvmlUnavailable { .. } => "gpu.nvml_unavailable",
            GpuEvent::NvmlCallNotSupported { .. } => "gpu.nvml_call_not_supported",
            GpuEvent::SmiNotFound => "gpu.smi_not_found",
            GpuEvent::SmiNoDevices => "gpu.smi_no_devices",
            GpuEvent::SmiStartFailed { .. } => "gpu.smi_start_failed",
            GpuEvent::SmiTimeout => "gpu.smi_timeout",
            GpuEvent::SmiParseFailure { .. } => "gpu.smi_parse_failure",
            GpuEvent::SmiEmptyAnswer => "gpu.smi_empty_answer",
            GpuEvent::SmiDowngradedToCoreFields { .. } => "gpu.smi_downgraded_to_core_fields",
            GpuEvent::SmiSampleFailed { .. } => "gpu.smi_sample_failed",
            GpuEvent::SmiStoppedAfterFailures { .. } => "gpu.smi_stopped_after_failures",
        }
    }

    /// Failure class in the diagnostics vocabulary.
    pub fn class(&self) -> &'static str {
        match self {
            GpuEvent::NvmlUnavailable { .. } => "unavailable",
            GpuEvent::NvmlCallNotSupported { .. } => "unsupported",
            GpuEvent::SmiNotFound | GpuEvent::SmiNoDevices => "not_found",
            GpuEvent::SmiStartFailed { .. } | GpuEvent::SmiSampleFailed { .. } => {
                "execution_failed"
            }
            GpuEvent::SmiTimeout => "timeout",
            GpuEvent::SmiParseFailure { .. } | GpuEvent::SmiEmptyAnswer => "invalid_input",
            GpuEvent::SmiDowngradedToCoreFields { .. } => "incompatible",
            GpuEvent::SmiStoppedAfterFailures { .. } => "unavailable",
        }
    }

    /// Nominal severity of the event.
    pub fn severity(&self) -> GpuEventSeverity {
        match self {
            GpuEvent::NvmlCallNotSupported { .. } | GpuEvent::SmiSampleFailed { .. } => {
                GpuEventSeverity::Debug
            }
            GpuEvent::NvmlUnavailable { .. }
            | GpuEvent::SmiNotFound
            | GpuEvent::SmiNoDevices
            | GpuEvent::SmiDowngradedToCoreFields { .. } => GpuEventSeverity::Info,
            GpuEvent::SmiStartFailed { .. }
            | GpuEvent::SmiTimeout
            | GpuEvent::SmiParseFailure { .. }
            | GpuEvent::SmiEmptyAnswer
            | GpuEvent::SmiStoppedAfterFailures { .. } => GpuEventSeverity::Warning,
        }
    }
}

/// Where sources report [`GpuEvent`]s. Called from blocking workers and from the
/// `nvidia-smi` background task, so it must be cheap and must not block for long.
pub trait GpuEventSink: Send + Sync {
    /// Record one event.
    fn record(&self, event: GpuEvent);
}

/// A sink that drops every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopEventSink;

impl GpuEventSink for NoopEventSink {
    fn record(&self, _event: GpuEvent) {}
}

/// A sink that keeps every event in memory, in order (tests, simple integrations).
#[derive(Debug, Default)]
pub struct CollectingEventSink {
    events: Mutex<Vec<GpuEvent>>,
}

impl CollectingEventSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy of the events recorded so far.
    pub fn events(&self) -> Vec<GpuEvent> {
        match self.events.lock() {
            Ok(events) => events.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// How many recorded events satisfy `predicate`.
    pub fn count(&self, predicate: impl Fn(&GpuEvent) -> bool) -> usize {
        self.events()
            .iter()
            .filter(|event| predicate(event))
            .count()
    }
}

impl GpuEventSink for CollectingEventSink {
    fn record(&self, event: GpuEvent) {
        match self.events.lock() {
            Ok(mut events) => events.push(event),
            Err(poisoned) => poisoned.into_inner().push(event),
        }
    }
}

//! The RAPL sampler: CPU package (and DRAM) energy counters for the energy stage,
//! read on a blocking worker at each energy tick; an unreadable counter is recorded
//! under the CPU category every time and explained once, with its fix.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::platform::ReadErrorClass;
use crate::platform::os::rapl::read_rapl_zones;
use wattline_diagnostics::{PipelineDiagnostics, SamplerFailure};
use wattline_model::category::SamplerCategory;
use wattline_model::energy::RaplZoneReading;

/// One reading of every RAPL zone.
#[derive(Debug)]
pub struct RaplRead {
    /// When the counters were read.
    pub at: std::time::Instant,
    /// The readable zones.
    pub zones: Vec<RaplZoneReading>,
    /// Why CPU energy is not measured, when it is not.
    pub unavailable: Option<String>,
}

/// Reads RAPL for the energy stage and explains, once and loudly, a counter that is
/// there but unreadable.
#[derive(Debug)]
pub struct RaplReader {
    root: PathBuf,
    diagnostics: Option<PipelineDiagnostics>,
    explained: AtomicBool,
}

impl RaplReader {
    /// A reader under `root` recording into `diagnostics`.
    pub fn new(root: PathBuf, diagnostics: Option<PipelineDiagnostics>) -> Self {
        RaplReader {
            root,
            diagnostics,
            explained: AtomicBool::new(false),
        }
    }

    /// Reads every zone on a blocking worker: what was readable, and why the rest was
    /// not (for the energy stage); `None` when the worker failed.
    pub async fn read(&self) -> Option<RaplRead> {
        let root = self.root.clone();
        let Ok(((zones, errors), at, present)) = tokio::task::spawn_blocking(move || {
            // Stamped when read, not when the answer reaches the async side.
            let read = read_rapl_zones(&root);
            let at = std::time::Instant::now();
            (read, at, root.join("sys/class/powercap").is_dir())
        })
        .await
        else {
            return None;
        };
        let unavailable = rapl_unavailable(&zones, &errors, present);
        self.record_problems(&errors, unavailable.as_deref());
        Some(RaplRead {
            at,
            zones,
            unavailable,
        })
    }

    /// Records each unreadable counter in diagnostics, and warns once per pipeline
    /// with the cause and fix; returns whether this call warned.
    fn record_problems(
        &self,
        errors: &[crate::platform::ReadError],
        unavailable: Option<&str>,
    ) -> bool {
        let Some(error) = errors.first() else {
            return false;
        };
        let warned = !self.explained.swap(true, Ordering::Relaxed);
        if warned {
            tracing::warn!(
                "CPU energy is not measured: {}",
                unavailable.unwrap_or("RAPL counters unreadable")
            );
        }
        if let Some(diagnostics) = &self.diagnostics {
            let failure = if error.class() == ReadErrorClass::PermissionDenied {
                SamplerFailure::PermissionDenied
            } else {
                SamplerFailure::ReadFailed
            };
            let _ = diagnostics.record_sampler_failure(
                SamplerCategory::Cpu,
                failure,
                &format!(
                    "RAPL counter {} unreadable: {error}",
                    error.path().display()
                ),
            );
        }
        warned
    }
}

/// Why CPU energy is not read, with the fix, when it is not.
pub(crate) fn rapl_unavailable(
    zones: &[RaplZoneReading],
    errors: &[crate::platform::ReadError],
    present: bool,
) -> Option<String> {
    if zones.iter().any(|zone| zone.name.starts_with("package")) {
        return None;
    }
    if let Some(error) = errors.first() {
        return Some(if error.class() == ReadErrorClass::PermissionDenied {
            format!(
                "the RAPL counter {} is readable by root only (Linux 5.10 and later): run as root, or grant read access to /sys/class/powercap/*/energy_uj",
                error.path().display()
            )
        } else {
            format!("the RAPL counter could not be read: {error}")
        });
    }
    Some(if present {
        "no RAPL package zone under /sys/class/powercap".to_owned()
    } else {
        "this machine exposes no RAPL powercap interface (/sys/class/powercap)".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::ReadError;

    #[test]
    fn an_unreadable_rapl_counter_is_explained_with_its_cause_and_fix() {
        let denied = ReadError::PermissionDenied {
            path: "/sys/class/powercap/intel-rapl:0/energy_uj".into(),
        };
        let reason = rapl_unavailable(&[], &[denied], true).unwrap();
        assert!(reason.contains("intel-rapl:0/energy_uj"), "{reason}");
        assert!(reason.contains("run as root"), "{reason}");
        assert!(
            reason.contains("/sys/class/powercap/*/energy_uj"),
            "{reason}"
        );
        assert!(
            rapl_unavailable(&[], &[], false)
                .unwrap()
                .contains("no RAPL")
        );
    }

    #[test]
    fn an_unreadable_rapl_counter_is_recorded_every_time_and_warned_about_once() {
        let (context, components) = crate::pipeline::open_diagnostics(Some(Default::default()))
            .unwrap()
            .unwrap();
        let reader = RaplReader::new("/".into(), Some(components));
        let denied = || ReadError::PermissionDenied {
            path: "/sys/class/powercap/intel-rapl:0/energy_uj".into(),
        };
        assert!(!reader.record_problems(&[], None), "nothing to say");
        assert!(reader.record_problems(&[denied()], Some("why")));
        assert!(
            !reader.record_problems(&[denied()], Some("why")),
            "warned once"
        );
        let snapshot = context.snapshot().unwrap();
        let recorded: Vec<&str> = snapshot
            .recent_events
            .iter()
            .map(|event| event.code.as_str())
            .collect();
        assert_eq!(
            recorded,
            vec![
                "sampler.cpu.permission_denied",
                "sampler.cpu.permission_denied"
            ]
        );
        assert!(
            snapshot.recent_events[0]
                .detail
                .as_deref()
                .is_some_and(|detail| detail.contains("intel-rapl:0/energy_uj"))
        );
    }
}

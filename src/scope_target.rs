//! What a configured scope measures: the scope setting (and a process) turned into
//! the target the pipeline samples.

use wattline_actors::scope::{ProcessIdentity, ScopeTarget, identify_process};
use wattline_config::MeasurementScopeSetting;

/// Why a scope could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// A process scope was asked for without a process to measure.
    #[error("the {0} scope needs a process ID to measure")]
    MissingProcess(&'static str),
    /// The process to measure could not be read.
    #[error("process {pid} cannot be measured: {source}")]
    Unreadable {
        /// The process.
        pid: u32,
        /// Why.
        source: wattline_actors::ReadError,
    },
}

/// Turns a configured scope into a target. `runtime_default` means `default_scope`
/// (`global` for the CLI, `process_tree` for the library); process scopes measure
/// `pid`.
pub fn resolve_target(
    setting: MeasurementScopeSetting,
    default_scope: MeasurementScopeSetting,
    pid: Option<u32>,
) -> Result<ScopeTarget, ScopeError> {
    let setting = match setting {
        MeasurementScopeSetting::RuntimeDefault => default_scope,
        other => other,
    };
    let identify = |name: &'static str| -> Result<ProcessIdentity, ScopeError> {
        let pid = pid.ok_or(ScopeError::MissingProcess(name))?;
        identify_process(std::path::Path::new("/"), pid)
            .map_err(|source| ScopeError::Unreadable { pid, source })
    };
    Ok(match setting {
        MeasurementScopeSetting::Global | MeasurementScopeSetting::RuntimeDefault => {
            ScopeTarget::Global
        }
        MeasurementScopeSetting::ApplicationProcess => {
            ScopeTarget::ApplicationProcess(identify("application_process")?)
        }
        MeasurementScopeSetting::ProcessTree => ScopeTarget::ProcessTree(identify("process_tree")?),
    })
}

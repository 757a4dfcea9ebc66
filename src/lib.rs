//! wattline: measure what a program costs the machine it runs on.
//!
//! This crate is the public library API. It re-exports the configuration types
//! (`wattline-config`) and the snapshot model (`wattline-actors`), and offers the
//! actor [`Pipeline`] and [`Collector`] for synchronous snapshots without one.

#![warn(missing_docs)]

mod agent_scope;
pub mod api;
mod collector;
pub mod embedded;
mod error;
mod exporting;
pub mod genai_spans;
pub mod gpu;
#[cfg(unix)]
pub mod host;
pub mod overrides;
mod pipeline;
pub mod plugin;
pub mod report;
mod scope_target;

use std::path::PathBuf;

pub use agent_scope::{AgentScope, ScopeOptions, current_scope};
pub use collector::Collector;
pub use genai_spans::GenAiSpanProcessor;
pub use pipeline::{
    DiagnosticsReadError, Error, Pipeline, PipelineBuilder, PreparedPipeline,
    library_default_config,
};
pub use scope_target::{ScopeError, resolve_target};
pub use wattline_actors::command_cgroup;
pub use wattline_actors::doctor;
pub use wattline_diagnostics as diagnostics;
pub use wattline_model::category::SamplerCategory;
pub use wattline_model::events;
pub use wattline_model::metric_measurements;
pub use wattline_model::metric_names;
pub use wattline_model::remote_call;
pub use wattline_model::report::EnergyReport;

/// This process's id, cached and read again in a forked child: what tells a pipeline
/// (or a binding's runtime) that it runs in a child of the process that made it.
pub use wattline_actors::pipeline::current_process_id;
pub use wattline_actors::scope::{ProcessIdentity, ScopeTarget};
pub use wattline_config as config;
pub use wattline_model::series::SamplingSeries;
pub use wattline_model::snapshot;

/// Loads the layered `plugins.toml` configuration (an explicit path first, else the
/// user's), with defaults applied.
pub fn load_config(
    explicit: Option<PathBuf>,
) -> Result<wattline_config::EffectiveConfig, wattline_config::ConfigError> {
    let layers = wattline_config::Discovery::from_environment(explicit).load()?;
    wattline_config::EffectiveConfig::merge(&layers)
}

/// The energy/cost report rebuilt from an ATOF file alone: its energy records, fed to
/// the same account the live pipeline used, as of the last report taken (or, for a run
/// cut short, its newest record). Reads plain, zstd-compressed and rotated files as
/// [`report_and_series_from_atof`] does.
pub fn report_from_atof(
    path: &std::path::Path,
) -> Result<EnergyReport, wattline_exporters::AtofReadError> {
    report_and_series_from_atof(path).map(|(report, _)| report)
}

/// The report (as [`report_from_atof`]) and the run's time series (power, CPU use,
/// memory; for [`report::html`] and the table's sparklines), from one streaming read
/// of an ATOF file: plain or zstd-compressed, and every file of its set in order when
/// `path` is a part of a rotated set (or names one). Marks are read one at a time and
/// the copies of a poll under many scopes are skipped, so memory stays bounded
/// whatever the file's size.
pub fn report_and_series_from_atof(
    path: &std::path::Path,
) -> Result<(EnergyReport, report::series::RunSeries), wattline_exporters::AtofReadError> {
    let mut marks = wattline_exporters::AtofMarkStream::open(path)?.skipping_copies();
    let mut builder = report::series::SeriesBuilder::new();
    let mut failure = None;
    let records = std::iter::from_fn(|| {
        loop {
            match marks.next_mark() {
                Ok(Some(mark)) => match mark.energy {
                    Some(record) => {
                        builder.push_energy(&record);
                        return Some(record);
                    }
                    None if mark.name == events::RESOURCE_MARK_NAME => {
                        builder.push_resource_mark(mark.timestamp, &mark.measurements);
                    }
                    None => {}
                },
                Ok(None) => return None,
                Err(error) => {
                    failure = Some(error);
                    return None;
                }
            }
        }
    });
    let report = wattline_energy::replay::report_from_records(records);
    if let Some(error) = failure {
        return Err(error);
    }
    let mut report = report.ok_or_else(|| wattline_exporters::AtofReadError::Invalid {
        path: path.to_path_buf(),
        line: 0,
        reason: "no energy records: the file was written with the energy component off, or by a wattline older than 0.2".into(),
    })?;
    report.replay_notes.extend(marks.left_out().iter().cloned());
    Ok((report, builder.finish()))
}

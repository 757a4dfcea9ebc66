//! `wattline collect`: one snapshot as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use wattline::config::{MeasurementScopeSetting, ResourceMetricsConfig};

use super::{ScopeArgument, load_effective_config};

/// Arguments of `wattline collect`.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// A plugins.toml (or a directory holding one) to use instead of the user's.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// The processes to measure; overrides the configuration. Default: global.
    #[arg(long, value_enum)]
    scope: Option<ScopeArgument>,
    /// The process to measure in application-process and process-tree scopes.
    #[arg(long, value_name = "N")]
    pid: Option<u32>,
    /// Print the snapshot on one line.
    #[arg(long)]
    compact: bool,
}

/// Runs `collect`.
pub fn run(args: CollectArgs) -> Result<ExitCode, String> {
    let effective = load_effective_config(args.config)?;
    // The CLI measures with the default component when no file enables it.
    let config: ResourceMetricsConfig = effective.resource_metrics.unwrap_or_default();
    let setting = args
        .scope
        .map(MeasurementScopeSetting::from)
        .unwrap_or(config.measurement_scope);
    let target = wattline::resolve_target(setting, MeasurementScopeSetting::Global, args.pid)
        .map_err(|error| error.to_string())?;
    let snapshot = wattline::collect_once(target, config);
    let json = if args.compact {
        serde_json::to_string(&snapshot)
    } else {
        serde_json::to_string_pretty(&snapshot)
    }
    .map_err(|error| format!("cannot write the snapshot as JSON: {error}"))?;
    println!("{json}");
    Ok(ExitCode::SUCCESS)
}

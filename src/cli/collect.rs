//! `wattline collect` and `wattline diagnostics`: one snapshot through the pipeline,
//! printed as JSON, or the diagnostics recorded while taking it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use wattline::config::{EffectiveConfig, MeasurementScopeSetting, ResourceMetricsConfig};

use super::{ScopeArgument, cli_resource_metrics, load_configuration};

/// Arguments of `wattline collect` and `wattline diagnostics`.
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
    /// Print on one line.
    #[arg(long)]
    compact: bool,
}

/// What to print after the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The snapshot.
    Snapshot,
    /// The diagnostics context.
    Diagnostics,
}

/// Runs `collect` or `diagnostics`.
pub fn run(args: CollectArgs, output: Output) -> Result<ExitCode, String> {
    let (layers, effective) = load_configuration(args.config)?;
    // On-demand collection needs an active component: the default one when no file
    // mentions it, never one a file switched off.
    let resource: ResourceMetricsConfig =
        cli_resource_metrics(&layers, &effective).map_err(|source| {
            format!(
                "resource_metrics is disabled in {source}: there is nothing to collect \
                 (set `enabled = true` on that component, or remove the entry)"
            )
        })?;
    let setting = args
        .scope
        .map(MeasurementScopeSetting::from)
        .unwrap_or(resource.measurement_scope);
    let target = wattline::resolve_target(setting, MeasurementScopeSetting::Global, args.pid)
        .map_err(|error| error.to_string())?;
    let config = EffectiveConfig {
        resource_metrics: Some(ResourceMetricsConfig {
            // One snapshot: no polling, and no energy stage to start.
            polling: Default::default(),
            ..resource
        }),
        energy: None,
        ..effective
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    let (snapshot, diagnostics) = runtime.block_on(async move {
        let pipeline = wattline::Pipeline::builder()
            .config(config)
            .scope(target)
            .spawn()
            .await
            .map_err(|error| error.to_string())?;
        let snapshot = pipeline.collect().await.map_err(|error| error.to_string());
        let diagnostics = pipeline
            .diagnostics_json()
            .map_err(|error| error.to_string());
        let _ = pipeline.shutdown().await;
        Ok::<_, String>((snapshot?, diagnostics?))
    })?;
    let json = match output {
        Output::Snapshot => if args.compact {
            serde_json::to_string(&snapshot)
        } else {
            serde_json::to_string_pretty(&snapshot)
        }
        .map_err(|error| format!("cannot write the snapshot as JSON: {error}"))?,
        Output::Diagnostics => {
            let text = diagnostics.ok_or("diagnostics are disabled by the configuration")?;
            if args.compact {
                text
            } else {
                let value: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|error| format!("diagnostics JSON: {error}"))?;
                serde_json::to_string_pretty(&value)
                    .map_err(|error| format!("diagnostics JSON: {error}"))?
            }
        }
    };
    super::output::print_stdout(&format!("{json}\n"))?;
    Ok(ExitCode::SUCCESS)
}

//! Command-line parsing and dispatch.

mod collect;
mod command_cgroup;
mod compare;
mod config_commands;
mod csv_file;
mod doctor;
mod exit_stamp;
mod output;
mod report;
mod report_output;
mod run;
mod shell;
mod status;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use wattline::config::{Discovery, EffectiveConfig, MeasurementScopeSetting};

/// Exit code for bad input: configuration, arguments.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Measure what a program costs the machine it runs on.
#[derive(Debug, Parser)]
#[command(name = "wattline", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Take one resource snapshot and print it as JSON.
    Collect(collect::CollectArgs),
    /// Take one snapshot and print the diagnostics recorded meanwhile, as JSON.
    Diagnostics(collect::CollectArgs),
    /// Run a command, measure it, and print the energy/cost report at the end.
    Run(run::RunArgs),
    /// Recompute the energy/cost report from an ATOF file alone.
    Report(report::ReportArgs),
    /// Check or show configuration.
    #[command(subcommand)]
    Config(config_commands::ConfigCommand),
    /// Say what this machine lets wattline measure, and how to fix what it cannot.
    Doctor(doctor::DoctorArgs),
    /// Compare two runs (ATOF files or saved JSON reports): energy, cost, CO2 and
    /// duration per run, device, domain and step name, and the change.
    Compare(compare::CompareArgs),
    /// Print a shell completion script (bash, zsh, fish).
    Completions(shell::CompletionsArgs),
    /// Print the manual page (roff): `wattline man | man -l -`.
    Man,
}

/// A scope chosen on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScopeArgument {
    /// Every process the OS shows.
    Global,
    /// One process (`--pid`), without children.
    ApplicationProcess,
    /// A process (`--pid`) and its live descendants.
    ProcessTree,
}

impl From<ScopeArgument> for MeasurementScopeSetting {
    fn from(scope: ScopeArgument) -> Self {
        match scope {
            ScopeArgument::Global => MeasurementScopeSetting::Global,
            ScopeArgument::ApplicationProcess => MeasurementScopeSetting::ApplicationProcess,
            ScopeArgument::ProcessTree => MeasurementScopeSetting::ProcessTree,
        }
    }
}

/// Parses the arguments and runs the command.
pub fn run() -> ExitCode {
    init_logging();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Collect(args) => collect::run(args, collect::Output::Snapshot),
        Command::Diagnostics(args) => collect::run(args, collect::Output::Diagnostics),
        Command::Config(command) => config_commands::run(command),
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Completions(args) => shell::completions(args),
        Command::Man => shell::manual_page(),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("wattline: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// Loads the layered configuration, `--config` first.
pub fn load_effective_config(explicit: Option<PathBuf>) -> Result<EffectiveConfig, String> {
    load_configuration(explicit).map(|(_, effective)| effective)
}

/// The configuration layers, `--config` first, and their merge.
pub fn load_configuration(
    explicit: Option<PathBuf>,
) -> Result<(Vec<wattline::config::PluginsDocument>, EffectiveConfig), String> {
    let layers = Discovery::from_environment(explicit)
        .load()
        .map_err(|e| e.to_string())?;
    let effective = EffectiveConfig::merge(&layers).map_err(|e| e.to_string())?;
    Ok((layers, effective))
}

/// The `resource_metrics` component a command measures with: the files' when one
/// enables it, the default component when none mentions it (the CLI's own default),
/// and `Err(source)` naming the file that switched it off.
pub fn cli_resource_metrics(
    layers: &[wattline::config::PluginsDocument],
    effective: &EffectiveConfig,
) -> Result<wattline::config::ResourceMetricsConfig, String> {
    use wattline::config::{ComponentKind, ComponentSwitch};
    match ComponentSwitch::of(layers, ComponentKind::ResourceMetrics) {
        ComponentSwitch::Disabled(source) => Err(source),
        ComponentSwitch::Unmentioned => Ok(Default::default()),
        ComponentSwitch::Enabled => Ok(effective.resource_metrics.clone().unwrap_or_default()),
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("WATTLINE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

//! `wattline config check` and `wattline config show`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use wattline::config::{EffectiveConfig, load_file};

use super::load_effective_config;

/// Configuration commands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate one plugins.toml: prints "ok" (exit 0) or the error (exit 2).
    Check {
        /// The file to check.
        file: PathBuf,
    },
    /// Print the effective, merged configuration with every default filled in.
    Show {
        /// A plugins.toml (or a directory holding one) to use instead of the user's.
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
}

/// Runs a configuration command.
pub fn run(command: ConfigCommand) -> Result<ExitCode, String> {
    match command {
        ConfigCommand::Check { file } => {
            let document = load_file(&file, true).map_err(|error| error.to_string())?;
            EffectiveConfig::merge(&document.into_iter().collect::<Vec<_>>())
                .map_err(|error| error.to_string())?;
            super::output::print_stdout("ok\n")?;
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Show { config } => {
            let effective = load_effective_config(config)?;
            super::output::print_stdout(&effective.to_toml().map_err(|error| error.to_string())?)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

//! `wattline completions SHELL` and `wattline man`: the shell's completion script and
//! the manual page, both generated from the command-line definition, so they never
//! drift from it.

use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};

/// Arguments of `wattline completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

/// The shells a completion script is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// bash: `source <(wattline completions bash)`.
    Bash,
    /// zsh: write it as `_wattline` into a folder on `$fpath`.
    Zsh,
    /// fish: write it to `~/.config/fish/completions/wattline.fish`.
    Fish,
}

/// Prints the completion script for `args.shell`.
pub fn completions(args: CompletionsArgs) -> Result<ExitCode, String> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut super::Cli::command(), "wattline", &mut script);
    super::output::print_stdout(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page (roff, section 1): `wattline man | man -l -`.
pub fn manual_page() -> Result<ExitCode, String> {
    let mut page = Vec::new();
    clap_mangen::Man::new(super::Cli::command())
        .render(&mut page)
        .map_err(|error| format!("cannot write the manual page: {error}"))?;
    super::output::print_stdout(&String::from_utf8_lossy(&page))?;
    Ok(ExitCode::SUCCESS)
}

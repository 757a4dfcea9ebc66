//! `wattline doctor`: what this machine lets wattline measure, and for everything it
//! cannot, the cause and the fix in one line each; then the configuration files that
//! take effect. Exit 0 when it could inspect, 2 when the configuration is bad.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde::Serialize;
use wattline::config::Discovery;
use wattline::doctor::{Check, CheckStatus, DoctorSetting, inspect};

/// Arguments of `wattline doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// A plugins.toml (or a directory holding one) to use instead of the user's.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print JSON instead of lines.
    #[arg(long)]
    json: bool,
}

/// One configuration file considered.
#[derive(Debug, Serialize)]
struct ConfigFile {
    path: String,
    exists: bool,
}

#[derive(Debug, Serialize)]
struct Findings {
    checks: Vec<Check>,
    config_files: Vec<ConfigFile>,
    config_error: Option<String>,
}

fn line(check: &Check) -> String {
    let mark = match check.status {
        CheckStatus::Ok => "ok",
        CheckStatus::Partial => "part",
        CheckStatus::Unavailable => "no",
    };
    let mut text = format!("{mark:<5}{:<11}{}\n", check.area, check.finding);
    if let Some(fix) = &check.fix {
        text.push_str(&format!("{:<16}fix: {fix}\n", ""));
    }
    text
}

/// Runs `doctor`.
pub fn run(args: DoctorArgs) -> Result<ExitCode, String> {
    let discovery = Discovery::from_environment(args.config.clone());
    let config_files: Vec<ConfigFile> = discovery
        .candidate_files()
        .into_iter()
        .map(|(path, _)| ConfigFile {
            exists: path.is_file(),
            path: path.display().to_string(),
        })
        .collect();
    let config_error = super::load_configuration(args.config).err();
    let findings = Findings {
        checks: inspect(&DoctorSetting::default()),
        config_files,
        config_error,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&findings)
            .map_err(|error| format!("cannot write the findings: {error}"))?;
        super::output::print_stdout(&format!("{text}\n"))?;
    } else {
        let mut text = String::from("what wattline can measure here\n");
        for check in &findings.checks {
            text.push_str(&line(check));
        }
        text.push_str("configuration\n");
        for file in &findings.config_files {
            let state = if file.exists { "used" } else { "absent" };
            text.push_str(&format!("{state:<16}{}\n", file.path));
        }
        if let Some(error) = &findings.config_error {
            text.push_str(&format!("{:<16}{error}\n", "invalid"));
        }
        super::output::print_stdout(&text)?;
    }
    Ok(if findings.config_error.is_some() {
        ExitCode::from(super::EXIT_BAD_INPUT)
    } else {
        ExitCode::SUCCESS
    })
}

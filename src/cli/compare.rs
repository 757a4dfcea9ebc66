//! `wattline compare BASE NEW`: two runs side by side (ATOF files or saved JSON
//! reports), with a gate for CI: `--fail-above PCT`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use wattline::EnergyReport;
use wattline::report::compare::{
    compare_reports, regressions, render_comparison_html, render_comparison_table,
};

/// Exit code when `--fail-above` finds a growth past its limit.
pub const EXIT_GREW: u8 = 1;

/// Arguments of `wattline compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The run to compare against: an ATOF file (plain, zstd, or any part of a rotated
    /// set) or a report saved with `--report json` (a `.json` file).
    base: PathBuf,
    /// The run to compare, read as BASE is.
    new: PathBuf,
    /// How the comparison is printed on stdout.
    #[arg(long, value_enum, default_value = "table")]
    report: CompareFormat,
    /// Also write the comparison as one self-contained HTML page to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Exit with status 1 when the run's energy, or the attributed energy of any step
    /// name both runs have, grew by more than PCT percent.
    #[arg(long, value_name = "PCT", value_parser = non_negative_percent)]
    fail_above: Option<f64>,
}

/// How the comparison is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// A table, units chosen by size.
    Table,
    /// JSON, fixed units (kWh, currency, g, s).
    Json,
}

fn non_negative_percent(text: &str) -> Result<f64, String> {
    match text.trim_end_matches('%').parse::<f64>() {
        Ok(percent) if percent.is_finite() && percent >= 0.0 => Ok(percent),
        _ => Err(format!("`{text}` is not a percentage of 0 or more")),
    }
}

/// Runs `compare`.
pub fn run(args: CompareArgs) -> Result<ExitCode, String> {
    let base = load_run(&args.base)?;
    let new = load_run(&args.new)?;
    let comparison = compare_reports(
        &base,
        &new,
        &args.base.display().to_string(),
        &args.new.display().to_string(),
    );
    let printed = match args.report {
        CompareFormat::Table => render_comparison_table(&comparison),
        CompareFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&comparison)
                .map_err(|error| format!("cannot write the comparison: {error}"))?
        ),
    };
    super::output::print_stdout(&printed)?;
    if let Some(path) = &args.html {
        std::fs::write(path, render_comparison_html(&comparison)).map_err(|error| {
            format!(
                "{}: the HTML comparison could not be written: {error}",
                path.display()
            )
        })?;
    }
    if let Some(percent) = args.fail_above {
        let grown = regressions(&comparison, percent);
        if !grown.is_empty() {
            super::output::print_stderr(&format!(
                "wattline compare: grew past --fail-above {percent}%:\n  {}\n",
                grown.join("\n  ")
            ))?;
            return Ok(ExitCode::from(EXIT_GREW));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A run's report: parsed from a saved JSON report (a `.json` file), else rebuilt from
/// an ATOF file.
fn load_run(path: &Path) -> Result<EnergyReport, String> {
    if path
        .extension()
        .is_some_and(|extension| extension == "json")
    {
        let text = std::fs::read_to_string(path)
            .map_err(|error| format!("{}: cannot read: {error}", path.display()))?;
        let mut reader = serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(&mut reader).map_err(|error| {
            format!(
                "{}: not a wattline JSON report (at `{}`: {})",
                path.display(),
                error.path(),
                error.inner()
            )
        })
    } else {
        wattline::report_from_atof(path).map_err(|error| error.to_string())
    }
}

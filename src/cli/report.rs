//! `wattline report FILE`: the energy/cost report recomputed from an ATOF file (plain
//! `.jsonl`, zstd `.jsonl.zst`, or a rotated set), read as a stream.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::report_output::ReportFormat;

/// Arguments of `wattline report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// An ATOF JSON-lines file written by `wattline run --atof DIR` (or the `atof`
    /// component): plain or zstd-compressed; for a rotated set, any of its parts (or
    /// its unrotated name), and every part is read in order.
    file: PathBuf,
    /// The report's format (`table` prints to stdout here).
    #[arg(long, value_enum, default_value = "table")]
    report: ReportFormat,
    /// Also append the report as a CSV row to this file (header written when new).
    #[arg(long, value_name = "FILE")]
    csv_file: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page with charts to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write the report (in `--report`'s format) to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<ExitCode, String> {
    let (report, series) =
        wattline::report_and_series_from_atof(&args.file).map_err(|error| error.to_string())?;
    let output = args
        .output
        .as_deref()
        .map(super::report_output::ReportFile::create)
        .transpose()?;
    let outputs = super::report_output::ReportOutputs {
        format: args.report,
        table_on_stderr: false,
        output: output.as_ref(),
        csv_file: args.csv_file.as_deref(),
        html: args.html.as_deref(),
    };
    let file_problems =
        super::report_output::write_report(&outputs, &report, &series, Default::default())?;
    // Writing files is this command's whole job: one that failed fails it.
    if !file_problems.is_empty() {
        return Err(file_problems.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

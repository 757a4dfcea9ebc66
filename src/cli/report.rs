//! `wattline report FILE.jsonl`: the energy/cost report recomputed from an ATOF file.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::run::ReportFormat;

/// Arguments of `wattline report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// An ATOF JSON-lines file written by `wattline run --atof DIR` (or the `atof`
    /// component).
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
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<ExitCode, String> {
    let (report, series) =
        wattline::report_and_series_from_atof(&args.file).map_err(|error| error.to_string())?;
    match args.report {
        ReportFormat::Table => {
            super::output::print_stdout(&super::report_pictures::table(&report, &series))?
        }
        ReportFormat::Json => super::output::print_stdout(&format!(
            "{}\n",
            report
                .to_json()
                .map_err(|error| format!("cannot write the report: {error}"))?
        ))?,
        ReportFormat::Csv => super::output::print_stdout(&format!(
            "{}\n{}\n",
            wattline::report_csv::csv_header(),
            wattline::report_csv::csv_row(&report, Default::default())
        ))?,
    }
    if let Some(path) = &args.csv_file {
        let row = wattline::report_csv::csv_row(&report, Default::default());
        super::csv_file::append_row(path, &wattline::report_csv::csv_header(), &row)?;
    }
    if let Some(path) = &args.html {
        super::report_pictures::write_page(path, &report, &series, Default::default())?;
    }
    Ok(ExitCode::SUCCESS)
}

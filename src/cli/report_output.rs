//! Where a report goes, for `run` and `report` alike: the chosen format printed, then
//! the CSV row appended and the HTML page written when asked.

use std::path::Path;

use wattline::EnergyReport;
use wattline::report_csv::{RunDescription, csv_header, csv_row};
use wattline::report_series::{RunSeries, power_sparklines};

use super::run::ReportFormat;

/// What a report is printed and written as.
pub struct ReportOutputs<'a> {
    /// The format printed.
    pub format: ReportFormat,
    /// Prints the table on stderr (`run`, whose stdout may be the command's) rather
    /// than stdout. JSON and CSV always go to stdout.
    pub table_on_stderr: bool,
    /// Append the report as a CSV row to this file.
    pub csv_file: Option<&'a Path>,
    /// Write the HTML page to this file.
    pub html: Option<&'a Path>,
}

/// Prints `report` and writes its files. An error printing is returned; a file that
/// could not be written is listed in the answer (the caller says whether that fails
/// the command), and the other outputs are still made.
pub fn write_report(
    outputs: &ReportOutputs<'_>,
    report: &EnergyReport,
    series: &RunSeries,
    run: RunDescription<'_>,
) -> Result<Vec<String>, String> {
    match outputs.format {
        ReportFormat::Table if outputs.table_on_stderr => {
            super::output::print_stderr(&table(report, series))?
        }
        ReportFormat::Table => super::output::print_stdout(&table(report, series))?,
        ReportFormat::Json => super::output::print_stdout(&format!(
            "{}\n",
            report
                .to_json()
                .map_err(|error| format!("cannot write the report: {error}"))?
        ))?,
        ReportFormat::Csv => {
            super::output::print_stdout(&format!("{}\n{}\n", csv_header(), csv_row(report, run)))?
        }
    }
    let mut file_problems = Vec::new();
    if let Some(path) = outputs.csv_file
        && let Err(problem) =
            super::csv_file::append_row(path, &csv_header(), &csv_row(report, run))
    {
        file_problems.push(problem);
    }
    if let Some(path) = outputs.html
        && let Err(problem) = write_page(path, report, series, run)
    {
        file_problems.push(problem);
    }
    Ok(file_problems)
}

/// The table report with a power sparkline per device under it, where power was read.
fn table(report: &EnergyReport, series: &RunSeries) -> String {
    format!("{}{}", report.to_table(), power_sparklines(report, series))
}

/// Writes the HTML page of `report` to `path`, replacing what was there.
fn write_page(
    path: &Path,
    report: &EnergyReport,
    series: &RunSeries,
    run: RunDescription<'_>,
) -> Result<(), String> {
    let page = wattline::report_html::render_html(report, series, run);
    std::fs::write(path, page).map_err(|error| {
        format!(
            "{}: the HTML report could not be written: {error}",
            path.display()
        )
    })
}

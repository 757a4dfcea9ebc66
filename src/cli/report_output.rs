//! Where a report goes, for `run` and `report` alike: the chosen format printed, then
//! the CSV row appended and the HTML page written when asked.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use wattline::EnergyReport;
use wattline::report::csv::{RunDescription, csv_header, csv_row};
use wattline::report::series::RunSeries;
// The library's format also names the HTML page, which is only ever written to a file.
use clap::ValueEnum;
use wattline::report::{ReportFormat as RenderFormat, render_report};

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// A table on stderr.
    Table,
    /// JSON on stdout.
    Json,
    /// A CSV header and one row on stdout (columns: README, "CSV").
    Csv,
}

/// The file `--output` names: the report in the chosen format goes there instead of
/// stdout or stderr. Created (or emptied) when the command starts, so a path that
/// cannot be written fails before any work is done.
#[derive(Debug)]
pub struct ReportFile {
    path: PathBuf,
    file: File,
}

impl ReportFile {
    /// Creates `path`, replacing what was there.
    pub fn create(path: &Path) -> Result<ReportFile, String> {
        let file = File::create(path)
            .map_err(|error| format!("--output {}: cannot create it: {error}", path.display()))?;
        Ok(ReportFile {
            path: path.to_path_buf(),
            file,
        })
    }

    fn write(&self, text: &str) -> Result<(), String> {
        (&self.file)
            .write_all(text.as_bytes())
            .and_then(|()| (&self.file).flush())
            .map_err(|error| {
                format!(
                    "{}: the report could not be written: {error}",
                    self.path.display()
                )
            })
    }
}

/// What a report is printed and written as.
pub struct ReportOutputs<'a> {
    /// The format printed.
    pub format: ReportFormat,
    /// Prints the table on stderr (`run`, whose stdout may be the command's) rather
    /// than stdout. JSON and CSV always go to stdout.
    pub table_on_stderr: bool,
    /// Writes the report in `format` to this file instead of printing it.
    pub output: Option<&'a ReportFile>,
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
    let printed = render_report(report, series, run, outputs.format.into())
        .map_err(|error| error.to_string())?;
    let mut file_problems = Vec::new();
    if let Some(file) = outputs.output {
        if let Err(problem) = file.write(&printed) {
            file_problems.push(problem);
        }
    } else if outputs.format == ReportFormat::Table && outputs.table_on_stderr {
        super::output::print_stderr(&printed)?;
    } else {
        super::output::print_stdout(&printed)?;
    }
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

impl From<ReportFormat> for RenderFormat {
    fn from(format: ReportFormat) -> Self {
        match format {
            ReportFormat::Table => RenderFormat::Table,
            ReportFormat::Json => RenderFormat::Json,
            ReportFormat::Csv => RenderFormat::Csv,
        }
    }
}

/// Writes the HTML page of `report` to `path`, replacing what was there.
fn write_page(
    path: &Path,
    report: &EnergyReport,
    series: &RunSeries,
    run: RunDescription<'_>,
) -> Result<(), String> {
    let page = render_report(report, series, run, RenderFormat::Html)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    std::fs::write(path, page).map_err(|error| {
        format!(
            "{}: the HTML report could not be written: {error}",
            path.display()
        )
    })
}

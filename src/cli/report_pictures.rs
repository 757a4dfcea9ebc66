//! The report's pictures: the power sparklines under the table, and the HTML page
//! (`--html FILE`) written to its file.

use std::path::Path;

use wattline::EnergyReport;
use wattline::report_csv::RunDescription;
use wattline::report_series::{RunSeries, power_sparklines};

/// The table report with a power sparkline per device under it, where power was read.
pub fn table(report: &EnergyReport, series: &RunSeries) -> String {
    format!("{}{}", report.to_table(), power_sparklines(report, series))
}

/// Writes the HTML page of `report` to `path`, replacing what was there.
pub fn write_page(
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

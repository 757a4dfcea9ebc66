//! The energy/cost report's renderers, all from one [`EnergyReport`] value: the
//! terminal table ([`render_table`], with the power sparklines of [`series`]), JSON,
//! the CSV row ([`csv`]) and the HTML page ([`html`]). [`render_report`] is the one
//! entry point `wattline run` and `wattline report` print and write through.

pub mod compare;
pub mod csv;
pub mod html;
pub mod human_units;
pub mod receipts;
pub mod remote_estimates;
pub mod series;
mod table;

pub use table::render_table;

use csv::RunDescription;
use series::RunSeries;
use wattline_model::report::EnergyReport;

/// What a report is rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    /// The terminal table, with a power sparkline per line of the series under it.
    Table,
    /// Pretty JSON, one line end after it.
    Json,
    /// The CSV header and the report's row, each ending its line.
    Csv,
    /// The self-contained HTML page.
    Html,
}

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The report could not be serialised as JSON.
    #[error("cannot write the report: {0}")]
    Json(#[from] serde_json::Error),
}

/// `report` rendered as `format`. `series` is the run's time series (the table's
/// sparklines, the page's charts; empty when not recorded) and `run` what the report
/// does not know itself (the command and its scope; empty from a file).
pub fn render_report(
    report: &EnergyReport,
    series: &RunSeries,
    run: RunDescription<'_>,
    format: ReportFormat,
) -> Result<String, RenderError> {
    Ok(match format {
        ReportFormat::Table => format!(
            "{}{}",
            render_table(report),
            series::power_sparklines(report, series)
        ),
        ReportFormat::Json => format!("{}\n", report.to_json()?),
        ReportFormat::Csv => format!("{}\n{}\n", csv::csv_header(), csv::csv_row(report, run)),
        ReportFormat::Html => html::render_html(report, series, run),
    })
}

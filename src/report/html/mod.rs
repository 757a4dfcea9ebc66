//! The report as one self-contained HTML page: power over time per GPU and per RAPL
//! zone, the CPU use and memory of the measured scope, each Agent scope as a band on
//! the same time axis, the totals with their factors, and the diagnostics behind the
//! figures. Inline SVG and CSS only: no script, no font, nothing fetched. Pure: data
//! in, a `String` out; the CLI writes the file.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use wattline_model::report::EnergyDomain;

mod chart;
mod sections;
#[cfg(test)]
mod tests;

use crate::report::csv::{RunDescription, factor_source};
use crate::report::human_units::{energy_text, power_text, three_significant_figures};
use crate::report::receipts::interval_text;
use crate::report::series::RunSeries;
use chart::TimeAxis;
use sections::{
    agent_scopes_section, cpu_power_section, cpu_use_section, diagnostics_section,
    gpu_power_section, memory_section,
};
use wattline_model::receipt::EnergyReceipt;
use wattline_model::report::EnergyReport;

/// The page. `run` says what the report does not know (the command and its scope);
/// from a file both are unknown.
pub fn render_html(report: &EnergyReport, series: &RunSeries, run: RunDescription<'_>) -> String {
    let axis = TimeAxis::of(report);
    let command = run.command.map(|argv| argv.join(" "));
    let title = match &command {
        Some(command) => format!("wattline report: {command}"),
        None => "wattline report".to_string(),
    };
    let mut page = String::new();
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str(
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"wattline\">\n",
    );
    let _ = writeln!(page, "<title>{}</title>", escape(&title));
    page.push_str(STYLE);
    page.push_str("</head>\n<body>\n<main>\n");
    page.push_str(&header(report, series, run, command.as_deref()));
    page.push_str(&totals_section(report));
    page.push_str(&gpu_power_section(report, series, &axis));
    page.push_str(&cpu_power_section(report, series, &axis));
    page.push_str(&agent_scopes_section(report, &axis));
    page.push_str(&cpu_use_section(series, &axis));
    page.push_str(&memory_section(series, &axis));
    page.push_str(&diagnostics_section(report));
    let _ = writeln!(
        page,
        "<footer>Written by wattline {}. This page is self-contained: it loads nothing \
         and runs no script.</footer>",
        env!("CARGO_PKG_VERSION")
    );
    page.push_str("</main>\n</body>\n</html>\n");
    page
}

/// The page's style sheet (also the comparison page's).
pub(crate) const STYLE: &str = "<style>
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #1d2330;
  font: 15px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif; }
main { max-width: 1220px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 0 0 8px; }
section { background: #fff; border: 1px solid #dde1e8; border-radius: 8px; padding: 16px 18px; margin: 16px 0; }
.meta { color: #4a5263; margin: 0; }
code { font-family: ui-monospace, 'SF Mono', Menlo, Consolas, 'Liberation Mono', monospace; font-size: 13px;
  background: #eef0f4; padding: 1px 4px; border-radius: 3px; word-break: break-all; }
table { border-collapse: collapse; margin: 6px 0 12px; }
.side-by-side { display: flex; flex-wrap: wrap; gap: 0 40px; align-items: flex-start; }
td code { white-space: nowrap; word-break: normal; }
th, td { text-align: left; padding: 4px 12px 4px 0; border-bottom: 1px solid #edf0f4; vertical-align: top; }
td.number { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th { font-weight: 600; color: #4a5263; }
tr.total td { font-weight: 600; border-top: 2px solid #c9ced8; }
.legend { list-style: none; padding: 0; margin: 4px 0 6px; display: flex; flex-wrap: wrap; gap: 4px 22px; }
.swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px; margin-right: 6px; vertical-align: -2px; }
.missing { background: #fff6e5; border-left: 4px solid #e69f00; padding: 8px 12px; margin: 4px 0; }
.note { color: #4a5263; font-size: 13px; margin: 4px 0 0; }
svg { display: block; width: 100%; height: auto; }
svg text { font: 13px system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif; fill: #4a5263; }
svg text.lane { fill: #1d2330; font-weight: 600; }
.grid { stroke: #e6e9ef; stroke-width: 1; }
.frame { stroke: #9aa3b2; stroke-width: 1; fill: none; }
footer { color: #6b7385; font-size: 13px; margin-top: 20px; }
</style>
";

/// Text for an HTML element or a quoted attribute.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

fn seconds_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_nanoseconds().unwrap_or(0) as f64 / 1e9
}

fn time_text(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn header(
    report: &EnergyReport,
    series: &RunSeries,
    run: RunDescription<'_>,
    command: Option<&str>,
) -> String {
    let mut facts = Vec::new();
    match command {
        Some(command) => facts.push(format!("command <code>{}</code>", escape(command))),
        None => facts.push("rebuilt from an ATOF file".to_string()),
    }
    if let Some(scope) = run
        .scope
        .map(str::to_string)
        .or_else(|| series.scope.clone())
    {
        facts.push(format!("scope {}", escape(&scope)));
    }
    facts.push(format!(
        "{} to {} ({:.1} s)",
        time_text(report.started_at),
        time_text(report.ended_at),
        seconds_between(report.started_at, report.ended_at)
    ));
    let source = match (&report.gpu_source, &report.gpu_source_configured) {
        (Some(source), _) => source.clone(),
        (None, Some(configured)) if configured != "none" => {
            format!("none answered (configured: {configured})")
        }
        (None, _) => "none".to_string(),
    };
    facts.push(format!("GPU source {}", escape(&source)));
    format!(
        "<header>\n<h1>wattline report</h1>\n<p class=\"meta\">{}</p>\n</header>\n",
        facts.join(" · ")
    )
}

/// An energy in the unit its size calls for (the page is for people; JSON and CSV
/// keep kWh).
fn kwh_text(kwh: Option<f64>) -> String {
    kwh.map_or_else(|| "not measured".into(), energy_text)
}

/// A cost in the report's currency, escaped for the page.
fn cost_text(cost: Option<f64>, currency: &str) -> String {
    cost.map_or_else(
        || "–".into(),
        |cost| format!("{} {}", three_significant_figures(cost), escape(currency)),
    )
}

fn grams_text(grams: Option<f64>) -> String {
    grams.map_or_else(
        || "–".into(),
        |grams| format!("{} g", three_significant_figures(grams)),
    )
}

/// A power in the unit its size calls for; `–` when not read.
fn watts_text(watts: Option<f64>) -> String {
    watts.map_or_else(|| "–".into(), power_text)
}

fn optional_number(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".into(), |value| format!("{value:.decimals$}"))
}

fn totals_section(report: &EnergyReport) -> String {
    let cost = |cost: Option<f64>| cost_text(cost, &report.currency);
    let mut out = String::from(
        "<div class=\"side-by-side\">\n<table>\n<tr><th>domain</th><th>energy</th>\
         <th>95% interval</th><th>method</th><th>cost</th><th>CO2</th></tr>\n",
    );
    let interval = |receipt: Option<&EnergyReceipt>| {
        receipt.map_or_else(|| "–".to_owned(), |receipt| escape(&interval_text(receipt)))
    };
    for (domain, kwh) in [
        (EnergyDomain::Gpu, report.total.gpu_energy_kwh),
        (EnergyDomain::CpuPackage, report.total.cpu_energy_kwh),
        (EnergyDomain::Dram, report.total.dram_energy_kwh),
    ] {
        let measured = report.domains.iter().find(|d| d.domain == domain);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"number\">{}</td><td>{}</td><td>{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td></tr>",
            domain.label(),
            kwh_text(kwh),
            interval(measured.and_then(|d| d.receipt.as_ref())),
            measured.map_or("–", |d| d.method.as_str()),
            cost(measured.map(|d| d.cost)),
            grams_text(measured.and_then(|d| d.co2_grams)),
        );
    }
    let _ = writeln!(
        out,
        "<tr class=\"total\"><td>total</td><td class=\"number\">{}</td><td>{}</td><td></td>\
         <td class=\"number\">{}</td><td class=\"number\">{}</td></tr>",
        kwh_text(report.total.energy_kwh),
        interval(report.total.receipt.as_ref()),
        cost(report.total.cost),
        grams_text(report.total.co2_grams),
    );
    if (report.pue.value - 1.0).abs() > f64::EPSILON {
        let _ = writeln!(
            out,
            "<tr><td>facility (PUE {})</td><td class=\"number\">{}</td><td></td><td></td>\
             <td class=\"number\">{}</td><td></td></tr>",
            report.pue.value,
            kwh_text(report.total.facility_energy_kwh),
            cost(report.total.facility_cost),
        );
    }
    out.push_str("</table>\n");
    out.push_str(&factors_table(report));
    out.push_str("</div>\n");
    out.push_str(&devices_table(report));
    section("totals", "Energy, cost and CO2", &out)
}

fn factors_table(report: &EnergyReport) -> String {
    let mut out = String::from(
        "<table>\n<tr><th>factor</th><th>value</th><th>where it came from</th></tr>\n",
    );
    let mut row = |name: &str, value: String, source: String| {
        let _ = writeln!(
            out,
            "<tr><td>{name}</td><td>{}</td><td><code>{}</code></td></tr>",
            escape(&value),
            escape(&source)
        );
    };
    row(
        "price",
        format!("{} {}", report.cost_per_kwh.value, report.cost_per_kwh.unit),
        factor_source(&report.cost_per_kwh.origin),
    );
    match &report.carbon_intensity {
        Some(factor) => row(
            "carbon intensity",
            format!("{} {}", factor.value, factor.unit),
            factor_source(&factor.origin),
        ),
        None => row(
            "carbon intensity",
            "CO2 not tracked (set GENAI_ENABLE_CO2_TRACKING=true)".into(),
            "default".into(),
        ),
    }
    row(
        "PUE",
        report.pue.value.to_string(),
        factor_source(&report.pue.origin),
    );
    out.push_str("</table>\n");
    if report.carbon_intensity.is_some() {
        out.push_str(
            "<p class=\"note\">The carbon intensity is a factor, not a reading of the grid.</p>\n",
        );
    }
    format!("<div>\n{out}</div>\n")
}

fn devices_table(report: &EnergyReport) -> String {
    if report.devices.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table>\n<tr><th>GPU</th><th>energy</th><th>method</th><th>mean</th><th>max</th>\
         <th>readings</th><th>rate</th><th>gaps</th></tr>\n",
    );
    for device in &report.devices {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"number\">{}</td><td>{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{} Hz</td><td class=\"number\">{}</td></tr>",
            escape(&device_label(
                device.name.as_deref(),
                &device.device_identifier
            )),
            energy_text(device.energy_kwh),
            device.energy_source.as_str(),
            watts_text(device.mean_watts),
            watts_text(device.max_watts),
            device.readings,
            optional_number(device.sampling_rate_hz, 1),
            device.gaps,
        );
    }
    out.push_str("</table>\n");
    out
}

fn device_label(name: Option<&str>, identifier: &str) -> String {
    match name {
        Some(name) => format!("{name} {identifier}"),
        None => identifier.to_string(),
    }
}

/// A message in place of a chart that has nothing to draw.
fn missing(text: &str) -> String {
    format!("<p class=\"missing\">{}</p>\n", escape(text))
}

/// A section of the page around `body`.
fn section(id: &str, title: &str, body: &str) -> String {
    format!("<section id=\"{id}\">\n<h2>{title}</h2>\n{body}</section>\n")
}

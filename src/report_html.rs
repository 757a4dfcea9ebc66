//! The report as one self-contained HTML page: power over time per GPU and per RAPL
//! zone, the CPU use and memory of the measured scope, each Agent scope as a band on
//! the same time axis, the totals with their factors, and the diagnostics behind the
//! figures. Inline SVG and CSS only: no script, no font, nothing fetched. Pure: data
//! in, a `String` out; the CLI writes the file.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use wattline_actors::diagnostics::{DiagnosticOutcome, DiagnosticsSnapshot};
use wattline_actors::energy::report::{EnergyDomain, ScopeEnergy};

use crate::EnergyReport;
use crate::report_csv::{RunDescription, factor_source};
use crate::report_series::{MemoryFigure, PowerLine, RunSeries, SeriesPoint, has_readings};

/// Width of every chart's drawing, in SVG units (it scales with the page).
const CHART_WIDTH: f64 = 1160.0;
/// Room left of the plot for the value axis.
const PLOT_LEFT: f64 = 76.0;
/// Room right of the plot.
const PLOT_RIGHT: f64 = 20.0;
/// Room above the plot.
const PLOT_TOP: f64 = 14.0;
/// Room below the plot for the time axis and its title.
const PLOT_BOTTOM: f64 = 44.0;
/// Height of a line chart's plot.
const PLOT_HEIGHT: f64 = 180.0;
/// Height of one Agent scope's lane.
const LANE_HEIGHT: f64 = 30.0;
/// Lines with at most this many points also get a dot at each reading.
const DOTTED_UP_TO: usize = 80;

/// Line colours, told apart by colour-blind readers too (Okabe-Ito, darkened).
const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f7f00", "#000000",
];

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

const STYLE: &str = "<style>
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

fn kwh_text(kwh: Option<f64>) -> String {
    kwh.map_or_else(|| "not measured".into(), |kwh| format!("{kwh:.6} kWh"))
}

/// A cost in the report's currency, escaped for the page.
fn cost_text(cost: Option<f64>, currency: &str) -> String {
    cost.map_or_else(
        || "–".into(),
        |cost| format!("{cost:.6} {}", escape(currency)),
    )
}

fn grams_text(grams: Option<f64>) -> String {
    grams.map_or_else(|| "–".into(), |grams| format!("{grams:.3} g"))
}

fn optional_number(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".into(), |value| format!("{value:.decimals$}"))
}

fn totals_section(report: &EnergyReport) -> String {
    let cost = |cost: Option<f64>| cost_text(cost, &report.currency);
    let mut out = String::from(
        "<div class=\"side-by-side\">\n<table>\n<tr><th>domain</th><th>energy</th>\
         <th>method</th><th>cost</th><th>CO2</th></tr>\n",
    );
    for (domain, kwh) in [
        (EnergyDomain::Gpu, report.total.gpu_energy_kwh),
        (EnergyDomain::CpuPackage, report.total.cpu_energy_kwh),
        (EnergyDomain::Dram, report.total.dram_energy_kwh),
    ] {
        let measured = report.domains.iter().find(|d| d.domain == domain);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"number\">{}</td><td>{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{}</td></tr>",
            domain.label(),
            kwh_text(kwh),
            measured.map_or("–", |d| d.method.as_str()),
            cost(measured.map(|d| d.cost)),
            grams_text(measured.and_then(|d| d.co2_grams)),
        );
    }
    let _ = writeln!(
        out,
        "<tr class=\"total\"><td>total</td><td class=\"number\">{}</td><td></td>\
         <td class=\"number\">{}</td><td class=\"number\">{}</td></tr>",
        kwh_text(report.total.energy_kwh),
        cost(report.total.cost),
        grams_text(report.total.co2_grams),
    );
    if (report.pue.value - 1.0).abs() > f64::EPSILON {
        let _ = writeln!(
            out,
            "<tr><td>facility (PUE {})</td><td class=\"number\">{}</td><td></td>\
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
            "<tr><td>{}</td><td class=\"number\">{:.6} kWh</td><td>{}</td>\
             <td class=\"number\">{} W</td><td class=\"number\">{} W</td><td class=\"number\">{}</td>\
             <td class=\"number\">{} Hz</td><td class=\"number\">{}</td></tr>",
            escape(&device_label(
                device.name.as_deref(),
                &device.device_identifier
            )),
            device.energy_kwh,
            device.energy_source.as_str(),
            optional_number(device.mean_watts, 1),
            optional_number(device.max_watts, 1),
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

fn gpu_power_section(report: &EnergyReport, series: &RunSeries, axis: &TimeAxis) -> String {
    let chart = power_chart("gpu-power", &series.gpu_power, axis, |line| {
        let device = report
            .devices
            .iter()
            .find(|d| d.device_identifier == line.id)?;
        Some(format!(
            "mean {} W, max {} W, {:.6} kWh",
            optional_number(device.mean_watts, 1),
            optional_number(device.max_watts, 1),
            device.energy_kwh
        ))
    });
    let body = chart.unwrap_or_else(|| {
        missing(&format!(
            "No GPU power was read: {}",
            report
                .gpu_unavailable
                .as_deref()
                .unwrap_or("no device answered (see the diagnostics below)")
        ))
    });
    section("gpu-power", "GPU power", &body)
}

fn cpu_power_section(report: &EnergyReport, series: &RunSeries, axis: &TimeAxis) -> String {
    let chart = power_chart("cpu-power", &series.cpu_power, axis, |line| {
        let zone = report.cpu_zones.iter().find(|zone| zone.zone == line.id)?;
        Some(format!(
            "{:.6} kWh ({})",
            zone.energy_kwh,
            zone.domain.label()
        ))
    });
    let body = match chart {
        Some(chart) => format!(
            "{chart}<p class=\"note\">Each point is a counter delta over the time between two \
             readings, drawn at the middle of it.</p>\n"
        ),
        None => missing(&format!(
            "No CPU package or DRAM power was read: {}",
            report.cpu_unavailable.as_deref().unwrap_or(
                "fewer than two readings of a RAPL counter in this run (see the diagnostics below)"
            )
        )),
    };
    section("cpu-power", "CPU package and DRAM power (RAPL)", &body)
}

/// The chart of the power `lines` that hold readings, each with its legend `detail`;
/// `None` when none does.
fn power_chart(
    id: &str,
    lines: &[PowerLine],
    axis: &TimeAxis,
    detail: impl Fn(&PowerLine) -> Option<String>,
) -> Option<String> {
    let lines: Vec<&PowerLine> = lines
        .iter()
        .filter(|line| has_readings(&line.points))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let legend: Vec<LegendEntry> = lines
        .iter()
        .map(|line| LegendEntry {
            label: line.label.clone(),
            detail: detail(line),
        })
        .collect();
    let points: Vec<&[SeriesPoint]> = lines.iter().map(|l| l.points.as_slice()).collect();
    Some(line_chart(
        id,
        axis,
        &ValueScale::plain("W"),
        &legend,
        &points,
    ))
}

/// Why a resource chart is empty.
const NO_POLLS: &str = "the run had no resource polls that carried it (polling off, \
    resource_metrics disabled, or the command ended before the second poll: a rate's \
    first reading is null)";

fn cpu_use_section(series: &RunSeries, axis: &TimeAxis) -> String {
    let body = match peak_and_mean(&series.cpu_use) {
        Some((peak, mean)) => {
            let legend = [LegendEntry {
                label: "CPU use".into(),
                detail: Some(format!("mean {mean:.2}, peak {peak:.2} logical processors")),
            }];
            line_chart(
                "cpu-use",
                axis,
                &ValueScale::plain("logical processors"),
                &legend,
                &[&series.cpu_use],
            )
        }
        None => missing(&format!("No CPU use was recorded: {NO_POLLS}")),
    };
    section("cpu-use", "CPU use of the measured scope", &body)
}

fn memory_section(series: &RunSeries, axis: &TimeAxis) -> String {
    let (title, label) = match series.memory_figure {
        Some(MemoryFigure::SystemUsed) => (
            "Memory: system memory in use (the global scope has no resident figure)",
            "system memory in use",
        ),
        _ => (
            "Memory: resident memory of the measured processes",
            "resident memory",
        ),
    };
    let body = match peak_and_mean(&series.memory) {
        Some((peak, _)) => {
            let scale = ValueScale::bytes(peak);
            let legend = [LegendEntry {
                label: label.into(),
                detail: Some(format!("peak {:.1} {}", peak / scale.divisor, scale.unit)),
            }];
            line_chart("memory", axis, &scale, &legend, &[&series.memory])
        }
        None => missing(&format!("No memory was recorded: {NO_POLLS}")),
    };
    section("memory", title, &body)
}

fn peak_and_mean(points: &[SeriesPoint]) -> Option<(f64, f64)> {
    let readings: Vec<f64> = points.iter().filter_map(|point| point.value).collect();
    let peak = readings.iter().copied().reduce(f64::max)?;
    Some((peak, readings.iter().sum::<f64>() / readings.len() as f64))
}

fn agent_scopes_section(report: &EnergyReport, axis: &TimeAxis) -> String {
    if report.agent_scopes.is_empty() {
        let body = "<p class=\"note\">No Agent scope was marked in this run.</p>\n";
        return section("agent-scopes", "Agent scopes", body);
    }
    let mut out = scope_lanes(report, axis);
    out.push_str(
        "<table>\n<tr><th>scope</th><th>from</th><th>to</th><th>energy</th><th>GPU</th>\
         <th>cost</th><th>CO2</th></tr>\n",
    );
    for scope in &report.agent_scopes {
        let end = scope.ended_at.unwrap_or(report.ended_at);
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"number\">{:.2} s</td><td class=\"number\">{:.2} s{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{}</td></tr>",
            escape(&scope.name),
            seconds_between(report.started_at, scope.started_at),
            seconds_between(report.started_at, end),
            if scope.ended_at.is_none() {
                " (live at the report)"
            } else {
                ""
            },
            kwh_text(scope.energy_kwh),
            kwh_text(scope.gpu_energy_kwh),
            cost_text(scope.cost, &report.currency),
            grams_text(scope.co2_grams),
        );
    }
    out.push_str(
        "</table>\n<p class=\"note\">Scopes overlap: their energies are not to be added up.</p>\n",
    );
    section("agent-scopes", "Agent scopes", &out)
}

/// One lane per scope, its band spanning the time it was live, on the charts' time
/// axis.
fn scope_lanes(report: &EnergyReport, axis: &TimeAxis) -> String {
    let plot_height = LANE_HEIGHT * report.agent_scopes.len() as f64;
    let mut svg = svg_open(
        "agent-scopes",
        plot_height,
        "Agent scopes on the run's time axis",
    );
    svg.push_str(&axis.grid_and_labels(plot_height));
    for (lane, scope) in report.agent_scopes.iter().enumerate() {
        svg.push_str(&scope_band(report, axis, lane, scope));
    }
    svg.push_str(&frame(plot_height));
    svg.push_str("</svg>\n");
    svg
}

fn scope_band(report: &EnergyReport, axis: &TimeAxis, lane: usize, scope: &ScopeEnergy) -> String {
    let color = PALETTE[lane % PALETTE.len()];
    let end = scope.ended_at.unwrap_or(report.ended_at);
    let left = axis.x(scope.started_at).clamp(PLOT_LEFT, axis.right());
    let right = axis.x(end).clamp(left, axis.right());
    let top = PLOT_TOP + LANE_HEIGHT * lane as f64 + 4.0;
    let label = format!("{} · {}", scope.name, kwh_text(scope.energy_kwh));
    // A label starting far right would leave the chart: it ends at the band instead.
    let (text_x, anchor) = if left > PLOT_LEFT + (axis.right() - PLOT_LEFT) * 0.6 {
        (right - 6.0, "end")
    } else {
        (left + 6.0, "start")
    };
    format!(
        "<g class=\"band\"><title>{title}</title><rect x=\"{left:.1}\" y=\"{top:.1}\" \
         width=\"{:.1}\" height=\"{:.1}\" rx=\"3\" fill=\"{color}\" fill-opacity=\"0.28\" \
         stroke=\"{color}\"/><text class=\"lane\" x=\"{text_x:.1}\" y=\"{:.1}\" \
         text-anchor=\"{anchor}\">{text}</text></g>\n",
        (right - left).max(2.0),
        LANE_HEIGHT - 8.0,
        top + LANE_HEIGHT / 2.0 + 1.0,
        title = escape(&format!(
            "{label}, {:.2} s to {:.2} s",
            seconds_between(report.started_at, scope.started_at),
            seconds_between(report.started_at, end)
        )),
        text = escape(&label),
    )
}

fn diagnostics_section(report: &EnergyReport) -> String {
    let mut out = String::new();
    let mut notes = Vec::new();
    if let Some(reason) = &report.gpu_unavailable {
        notes.push(format!("GPU energy not measured: {reason}"));
    }
    if let Some(reason) = &report.cpu_unavailable {
        notes.push(format!("CPU energy not measured: {reason}"));
    }
    for device in report.devices.iter().filter(|d| d.gaps > 0) {
        notes.push(format!(
            "{}: {} failed samples, not integrated (gaps)",
            device_label(device.name.as_deref(), &device.device_identifier),
            device.gaps
        ));
    }
    for exporter in report.exporters.iter().filter(|e| e.lost_data()) {
        notes.push(format!(
            "exporter {} lost data: {}",
            exporter.name,
            exporter.loss_description()
        ));
    }
    for variable in &report.ignored_variables {
        notes.push(format!("{variable} is set and has no effect"));
    }
    if !notes.is_empty() {
        out.push_str("<ul>\n");
        for note in &notes {
            let _ = writeln!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
    match &report.diagnostics {
        None => out.push_str(
            "<p class=\"note\">This report carries no diagnostics snapshot (a report rebuilt \
             from an ATOF file has none; <code>wattline run --html</code> includes it).</p>\n",
        ),
        Some(value) => match serde_json::from_value::<DiagnosticsSnapshot>(value.clone()) {
            Ok(snapshot) => out.push_str(&recorded_codes(&snapshot, notes.is_empty())),
            Err(error) => out.push_str(&missing(&format!(
                "The report's diagnostics could not be read: {error}"
            ))),
        },
    }
    section("diagnostics", "Diagnostics that affected the figures", &out)
}

/// Every code recorded at least once, with its newest retained detail.
fn recorded_codes(snapshot: &DiagnosticsSnapshot, nothing_else: bool) -> String {
    let mut rows = String::new();
    for component in &snapshot.components {
        // Successes (a worker's "step completed") say nothing about the figures.
        let recorded = component
            .codes
            .iter()
            .filter(|code| code.occurrences > 0 && code.outcome != DiagnosticOutcome::Success);
        for code in recorded {
            let detail = snapshot
                .recent_events
                .iter()
                .rev()
                .find(|event| event.component == component.name && event.code == code.code)
                .and_then(|event| event.detail.as_deref())
                .unwrap_or("");
            let _ = writeln!(
                rows,
                "<tr><td><code>{}</code></td><td class=\"number\">{}</td><td>{}</td><td>{}</td></tr>",
                escape(&code.code),
                code.occurrences,
                escape(&code.description),
                escape(detail)
            );
        }
    }
    if rows.is_empty() {
        return if nothing_else {
            "<p class=\"note\">Nothing was recorded that affected the figures.</p>\n".into()
        } else {
            "<p class=\"note\">No diagnostic code was recorded.</p>\n".into()
        };
    }
    format!(
        "<table>\n<tr><th>code</th><th>times</th><th>what</th><th>latest detail</th></tr>\n\
         {rows}</table>\n"
    )
}

/// The shared time axis: seconds from the report's start to its end.
struct TimeAxis {
    start: DateTime<Utc>,
    seconds: f64,
}

impl TimeAxis {
    fn of(report: &EnergyReport) -> Self {
        TimeAxis {
            start: report.started_at,
            seconds: seconds_between(report.started_at, report.ended_at).max(0.001),
        }
    }

    fn right(&self) -> f64 {
        CHART_WIDTH - PLOT_RIGHT
    }

    fn x(&self, at: DateTime<Utc>) -> f64 {
        PLOT_LEFT + seconds_between(self.start, at) / self.seconds * (self.right() - PLOT_LEFT)
    }

    /// The unit ticks are counted in: seconds, minutes for runs of ten minutes or
    /// more, hours from six hours.
    fn unit(&self) -> (f64, &'static str) {
        if self.seconds >= 6.0 * 3600.0 {
            (3600.0, "hours")
        } else if self.seconds >= 600.0 {
            (60.0, "minutes")
        } else {
            (1.0, "seconds")
        }
    }

    /// Vertical grid lines, tick labels and the axis title under a plot of
    /// `plot_height`.
    fn grid_and_labels(&self, plot_height: f64) -> String {
        let (per_unit, unit) = self.unit();
        let span = self.seconds / per_unit;
        let step = nice_step(span / 10.0);
        let bottom = PLOT_TOP + plot_height;
        let mut out = String::new();
        for tick in ticks(span, step) {
            let x = PLOT_LEFT + tick / span * (self.right() - PLOT_LEFT);
            let _ = writeln!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{PLOT_TOP}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                bottom + 17.0,
                tick_label(tick, step)
            );
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{unit} since the start ({} UTC)</text>",
            (PLOT_LEFT + self.right()) / 2.0,
            bottom + 37.0,
            self.start.format("%Y-%m-%d %H:%M:%S")
        );
        out
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

/// 0, `step`, 2 `step` ... up to `end`.
fn ticks(end: f64, step: f64) -> Vec<f64> {
    let count = (end / step + 1e-9).floor() as usize;
    (0..=count.min(1000))
        .map(|index| index as f64 * step)
        .collect()
}

fn tick_label(value: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// A value axis: the unit it is labelled in and how many base units one is.
struct ValueScale {
    unit: String,
    divisor: f64,
}

impl ValueScale {
    fn plain(unit: &str) -> Self {
        ValueScale {
            unit: unit.into(),
            divisor: 1.0,
        }
    }

    /// Bytes, counted in the binary unit that keeps `peak` readable.
    fn bytes(peak: f64) -> Self {
        let (unit, divisor) = if peak >= 1024f64.powi(3) {
            ("GiB", 1024f64.powi(3))
        } else if peak >= 1024f64.powi(2) {
            ("MiB", 1024f64.powi(2))
        } else {
            ("KiB", 1024.0)
        };
        ValueScale {
            unit: unit.into(),
            divisor,
        }
    }
}

/// One line's legend: its label and a summary.
struct LegendEntry {
    label: String,
    detail: Option<String>,
}

fn svg_open(id: &str, plot_height: f64, description: &str) -> String {
    let height = PLOT_TOP + plot_height + PLOT_BOTTOM;
    format!(
        "<svg id=\"{id}-chart\" viewBox=\"0 0 {CHART_WIDTH} {height}\" role=\"img\" \
         aria-label=\"{}\">\n<defs><clipPath id=\"{id}-plot\"><rect x=\"{PLOT_LEFT}\" \
         y=\"{PLOT_TOP}\" width=\"{:.1}\" height=\"{plot_height:.1}\"/></clipPath></defs>\n",
        escape(description),
        CHART_WIDTH - PLOT_RIGHT - PLOT_LEFT,
    )
}

fn frame(plot_height: f64) -> String {
    format!(
        "<rect class=\"frame\" x=\"{PLOT_LEFT}\" y=\"{PLOT_TOP}\" width=\"{:.1}\" \
         height=\"{plot_height:.1}\"/>\n",
        CHART_WIDTH - PLOT_RIGHT - PLOT_LEFT
    )
}

/// A chart of `lines` (one per legend entry) over the time axis, from zero up.
fn line_chart(
    id: &str,
    axis: &TimeAxis,
    scale: &ValueScale,
    legend: &[LegendEntry],
    lines: &[&[SeriesPoint]],
) -> String {
    let mut out = String::from("<ul class=\"legend\">\n");
    for (index, entry) in legend.iter().enumerate() {
        let _ = writeln!(
            out,
            "<li><span class=\"swatch\" style=\"background:{}\"></span>{}{}</li>",
            PALETTE[index % PALETTE.len()],
            escape(&entry.label),
            entry
                .detail
                .as_ref()
                .map_or_else(String::new, |detail| format!(": {}", escape(detail)))
        );
    }
    out.push_str("</ul>\n");
    let peak = lines
        .iter()
        .flat_map(|points| points.iter().filter_map(|point| point.value))
        .fold(0.0, f64::max)
        / scale.divisor;
    // From zero to a round value a little above the peak (0 to 1 for a line of zeros).
    let (step, top) = if peak > 0.0 {
        let step = nice_step(peak * 1.05 / 5.0);
        (step, (peak * 1.05 / step).ceil() * step)
    } else {
        (0.2, 1.0)
    };
    let y = |value: f64| PLOT_TOP + PLOT_HEIGHT - (value / scale.divisor / top) * PLOT_HEIGHT;
    let description = legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    out.push_str(&svg_open(id, PLOT_HEIGHT, &description));
    for tick in ticks(top, step) {
        let at = y(tick * scale.divisor);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{PLOT_LEFT}\" y1=\"{at:.1}\" x2=\"{:.1}\" y2=\"{at:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            axis.right(),
            PLOT_LEFT - 8.0,
            at + 4.0,
            tick_label(tick, step)
        );
    }
    let _ = writeln!(
        out,
        "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        PLOT_TOP + PLOT_HEIGHT / 2.0,
        escape(&scale.unit)
    );
    out.push_str(&axis.grid_and_labels(PLOT_HEIGHT));
    let _ = writeln!(out, "<g clip-path=\"url(#{id}-plot)\">");
    for (index, points) in lines.iter().enumerate() {
        out.push_str(&line_path(
            points,
            PALETTE[index % PALETTE.len()],
            |at| axis.x(at),
            y,
        ));
    }
    out.push_str("</g>\n");
    out.push_str(&frame(PLOT_HEIGHT));
    out.push_str("</svg>\n");
    out
}

/// One line as a path broken at every gap, with a dot at each reading when the line
/// is sparse (a lone reading between gaps would otherwise not show).
fn line_path(
    points: &[SeriesPoint],
    color: &str,
    x: impl Fn(DateTime<Utc>) -> f64,
    y: impl Fn(f64) -> f64,
) -> String {
    let mut path = String::new();
    let mut pen_down = false;
    for point in points {
        match point.value {
            Some(value) => {
                let _ = write!(
                    path,
                    "{}{:.1} {:.1} ",
                    if pen_down { "L" } else { "M" },
                    x(point.at),
                    y(value)
                );
                pen_down = true;
            }
            None => pen_down = false,
        }
    }
    let mut out = format!(
        "<path d=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" \
         stroke-linejoin=\"round\"/>\n",
        path.trim_end()
    );
    if points.len() <= DOTTED_UP_TO {
        for point in points {
            if let Some(value) = point.value {
                let _ = writeln!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
                    x(point.at),
                    y(value)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report_series::SeriesBuilder;
    use wattline_actors::energy::record::{DevicePower, PowerRecord};
    use wattline_actors::energy::replay::report_from_records;
    use wattline_model::energy::EnergyRecord;

    fn start() -> DateTime<Utc> {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn nanos(seconds: f64) -> u64 {
        (seconds * 1e9).round() as u64
    }

    fn wall(seconds: f64) -> DateTime<Utc> {
        start() + chrono::Duration::nanoseconds(nanos(seconds) as i64)
    }

    /// A 2 s run: one GPU read every 0.1 s, its power climbing, and two Agent scopes.
    fn gpu_run_records() -> Vec<EnergyRecord> {
        let mut records = vec![
            EnergyRecord::Started {
                at: 0,
                wall: start(),
                settings: Box::default(),
            },
            EnergyRecord::MeasuringFrom {
                at: 0,
                wall: start(),
            },
        ];
        let scopes = [
            ("plan <script>alert(1)</script>", 0.2, 0.9),
            ("execute & \"check\"", 1.0, 1.8),
        ];
        for step in 0..=20 {
            let seconds = step as f64 * 0.1;
            for (index, (name, from, to)) in scopes.iter().enumerate() {
                let uuid = uuid::Uuid::from_u128(index as u128 + 1);
                if (seconds - from).abs() < 1e-9 {
                    records.push(EnergyRecord::ScopeStarted {
                        uuid,
                        name: name.to_string(),
                        at: nanos(seconds),
                        wall: wall(seconds),
                        parent: None,
                        process_id: None,
                        weight: None,
                    });
                }
                if (seconds - to).abs() < 1e-9 {
                    records.push(EnergyRecord::ScopeEnded {
                        uuid,
                        at: nanos(seconds),
                        wall: wall(seconds),
                    });
                }
            }
            records.push(EnergyRecord::Power(PowerRecord {
                source: "nvml".into(),
                at: nanos(seconds),
                devices: Some(vec![DevicePower {
                    id: "GPU-0123456789abcdef".into(),
                    name: Some("NVIDIA <H200>".into()),
                    watts: Some(100.0 + 10.0 * step as f64),
                    counter_millijoules: None,
                    shares: None,
                    mig_enabled: None,
                    at: None,
                }]),
                power_field: None,
            }));
        }
        records.push(EnergyRecord::Report {
            at: nanos(2.0),
            wall: wall(2.0),
        });
        records
    }

    fn page(records: &[EnergyRecord], command: &[String]) -> String {
        let report = report_from_records(records.iter().cloned()).unwrap();
        let mut builder = SeriesBuilder::new();
        for record in records {
            builder.push_energy(record);
        }
        render_html(
            &report,
            &builder.finish(),
            RunDescription {
                scope: Some("global"),
                command: Some(command),
            },
        )
    }

    /// Every attribute or rule that could make a browser fetch something.
    fn assert_loads_nothing(page: &str) {
        for forbidden in [
            "http://", "https://", "src=", "href=", "<script", "<link", "@import", "<img",
            "<iframe", "<object", "<embed",
        ] {
            assert!(!page.contains(forbidden), "the page holds {forbidden:?}");
        }
        for (at, _) in page.match_indices("url(") {
            assert!(
                page[at..].starts_with("url(#"),
                "only references inside the page: {}",
                &page[at..at + 30]
            );
        }
    }

    #[test]
    fn text_is_escaped_for_elements_and_attributes() {
        assert_eq!(
            escape("<a href=\"x\">Tom & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;"
        );
    }

    #[test]
    fn a_run_with_gpu_power_draws_its_line_axes_and_a_band_per_agent_scope() {
        let command = ["sh".to_string(), "-c".into(), "echo '<b>&</b>'".into()];
        let page = page(&gpu_run_records(), &command);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert_loads_nothing(&page);
        // Text from outside is escaped wherever it lands.
        assert!(page.contains("sh -c echo &#39;&lt;b&gt;&amp;&lt;/b&gt;&#39;"));
        assert!(!page.contains("<b>&</b>"));
        assert!(page.contains("NVIDIA &lt;H200&gt; GPU-01234567"));
        assert!(!page.contains("<H200>"));
        assert!(!page.contains("<script>alert(1)"));
        assert!(page.contains("plan &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("execute &amp; &quot;check&quot;"));
        // The GPU chart: a line through 21 readings, the value axis in watts up to a
        // round value above the 300 W peak, the time axis over the 2 s window.
        let chart = section(&page, "gpu-power");
        assert!(chart.contains("<svg id=\"gpu-power-chart\""));
        let path = chart.split("<path d=\"").nth(1).unwrap();
        let path = &path[..path.find('"').unwrap()];
        assert_eq!(path.matches('M').count(), 1, "one unbroken line: {path}");
        assert_eq!(path.matches('L').count(), 20, "{path}");
        for label in [">0<", ">100<", ">200<", ">300<", ">W<"] {
            assert!(chart.contains(label), "no value label {label}");
        }
        for label in [
            ">0.0<",
            ">0.4<",
            ">1.0<",
            ">2.0<",
            "seconds since the start",
        ] {
            assert!(chart.contains(label), "no time label {label}");
        }
        assert!(!chart.contains("No GPU power was read"));
        // One band per Agent scope, each with its energy.
        let lanes = section(&page, "agent-scopes");
        assert_eq!(lanes.matches("<g class=\"band\">").count(), 2);
        let bands: Vec<&str> = lanes.split("<g class=\"band\">").skip(1).collect();
        let report = report_from_records(gpu_run_records()).unwrap();
        for (band, scope) in bands.iter().zip(&report.agent_scopes) {
            let kwh = format!("{:.6} kWh", scope.energy_kwh.unwrap());
            assert!(band.contains(&kwh), "{band}");
        }
        // The bands sit on the charts' time axis: 0.2 s to 0.9 s of 2 s.
        let plot = CHART_WIDTH - PLOT_RIGHT - PLOT_LEFT;
        let expected_left = format!("x=\"{:.1}\"", PLOT_LEFT + 0.1 * plot);
        assert!(bands[0].contains(&expected_left), "{}", bands[0]);
        // The totals with the factors and where they came from.
        let totals = section(&page, "totals");
        assert!(totals.contains("0.12 USD/kWh"));
        assert!(totals.contains("<code>default</code>"));
        assert!(totals.contains("dense trapezoid"));
    }

    /// The HTML of the section with `id`.
    fn section<'a>(page: &'a str, id: &str) -> &'a str {
        let from = page
            .find(&format!("<section id=\"{id}\">"))
            .unwrap_or_else(|| panic!("no section {id}"));
        let to = from + page[from..].find("</section>").unwrap();
        &page[from..to]
    }

    #[test]
    fn without_gpu_power_the_page_says_why_instead_of_an_empty_chart() {
        let records = vec![
            EnergyRecord::Started {
                at: 0,
                wall: start(),
                settings: Box::default(),
            },
            EnergyRecord::GpuStatus {
                configured: "nvml".into(),
                unavailable: Some("NVML library not found (libnvidia-ml.so.1)".into()),
                selection: None,
            },
            EnergyRecord::CpuStatus {
                unavailable: Some("no RAPL powercap interface <here>".into()),
            },
            EnergyRecord::Report {
                at: nanos(1.0),
                wall: wall(1.0),
            },
        ];
        let page = page(&records, &["true".to_string()]);
        assert_loads_nothing(&page);
        let gpu = section(&page, "gpu-power");
        assert!(
            gpu.contains("No GPU power was read: NVML library not found (libnvidia-ml.so.1)"),
            "{gpu}"
        );
        assert!(!gpu.contains("<svg"));
        let cpu = section(&page, "cpu-power");
        assert!(cpu.contains(
            "No CPU package or DRAM power was read: no RAPL powercap interface &lt;here&gt;"
        ));
        assert!(!cpu.contains("<svg"));
        assert!(section(&page, "cpu-use").contains("No CPU use was recorded"));
        assert!(section(&page, "memory").contains("No memory was recorded"));
        assert!(section(&page, "agent-scopes").contains("No Agent scope was marked"));
        assert!(section(&page, "totals").contains("not measured"));
    }

    #[test]
    fn diagnostics_list_the_failures_with_their_latest_detail_escaped() {
        let mut report = report_from_records(gpu_run_records()).unwrap();
        let code = |code: &str, outcome: &str, occurrences: u64| {
            serde_json::json!({
                "position": 1, "code": code, "origin": "builtin", "description": "what <it> is",
                "outcome": outcome, "allowed_classes": [], "occurrences": occurrences,
                "last_observed_at": null,
            })
        };
        report.diagnostics = Some(serde_json::json!({
            "availability": "enabled",
            "taken_at": "2026-01-01T00:00:02Z",
            "limits": null,
            "usage": {"live_components": 1, "extension_declarations": 0, "registration_text_bytes": 0},
            "components": [{"name": "gpu", "state": "open", "codes": [
                code("gpu.nvidia_smi.timeout", "failure", 2),
                code("gpu.nvidia_smi.not_found", "failure", 0),
                code("worker.step_completed", "success", 5),
            ]}],
            "recent_events": [{
                "sequence": 1, "component": "gpu", "code": "gpu.nvidia_smi.timeout", "position": 1,
                "count": 1, "outcome": "failure", "severity": "warning", "failure_class": "timeout",
                "detail": "no answer in 10 s <stuck>", "correlation": {"request_id": null, "session_id": null},
                "recorded_at": "2026-01-01T00:00:01Z",
            }],
            "history": {"capacity": 64, "retained": 1, "evicted": 0, "truncated": 0, "dropped": 0},
            "delivery": {"accepted": 2, "rejected": 0, "busy": 0},
        }));
        let html = render_html(&report, &RunSeries::default(), RunDescription::default());
        let diagnostics = section(&html, "diagnostics");
        assert!(diagnostics.contains("<code>gpu.nvidia_smi.timeout</code>"));
        assert!(diagnostics.contains("no answer in 10 s &lt;stuck&gt;"));
        assert!(diagnostics.contains("what &lt;it&gt; is"));
        assert!(!diagnostics.contains("not_found"), "never recorded");
        assert!(!diagnostics.contains("step_completed"), "a success");
        assert!(html.contains("rebuilt from an ATOF file"));
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(70.0), 100.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(ticks(1.0, 0.25), [0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(tick_label(0.5, 0.1), "0.5");
        assert_eq!(tick_label(300.0, 100.0), "300");
    }
}

//! The page's sections that draw on the time axis (power, CPU use, memory, Agent
//! scopes) and the diagnostics behind the figures.

use std::fmt::Write as _;

use wattline_diagnostics::{DiagnosticOutcome, DiagnosticsSnapshot};
use wattline_model::report::ScopeEnergy;

use super::chart::{
    LANE_HEIGHT, LegendEntry, PALETTE, PLOT_LEFT, PLOT_TOP, TimeAxis, ValueScale, frame,
    line_chart, svg_open,
};
use super::{
    cost_text, device_label, escape, grams_text, kwh_text, missing, seconds_between, section,
    watts_text,
};
use crate::report::human_units::energy_text;
use crate::report::remote_estimates::{call_text, totals_text};
use crate::report::series::RunSeries;
use crate::report::series::{MemoryFigure, PowerLine, SeriesPoint, has_readings};
use wattline_model::report::EnergyReport;

pub(super) fn gpu_power_section(
    report: &EnergyReport,
    series: &RunSeries,
    axis: &TimeAxis,
) -> String {
    let chart = power_chart("gpu-power", &series.gpu_power, axis, |line| {
        let device = report
            .devices
            .iter()
            .find(|d| d.device_identifier == line.id)?;
        Some(format!(
            "mean {}, max {}, {}",
            watts_text(device.mean_watts),
            watts_text(device.max_watts),
            energy_text(device.energy_kwh)
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

pub(super) fn cpu_power_section(
    report: &EnergyReport,
    series: &RunSeries,
    axis: &TimeAxis,
) -> String {
    let chart = power_chart("cpu-power", &series.cpu_power, axis, |line| {
        let zone = report.cpu_zones.iter().find(|zone| zone.zone == line.id)?;
        Some(format!(
            "{} ({})",
            energy_text(zone.energy_kwh),
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

pub(super) fn cpu_use_section(series: &RunSeries, axis: &TimeAxis) -> String {
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

pub(super) fn memory_section(series: &RunSeries, axis: &TimeAxis) -> String {
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

pub(super) fn agent_scopes_section(report: &EnergyReport, axis: &TimeAxis) -> String {
    if report.agent_scopes.is_empty() {
        let body = "<p class=\"note\">No Agent scope was marked in this run.</p>\n";
        return section("agent-scopes", "Agent scopes", body);
    }
    let mut out = scope_lanes(report, axis);
    // The remote calls' column only where a step made one.
    let remote = report.agent_scopes.iter().any(|s| s.remote_call.is_some());
    let _ = writeln!(
        out,
        "<table>\n<tr><th>scope</th><th>from</th><th>to</th><th>attributed</th>\
         <th>attributed cost</th><th>window energy</th><th>window GPU</th><th>window cost</th>\
         <th>window CO2</th>{}</tr>",
        if remote {
            "<th>remote call (estimated)</th>"
        } else {
            ""
        }
    );
    for scope in &report.agent_scopes {
        let end = scope.ended_at.unwrap_or(report.ended_at);
        let remote_cell = match (&scope.remote_call, remote) {
            (Some(call), _) => format!("<td>{}</td>", escape(&call_text(call))),
            (None, true) => "<td></td>".to_owned(),
            (None, false) => String::new(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"number\">{:.2} s</td><td class=\"number\">{:.2} s{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{}</td><td class=\"number\">{}</td><td class=\"number\">{}</td>\
             <td class=\"number\">{}</td>{}</tr>",
            escape(&scope.name),
            seconds_between(report.started_at, scope.started_at),
            seconds_between(report.started_at, end),
            if scope.ended_at.is_none() {
                " (live at the report)"
            } else {
                ""
            },
            kwh_text(scope.attributed_energy_kwh),
            cost_text(scope.attributed_cost, &report.currency),
            kwh_text(scope.energy_kwh),
            kwh_text(scope.gpu_energy_kwh),
            cost_text(scope.cost, &report.currency),
            grams_text(scope.co2_grams),
            remote_cell,
        );
    }
    let unattributed: f64 = report.domains.iter().map(|d| d.unattributed_kwh).sum();
    let _ = write!(
        out,
        "</table>\n<p class=\"note\">Attributed: each scope's part of the energy it shared \
         with the scopes live beside it (by process share, then weight); these and the {} \
         no scope held add up to the total. Window: the device's energy while the scope was \
         live; windows overlap and are not to be added up.</p>\n",
        kwh_text(Some(unattributed))
    );
    if let Some(totals) = &report.remote_estimates {
        let _ = writeln!(
            out,
            "<p class=\"note\">Remote model calls: {}. An estimate of the energy a call \
             cost on the machine that served it, from its token counts; this machine only \
             waited, so none of it is in the measured figures.</p>",
            escape(&totals_text(totals))
        );
    }
    if !report.folded_scopes.is_empty() {
        let folded: u64 = report.folded_scopes.iter().map(|f| f.count).sum();
        let _ = writeln!(
            out,
            "<p class=\"note\">{folded} older finished scopes are folded into per-name \
             aggregates (the report's <code>folded_scopes</code>).</p>"
        );
    }
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
    let label = format!(
        "{} · {}",
        scope.name,
        kwh_text(scope.attributed_energy_kwh.or(scope.energy_kwh))
    );
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

pub(super) fn diagnostics_section(report: &EnergyReport) -> String {
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

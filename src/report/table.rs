//! The report as a readable table for a terminal: the window, the GPU devices as a
//! table of fixed-width columns, then one line per CPU zone, total, factor, process,
//! Agent scope and problem. Each part is a function of the report; [`render_table`]
//! runs them in order.

use std::fmt::Write as _;

use wattline_config::energy::FactorOrigin;

use crate::report::human_units::{energy_text, power_text, three_significant_figures};
use crate::report::receipts::plus_minus_text;
use crate::report::remote_estimates::{call_text, totals_text};
use wattline_model::report::EnergyReport;
use wattline_model::report::{DeviceEnergy, Factor};

/// The parts of the table, in the order they are printed.
const PARTS: &[fn(&EnergyReport, &mut String)] = &[
    window_and_source,
    gpu_devices,
    gpu_selection,
    cpu_zones,
    totals,
    co2,
    process_attribution,
    agent_scopes,
    exporter_losses,
    notes_and_problems,
];

/// The report as a readable table for a terminal (what `wattline run` prints at the
/// end, before the power sparklines).
pub fn render_table(report: &EnergyReport) -> String {
    let mut out = String::new();
    for part in PARTS {
        part(report, &mut out);
    }
    out
}

/// How a column's cells sit in their width.
#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// One column of the device table: its heading and width.
struct Column {
    heading: &'static str,
    width: usize,
    align: Align,
}

const fn column(heading: &'static str, width: usize, align: Align) -> Column {
    Column {
        heading,
        width,
        align,
    }
}

/// The device table's columns; [`device_cells`] gives a row's cells in this order.
const DEVICE_COLUMNS: [Column; 9] = [
    column("device", 40, Align::Left),
    column("energy", 12, Align::Right),
    column("method", 16, Align::Right),
    column("mean", 9, Align::Right),
    column("max", 9, Align::Right),
    column("covered", 8, Align::Right),
    column("rate Hz", 8, Align::Right),
    column("gaps", 5, Align::Right),
    column("cost", 10, Align::Right),
];

/// One line of the device table: each cell padded to its column, one space between.
fn table_line<S: AsRef<str>>(cells: &[S]) -> String {
    let padded: Vec<String> = DEVICE_COLUMNS
        .iter()
        .zip(cells)
        .map(|(column, cell)| match column.align {
            Align::Left => format!("{:<width$}", cell.as_ref(), width = column.width),
            Align::Right => format!("{:>width$}", cell.as_ref(), width = column.width),
        })
        .collect();
    format!("{}\n", padded.join(" "))
}

/// A device's row, cell by cell, in [`DEVICE_COLUMNS`]'s order.
fn device_cells(device: &DeviceEnergy) -> [String; 9] {
    let label = match &device.name {
        Some(name) => format!("{name} {}", short(&device.device_identifier)),
        None => device.device_identifier.clone(),
    };
    [
        truncate(&label, DEVICE_COLUMNS[0].width),
        energy_text(device.energy_kwh),
        device.energy_source.as_str().to_owned(),
        device.mean_watts.map_or_else(|| "-".to_owned(), power_text),
        device.max_watts.map_or_else(|| "-".to_owned(), power_text),
        format!("{:.1}s", device.covered_seconds),
        optional(device.sampling_rate_hz),
        device.gaps.to_string(),
        three_significant_figures(device.cost),
    ]
}

/// The window's length and which GPU source answered.
fn window_and_source(report: &EnergyReport, out: &mut String) {
    let seconds = (report.ended_at - report.started_at).num_milliseconds() as f64 / 1000.0;
    let _ = writeln!(out, "wattline energy report ({seconds:.1} s)");
    match (&report.gpu_source, &report.gpu_source_configured) {
        (Some(source), _) => {
            let _ = writeln!(out, "GPU source: {source}");
        }
        (None, Some(configured)) if configured != "none" => {
            let _ = writeln!(
                out,
                "GPU source: none (configured: {configured}, not answering)"
            );
        }
        (None, _) => out.push_str("GPU source: none\n"),
    }
}

/// The device table, or why there is none, and a note per MIG board.
fn gpu_devices(report: &EnergyReport, out: &mut String) {
    if report.devices.is_empty() {
        let _ = writeln!(
            out,
            "GPU energy not measured: {}",
            report
                .gpu_unavailable
                .as_deref()
                .unwrap_or("no device answered (see diagnostics)")
        );
        return;
    }
    let headings: Vec<&str> = DEVICE_COLUMNS.iter().map(|c| c.heading).collect();
    out.push_str(&table_line(&headings));
    for device in &report.devices {
        out.push_str(&table_line(&device_cells(device)));
    }
    for device in report.devices.iter().filter(|d| d.shared_board_power) {
        let _ = writeln!(
            out,
            "  {}: MIG is on: whole-board power, shared by every MIG instance, not any one instance's own",
            short(&device.device_identifier)
        );
    }
}

/// The devices counted, when a selection narrowed them.
fn gpu_selection(report: &EnergyReport, out: &mut String) {
    let Some(selection) = &report.gpu_selection else {
        return;
    };
    let counted: Vec<&str> = report
        .devices
        .iter()
        .map(|device| device.device_identifier.as_str())
        .collect();
    let _ = writeln!(
        out,
        "GPUs counted: {} (selected by {})",
        if counted.is_empty() {
            "none".to_owned()
        } else {
            counted.join(", ")
        },
        selection.describe()
    );
}

/// One line per RAPL zone, or why CPU energy was not measured.
fn cpu_zones(report: &EnergyReport, out: &mut String) {
    for zone in &report.cpu_zones {
        let _ = writeln!(
            out,
            "CPU {} ({}): {} over {:.1} s (RAPL counter{})",
            zone.name,
            zone.zone,
            energy_text(zone.energy_kwh),
            zone.covered_seconds,
            if zone.domain.is_counted() {
                ""
            } else {
                "; part of the package, not added"
            }
        );
    }
    if let Some(reason) = &report.cpu_unavailable {
        let _ = writeln!(out, "CPU energy not measured: {reason}");
    }
}

/// The total by domain with its cost, and the facility figure at a PUE other than 1.
fn totals(report: &EnergyReport, out: &mut String) {
    let Some(kwh) = report.total.energy_kwh else {
        out.push_str("Total: not measured (no GPU or CPU energy could be read)\n");
        return;
    };
    let parts: Vec<String> = report
        .domains
        .iter()
        .map(|d| {
            format!(
                "{} {} by {}",
                d.domain.label(),
                energy_text(d.energy_kwh),
                d.method.as_str()
            )
        })
        .collect();
    let receipt = report
        .total
        .receipt
        .map(|receipt| format!(" {}", plus_minus_text(kwh, &receipt)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "Total: {}{receipt} ({}), {} {} at {} {}/kWh ({})",
        energy_text(kwh),
        parts.join(", "),
        three_significant_figures(report.total.cost.unwrap_or(0.0)),
        report.currency,
        report.cost_per_kwh.value,
        report.currency,
        origin(&report.cost_per_kwh.origin)
    );
    if (report.pue.value - 1.0).abs() > f64::EPSILON {
        let _ = writeln!(
            out,
            "Facility at PUE {} ({}): {}, {} {}",
            report.pue.value,
            origin(&report.pue.origin),
            energy_text(report.total.facility_energy_kwh.unwrap_or(0.0)),
            three_significant_figures(report.total.facility_cost.unwrap_or(0.0)),
            report.currency
        );
    }
}

/// The CO2 figure and its carbon intensity, or that CO2 is not tracked.
fn co2(report: &EnergyReport, out: &mut String) {
    match (&report.total.co2_grams, &report.carbon_intensity) {
        (Some(grams), Some(factor)) => {
            let _ = writeln!(
                out,
                "CO2: {} gCO2e at carbon intensity {}, a factor, not a reading of the grid",
                three_significant_figures(*grams),
                carbon_intensity(factor)
            );
        }
        (None, Some(factor)) => {
            let _ = writeln!(
                out,
                "CO2: no energy measured; carbon intensity {}",
                carbon_intensity(factor)
            );
        }
        _ => out.push_str("CO2: not tracked (set GENAI_ENABLE_CO2_TRACKING=true)\n"),
    }
}

/// Each process's share of each device it ran on, and the device's unattributed rest.
fn process_attribution(report: &EnergyReport, out: &mut String) {
    for device in report.devices.iter().filter(|d| d.attribution.is_some()) {
        let basis = device.attribution.map_or("", |b| b.as_str());
        for process in report
            .processes
            .iter()
            .filter(|p| p.device_identifier == device.device_identifier)
        {
            let _ = writeln!(
                out,
                "process {:<8} {} on {} (by {basis} share)",
                process.process_id,
                energy_text(process.gpu_energy_kwh),
                short(&device.device_identifier)
            );
        }
        let _ = writeln!(
            out,
            "unattributed     {} on {}",
            energy_text(device.unattributed_kwh),
            short(&device.device_identifier)
        );
    }
}

/// One line per Agent scope: its attributed energy (these add up, with what no scope
/// held), then its window (the device's energy while it was live: not additive); then
/// the folded scopes, one line per name.
fn agent_scopes(report: &EnergyReport, out: &mut String) {
    let kwh_text = |kwh: Option<f64>| kwh.map_or_else(|| "not measured".into(), energy_text);
    for scope in &report.agent_scopes {
        let window_receipt = scope
            .energy_kwh
            .zip(scope.receipt)
            .map(|(kwh, receipt)| format!(" {}", plus_minus_text(kwh, &receipt)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "agent {:<20} {} attributed (window {}{window_receipt}, not additive)",
            scope.name,
            kwh_text(scope.attributed_energy_kwh),
            kwh_text(scope.energy_kwh)
        );
    }
    if !report.agent_scopes.is_empty() && !report.domains.is_empty() {
        let unattributed: f64 = report.domains.iter().map(|d| d.unattributed_kwh).sum();
        let _ = writeln!(
            out,
            "agent {:<20} {} held by no scope",
            "(none)",
            energy_text(unattributed)
        );
    }
    for scope in &report.agent_scopes {
        if let Some(call) = &scope.remote_call {
            let _ = writeln!(out, "remote {:<19} {}", scope.name, call_text(call));
        }
    }
    if let Some(totals) = &report.remote_estimates {
        let _ = writeln!(out, "remote {:<19} {}", "(all)", totals_text(totals));
    }
    for folded in &report.folded_scopes {
        let energy = &folded.attributed_energy_kwh;
        let _ = writeln!(
            out,
            "agent {:<20} {} older scopes folded: {} attributed in all, p50 {} p99 {}, p50 {:.2} s",
            folded.name,
            folded.count,
            energy_text(energy.sum),
            energy_text(energy.p50),
            energy_text(energy.p99),
            folded.duration_seconds.p50
        );
    }
}

/// One line per exporter that lost data.
fn exporter_losses(report: &EnergyReport, out: &mut String) {
    for exporter in report.exporters.iter().filter(|e| e.lost_data()) {
        let _ = writeln!(
            out,
            "exporter {}: {} exported, {}",
            exporter.name,
            exporter.exported,
            exporter.loss_description()
        );
    }
}

/// What a replay left out, a last sample not taken, and parts of the pipeline that
/// stopped.
fn notes_and_problems(report: &EnergyReport, out: &mut String) {
    for note in &report.replay_notes {
        let _ = writeln!(out, "Note: {note}");
    }
    if let Some(reason) = &report.last_sample_missing {
        let _ = writeln!(
            out,
            "Last power sample not taken: {reason} (the figures end at the reading before)"
        );
    }
    for problem in &report.health {
        let _ = writeln!(
            out,
            "PIPELINE STOPPED IN PART: {} {} at {} (figures after it may be missing)",
            problem.component,
            problem.detail,
            problem.at.format("%H:%M:%S%.3f")
        );
    }
}

fn optional(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

fn short(identifier: &str) -> String {
    identifier.chars().take(12).collect()
}

fn truncate(text: &str, width: usize) -> String {
    text.chars().take(width).collect()
}

fn origin(origin: &FactorOrigin) -> String {
    match origin {
        FactorOrigin::Default => "default".into(),
        FactorOrigin::File(path) => format!("from {path}"),
        FactorOrigin::Environment(name) => format!("from ${name}"),
        FactorOrigin::Code => "set in code".into(),
        FactorOrigin::Region(code) => format!("region {code}"),
    }
}

/// `380.95 gCO2e/kWh (region DE, Ember/OWID 2023, CC BY 4.0; carbon_region from
/// $GENAI_CO2_COUNTRY_ISO_CODE)`: the factor, where it came from, and the region
/// factor an explicit value won over.
fn carbon_intensity(factor: &Factor) -> String {
    let value = format!("{} {}", factor.value, factor.unit);
    match &factor.region {
        Some(region) if region.applied => format!(
            "{value} ({}; carbon_region {})",
            region.intensity.label(),
            origin(&region.origin)
        ),
        Some(region) => format!(
            "{value} ({}, which wins over carbon_region {}: {}, {} {})",
            origin(&factor.origin),
            origin(&region.origin),
            region.intensity.label(),
            region.intensity.gco2e_per_kwh,
            factor.unit
        ),
        None => format!("{value} ({})", origin(&factor.origin)),
    }
}

//! Two runs side by side: "did my change make the agent cost more?". Each report's
//! figures are matched (the run, each GPU device by its identifier, each energy domain,
//! each Agent-scope name) and put beside each other with the change, for the table,
//! JSON and the HTML page; [`regressions`] names what grew past a limit, for a CI gate.
//! Pure: two reports in, a comparison out.

use serde::Serialize;

use crate::report::human_units::{energy_text, three_significant_figures};
use wattline_model::report::EnergyReport;
use wattline_model::report::ScopeEnergy;

/// Two runs compared: `rows` in order (the run, devices, domains, Agent-scope names).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunComparison {
    /// What the base run was read from (a path, as given).
    pub base: String,
    /// What the new run was read from.
    pub new: String,
    /// The currency of the costs (the new run's).
    pub currency: String,
    /// Every matched figure, the run first.
    pub rows: Vec<ComparedRow>,
    /// What a reader should know about the comparison (currencies that differ, folded
    /// scopes counted), in words.
    pub notes: Vec<String>,
}

/// What a row compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparedPart {
    /// The whole run: its total energy over every measured domain.
    Run,
    /// One GPU device, matched by its identifier.
    Device,
    /// One energy domain (`gpu`, `cpu_package`, `dram`, `cpu_part`).
    Domain,
    /// Every Agent scope of one name: their attributed energy (which adds up across
    /// concurrent scopes), cost, CO2 and summed duration.
    AgentScope,
}

impl ComparedRow {
    /// How the table names the row: `run`, `device GPU-…`, `step planner`.
    fn label(&self) -> String {
        match self.part {
            ComparedPart::Run => "run".to_owned(),
            part => format!("{} {}", part.label(), self.name),
        }
    }
}

impl ComparedPart {
    fn label(self) -> &'static str {
        match self {
            ComparedPart::Run => "run",
            ComparedPart::Device => "device",
            ComparedPart::Domain => "domain",
            ComparedPart::AgentScope => "step",
        }
    }
}

/// One figure in both runs, and how it changed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComparedFigure {
    /// In the base run; `None` when not measured there (or absent).
    pub base: Option<f64>,
    /// In the new run.
    pub new: Option<f64>,
    /// `new - base`, when both were measured.
    pub change: Option<f64>,
    /// The change as a percentage of `base`, when both were measured and `base` is not
    /// zero.
    pub change_percent: Option<f64>,
}

impl ComparedFigure {
    fn of(base: Option<f64>, new: Option<f64>) -> Self {
        let change = base.zip(new).map(|(base, new)| new - base);
        let change_percent = base
            .zip(change)
            .filter(|(base, _)| *base != 0.0)
            .map(|(base, change)| change / base.abs() * 100.0);
        ComparedFigure {
            base,
            new,
            change,
            change_percent,
        }
    }
}

/// One matched part of both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparedRow {
    /// What is compared.
    pub part: ComparedPart,
    /// Its name: `run`, a device identifier, a domain, a scope name.
    pub name: String,
    /// How many of it the base run had (0: only in the new run). For a scope name, its
    /// scopes, folded ones included.
    pub base_count: u64,
    /// How many of it the new run had (0: only in the base run).
    pub new_count: u64,
    /// Energy, kWh (for a step, attributed).
    pub energy_kwh: ComparedFigure,
    /// Cost, in [`RunComparison::currency`].
    pub cost: ComparedFigure,
    /// gCO2e, with CO2 tracking on.
    pub co2_grams: ComparedFigure,
    /// Seconds: the run's window, a device's covered time, a step name's summed
    /// durations; `None` for a domain.
    pub duration_seconds: ComparedFigure,
    /// Whether the two energy figures' 95% intervals overlap: a change inside that is
    /// within error. `None` where either run has no interval for it.
    pub within_error: Option<bool>,
}

/// One part's figures in one run.
#[derive(Debug, Clone, Copy, Default)]
struct Figures {
    count: u64,
    energy_kwh: Option<f64>,
    cost: Option<f64>,
    co2_grams: Option<f64>,
    duration_seconds: Option<f64>,
    /// The energy's 95% interval, kWh.
    energy_interval: Option<(f64, f64)>,
}

/// The 95% interval of a figure's receipt.
fn interval(receipt: Option<&wattline_model::receipt::EnergyReceipt>) -> Option<(f64, f64)> {
    receipt.map(|receipt| (receipt.low_kwh, receipt.high_kwh))
}

/// Adds two optional figures: absent only when both are.
fn add(left: Option<f64>, right: Option<f64>) -> Option<f64> {
    match (left, right) {
        (None, None) => None,
        _ => Some(left.unwrap_or(0.0) + right.unwrap_or(0.0)),
    }
}

impl Figures {
    fn merged(self, other: Figures) -> Figures {
        Figures {
            count: self.count + other.count,
            energy_kwh: add(self.energy_kwh, other.energy_kwh),
            cost: add(self.cost, other.cost),
            co2_grams: add(self.co2_grams, other.co2_grams),
            duration_seconds: add(self.duration_seconds, other.duration_seconds),
            energy_interval: self
                .energy_interval
                .zip(other.energy_interval)
                .map(|(a, b)| (a.0 + b.0, a.1 + b.1)),
        }
    }
}

/// `base` and `new` side by side; `base_name` and `new_name` say where each came from.
pub fn compare_reports(
    base: &EnergyReport,
    new: &EnergyReport,
    base_name: &str,
    new_name: &str,
) -> RunComparison {
    let mut rows = vec![compared_row(
        ComparedPart::Run,
        "run",
        Some(run_figures(base)),
        Some(run_figures(new)),
    )];
    for (part, of) in [
        (ComparedPart::Device, device_figures as PartFigures),
        (ComparedPart::Domain, domain_figures),
        (ComparedPart::AgentScope, scope_name_figures),
    ] {
        let (base_parts, new_parts) = (of(base), of(new));
        // The base run's names in its order, then those only the new run has.
        for (name, figures) in &base_parts.in_order {
            rows.push(compared_row(
                part,
                name,
                Some(*figures),
                new_parts.get(name),
            ));
        }
        for (name, figures) in &new_parts.in_order {
            if base_parts.get(name).is_none() {
                rows.push(compared_row(part, name, None, Some(*figures)));
            }
        }
    }
    let mut notes = Vec::new();
    if base.currency != new.currency {
        notes.push(format!(
            "the runs' currencies differ ({} and {}): costs are not comparable",
            base.currency, new.currency
        ));
    }
    for (report, which) in [(base, "base"), (new, "new")] {
        let folded: u64 = report.folded_scopes.iter().map(|folded| folded.count).sum();
        if folded > 0 {
            notes.push(format!(
                "the {which} run folded {folded} older scopes into per-name aggregates; \
                 they are counted in their names' rows"
            ));
        }
    }
    RunComparison {
        base: base_name.to_owned(),
        new: new_name.to_owned(),
        currency: new.currency.clone(),
        rows,
        notes,
    }
}

/// A run's parts of one kind, each named, in the report's order.
type PartFigures = fn(&EnergyReport) -> NamedFigures;

/// Figures by name, in the order the names first came, those of a repeated name
/// summed; looked up by name in constant time (a run can hold thousands of step
/// names).
#[derive(Default)]
struct NamedFigures {
    in_order: Vec<(String, Figures)>,
    index: std::collections::HashMap<String, usize>,
}

impl NamedFigures {
    fn add(&mut self, name: &str, figures: Figures) {
        match self.index.get(name) {
            Some(&at) => self.in_order[at].1 = self.in_order[at].1.merged(figures),
            None => {
                self.index.insert(name.to_owned(), self.in_order.len());
                self.in_order.push((name.to_owned(), figures));
            }
        }
    }

    fn get(&self, name: &str) -> Option<Figures> {
        self.index.get(name).map(|&at| self.in_order[at].1)
    }
}

fn compared_row(
    part: ComparedPart,
    name: &str,
    base: Option<Figures>,
    new: Option<Figures>,
) -> ComparedRow {
    let figure = |of: fn(&Figures) -> Option<f64>| {
        ComparedFigure::of(base.as_ref().and_then(of), new.as_ref().and_then(of))
    };
    ComparedRow {
        part,
        name: name.to_owned(),
        base_count: base.map_or(0, |figures| figures.count),
        new_count: new.map_or(0, |figures| figures.count),
        energy_kwh: figure(|figures| figures.energy_kwh),
        cost: figure(|figures| figures.cost),
        co2_grams: figure(|figures| figures.co2_grams),
        duration_seconds: figure(|figures| figures.duration_seconds),
        within_error: base
            .and_then(|figures| figures.energy_interval)
            .zip(new.and_then(|figures| figures.energy_interval))
            .map(|(base, new)| base.0 <= new.1 && new.0 <= base.1),
    }
}

fn seconds_between(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> f64 {
    (to - from).num_nanoseconds().unwrap_or(0) as f64 / 1e9
}

fn run_figures(report: &EnergyReport) -> Figures {
    Figures {
        count: 1,
        energy_kwh: report.total.energy_kwh,
        cost: report.total.cost,
        co2_grams: report.total.co2_grams,
        duration_seconds: Some(seconds_between(report.started_at, report.ended_at)),
        energy_interval: interval(report.total.receipt.as_ref()),
    }
}

fn device_figures(report: &EnergyReport) -> NamedFigures {
    let mut named = NamedFigures::default();
    for device in &report.devices {
        let figures = Figures {
            count: 1,
            energy_kwh: Some(device.energy_kwh),
            cost: Some(device.cost),
            co2_grams: device.co2_grams,
            duration_seconds: Some(device.covered_seconds),
            energy_interval: interval(device.receipt.as_ref()),
        };
        named.add(&device.device_identifier, figures);
    }
    named
}

fn domain_figures(report: &EnergyReport) -> NamedFigures {
    let mut named = NamedFigures::default();
    for domain in &report.domains {
        let figures = Figures {
            count: 1,
            energy_kwh: Some(domain.energy_kwh),
            cost: Some(domain.cost),
            co2_grams: domain.co2_grams,
            duration_seconds: None,
            energy_interval: interval(domain.receipt.as_ref()),
        };
        named.add(domain.domain.as_str(), figures);
    }
    named
}

/// Every scope name's scopes summed, the folded ones included (their cost and CO2 at
/// the report's factors, as a kept scope's are).
fn scope_name_figures(report: &EnergyReport) -> NamedFigures {
    let mut names = NamedFigures::default();
    for scope in &report.agent_scopes {
        names.add(&scope.name, kept_scope_figures(report, scope));
    }
    for folded in &report.folded_scopes {
        let kwh = folded.attributed_energy_kwh.sum;
        names.add(
            &folded.name,
            Figures {
                count: folded.count,
                energy_kwh: Some(kwh),
                cost: Some(kwh * report.cost_per_kwh.value),
                co2_grams: report
                    .carbon_intensity
                    .as_ref()
                    .map(|intensity| kwh * intensity.value),
                duration_seconds: Some(folded.duration_seconds.sum),
                // Folded steps keep no receipts: their name has no interval.
                energy_interval: None,
            },
        );
    }
    names
}

/// A kept scope's figures; one still live at the report counts until its end.
fn kept_scope_figures(report: &EnergyReport, scope: &ScopeEnergy) -> Figures {
    let ended = scope.ended_at.unwrap_or(report.ended_at);
    Figures {
        count: 1,
        energy_kwh: scope.attributed_energy_kwh,
        cost: scope.attributed_cost,
        co2_grams: scope.attributed_co2_grams,
        duration_seconds: Some(seconds_between(scope.started_at, ended)),
        energy_interval: interval(scope.attributed_receipt.as_ref()),
    }
}

/// What grew by more than `percent`: the run's energy, or any step name's attributed
/// energy, in words (empty when nothing did). A step only one run has is not a growth
/// of that step (the run's total counts it); a figure that grew from zero did grow; a
/// growth inside both figures' 95% intervals is within error, not a growth.
pub fn regressions(comparison: &RunComparison, percent: f64) -> Vec<String> {
    comparison
        .rows
        .iter()
        .filter(|row| matches!(row.part, ComparedPart::Run | ComparedPart::AgentScope))
        .filter(|row| row.within_error != Some(true))
        .filter_map(|row| {
            let (base, new) = row.energy_kwh.base.zip(row.energy_kwh.new)?;
            let grew = if base > 0.0 {
                (new - base) / base * 100.0 > percent
            } else {
                new > base
            };
            grew.then(|| {
                let by = row
                    .energy_kwh
                    .change_percent
                    .map_or_else(|| "from zero".to_owned(), |change| format!("{change:+.1}%"));
                format!(
                    "{}: {} → {} ({by}), more than {percent}%",
                    row.label(),
                    energy_text(base),
                    energy_text(new)
                )
            })
        })
        .collect()
}

/// A figure's two values and change as `base → new (+x%)`, each written by `text`.
fn figure_text(figure: &ComparedFigure, text: impl Fn(f64) -> String) -> String {
    let side = |value: Option<f64>| value.map_or_else(|| "–".to_owned(), &text);
    let change = match (figure.change_percent, figure.change) {
        (Some(percent), _) => format!(" ({percent:+.1}%)"),
        (None, Some(change)) if change != 0.0 => " (from zero)".to_owned(),
        _ => String::new(),
    };
    format!("{} → {}{change}", side(figure.base), side(figure.new))
}

/// A cost with three significant figures and its currency.
fn cost_text(cost: f64, currency: &str) -> String {
    format!("{} {currency}", three_significant_figures(cost))
}

fn grams_text(grams: f64) -> String {
    format!("{} g", three_significant_figures(grams))
}

fn seconds_text(seconds: f64) -> String {
    format!("{} s", three_significant_figures(seconds))
}

/// How many of a part each run had, when a name repeats or is missing from one.
fn counts_text(row: &ComparedRow) -> String {
    match (row.base_count, row.new_count) {
        (1, 1) => String::new(),
        (0, _) => " [only in new]".to_owned(),
        (_, 0) => " [only in base]".to_owned(),
        (base, new) => format!(" [×{base} → ×{new}]"),
    }
}

/// The comparison as a table for a terminal: one line per row, each figure as
/// `base → new (change)`, in units chosen by size.
pub fn render_comparison_table(comparison: &RunComparison) -> String {
    let mut out = format!(
        "wattline compare\n  base: {}\n  new:  {}\n\n",
        comparison.base, comparison.new
    );
    let widths = [34, 34, 34, 28, 26];
    let line = |cells: [&str; 5]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        format!("{}\n", padded.join(" ").trim_end())
    };
    out.push_str(&line(["", "energy", "cost", "CO2", "duration"]));
    let currency = comparison.currency.as_str();
    for row in &comparison.rows {
        let name = format!("{}{}", row.label(), counts_text(row));
        let mut energy = figure_text(&row.energy_kwh, energy_text);
        if row.within_error == Some(true) && row.energy_kwh.change.is_some_and(|c| c != 0.0) {
            energy.push_str(" within error");
        }
        out.push_str(&line([
            &name,
            &energy,
            &figure_text(&row.cost, |cost| cost_text(cost, currency)),
            &figure_text(&row.co2_grams, grams_text),
            &figure_text(&row.duration_seconds, seconds_text),
        ]));
    }
    out.push_str("\nSteps compare attributed energy (concurrent steps' parts add up).\n");
    for note in &comparison.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// The comparison as one self-contained HTML page: a table per part, no script.
pub fn render_comparison_html(comparison: &RunComparison) -> String {
    use crate::report::html::{STYLE, escape};
    let currency = comparison.currency.as_str();
    let mut rows = String::new();
    for row in &comparison.rows {
        let cells = [
            figure_text(&row.energy_kwh, energy_text),
            figure_text(&row.cost, |cost| cost_text(cost, currency)),
            figure_text(&row.co2_grams, grams_text),
            figure_text(&row.duration_seconds, seconds_text),
        ];
        let grew = row.energy_kwh.change.is_some_and(|change| change > 0.0);
        rows.push_str(&format!(
            "<tr{}><td>{}</td><td>{}{}</td>{}</tr>\n",
            if grew { " class=\"grew\"" } else { "" },
            row.part.label(),
            escape(&row.name),
            escape(&counts_text(row)),
            cells
                .iter()
                .map(|cell| format!("<td class=\"number\">{}</td>", escape(cell)))
                .collect::<String>()
        ));
    }
    let notes: String = comparison
        .notes
        .iter()
        .map(|note| format!("<p class=\"note\">{}</p>\n", escape(note)))
        .collect();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"wattline\">\n<title>wattline compare</title>\n\
         {STYLE}<style>tr.grew td {{ color: #a3311f; }}</style>\n</head>\n<body>\n<main>\n\
         <header>\n<h1>wattline compare</h1>\n<p class=\"meta\">base <code>{}</code> · new \
         <code>{}</code></p>\n</header>\n<section id=\"comparison\">\n\
         <h2>Energy, cost, CO2 and duration</h2>\n<table>\n<tr><th>part</th><th>name</th>\
         <th>energy</th><th>cost</th><th>CO2</th><th>duration</th></tr>\n{rows}</table>\n\
         <p class=\"note\">Steps compare attributed energy (concurrent steps' parts add \
         up).</p>\n{notes}</section>\n</main>\n</body>\n</html>\n",
        escape(&comparison.base),
        escape(&comparison.new),
    )
}

#[cfg(test)]
mod tests;

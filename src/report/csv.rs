//! The energy report as one CSV row per run, for spreadsheets: stable, documented
//! columns ([`CSV_COLUMNS`]), a header that identifies the format, RFC 4180 quoting.
//! Transform only; the CLI appends to files.

use wattline_config::energy::{FactorOrigin, RegionFactor};
use wattline_model::report::EnergyReport;

/// The columns, in order. Append-only: a new column goes at the end, so files written
/// by an older wattline keep their meaning (their header then differs, and the CLI
/// refuses to mix the two in one file).
pub const CSV_COLUMNS: &[&str] = &[
    "started_at",
    "duration_seconds",
    "scope",
    "command",
    "gpu_energy_kwh",
    "cpu_energy_kwh",
    "dram_energy_kwh",
    "energy_kwh",
    "facility_energy_kwh",
    "cost",
    "facility_cost",
    "currency",
    "co2_grams",
    "cost_per_kwh",
    "cost_per_kwh_source",
    "carbon_intensity_gco2e_per_kwh",
    "carbon_intensity_source",
    "pue",
    "pue_source",
    "gpu_source",
    "gpu_models",
    "carbon_region",
    "carbon_region_gco2e_per_kwh",
    "carbon_region_year",
    "carbon_region_dataset",
    "carbon_region_licence",
    "carbon_region_source",
    "scope_attributed_energy_kwh",
    "unattributed_energy_kwh",
    "remote_calls",
    "remote_estimated_energy_kwh_low",
    "remote_estimated_energy_kwh_high",
    "remote_models_without_estimate",
    "energy_kwh_low",
    "energy_kwh_high",
];

/// What the report does not know about its run: the scope measured and the command.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunDescription<'a> {
    /// `global`, `process_tree`, ….
    pub scope: Option<&'a str>,
    /// The command's argv.
    pub command: Option<&'a [String]>,
}

/// The header line (no line end).
pub fn csv_header() -> String {
    CSV_COLUMNS.join(",")
}

/// One field, quoted when it holds a comma, a quote or a line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn number(value: Option<f64>) -> String {
    value.map(|value| value.to_string()).unwrap_or_default()
}

/// Where a factor came from, in a few words: `default`, `file:PATH`, `env:NAME`,
/// `code` (the HTML report says it the same way).
pub(crate) fn factor_source(origin: &FactorOrigin) -> String {
    match origin {
        FactorOrigin::Default => "default".into(),
        FactorOrigin::File(path) => format!("file:{path}"),
        FactorOrigin::Environment(name) => format!("env:{name}"),
        FactorOrigin::Code => "code".into(),
        FactorOrigin::Region(code) => format!("region:{code}"),
    }
}

/// The row for `report` (no line end); empty fields for what was not measured.
pub fn csv_row(report: &EnergyReport, run: RunDescription<'_>) -> String {
    let duration = (report.ended_at - report.started_at)
        .to_std()
        .map_or(0.0, |duration| duration.as_secs_f64());
    let mut models: Vec<&str> = Vec::new();
    for device in &report.devices {
        if let Some(name) = device.name.as_deref()
            && !models.contains(&name)
        {
            models.push(name);
        }
    }
    let total = &report.total;
    let region = report
        .carbon_intensity
        .as_ref()
        .and_then(|factor| factor.region.as_ref());
    let region_text = |text: fn(&RegionFactor) -> String| region.map(text).unwrap_or_default();
    // What the Agent scopes were attributed in all, and what no scope held: they add up
    // to the total. Empty for a run without scopes.
    let had_scopes = !report.agent_scopes.is_empty() || !report.folded_scopes.is_empty();
    let scope_attributed = total.energy_kwh.filter(|_| had_scopes).map(|energy| {
        let unattributed: f64 = report.domains.iter().map(|d| d.unattributed_kwh).sum();
        (energy - unattributed, unattributed)
    });
    // The remote calls' estimates: their own columns, never in the measured ones.
    let remote = report.remote_estimates.as_ref();
    let values = [
        report
            .started_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        duration.to_string(),
        run.scope.unwrap_or_default().to_string(),
        run.command.map(|argv| argv.join(" ")).unwrap_or_default(),
        number(total.gpu_energy_kwh),
        number(total.cpu_energy_kwh),
        number(total.dram_energy_kwh),
        number(total.energy_kwh),
        number(total.facility_energy_kwh),
        number(total.cost),
        number(total.facility_cost),
        report.currency.clone(),
        number(total.co2_grams),
        report.cost_per_kwh.value.to_string(),
        factor_source(&report.cost_per_kwh.origin),
        number(report.carbon_intensity.as_ref().map(|factor| factor.value)),
        report
            .carbon_intensity
            .as_ref()
            .map(|factor| factor_source(&factor.origin))
            .unwrap_or_default(),
        report.pue.value.to_string(),
        factor_source(&report.pue.origin),
        report.gpu_source.clone().unwrap_or_default(),
        models.join(";"),
        region_text(|region| region.intensity.code.clone()),
        number(region.map(|region| region.intensity.gco2e_per_kwh)),
        region_text(|region| region.intensity.year.to_string()),
        region_text(|region| region.intensity.dataset.clone()),
        region_text(|region| region.intensity.licence.clone()),
        region_text(|region| factor_source(&region.origin)),
        number(scope_attributed.map(|(attributed, _)| attributed)),
        number(scope_attributed.map(|(_, unattributed)| unattributed)),
        remote
            .map(|totals| totals.calls.to_string())
            .unwrap_or_default(),
        number(remote.map(|totals| totals.low_kwh)),
        number(remote.map(|totals| totals.high_kwh)),
        remote
            .map(|totals| totals.models_without_estimate.join(";"))
            .unwrap_or_default(),
        number(total.receipt.map(|receipt| receipt.low_kwh)),
        number(total.receipt.map(|receipt| receipt.high_kwh)),
    ];
    debug_assert_eq!(values.len(), CSV_COLUMNS.len());
    values
        .iter()
        .map(|value| field(value))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_quotes_or_breaks_are_quoted() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn factor_sources_name_file_and_variable() {
        assert_eq!(factor_source(&FactorOrigin::Default), "default");
        assert_eq!(
            factor_source(&FactorOrigin::Environment(
                "GENAI_POWER_COST_PER_KWH".into()
            )),
            "env:GENAI_POWER_COST_PER_KWH"
        );
        assert_eq!(
            factor_source(&FactorOrigin::File("/etc/wattline/plugins.toml".into())),
            "file:/etc/wattline/plugins.toml"
        );
        assert_eq!(
            factor_source(&FactorOrigin::Region("DE".into())),
            "region:DE"
        );
    }
}

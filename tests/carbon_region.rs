//! `wattline run` with a regional carbon intensity: the reference's
//! `GENAI_CO2_COUNTRY_ISO_CODE` or `carbon_region` in a file picks the country's grid
//! factor, and the table, JSON and CSV reports name it, its dataset and its origin.

mod support;

use support::wattline;
use wattline::report::csv::CSV_COLUMNS;

const COUNTRY: &str = "GENAI_CO2_COUNTRY_ISO_CODE";

/// `wattline run` with GPU energy from the stand-in `nvidia-smi` and CO2 tracking on.
fn run_with(
    home: &std::path::Path,
    environment: &[(&str, &str)],
    arguments: &[&str],
) -> std::process::Output {
    let (_bin, path) = support::path_with_stand_in_nvidia_smi();
    let mut command = wattline(home);
    command
        .env_remove(COUNTRY)
        .env_remove("GENAI_CO2_USE_MANUAL")
        .env("PATH", path)
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.2")
        .env("GENAI_ENABLE_CO2_TRACKING", "true");
    for (name, value) in environment {
        command.env(name, value);
    }
    let output = command
        .args(["run", "--quiet"])
        .args(arguments)
        .args(["--", "sleep", "0.6"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A `plugins.toml` in `home` whose energy component has `config` (TOML lines).
fn energy_file(home: &std::path::Path, config: &str) -> std::path::PathBuf {
    let file = home.join("plugins.toml");
    std::fs::write(
        &file,
        format!("version = 1\n[[components]]\nkind = \"energy\"\n[components.config]\n{config}\n"),
    )
    .unwrap();
    file
}

/// Runs `command`, which must exit 2 (bad input); its stderr.
fn refused(command: &mut std::process::Command) -> String {
    let output = command.output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    stderr
}

fn germany() -> f64 {
    wattline::config::grid_intensity::region_intensity("DE")
        .unwrap()
        .gco2e_per_kwh
}

#[test]
fn the_reference_country_variable_selects_the_grid_factor_in_every_report() {
    let home = tempfile::tempdir().unwrap();
    let environment = [(COUNTRY, "DEU"), ("GENAI_CO2_CLOUD_PROVIDER", "gcp")];

    let output = run_with(home.path(), &environment, &["--report", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let factor = &report["carbon_intensity"];
    assert_eq!(factor["value"], germany(), "{factor}");
    assert_eq!(
        factor["origin"],
        serde_json::json!({"kind": "region", "name": "DE"})
    );
    let region = &factor["region"];
    assert_eq!(region["code"], "DE");
    assert_eq!(region["iso3"], "DEU");
    assert_eq!(region["dataset"], "Ember/OWID");
    assert_eq!(region["year"], 2023);
    assert_eq!(region["licence"], "CC BY 4.0");
    assert_eq!(region["applied"], true);
    assert_eq!(
        region["origin"],
        serde_json::json!({"kind": "environment", "name": COUNTRY})
    );
    let kwh = report["total"]["energy_kwh"].as_f64().unwrap();
    let grams = report["total"]["co2_grams"].as_f64().unwrap();
    assert!(kwh > 0.0);
    assert!(
        (grams - kwh * germany()).abs() < 1e-12,
        "{grams} for {kwh} kWh"
    );
    // The cloud provider means nothing here and says so; the country is applied.
    assert_eq!(
        report["ignored_variables"],
        serde_json::json!(["GENAI_CO2_CLOUD_PROVIDER"])
    );

    let output = run_with(home.path(), &environment, &["--report", "table"]);
    let table = String::from_utf8(output.stderr).unwrap();
    assert!(
        table.contains(&format!(
            "at carbon intensity {} gCO2e/kWh (region DE, Ember/OWID 2023, CC BY 4.0; \
             carbon_region from ${COUNTRY})",
            germany()
        )),
        "{table}"
    );

    let output = run_with(home.path(), &environment, &["--report", "csv"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0], CSV_COLUMNS.join(","));
    // Nothing in this row needs quoting: the command has no comma.
    let row: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(row.len(), CSV_COLUMNS.len(), "{stdout}");
    let column = |name: &str| row[CSV_COLUMNS.iter().position(|c| *c == name).unwrap()];
    assert_eq!(
        column("carbon_intensity_gco2e_per_kwh"),
        germany().to_string()
    );
    assert_eq!(column("carbon_intensity_source"), "region:DE");
    assert_eq!(column("carbon_region"), "DE");
    assert_eq!(column("carbon_region_gco2e_per_kwh"), germany().to_string());
    assert_eq!(column("carbon_region_year"), "2023");
    assert_eq!(column("carbon_region_dataset"), "Ember/OWID");
    assert_eq!(column("carbon_region_licence"), "CC BY 4.0");
    assert_eq!(column("carbon_region_source"), format!("env:{COUNTRY}"));
}

#[test]
fn an_explicit_intensity_beats_the_files_region_and_both_are_reported() {
    let home = tempfile::tempdir().unwrap();
    let file = energy_file(home.path(), "carbon_region = \"de\"");
    let config = file.to_str().unwrap();
    let output = run_with(
        home.path(),
        &[("GENAI_CARBON_INTENSITY", "100")],
        &["--config", config, "--report", "json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let factor = &report["carbon_intensity"];
    assert_eq!(factor["value"], 100.0);
    assert_eq!(
        factor["origin"],
        serde_json::json!({"kind": "environment", "name": "GENAI_CARBON_INTENSITY"})
    );
    assert_eq!(factor["region"]["code"], "DE");
    assert_eq!(factor["region"]["gco2e_per_kwh"], germany());
    assert_eq!(factor["region"]["applied"], false);
    assert_eq!(
        factor["region"]["origin"],
        serde_json::json!({"kind": "file", "name": config})
    );
}

#[test]
fn an_unknown_region_never_starts_the_command_and_names_the_value() {
    let home = tempfile::tempdir().unwrap();
    let marker = home.path().join("started");
    let stderr = refused(
        wattline(home.path())
            .env(COUNTRY, "Atlantis")
            .args(["run", "--quiet", "--", "touch"])
            .arg(&marker),
    );
    assert!(
        stderr.contains(&format!(
            "environment variable {COUNTRY}: must be an ISO 3166-1"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("(got \"Atlantis\")"), "{stderr}");
    assert!(!marker.exists(), "the command ran");

    let file = energy_file(home.path(), "carbon_region = \"XX\"");
    let stderr = refused(
        wattline(home.path())
            .env_remove(COUNTRY)
            .args(["config", "check"])
            .arg(&file),
    );
    assert!(
        stderr.contains("components[0].config.carbon_region: must be an ISO 3166-1"),
        "{stderr}"
    );
    assert!(stderr.contains("(got \"XX\")"), "{stderr}");
}

//! The concurrent-steps fixture (`tests/fixtures/concurrent_steps/`) through every
//! layer that shows a step's energy from a file: the report as JSON, table, CSV and
//! HTML (`wattline report`), and `compare` with its gate, a step that grew from zero
//! and folded steps. Every expected value is the fixture's hand-worked figure; each
//! step's window and attributed figures differ, so a layer that shows one for the
//! other fails here.

mod support;

use serde_json::Value;
use support::concurrent_steps::{
    Fixture, FixtureRun, JOULES_PER_KWH, Step, assert_close, closed_form, folder,
};
use support::wattline;

fn kwh(joules: f64) -> f64 {
    joules / JOULES_PER_KWH
}

fn number(value: &Value, what: &str) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {value}"))
}

/// `wattline report FILE` with `args`: its stdout.
fn report_of(file: &str, args: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = support::succeeded(
        wattline(home.path())
            .arg("report")
            .arg(folder().join(file))
            .args(args),
    );
    String::from_utf8(output.stdout).unwrap()
}

fn json_report(run: &FixtureRun) -> Value {
    serde_json::from_str(&report_of(&run.file, &["--report", "json"])).unwrap()
}

#[test]
fn the_hand_worked_figures_follow_the_rule_and_add_up() {
    let fixture = Fixture::load();
    for run in &fixture.runs {
        let live = run.live_steps();
        let end = f64::from(fixture.seconds);
        let shares = run.shares.as_deref();
        let gpu = closed_form(&live, fixture.gpu_watts, shares, 0.0, end);
        // The CPU package draws only until `cpu_until_seconds`; RAPL carries no shares.
        let cpu = closed_form(
            &live,
            fixture.cpu_watts,
            None,
            0.0,
            fixture.cpu_until_seconds,
        );
        for ((step, gpu), cpu) in run.steps.iter().zip(&gpu).zip(&cpu) {
            let what = |figure: &str| format!("{} {}: {figure}", run.name, step.name);
            assert_close(&what("GPU window"), gpu.0, step.window_gpu_joules);
            assert_close(&what("GPU attributed"), gpu.1, step.attributed_gpu_joules);
            assert_close(&what("CPU window"), cpu.0, step.window_cpu_joules);
            assert_close(&what("CPU attributed"), cpu.1, step.attributed_cpu_joules);
        }
        // Top-level steps' parts and what no step held add up to each domain's energy.
        let top_level = |figure: fn(&Step) -> f64| -> f64 {
            run.steps
                .iter()
                .filter(|step| step.parent.is_none())
                .map(figure)
                .sum()
        };
        assert_close(
            &format!("{} GPU total", run.name),
            top_level(|step| step.attributed_gpu_joules) + run.unattributed_gpu_joules,
            fixture.gpu_watts * end,
        );
        assert_close(
            &format!("{} CPU total", run.name),
            top_level(|step| step.attributed_cpu_joules) + run.unattributed_cpu_joules,
            fixture.cpu_watts * fixture.cpu_until_seconds,
        );
    }
    // The fixture is worth its name: in the base run each step's window differs from
    // its part, in every domain shown.
    let base = fixture.run("base");
    assert!(base.steps.iter().all(|step| {
        step.window_joules() != step.attributed_joules()
            && step.window_gpu_joules != step.attributed_gpu_joules
    }));
}

/// The committed event files are the schedules' records (regenerated with
/// `WATTLINE_WRITE_FIXTURES=1` after the schedules change).
#[test]
fn the_event_files_are_the_schedules() {
    let fixture = Fixture::load();
    if std::env::var_os("WATTLINE_WRITE_FIXTURES").is_some() {
        support::refuse_skip_under_ci("WATTLINE_WRITE_FIXTURES");
        support::concurrent_steps::write_fixture_files(&fixture);
    }
    for run in &fixture.runs {
        let path = folder().join(&run.file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let in_file: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["data"].clone())
            .collect();
        let expected: Vec<Value> = fixture
            .records(run)
            .iter()
            .map(|record| serde_json::to_value(record).unwrap())
            .collect();
        assert!(
            in_file == expected,
            "{} is not the schedule's records: regenerate it with \
             WATTLINE_WRITE_FIXTURES=1 cargo test --test concurrent_steps",
            path.display()
        );
    }
}

/// Asserts every figure of `scope` (a JSON report's step) against `step`'s.
fn assert_step_figures(fixture: &Fixture, run: &str, scope: &Value, step: &Step) {
    let figure = |field: &str| number(&scope[field], &format!("{run} {} {field}", step.name));
    let what = |field: &str| format!("{run} {} {field}", step.name);
    let (window, attributed) = (step.window_joules(), step.attributed_joules());
    for (field, expected) in [
        ("gpu_energy_kwh", kwh(step.window_gpu_joules)),
        ("energy_kwh", kwh(window)),
        ("cost", fixture.cost(window)),
        ("co2_grams", fixture.co2_grams(window)),
        ("attributed_gpu_energy_kwh", kwh(step.attributed_gpu_joules)),
        ("attributed_energy_kwh", kwh(attributed)),
        ("attributed_cost", fixture.cost(attributed)),
        ("attributed_co2_grams", fixture.co2_grams(attributed)),
    ] {
        assert_close(&what(field), figure(field), expected);
    }
    assert_eq!(figure("weight"), step.weight, "{}", what("weight"));
    assert_eq!(scope["process_id"], step.process, "{}", what("process_id"));
}

#[test]
fn the_json_report_gives_each_step_its_window_and_its_part() {
    let fixture = Fixture::load();
    let run = fixture.run("base");
    let report = json_report(run);
    let scopes = report["agent_scopes"].as_array().unwrap();
    assert_eq!(scopes.len(), run.steps.len(), "{scopes:#?}");
    for step in &run.steps {
        let scope = scopes
            .iter()
            .find(|scope| scope["name"] == step.name.as_str())
            .unwrap_or_else(|| panic!("no step {} in {scopes:#?}", step.name));
        assert_step_figures(&fixture, &run.name, scope, step);
        let parent = step.parent.as_ref().map(|parent| {
            let uuid = support::concurrent_steps::step_uuid(run, parent);
            Value::String(uuid.to_string())
        });
        assert_eq!(scope["parent_uuid"], parent.unwrap_or(Value::Null));
    }
    // The run: both domains, and what no step held in each.
    let gpu_total = fixture.gpu_watts * f64::from(fixture.seconds);
    let cpu_total = fixture.cpu_watts * fixture.cpu_until_seconds;
    assert_close(
        "total energy",
        number(&report["total"]["energy_kwh"], "total"),
        kwh(gpu_total + cpu_total),
    );
    for (domain, unattributed) in [
        ("gpu", run.unattributed_gpu_joules),
        ("cpu_package", run.unattributed_cpu_joules),
    ] {
        let entry = report["domains"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["domain"] == domain)
            .unwrap_or_else(|| panic!("no {domain} domain"));
        assert_close(
            &format!("{domain} unattributed"),
            number(&entry["unattributed_kwh"], domain),
            kwh(unattributed),
        );
    }
    assert_eq!(report["scope_attribution"], "process-share-then-weight");
}

/// The table, CSV and HTML write figures for people: each expected text below is the
/// fixture's figure written by hand to three significant figures.
#[test]
fn the_table_shows_each_steps_part_beside_its_window() {
    let table = report_of("base.jsonl", &[]);
    for (name, part, window) in [
        ("request", "1250 J", "2380 J"),
        ("tool", "554 J", "792 J"),
        ("summarize", "1520 J", "1980 J"),
        ("retry", "0 J", "360 J"),
    ] {
        let line = table
            .lines()
            .find(|line| line.starts_with(&format!("agent {name} ")))
            .unwrap_or_else(|| panic!("no line for {name} in\n{table}"));
        // The window's receipt (`±`) between the figure and the note.
        let (figures, receipt) = line
            .split_once(" ±")
            .unwrap_or_else(|| panic!("no receipt in {line}"));
        assert!(
            figures.ends_with(&format!(" {part} attributed (window {window}")),
            "{line}"
        );
        assert!(receipt.ends_with("%, not additive)"), "{line}");
    }
    // 1080 J of GPU and 36 J of CPU energy held by no step.
    let unheld = table
        .lines()
        .find(|line| line.starts_with("agent (none) "))
        .unwrap_or_else(|| panic!("no unattributed line in\n{table}"));
    assert!(unheld.ends_with(" 1120 J held by no scope"), "{unheld}");
}

#[test]
fn the_table_names_folded_steps_with_their_parts() {
    let table = report_of("base_folded.jsonl", &[]);
    for (name, part) in [("tool", "554 J"), ("request", "1250 J")] {
        let line = table
            .lines()
            .find(|line| line.starts_with(&format!("agent {name} ")))
            .unwrap_or_else(|| panic!("no line for {name} in\n{table}"));
        assert!(
            line.contains(&format!(
                " 1 older scopes folded: {part} attributed in all, "
            )),
            "{line}"
        );
    }
}

#[test]
fn the_csv_row_carries_what_steps_held_and_what_none_did() {
    let fixture = Fixture::load();
    let run = fixture.run("base");
    let csv = report_of(&run.file, &["--report", "csv"]);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| -> f64 {
        let index = header.iter().position(|column| *column == name).unwrap();
        row[index]
            .parse()
            .unwrap_or_else(|_| panic!("{name}: {}", row[index]))
    };
    let held: f64 = run
        .steps
        .iter()
        .filter(|step| step.parent.is_none())
        .map(Step::attributed_joules)
        .sum();
    assert_close(
        "scope_attributed_energy_kwh",
        column("scope_attributed_energy_kwh"),
        kwh(held),
    );
    assert_close(
        "unattributed_energy_kwh",
        column("unattributed_energy_kwh"),
        kwh(run.unattributed_gpu_joules + run.unattributed_cpu_joules),
    );
}

#[test]
fn the_html_page_gives_each_step_its_part_window_cost_and_co2() {
    let home = tempfile::tempdir().unwrap();
    let page = home.path().join("run.html");
    report_of(
        "base.jsonl",
        &["--report", "json", "--html", page.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // Each row: attributed, its cost, window energy, window GPU, window cost, window CO2.
    for (name, cells) in [
        (
            "request",
            [
                "1250 J",
                "0.0000693 EUR",
                "2380 J",
                "2160 J",
                "0.000132 EUR",
                "0.264 g",
            ],
        ),
        (
            "tool",
            [
                "554 J",
                "0.0000308 EUR",
                "792 J",
                "720 J",
                "0.0000440 EUR",
                "0.0880 g",
            ],
        ),
        (
            "summarize",
            [
                "1520 J",
                "0.0000847 EUR",
                "1980 J",
                "1800 J",
                "0.000110 EUR",
                "0.220 g",
            ],
        ),
        (
            "retry",
            [
                "0 J",
                "0 EUR",
                "360 J",
                "360 J",
                "0.0000200 EUR",
                "0.0400 g",
            ],
        ),
    ] {
        let start = html
            .find(&format!("<tr><td>{name}</td>"))
            .unwrap_or_else(|| panic!("no row for {name}"));
        let row = &html[start..start + html[start..].find("</tr>").unwrap()];
        let numbers: Vec<&str> = row
            .split("<td class=\"number\">")
            .skip(3) // the name, and the from and to times
            .map(|cell| cell.trim_end_matches("</td>"))
            .collect();
        assert_eq!(numbers, cells, "{name}: {row}");
    }
}

/// `wattline compare` on two fixture files: its JSON.
fn compare(base: &str, new: &str, extra: &[&str]) -> std::process::Output {
    let home = tempfile::tempdir().unwrap();
    wattline(home.path())
        .arg("compare")
        .arg(folder().join(base))
        .arg(folder().join(new))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn the_comparison_table_prices_each_steps_part() {
    // Base to reweighted, at 0.2 EUR/kWh and 400 g/kWh. request: 1247.4 J (1134 GPU +
    // 113.4 CPU) to 1650 J, +32.3%; tool: 554.4 J to 660 J, +19.0%; summarize: 1524.6 J
    // to 1122 J, -26.4%; retry: 0 J to 360 J, from zero. A joule is 0.2 / 3.6e6 EUR and
    // 400 / 3.6e6 g; three significant figures.
    let output = compare("base.jsonl", "reweighted.jsonl", &[]);
    assert!(output.status.success(), "{output:?}");
    let table = String::from_utf8(output.stdout).unwrap();
    for (name, cost, co2) in [
        (
            "request",
            "0.0000693 EUR → 0.0000917 EUR (+32.3%)",
            "0.139 g → 0.183 g (+32.3%)",
        ),
        (
            "tool",
            "0.0000308 EUR → 0.0000367 EUR (+19.0%)",
            "0.0616 g → 0.0733 g (+19.0%)",
        ),
        (
            "summarize",
            "0.0000847 EUR → 0.0000623 EUR (-26.4%)",
            "0.169 g → 0.125 g (-26.4%)",
        ),
        (
            "retry",
            "0 EUR → 0.0000200 EUR (from zero)",
            "0 g → 0.0400 g (from zero)",
        ),
    ] {
        let line = table
            .lines()
            .find(|line| line.starts_with(&format!("step {name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"));
        assert!(line.contains(cost), "{name}'s cost: {line}");
        assert!(line.contains(co2), "{name}'s CO2: {line}");
    }
}

#[test]
fn compare_puts_each_steps_part_side_by_side() {
    let fixture = Fixture::load();
    let (base, new) = (fixture.run("base"), fixture.run("reweighted"));
    let output = compare(&base.file, &new.file, &["--report", "json"]);
    assert!(output.status.success(), "{output:?}");
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    for (old, step) in base.steps.iter().zip(&new.steps) {
        let row = support::comparison_row(&comparison, "agent_scope", &step.name);
        let what = |figure: &str| format!("{} {figure}", step.name);
        let (before, after) = (old.attributed_joules(), step.attributed_joules());
        assert_close(
            &what("base"),
            number(&row["energy_kwh"]["base"], "base"),
            kwh(before),
        );
        assert_close(
            &what("new"),
            number(&row["energy_kwh"]["new"], "new"),
            kwh(after),
        );
        assert_close(
            &what("change"),
            number(&row["energy_kwh"]["change"], "change"),
            kwh(after - before),
        );
        assert_close(
            &what("cost"),
            number(&row["cost"]["new"], "cost"),
            fixture.cost(after),
        );
        assert_close(
            &what("CO2"),
            number(&row["co2_grams"]["new"], "CO2"),
            fixture.co2_grams(after),
        );
        assert_close(
            &what("duration"),
            number(&row["duration_seconds"]["new"], "duration"),
            step.seconds(),
        );
        if before > 0.0 {
            assert_close(
                &what("change percent"),
                number(&row["energy_kwh"]["change_percent"], "percent"),
                (after - before) / before * 100.0,
            );
        } else {
            // Grew from zero: no percentage.
            assert_eq!(row["energy_kwh"]["change_percent"], Value::Null, "{row}");
        }
    }
    // The run itself did not change: the same power over the same time.
    let run = support::comparison_row(&comparison, "run", "run");
    assert_close(
        "run change",
        number(&run["energy_kwh"]["change"], "run change"),
        0.0,
    );
}

#[test]
fn a_run_against_itself_passes_the_gate_and_a_step_at_zero_did_not_grow() {
    // retry's part is 0 J in both: no growth, even at a limit of 0%; the table writes
    // no change for it.
    let output = compare("base.jsonl", "base.jsonl", &["--fail-above", "0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("more than"), "{stderr}");
    let table = String::from_utf8_lossy(&output.stdout);
    let retry = table
        .lines()
        .find(|line| line.starts_with("step retry "))
        .unwrap_or_else(|| panic!("no row for retry:\n{table}"));
    assert!(retry.contains("0 J → 0 J "), "{retry}");
    assert!(!retry.contains("from zero"), "{retry}");
}

#[test]
fn the_gate_judges_attributed_energy_and_names_a_step_that_grew_from_zero() {
    // request's part grew by 32%, retry's from zero; tool's by 19% and summarize's
    // shrank; every window stayed the same.
    let output = compare("base.jsonl", "reweighted.jsonl", &["--fail-above", "25"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let named: Vec<&str> = stderr.lines().skip(1).map(str::trim).collect();
    assert_eq!(
        named,
        [
            "step request: 1250 J → 1650 J (+32.3%), more than 25%",
            "step retry: 0 J → 360 J (from zero), more than 25%",
        ],
        "{stderr}"
    );
    // At 35% only the step that grew from zero is past the limit.
    let output = compare("base.jsonl", "reweighted.jsonl", &["--fail-above", "35"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("step retry: 0 J → 360 J (from zero)"),
        "{stderr}"
    );
    assert!(!stderr.contains("step request"), "{stderr}");
    // The table shows the same step as grown from zero.
    let output = compare("base.jsonl", "reweighted.jsonl", &[]);
    let table = String::from_utf8_lossy(&output.stdout);
    let retry = table
        .lines()
        .find(|line| line.starts_with("step retry"))
        .unwrap_or_else(|| panic!("no retry row in\n{table}"));
    assert!(retry.contains("0 J → 360 J (from zero)"), "{retry}");
}

#[test]
fn compare_counts_folded_steps_with_their_parts() {
    let fixture = Fixture::load();
    let (detailed, folded) = (fixture.run("base"), fixture.run("base_folded"));
    assert!(folded.steps.iter().any(|step| !step.detailed));
    let output = compare(&detailed.file, &folded.file, &["--report", "json"]);
    assert!(output.status.success(), "{output:?}");
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    for step in &folded.steps {
        let row = support::comparison_row(&comparison, "agent_scope", &step.name);
        assert_eq!(
            (row["base_count"].as_u64(), row["new_count"].as_u64()),
            (Some(1), Some(1))
        );
        let what = |side: &str| format!("{} {side}", step.name);
        for side in ["base", "new"] {
            assert_close(
                &what(side),
                number(&row["energy_kwh"][side], side),
                kwh(step.attributed_joules()),
            );
            assert_close(
                &what("duration"),
                number(&row["duration_seconds"][side], side),
                step.seconds(),
            );
            assert_close(
                &what("cost"),
                number(&row["cost"][side], side),
                fixture.cost(step.attributed_joules()),
            );
            assert_close(
                &what("CO2"),
                number(&row["co2_grams"][side], side),
                fixture.co2_grams(step.attributed_joules()),
            );
        }
    }
    let notes = comparison["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|note| note
            .as_str()
            .unwrap()
            .starts_with("the new run folded 2 older scopes")),
        "{notes:?}"
    );
}

#[test]
fn folded_steps_keep_their_parts_in_the_report() {
    let fixture = Fixture::load();
    let run = fixture.run("base_folded");
    let report = json_report(run);
    let kept: Vec<&str> = report["agent_scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|scope| scope["name"].as_str().unwrap())
        .collect();
    let detailed: Vec<&str> = run
        .steps
        .iter()
        .filter(|step| step.detailed)
        .map(|step| step.name.as_str())
        .collect();
    assert_eq!(kept, detailed);
    for step in run.steps.iter().filter(|step| !step.detailed) {
        let folded = report["folded_scopes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|folded| folded["name"] == step.name.as_str())
            .unwrap_or_else(|| panic!("{} not folded: {report:#}", step.name));
        assert_eq!(folded["count"], 1);
        // One step: its sum, minimum and maximum are its own part.
        for figure in ["sum", "min", "max"] {
            assert_close(
                &format!("{} {figure}", step.name),
                number(&folded["attributed_energy_kwh"][figure], figure),
                kwh(step.attributed_joules()),
            );
        }
        assert_close(
            &format!("{} duration", step.name),
            number(&folded["duration_seconds"]["sum"], "duration"),
            step.seconds(),
        );
    }
}

//! Agent steps marked by the measured program itself: `wattline run` serves the host
//! endpoint to the command, whose real process (`examples/agent_step.rs`, on the Rust
//! worker SDK) starts and ends its scopes over the socket. Energy, marks and the report
//! attribute to those steps as to in-process scopes; a step left open at the exit is
//! ended and flagged.

mod support;

use std::path::PathBuf;

use support::concurrent_steps::{Live, closed_form};
use support::wattline;

fn agent_step() -> PathBuf {
    support::example("agent_step")
}

struct Run {
    report: serde_json::Value,
    events: Vec<serde_json::Value>,
    stdout: String,
    stderr: String,
}

fn run_agent_step(extra: &[&str]) -> Run {
    let (_bin, path) = support::path_with_stand_in_nvidia_smi();
    let mut line = vec![agent_step().into_os_string()];
    line.extend(extra.iter().map(Into::into));
    run_measured(&path, &line)
}

/// `wattline run` of the command `line`, with `path` (a stand-in `nvidia-smi` first).
fn run_measured(path: &str, line: &[std::ffi::OsString]) -> Run {
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("runs");
    let mut command = wattline(home.path());
    command
        .env("PATH", path)
        .env("GENAI_GPU_COLLECTION_INTERVAL", "0.1")
        .args(["run", "--quiet", "--interval", "100", "--report", "json"])
        .arg("--atof")
        .arg(&atof)
        .arg("--")
        .args(line);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    // The command's own output comes first on stdout, then the JSON report.
    let report_start = stdout.find("{\n").expect("a JSON report on stdout");
    let report = serde_json::from_str(&stdout[report_start..]).unwrap();
    Run {
        report,
        events: support::atof_events(&atof),
        stdout,
        stderr,
    }
}

fn scope_events<'a>(events: &'a [serde_json::Value], name: &str) -> Vec<&'a serde_json::Value> {
    events
        .iter()
        .filter(|event| event["kind"] == "scope" && event["name"] == name)
        .collect()
}

#[test]
fn a_step_marked_by_the_measured_program_gets_its_marks_and_energy() {
    let run = run_agent_step(&[]);
    assert!(run.stdout.contains("planner step done"), "{}", run.stdout);

    let planner = scope_events(&run.events, "planner");
    assert_eq!(planner.len(), 2, "a start and an end: {planner:?}");
    let (start, end) = (planner[0], planner[1]);
    assert_eq!(start["scope_category"], "start");
    assert_eq!(end["scope_category"], "end");
    assert_eq!(start["uuid"], end["uuid"]);
    assert_eq!(start["category"], "agent");
    // Started by another process over the endpoint: the ATOF `remote` flag; ended by it.
    assert_eq!(start["attributes"], serde_json::json!(["remote"]));
    assert_eq!(end["attributes"], serde_json::json!(["remote"]));

    // Polls at 100 ms over a 600 ms step: resource marks were copied under it.
    let under_planner = run
        .events
        .iter()
        .filter(|event| event["kind"] == "mark" && event["parent_uuid"] == start["uuid"])
        .count();
    assert!(under_planner >= 2, "{under_planner} marks under the step");

    // The report attributes GPU energy (250 W stand-in) to the step while it was live.
    let scopes = run.report["agent_scopes"].as_array().unwrap();
    let step = scopes
        .iter()
        .find(|scope| scope["name"] == "planner")
        .expect("the step is in the report");
    assert_eq!(step["uuid"], start["uuid"]);
    assert!(step["ended_at"].is_string(), "{step}");
    let step_kwh = step["gpu_energy_kwh"].as_f64().unwrap();
    let total_kwh = run.report["total"]["gpu_energy_kwh"].as_f64().unwrap();
    assert!(
        step_kwh > 0.0 && step_kwh < total_kwh,
        "{step_kwh} of {total_kwh}"
    );
    // About 250 W over the step's ~0.6 s (its own start and end, not a poll's).
    let seconds = step_kwh * 3_600_000.0 / 250.0;
    assert!((0.4..1.5).contains(&seconds), "{seconds} s at 250 W");
    assert!(!run.stderr.contains("left"), "{}", run.stderr);
    // The only step live then: all of its window is its own, attributed to the
    // process that opened it (the command, which says its ID over the endpoint).
    let attributed = step["attributed_gpu_energy_kwh"].as_f64().unwrap();
    assert!(
        (attributed - step_kwh).abs() <= 1e-9 * step_kwh,
        "{attributed} against its window {step_kwh}"
    );
    // Its nested step: planner's child in the file and the report, attributed its own
    // window (planner's, above, holds it).
    let lookup = scope_events(&run.events, "lookup");
    assert_eq!(lookup.len(), 2, "{lookup:?}");
    assert_eq!(lookup[0]["parent_uuid"], start["uuid"]);
    let nested = scopes
        .iter()
        .find(|scope| scope["name"] == "lookup")
        .expect("the nested step is in the report");
    assert_eq!(nested["parent_uuid"], start["uuid"]);
    let nested_kwh = nested["gpu_energy_kwh"].as_f64().unwrap();
    let nested_attributed = nested["attributed_gpu_energy_kwh"].as_f64().unwrap();
    assert!(
        nested_kwh > 0.0 && nested_kwh < step_kwh,
        "{nested_kwh} of {step_kwh}"
    );
    assert!(
        (nested_attributed - nested_kwh).abs() <= 1e-9 * nested_kwh,
        "{nested_attributed} against its window {nested_kwh}"
    );
    // Its final figures are in the event file too: one mark under the step, in joules,
    // equal to the report's.
    let settled: Vec<&serde_json::Value> = run
        .events
        .iter()
        .filter(|event| {
            event["name"] == "wattline.scope_energy" && event["parent_uuid"] == start["uuid"]
        })
        .collect();
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0]["timestamp"], end["timestamp"]);
    let observed = |name: &str| {
        settled[0]["data"]["measurements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {}", settled[0]))
            .clone()
    };
    let attributed_joules = observed("wattline.scope.energy.attributed");
    assert_eq!(attributed_joules["kind"], "histogram");
    assert_eq!(
        attributed_joules["attributes"]["wattline.scope.name"],
        "planner"
    );
    let in_joules = |kwh: &serde_json::Value| kwh.as_f64().unwrap() * 3_600_000.0;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    assert!(close(
        attributed_joules["value"].as_f64().unwrap(),
        in_joules(&step["attributed_energy_kwh"])
    ));
    assert!(close(
        observed("wattline.scope.energy.window")["value"]
            .as_f64()
            .unwrap(),
        in_joules(&step["energy_kwh"])
    ));
    let pid = step["process_id"]
        .as_u64()
        .expect("the command's process ID");
    assert!(
        run.stdout.contains(&format!("pid {pid}")),
        "{pid}: {}",
        run.stdout
    );

    // Its own diagnostics landed in the run's context under `worker.command.*`, with
    // the worker's provenance, and reach the report.
    let diagnostics = &run.report["diagnostics"];
    let component = support::component(diagnostics, "worker.command.agent_step");
    assert_eq!(component["codes"][0]["code"], "step_completed");
    assert_eq!(component["codes"][0]["occurrences"], 1);
    let event = diagnostics["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["component"] == "worker.command.agent_step")
        .expect("its event is retained");
    assert_eq!(event["detail"], "planner");
    assert!(event["provenance"]["worker_id"].is_string(), "{event}");
}

#[test]
fn a_step_left_open_at_the_programs_exit_is_ended_and_flagged() {
    let run = run_agent_step(&["--leave-open"]);
    assert!(run.stdout.contains("executor step open"), "{}", run.stdout);
    let executor = scope_events(&run.events, "executor");
    assert_eq!(executor.len(), 2, "{executor:?}");
    assert_eq!(executor[1]["scope_category"], "end");
    assert_eq!(
        executor[1]["attributes"],
        serde_json::json!(["remote", "wattline.ended_at_program_exit"])
    );
    // The properly ended step is not flagged.
    let planner = scope_events(&run.events, "planner");
    assert_eq!(planner[1]["attributes"], serde_json::json!(["remote"]));
    // The report has the step, ended.
    let scopes = run.report["agent_scopes"].as_array().unwrap();
    let step = scopes
        .iter()
        .find(|scope| scope["name"] == "executor")
        .unwrap();
    assert!(step["ended_at"].is_string(), "{step}");
    // Settled at the run's final report, with the report's figures.
    let settled = run
        .events
        .iter()
        .find(|event| {
            event["name"] == "wattline.scope_energy" && event["parent_uuid"] == executor[0]["uuid"]
        })
        .expect("the step's energy mark");
    let attributed = settled["data"]["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "wattline.scope.energy.attributed")
        .unwrap();
    let expected = step["attributed_energy_kwh"].as_f64().unwrap() * 3_600_000.0;
    assert!((attributed["value"].as_f64().unwrap() - expected).abs() <= 1e-9 * expected);
    assert!(
        run.stderr
            .contains("the command left 1 agent scope(s) open; ended at its exit"),
        "{}",
        run.stderr
    );
}

/// The stand-in's constant power, W.
const STAND_IN_WATTS: f64 = 250.0;

#[test]
fn steps_weighted_over_the_host_endpoint_divide_what_they_share_by_their_weights() {
    // The program's own process holds the whole (250 W) device from before its first
    // step (it starts once the stand-in has listed it) until after its last (its
    // `planner` step follows them, while the final reading, after it has exited, lists
    // no process): its steps share all of it by weight, whether or not an interval with
    // no process would go to the live steps.
    let (bin, path) = support::path_with_nvidia_smi_listing_the_command();
    let run = run_measured(
        &path,
        &support::after_listed(&bin, [agent_step().into_os_string(), "--weighted".into()]),
    );
    assert!(run.stdout.contains("weighted steps done"), "{}", run.stdout);
    // A weight of 0 is refused by the SDK, naming the weight; nothing reached the host.
    assert!(
        run.stdout
            .contains("refused: agent scope weight 0: a positive, finite number"),
        "{}",
        run.stdout
    );
    let scopes = run.report["agent_scopes"].as_array().unwrap();
    assert!(
        scopes.iter().all(|scope| scope["name"] != "unweighable"),
        "{scopes:?}"
    );
    let step = |name: &str| {
        scopes
            .iter()
            .find(|scope| scope["name"] == name)
            .unwrap_or_else(|| panic!("no step {name} in {scopes:?}"))
    };
    let (retrieve, rank) = (step("retrieve"), step("rank"));
    assert_eq!(retrieve["weight"], 3.0, "{retrieve}");
    assert_eq!(rank["weight"], 1.0, "{rank}");
    // The one process the stand-in listed is the program, which opened both steps.
    let listed = support::listed_pids(&bin);
    assert_eq!(listed.len(), 1, "{listed:?}");
    let pid = *listed.first().unwrap();
    assert_eq!(retrieve["process_id"], pid);
    assert_eq!(rank["process_id"], pid);
    assert_eq!(run.report["devices"][0]["attribution"], "memory");
    assert_the_weighted_split(
        &[retrieve, rank],
        &[3.0, 1.0],
        "the program's steps over the host endpoint",
    );
}

/// Checks `steps` (live together, with `weights`, at the stand-in's constant power)
/// against the rule written out plainly (`closed_form`) from their own start and end
/// stamps: each window is the power × its own duration, each attributed part its
/// weight's share of every stretch it was live in. The stamps are wall-clock times
/// worked out from the monotonic instants energy is cut at, the clocks' offset read
/// again each second: 2 ms apart at most (0.5 J), where a weight lost makes the split
/// 1 : 1, 37.5 J off here.
fn assert_the_weighted_split(steps: &[&serde_json::Value], weights: &[f64], what: &str) {
    let lives: Vec<Live> = steps
        .iter()
        .zip(weights)
        .map(|(step, weight)| Live {
            from: support::unix_seconds(&step["started_at"]),
            to: support::unix_seconds(&step["ended_at"]),
            weight: *weight,
            parent: None,
            process: 0,
        })
        .collect();
    let first = lives
        .iter()
        .map(|live| live.from)
        .fold(f64::INFINITY, f64::min);
    let last = lives
        .iter()
        .map(|live| live.to)
        .fold(f64::NEG_INFINITY, f64::max);
    let figures = closed_form(&lives, STAND_IN_WATTS, None, first, last);
    let joules =
        |step: &serde_json::Value, field: &str| step[field].as_f64().unwrap() * 3_600_000.0;
    for (step, (window, part)) in steps.iter().zip(figures) {
        let (got_window, got_part) = (
            joules(step, "gpu_energy_kwh"),
            joules(step, "attributed_gpu_energy_kwh"),
        );
        eprintln!(
            "{what}, {}: window {got_window:.4} J ({window:.4}), attributed {got_part:.4} J ({part:.4})",
            step["name"]
        );
        assert!(
            (got_window - window).abs() <= 0.5 && (got_part - part).abs() <= 0.5,
            "{what}, {}: window {got_window} J, attributed {got_part} J; the closed form's {window} J and {part} J",
            step["name"]
        );
    }
}

#[test]
fn without_a_host_endpoint_the_command_is_still_measured() {
    let home = tempfile::tempdir().unwrap();
    // The endpoint's private directory cannot be made under a missing TMPDIR.
    let output = wattline(home.path())
        .env("TMPDIR", home.path().join("missing"))
        .args(["run", "--quiet", "--report", "json", "--"])
        .args(["sh", "-c", "test -z \"$WATTLINE_HOST_SOCKET\""])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the command ran, without the variables: {stderr}"
    );
    assert!(
        stderr.contains("the command runs without WATTLINE_HOST_*"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["ended_at"].is_string(), "and was measured: {report}");
}

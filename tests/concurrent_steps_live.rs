//! The concurrent-steps schedule run live in a pipeline (a GPU at a constant 360 W,
//! cost and CO2 on): each step's span, its per-step histograms over OTLP (decoded with
//! the official `opentelemetry-proto` types), its `wattline.scope_energy` mark in the
//! event file and the report carry its window *and* its attributed figures, each
//! equal to the closed form of the fixture's rule (`support::concurrent_steps`)
//! applied to the boundaries the pipeline stamped: the step's own start and end
//! instants, read back from the event file's energy records. Every figure differs
//! between window and part, so a layer that shows one for the other fails here.

mod support;

#[path = "../exporters/tests/support/mod.rs"]
mod otlp;

use std::collections::BTreeMap;
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::metrics::v1::{HistogramDataPoint, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::Value;
use support::ConstantPowerGpu;
use support::concurrent_steps::{JOULES_PER_KWH, Live, closed_form};
use wattline::config::{
    AtofConfig, EffectiveConfig, OpenTelemetryConfig, OtlpEndpointConfig, OtlpTransport,
};
use wattline::{Pipeline, ScopeOptions};

const WATTS: f64 = 360.0;
const PRICE: f64 = 0.2;
const GCO2E_PER_KWH: f64 = 400.0;

/// The schedule, in ms from the first start: (name, weight, parent, start, end). Tool
/// runs inside request; summarize overlaps both.
const SCHEDULE: [(&str, f64, Option<usize>, u64, u64); 3] = [
    ("request", 1.0, None, 0, 600),
    ("tool", 2.0, Some(0), 100, 300),
    ("summarize", 3.0, None, 200, 700),
];

/// One step's figures, J (cost in the currency, CO2 in g).
#[derive(Debug, Clone, Copy)]
struct Expected {
    window: f64,
    attributed: f64,
    seconds: f64,
}

fn double(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> f64 {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::DoubleValue(value) => Some(*value),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no number {key} in {attributes:?}"))
}

/// `actual` within `relative` of `expected`.
#[track_caller]
fn assert_near(what: &str, actual: f64, expected: f64, relative: f64) {
    assert!(
        (actual - expected).abs() <= relative * expected.abs(),
        "{what}: {actual} where the closed form gives {expected}"
    );
}

/// The energy records' instant (ns on the run's clock) of `record` kinds, by scope
/// UUID; and the window's opening and the report's instant.
struct Stamps {
    started: BTreeMap<String, u64>,
    ended: BTreeMap<String, u64>,
    measuring_from: u64,
    report_at: u64,
}

fn stamps(events: &[Value]) -> Stamps {
    let mut stamps = Stamps {
        started: BTreeMap::new(),
        ended: BTreeMap::new(),
        measuring_from: 0,
        report_at: 0,
    };
    for event in events.iter().filter(|e| e["name"] == "wattline.energy") {
        let record = &event["data"];
        let at = record["at"].as_u64().unwrap_or_default();
        let uuid = || record["uuid"].as_str().unwrap().to_owned();
        match record["record"].as_str().unwrap() {
            "scope_started" => {
                stamps.started.insert(uuid(), at);
            }
            "scope_ended" => {
                stamps.ended.insert(uuid(), at);
            }
            "measuring_from" => stamps.measuring_from = at,
            "report" => stamps.report_at = stamps.report_at.max(at),
            _ => {}
        }
    }
    stamps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_live_layer_shows_each_steps_window_and_its_part() {
    let receiver = otlp::grpc_receiver();
    let directory = tempfile::tempdir().unwrap();
    let mut config = EffectiveConfig {
        resource_metrics: None,
        opentelemetry: Some(OpenTelemetryConfig {
            spans: true,
            export_interval_millis: 200,
            endpoints: vec![OtlpEndpointConfig::new(receiver.url(), OtlpTransport::Grpc)],
            ..OpenTelemetryConfig::default()
        }),
        atof: Some(AtofConfig {
            output_directory: directory.path().to_string_lossy().into_owned(),
            filename: "run.jsonl".into(),
            ..AtofConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    let energy = config.energy.as_mut().expect("energy on by default");
    energy.config.cost_per_kwh = PRICE;
    energy.config.currency = "EUR".into();
    energy.config.carbon_intensity = GCO2E_PER_KWH;
    energy.config.co2_tracking = true;
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| Some(Box::new(ConstantPowerGpu::new(WATTS))))
        .spawn()
        .await
        .unwrap();

    // The schedule's boundaries in time order: starts, then ends, each when due.
    let mut boundaries: Vec<(u64, usize, bool)> = SCHEDULE
        .iter()
        .enumerate()
        .flat_map(|(index, (_, _, _, from, to))| [(*from, index, true), (*to, index, false)])
        .collect();
    boundaries.sort();
    let zero = tokio::time::Instant::now();
    let mut live: Vec<Option<wattline::AgentScope>> = (0..SCHEDULE.len()).map(|_| None).collect();
    let mut uuids = vec![String::new(); SCHEDULE.len()];
    for (at, index, starts) in boundaries {
        tokio::time::sleep_until(zero + Duration::from_millis(at)).await;
        let (name, weight, parent, _, _) = SCHEDULE[index];
        if starts {
            let options = ScopeOptions::weight(weight);
            let scope = match parent {
                Some(parent) => live[parent]
                    .as_ref()
                    .unwrap()
                    .child_with(name, options)
                    .unwrap(),
                None => pipeline.agent_scope_with(name, options).unwrap(),
            };
            uuids[index] = scope.uuid().to_string();
            live[index] = Some(scope);
        } else {
            live[index].take().unwrap().end().unwrap();
        }
    }
    let report = pipeline.shutdown().await.unwrap().expect("a report");

    // The closed form over the instants the pipeline stamped.
    let events = support::atof_events(directory.path());
    let stamps = stamps(&events);
    let seconds = |nanos: u64| nanos as f64 / 1e9;
    let steps: Vec<Live> = SCHEDULE
        .iter()
        .zip(&uuids)
        .map(|((_, weight, parent, _, _), uuid)| Live {
            from: seconds(stamps.started[uuid]),
            to: seconds(stamps.ended[uuid]),
            weight: *weight,
            parent: *parent,
            process: 0,
        })
        .collect();
    let closed = closed_form(
        &steps,
        WATTS,
        None,
        seconds(stamps.measuring_from),
        seconds(stamps.report_at),
    );
    let expected: BTreeMap<&str, Expected> = SCHEDULE
        .iter()
        .zip(&closed)
        .zip(&steps)
        .map(|(((name, ..), (window, attributed)), step)| {
            (
                *name,
                Expected {
                    window: *window,
                    attributed: *attributed,
                    seconds: step.to - step.from,
                },
            )
        })
        .collect();
    // The schedule is worth its name: every step's part differs from its window by far
    // more than the tolerance below.
    for (name, figures) in &expected {
        assert!(
            figures.attributed < 0.9 * figures.window,
            "{name}: {figures:?}"
        );
    }
    // Where this host's RAPL is readable, CPU energy adds to the all-domain figures by
    // an amount the test cannot know; the project's machines have none.
    let cpu_measured = report.total.cpu_energy_kwh.is_some();
    // The pipeline's figures are sums over its own intervals, the closed form's over
    // the same instants: they agree to rounding.
    const RELATIVE: f64 = 1e-6;
    let cost = |joules: f64| joules / JOULES_PER_KWH * PRICE;
    let co2 = |joules: f64| joules / JOULES_PER_KWH * GCO2E_PER_KWH;

    // The report.
    for scope in &report.agent_scopes {
        let figures = expected[scope.name.as_str()];
        let what = |field: &str| format!("report {} {field}", scope.name);
        let kwh = |joules: f64| joules / JOULES_PER_KWH;
        assert_near(
            &what("gpu_energy_kwh"),
            scope.gpu_energy_kwh.unwrap(),
            kwh(figures.window),
            RELATIVE,
        );
        assert_near(
            &what("attributed_gpu_energy_kwh"),
            scope.attributed_gpu_energy_kwh.unwrap(),
            kwh(figures.attributed),
            RELATIVE,
        );
        if !cpu_measured {
            for (field, actual, expected) in [
                ("energy_kwh", scope.energy_kwh, kwh(figures.window)),
                ("cost", scope.cost, cost(figures.window)),
                ("co2_grams", scope.co2_grams, co2(figures.window)),
                (
                    "attributed_energy_kwh",
                    scope.attributed_energy_kwh,
                    kwh(figures.attributed),
                ),
                (
                    "attributed_cost",
                    scope.attributed_cost,
                    cost(figures.attributed),
                ),
                (
                    "attributed_co2_grams",
                    scope.attributed_co2_grams,
                    co2(figures.attributed),
                ),
            ] {
                assert_near(&what(field), actual.unwrap(), expected, RELATIVE);
            }
        }
    }
    assert_eq!(report.agent_scopes.len(), SCHEDULE.len());

    // The spans: every energy, cost and CO2 attribute, the weight, the coverage.
    let spans: Vec<Span> = receiver.spans.spans();
    assert_eq!(spans.len(), SCHEDULE.len(), "{spans:?}");
    for (name, weight, ..) in SCHEDULE {
        let span = spans.iter().find(|span| span.name == name).unwrap();
        let figures = expected[name];
        let attribute = |key: &str| double(&span.attributes, key);
        let what = |key: &str| format!("span {name} {key}");
        let mut checks = vec![
            ("wattline.energy.window_gpu_joules", figures.window),
            ("wattline.energy.attributed_gpu_joules", figures.attributed),
        ];
        if !cpu_measured {
            checks.extend([
                ("wattline.energy.window_joules", figures.window),
                ("wattline.energy.attributed_joules", figures.attributed),
                ("wattline.cost.window", cost(figures.window)),
                ("wattline.cost.attributed", cost(figures.attributed)),
                ("wattline.co2.window_grams", co2(figures.window)),
                ("wattline.co2.attributed_grams", co2(figures.attributed)),
            ]);
        }
        for (key, expected) in checks {
            assert_near(&what(key), attribute(key), expected, RELATIVE);
        }
        assert_eq!(attribute("wattline.scope.weight"), weight, "{name}");
        // Readings are taken at every boundary: the whole step is covered.
        assert_near(
            &what("coverage"),
            attribute("wattline.energy.coverage"),
            1.0,
            1e-9,
        );
    }

    // The per-step histograms: one observation per step name, its value the sum.
    let received = receiver.inbox.take();
    let mut latest: BTreeMap<(String, String), HistogramDataPoint> = BTreeMap::new();
    for metric in otlp::metrics(&received) {
        let Some(metric::Data::Histogram(histogram)) = &metric.data else {
            continue;
        };
        for point in &histogram.data_points {
            if let Some(step) = otlp::string_attribute(&point.attributes, "wattline.scope.name") {
                latest.insert((metric.name.clone(), step), point.clone());
            }
        }
    }
    for (name, ..) in SCHEDULE {
        let figures = expected[name];
        let mut checks = vec![
            ("wattline.scope.energy.window", figures.window),
            ("wattline.scope.energy.attributed", figures.attributed),
            ("wattline.scope.duration", figures.seconds),
        ];
        if !cpu_measured {
            checks.extend([
                ("wattline.scope.cost.attributed", cost(figures.attributed)),
                ("wattline.scope.co2.attributed", co2(figures.attributed)),
            ]);
        }
        for (metric, expected) in checks {
            let point = latest
                .get(&(metric.to_owned(), name.to_owned()))
                .unwrap_or_else(|| panic!("no {metric} point for {name}: {latest:#?}"));
            assert_eq!(point.count, 1, "{metric} {name}");
            assert_near(
                &format!("histogram {metric} {name}"),
                point.sum.unwrap(),
                expected,
                RELATIVE,
            );
        }
    }

    // The event file: one `wattline.scope_energy` mark under each step.
    for ((name, ..), uuid) in SCHEDULE.iter().zip(&uuids) {
        let figures = expected[name];
        let marks: Vec<&Value> = events
            .iter()
            .filter(|e| e["name"] == "wattline.scope_energy" && e["parent_uuid"] == uuid.as_str())
            .collect();
        assert_eq!(marks.len(), 1, "{name}: {marks:?}");
        let observed = |metric: &str| -> f64 {
            marks[0]["data"]["measurements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == metric)
                .unwrap_or_else(|| panic!("{metric} in {}", marks[0]))["value"]
                .as_f64()
                .unwrap()
        };
        let mut checks = vec![
            ("wattline.scope.energy.window", figures.window),
            ("wattline.scope.energy.attributed", figures.attributed),
        ];
        if !cpu_measured {
            checks.extend([
                ("wattline.scope.cost.attributed", cost(figures.attributed)),
                ("wattline.scope.co2.attributed", co2(figures.attributed)),
            ]);
        }
        for (metric, expected) in checks {
            assert_near(
                &format!("mark {metric} {name}"),
                observed(metric),
                expected,
                RELATIVE,
            );
        }
    }
}

//! The HTML page built from small runs: sections, charts, escaping, gaps.

use super::chart::{CHART_WIDTH, PLOT_LEFT, PLOT_RIGHT, nice_step, tick_label, ticks};
use super::*;
use crate::report::series::SeriesBuilder;
use wattline_energy::replay::report_from_records;
use wattline_model::energy::EnergyRecord;
use wattline_model::energy::{DevicePower, PowerRecord};

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
                    name: (*name).into(),
                    at: nanos(seconds),
                    wall: wall(seconds),
                    parent: None,
                    process_id: None,
                    weight: None,
                    traceparent: None,
                });
            }
            if (seconds - to).abs() < 1e-9 {
                records.push(EnergyRecord::ScopeEnded {
                    uuid,
                    at: nanos(seconds),
                    wall: wall(seconds),
                    remote_call: None,
                });
            }
        }
        records.push(EnergyRecord::Power(PowerRecord {
            source: "nvml".into(),
            at: nanos(seconds),
            devices: Some(vec![DevicePower {
                power_field: None,
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
        "http://", "https://", "src=", "href=", "<script", "<link", "@import", "<img", "<iframe",
        "<object", "<embed",
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
        let kwh = crate::report::human_units::energy_text(scope.attributed_energy_kwh.unwrap());
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

//! The stdout exporter prints the same instruments as OTLP. Its output goes to the real
//! standard output from the SDK's reader thread, so the test runs the exporter in a child
//! process (this binary again, running the ignored `print_metrics` test) and reads that.

mod support;

use std::process::Command;
use std::time::Duration;

use support::{at, gpu_batch, resource_mark, uuid};
use wattline_config::MetricTemporality;
use wattline_exporters::{ExportError, Exporter, StdoutExporter};

#[test]
#[ignore = "run by stdout_exporter_prints_names_units_values_and_delta_temporality in a child process"]
fn print_metrics() {
    let mut exporter = StdoutExporter::new(Duration::from_secs(3_600), MetricTemporality::Delta);
    exporter
        .export(&resource_mark(uuid(1), None, at(0, 0), 7))
        .unwrap();
    exporter
        .export(&gpu_batch(at(0, 0), &[("GPU-0", 75.0)], 0.25, 150.0))
        .unwrap();
    exporter.flush().unwrap();
    exporter.shutdown().unwrap();
    assert!(matches!(
        exporter.flush(),
        Err(ExportError::ShutDown("stdout"))
    ));
}

#[test]
fn stdout_exporter_prints_names_units_values_and_delta_temporality() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "print_metrics",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "service.name=String(Static(\"wattline\"))",
        "Name         : wattline",
        "Name         : nemo.relay.resource.sample_count",
        "Unit         : events",
        "Name         : gen_ai.gpu.utilization",
        "Unit         : %",
        "Name         : gen_ai.energy.consumed",
        "Temporality  : Delta",
        "Name         : gen_ai.power.consumption",
        "gpu_id",
        "GPU-0",
        "Value        : 7\n",
        "Value        : 75.0",
        "Value        : 0.25",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

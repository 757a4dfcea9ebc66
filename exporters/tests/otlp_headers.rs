//! `headers` and `header_env` reach the collector over both transports, and the value
//! read from the environment never appears in a log line or a debug dump. Its own binary:
//! it sets a process environment variable before any other thread exists.

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use support::{at, gpu_batch, grpc_receiver, http_receiver, otel_config};
use wattline_config::{MetricTemporality, OtlpTransport};
use wattline_exporters::{BuildError, Exporter, OtlpExporter};

/// Everything logged, at every level.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn header_and_header_env_are_delivered_and_the_secret_is_never_logged() {
    let variable = format!("WATTLINE_TEST_OTLP_TOKEN_{}", std::process::id());
    let secret = format!("Bearer s3cr3t-{}", std::process::id());
    // SAFETY: this binary's only test sets the variable first, before it starts any
    // thread, and nothing else in the process reads or writes the environment then.
    unsafe { std::env::set_var(&variable, &secret) };

    let logs = LogBuffer::default();
    let writer = logs.clone();
    // Global, with `log` records bridged: the reader threads, the gRPC runtime and the
    // HTTP client log too, at every level.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .try_init()
        .expect("the only subscriber of this binary");

    for (receiver, transport) in [
        (grpc_receiver(), OtlpTransport::Grpc),
        (http_receiver(), OtlpTransport::HttpBinary),
    ] {
        let mut config = otel_config(&receiver.url(), transport, MetricTemporality::Delta, 2_000);
        config.endpoints[0]
            .headers
            .insert("X-Team".into(), "perf".into());
        config.endpoints[0]
            .header_env
            .insert("Authorization".into(), variable.clone());
        let mut exporter = OtlpExporter::builder(config).build().unwrap();
        exporter
            .export(&gpu_batch(at(0, 0), &[("GPU-0", 1.0)], 0.1, 100.0))
            .unwrap();
        exporter.flush().unwrap();
        let received = receiver.inbox.take();
        assert_eq!(received.len(), 1, "{transport:?}");
        assert_eq!(received[0].header("x-team"), Some("perf"), "{transport:?}");
        assert_eq!(
            received[0].header("authorization"),
            Some(secret.as_str()),
            "{transport:?}"
        );
        let dump = format!("{exporter:?}");
        assert!(!dump.contains("s3cr3t"), "{dump}");
        exporter.shutdown().unwrap();
    }

    // An unset variable is a build error naming the variable, not a silent empty header.
    let mut config = otel_config(
        "http://127.0.0.1:4317",
        OtlpTransport::Grpc,
        MetricTemporality::Delta,
        1_000,
    );
    config.endpoints[0]
        .header_env
        .insert("authorization".into(), format!("{variable}_UNSET"));
    let error = OtlpExporter::builder(config).build().unwrap_err();
    assert!(
        matches!(
            error,
            BuildError::HeaderEnv {
                problem: "is not set",
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "endpoints[0].header_env.authorization: environment variable {variable}_UNSET is not set"
        )
    );

    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        logged.contains("OTLP metrics exporter started"),
        "logs were captured: {logged}"
    );
    assert!(!logged.contains("s3cr3t"), "{logged}");
    assert!(
        logged.contains("h2") && logged.contains("reqwest"),
        "the transports' own trace logs were captured too"
    );
}

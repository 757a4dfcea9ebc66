//! Source selection (NVML, else nvidia-smi, plus DRM), the composite source, and
//! device selectors.

mod support;

use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::{LogRecorder, build_fake_nvml, fake_smi_dir};
use tracing::Level;
use wattline_gpu::nvml::NvmlConfig;
use wattline_gpu::selection::{CompositeGpuSource, GpuSourceEnv, select_default_sources};
use wattline_gpu::visible_devices::selector_matches;
use wattline_gpu::{CollectingEventSink, GpuEvent, GpuSampleRequest, GpuSource};
use wattline_model::series::SamplingSeries;
use wattline_model::snapshot::{GpuDeviceReading, GpuSample, GpuVendor};

fn env(
    sink: &Arc<CollectingEventSink>,
    library: std::path::PathBuf,
    path_env: Option<OsString>,
) -> GpuSourceEnv {
    let mut env = GpuSourceEnv::from_process(sink.clone());
    env.path_env = path_env;
    env.nvml = NvmlConfig {
        library_path: Some(library),
        retry_delay: Duration::from_secs(60),
    };
    env.smi_interval = Duration::from_millis(50);
    env.smi_timeout = Duration::from_secs(5);
    env
}

fn drm_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let device = root.path().join("sys/class/drm/card0/device");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::write(device.join("vendor"), "0x1002\n").unwrap();
    std::fs::write(device.join("uevent"), "PCI_SLOT_NAME=0000:03:00.0\n").unwrap();
    std::fs::write(device.join("gpu_busy_percent"), "12\n").unwrap();
    root
}

#[test]
fn selectors_match_identifier_or_decimal_index() {
    assert!(selector_matches(&[], "GPU-1", Some(0)), "empty selects all");
    let selectors = vec!["2".to_owned(), "gpu-abc".to_owned()];
    assert!(selector_matches(&selectors, "GPU-x", Some(2)));
    assert!(
        selector_matches(&selectors, "GPU-ABC", Some(0)),
        "identifier, case ignored"
    );
    assert!(!selector_matches(&selectors, "GPU-x", Some(3)));
    assert!(
        !selector_matches(&["02".to_owned()], "GPU-x", Some(2)),
        "decimal string, exactly"
    );
    assert!(
        !selector_matches(&["0".to_owned()], "0000:03:00.0", None),
        "no index, no index match"
    );
}

struct Fixed {
    name: &'static str,
    answer: Option<GpuSample>,
    calls: usize,
}

impl GpuSource for Fixed {
    fn name(&self) -> &str {
        self.name
    }
    fn sample(&mut self, _request: &GpuSampleRequest) -> Option<GpuSample> {
        self.calls += 1;
        self.answer.clone()
    }
}

#[test]
fn composite_concatenates_in_order_and_is_none_only_when_all_are() {
    let first_time = Instant::now();
    let vendor_sample = GpuSample {
        devices: vec![GpuDeviceReading::new(GpuVendor::Other, "vendor-0")],
        processes: Vec::new(),
        taken_at: first_time,
    };
    let mut later = GpuSample::empty();
    later
        .devices
        .push(GpuDeviceReading::new(GpuVendor::Amd, "0000:03:00.0"));
    let mut composite = CompositeGpuSource::new(vec![
        Box::new(Fixed {
            name: "silent",
            answer: None,
            calls: 0,
        }),
        Box::new(Fixed {
            name: "vendor-tool",
            answer: Some(vendor_sample),
            calls: 0,
        }),
        Box::new(Fixed {
            name: "drm",
            answer: Some(later),
            calls: 0,
        }),
    ]);
    assert_eq!(composite.name(), "silent+vendor-tool+drm");
    assert_eq!(
        composite.source_names(),
        vec!["silent", "vendor-tool", "drm"]
    );
    let sample = composite
        .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("two sources answered");
    let ids: Vec<_> = sample
        .devices
        .iter()
        .map(|d| d.device_identifier.as_str())
        .collect();
    assert_eq!(ids, vec!["vendor-0", "0000:03:00.0"]);
    assert_eq!(sample.taken_at, first_time, "first answering source's time");

    let mut quiet = CompositeGpuSource::new(vec![Box::new(Fixed {
        name: "a",
        answer: None,
        calls: 0,
    })]);
    assert!(
        quiet
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
    let mut nothing = CompositeGpuSource::new(Vec::new());
    assert_eq!(nothing.name(), "none");
    assert!(nothing.is_empty());
    assert!(
        nothing
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
}

#[test]
fn nvml_is_chosen_when_it_loads_plus_drm() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &[]);
    // nvidia-smi is also there, but NVML wins.
    let smi = fake_smi_dir("answer.sh", Some("one_device.csv"));
    let root = drm_root();
    let sink = Arc::new(CollectingEventSink::new());
    let mut sources =
        select_default_sources(root.path(), env(&sink, library, Some(smi.path().into())));
    assert_eq!(sources.name(), "nvml+drm");
    let sample = sources
        .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
        .expect("sample");
    let ids: Vec<_> = sample
        .devices
        .iter()
        .map(|d| (d.vendor, d.device_identifier.as_str()))
        .collect();
    assert_eq!(
        ids,
        vec![
            (
                GpuVendor::Nvidia,
                "GPU-11111111-2222-3333-4444-555555555555"
            ),
            (
                GpuVendor::Nvidia,
                "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
            ),
            (GpuVendor::Amd, "0000:03:00.0"),
        ]
    );
    assert!(
        support::calls(smi.path()).is_empty(),
        "nvidia-smi never run"
    );
    // Only the fake's unsupported calls are reported: NVML loaded, nothing else failed.
    assert!(
        sink.events()
            .iter()
            .all(|e| matches!(e, GpuEvent::NvmlCallNotSupported { .. })),
        "{:?}",
        sink.events()
    );
}

#[tokio::test]
async fn nvidia_smi_is_chosen_when_nvml_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let library = build_fake_nvml(dir.path(), &["-DFAKE_INIT_FAIL".into()]);
    let smi = fake_smi_dir("answer.sh", Some("one_device.csv"));
    let no_drm = tempfile::tempdir().unwrap();
    let sink = Arc::new(CollectingEventSink::new());
    let mut sources =
        select_default_sources(no_drm.path(), env(&sink, library, Some(smi.path().into())));
    assert_eq!(sources.name(), "nvidia-smi");
    let deadline = Instant::now() + Duration::from_secs(10);
    let sample = loop {
        if let Some(sample) = sources.sample(&GpuSampleRequest::all(SamplingSeries::Polling)) {
            break sample;
        }
        assert!(Instant::now() < deadline, "no nvidia-smi answer");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        sample.devices[0].device_identifier,
        "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
    );
    assert!(matches!(
        &sink.events()[..],
        [GpuEvent::NvmlUnavailable { .. }]
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nvml_is_retried_while_nvidia_smi_answers_and_takes_over_when_it_loads() {
    // No NVML library at first; nvidia-smi answers. The library then appears: after
    // the retry delay NVML reads the devices and the tool is no longer run.
    let dir = tempfile::tempdir().unwrap();
    let library = dir.path().join("libnvidia-ml.so.1");
    let smi = fake_smi_dir("answer.sh", Some("one_device.csv"));
    let no_drm = tempfile::tempdir().unwrap();
    let sink = Arc::new(CollectingEventSink::new());
    let mut env = env(&sink, library, Some(smi.path().into()));
    env.nvml.retry_delay = Duration::from_millis(300);
    let mut sources = select_default_sources(no_drm.path(), env);
    assert_eq!(sources.name(), "nvidia-smi");
    let request = GpuSampleRequest::all(SamplingSeries::Polling);
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        if let Some(sample) = tokio::task::block_in_place(|| sources.sample_parts(&request))
            .into_iter()
            .find_map(|part| part.sample)
        {
            break sample;
        }
        assert!(Instant::now() < deadline, "no nvidia-smi answer");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        first.devices[0].device_identifier,
        "GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c"
    );
    build_fake_nvml(dir.path(), &[]);
    let taken_over = loop {
        let parts = tokio::task::block_in_place(|| sources.sample_parts(&request));
        if sources.name() == "nvml" {
            break parts;
        }
        assert!(Instant::now() < deadline, "NVML never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let sample = taken_over
        .into_iter()
        .find_map(|part| part.sample)
        .expect("NVML answers");
    assert_eq!(
        sample.devices[0].device_identifier,
        "GPU-11111111-2222-3333-4444-555555555555"
    );
    // The tool stops: no run starts after the takeover.
    let runs = support::calls(smi.path()).len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        support::calls(smi.path()).len(),
        runs,
        "nvidia-smi still run"
    );
}

#[test]
fn neither_nvml_nor_nvidia_smi_reports_once_and_keeps_nvml_for_retries() {
    let recorder = LogRecorder::default();
    let _guard = tracing::subscriber::set_default(recorder.clone());
    let dir = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let sink = Arc::new(CollectingEventSink::new());
    let mut sources = select_default_sources(
        empty_path.path(),
        env(
            &sink,
            dir.path().join("libnvidia-ml.so.1"),
            Some(empty_path.path().into()),
        ),
    );
    assert_eq!(sources.name(), "nvml");
    assert!(
        sources
            .sample(&GpuSampleRequest::all(SamplingSeries::Polling))
            .is_none()
    );
    let events = sink.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(events[0], GpuEvent::NvmlUnavailable { .. }));
    assert_eq!(events[1], GpuEvent::SmiNotFound);
    assert_eq!(
        recorder.at(Level::INFO).len(),
        2,
        "one line for NVML, one for nvidia-smi"
    );
    assert!(recorder.at(Level::WARN).is_empty());
}

#[test]
fn nvidia_smi_without_a_runtime_falls_back_to_nvml() {
    let dir = tempfile::tempdir().unwrap();
    let smi = fake_smi_dir("answer.sh", Some("one_device.csv"));
    let sink = Arc::new(CollectingEventSink::new());
    let sources = select_default_sources(
        dir.path(),
        env(
            &sink,
            dir.path().join("missing.so"),
            Some(smi.path().into()),
        ),
    );
    assert_eq!(sources.name(), "nvml");
    assert!(support::calls(smi.path()).is_empty());
}

#[test]
fn events_carry_codes_classes_and_severities() {
    let event = GpuEvent::SmiStoppedAfterFailures { count: 5 };
    assert_eq!(event.code(), "gpu.smi_stopped_after_failures");
    assert_eq!(event.class(), "unavailable");
    assert_eq!(event.severity(), wattline_gpu::GpuEventSeverity::Warning);
    assert_eq!(
        GpuEvent::SmiNotFound.severity(),
        wattline_gpu::GpuEventSeverity::Info
    );
    assert_eq!(GpuEvent::SmiTimeout.class(), "timeout");
}

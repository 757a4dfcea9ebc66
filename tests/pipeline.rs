//! The actor pipeline through the public API: polling marks per Agent scope, the
//! fixed-rate schedule with a slow sampler, supervision of a panicking sampler, flush
//! on a young pipeline, and the fork guard.

mod support;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wattline::config::{EffectiveConfig, ResourceMetricsConfig};
use wattline::events::{CollectingEventSink, PipelineEvent, ScopeCategory};
use wattline::{Pipeline, SamplerCategory, ScopeTarget};

use support::{ConstantPowerGpu, PanickingGpu, marks};

fn polling_config(interval_millis: u64, energy: bool) -> EffectiveConfig {
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = interval_millis;
    // Keep the polls light: CPU and GPU only.
    resource.memory.enabled = false;
    resource.process.enabled = false;
    resource.disk.enabled = false;
    resource.network.enabled = false;
    let mut config = EffectiveConfig {
        resource_metrics: Some(resource),
        ..EffectiveConfig::default()
    };
    if !energy {
        config.energy = None;
    }
    config
}

async fn wait_for(mut condition: impl FnMut() -> bool, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_live_agent_scope_gets_a_copy_of_every_poll() {
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = Pipeline::builder()
        .config(polling_config(150, false))
        .gpu_source(|| None)
        .event_sink(sink.clone())
        .spawn()
        .await
        .unwrap();
    // With no Agent scope, one mark under the root scope.
    wait_for(
        || !marks(&sink.events()).is_empty(),
        Duration::from_secs(10),
    )
    .await;
    let root_uuid = match &sink.events()[0] {
        PipelineEvent::Scope(scope) => {
            assert_eq!(scope.scope_category, ScopeCategory::Start);
            assert!(scope.parent_uuid.is_none());
            scope.uuid
        }
        other => panic!("first event should be the root scope start: {other:?}"),
    };
    assert_eq!(marks(&sink.events())[0].parent_uuid, Some(root_uuid));

    let agents = [
        pipeline.agent_scope("planner").unwrap(),
        pipeline.agent_scope("coder").unwrap(),
        pipeline.agent_scope("reviewer").unwrap(),
    ];
    let uuids: Vec<_> = agents.iter().map(|a| a.uuid()).collect();
    let before = marks(&sink.events()).len();
    wait_for(
        || marks(&sink.events()).len() >= before + 9,
        Duration::from_secs(10),
    )
    .await;

    // Group the marks after the scopes started by timestamp: each poll has 3 copies.
    let after: Vec<_> = marks(&sink.events()).into_iter().skip(before).collect();
    let mut by_poll: std::collections::BTreeMap<_, Vec<_>> = Default::default();
    for mark in &after {
        by_poll
            .entry(mark.timestamp)
            .or_default()
            .push(mark.clone());
    }
    let complete: Vec<_> = by_poll
        .values()
        .filter(|copies| copies.len() == 3)
        .collect();
    assert!(
        complete.len() >= 2,
        "polls: {:?}",
        by_poll.values().map(Vec::len).collect::<Vec<_>>()
    );
    for copies in &complete {
        let parents: Vec<_> = copies.iter().map(|m| m.parent_uuid.unwrap()).collect();
        assert_eq!(parents, uuids, "one copy per live scope, in start order");
        assert!(
            copies.iter().all(|m| m.data == copies[0].data),
            "identical data"
        );
        let mut distinct: Vec<_> = copies.iter().map(|m| m.uuid).collect();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "each copy has its own uuid");
        assert!(copies.iter().all(|m| m.uuid.get_version_num() == 7));
    }

    // End one scope mid-run: later polls have two copies, none under the ended one.
    let [planner, coder, reviewer] = agents;
    coder.end().unwrap();
    let ended_at = sink.events().len();
    wait_for(
        || marks(&sink.events()[ended_at..]).len() >= 4,
        Duration::from_secs(10),
    )
    .await;
    let later = marks(&sink.events()[ended_at..]);
    assert!(later.iter().all(|m| m.parent_uuid != Some(uuids[1])));
    assert!(later.iter().any(|m| m.parent_uuid == Some(uuids[0])));
    drop(planner);
    drop(reviewer);
    pipeline.shutdown().await.unwrap();
    let events = sink.events();
    let ends = events
        .iter()
        .filter(|e| matches!(e, PipelineEvent::Scope(s) if s.scope_category == ScopeCategory::End))
        .count();
    assert_eq!(ends, 4, "three agents and the root end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sampler_neither_delays_the_grid_nor_its_snapshot() {
    let sink = Arc::new(CollectingEventSink::default());
    let period = Duration::from_millis(200);
    let pipeline = Pipeline::builder()
        .config(polling_config(200, false))
        .gpu_source(|| {
            let mut slow = ConstantPowerGpu::new(100.0);
            slow.delay = Duration::from_millis(350);
            Some(Box::new(slow))
        })
        .tick_deadline(Duration::from_millis(80))
        .event_sink(sink.clone())
        .spawn()
        .await
        .unwrap();
    wait_for(|| marks(&sink.events()).len() >= 8, Duration::from_secs(20)).await;
    pipeline.shutdown().await.unwrap();
    let marks = marks(&sink.events());
    let first = marks[0].timestamp;
    for (k, mark) in marks.iter().enumerate().take(8) {
        // On the fixed-rate grid: k periods after the first, give or take scheduling
        // noise. A mark is stamped when its poll completes: the first waited the
        // deadline for the slow GPU, a later one finding the GPU still reading sends
        // it nothing and completes at once, so a mark may come up to one deadline
        // (80 ms) earlier on the grid than the first. A fixed-delay schedule would add
        // the deadline every time (80 ms x k).
        let offset = (mark.timestamp - first).to_std().unwrap_or_default();
        let expected = period * k as u32;
        let early_limit = expected.saturating_sub(Duration::from_millis(80 + 30));
        assert!(
            offset >= early_limit && offset < expected + Duration::from_millis(70),
            "tick {k}: {offset:?} vs {expected:?}"
        );
    }
    // The slow GPU never made a deadline after the first: its category was null.
    let with_gpu = marks
        .iter()
        .filter(|m| {
            m.data
                .measurements
                .iter()
                .any(|x| x.name.starts_with("nemo.relay.resource.accelerator"))
        })
        .count();
    assert!(with_gpu <= 1, "{with_gpu} polls carried GPU data");
    // And the CPU data arrived in every poll.
    assert!(marks.iter().all(|m| {
        m.data
            .measurements
            .iter()
            .any(|x| x.name == "nemo.relay.resource.cpu.total_time")
    }));
    let diagnostics = pipeline.diagnostics_json().unwrap().unwrap();
    assert!(
        diagnostics.contains("sampler.gpu.deadline_missed"),
        "{diagnostics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_gpu_source_is_restarted_and_its_category_is_null_meanwhile() {
    let pipeline = Pipeline::builder()
        .config(polling_config(5000, false))
        .gpu_source(|| Some(Box::new(PanickingGpu)))
        .spawn()
        .await
        .unwrap();
    let snapshot = pipeline.collect().await.unwrap();
    assert!(
        snapshot.gpu.is_none(),
        "the failed sampler's category is null"
    );
    assert!(snapshot.cpu.is_some(), "the others are unaffected");
    // Each collect makes the restarted sampler panic again.
    let mut restarts = 0;
    for _ in 0..40 {
        let _ = pipeline.collect().await.unwrap();
        restarts = pipeline.restart_count(SamplerCategory::Gpu).await;
        if restarts >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(restarts >= 2, "restarts: {restarts}");
    let diagnostics: serde_json::Value =
        serde_json::from_str(&pipeline.diagnostics_json().unwrap().unwrap()).unwrap();
    let occurrences = diagnostics["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["codes"].as_array().unwrap().iter())
        .find(|code| code["code"] == "sampler.gpu.restarted")
        .map(|code| code["occurrences"].as_u64().unwrap())
        .unwrap();
    assert!(
        occurrences >= u64::from(restarts),
        "{occurrences} < {restarts}"
    );
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_on_a_pipeline_younger_than_one_interval_has_a_reading() {
    let mut config = polling_config(5000, true);
    config.resource_metrics.as_mut().unwrap().polling.enabled = false;
    let started = std::time::Instant::now();
    let pipeline = Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| Some(Box::new(ConstantPowerGpu::new(250.0))))
        .spawn()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = pipeline.flush().await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(report.gpu_source.as_deref(), Some("test-constant"));
    assert_eq!(report.devices.len(), 1);
    let device = &report.devices[0];
    assert!(device.readings >= 2, "{device:?}");
    // 250 W over the covered time, which lies within the pipeline's lifetime.
    assert!(
        device.covered_seconds > 0.2 && device.covered_seconds <= elapsed,
        "{device:?}"
    );
    let expected_kwh = 250.0 * device.covered_seconds / 3_600_000.0;
    assert!(
        (device.energy_kwh - expected_kwh).abs() < 1e-12,
        "{} vs {expected_kwh}",
        device.energy_kwh
    );
    assert!((report.total.cost.unwrap() - device.energy_kwh * 0.12).abs() < 1e-15);
    assert!(report.total.co2_grams.is_none(), "CO2 is off by default");
    assert!(report.diagnostics.is_some());
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_and_on_demand_collections_keep_separate_baselines() {
    // Polls run first, twice or more: they start no baseline of the on-demand series,
    // whose first collection has no rate (the spec); its second has one.
    let sink = Arc::new(CollectingEventSink::default());
    let pipeline = Pipeline::builder()
        .config(polling_config(50, false))
        .gpu_source(|| None)
        .event_sink(sink.clone())
        .spawn()
        .await
        .unwrap();
    wait_for(|| marks(&sink.events()).len() >= 2, Duration::from_secs(10)).await;
    let first = pipeline.collect().await.unwrap();
    let second = pipeline.collect().await.unwrap();
    let polled = marks(&sink.events());
    pipeline.shutdown().await.unwrap();
    assert!(polled.len() >= 2, "{} polls", polled.len());
    assert!(first.cpu.as_ref().unwrap().consumption_rate.is_none());
    assert!(second.cpu.as_ref().unwrap().consumption_rate.is_some());
}

/// `collect_then`'s result, awaited (a callback never called fails the test).
async fn collected_then(
    pipeline: &Pipeline,
) -> Result<wattline::snapshot::Snapshot, wattline::Error> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    pipeline.collect_then(move |result| {
        let _ = sender.send(result);
    });
    tokio::time::timeout(Duration::from_secs(30), receiver)
        .await
        .expect("called within 30 s")
        .expect("called, not dropped")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collect_then_continues_the_on_demand_series_and_reports_a_stopped_pipeline() {
    let pipeline = Pipeline::builder()
        .gpu_source(|| None)
        .spawn()
        .await
        .unwrap();
    let first = collected_then(&pipeline).await.unwrap();
    assert!(first.cpu.as_ref().unwrap().consumption_rate.is_none());
    // The same series as collect(): its baseline is the callback's snapshot's.
    let second = pipeline.collect().await.unwrap();
    assert!(second.cpu.as_ref().unwrap().consumption_rate.is_some());
    let third = collected_then(&pipeline).await.unwrap();
    assert!(third.cpu.as_ref().unwrap().consumption_rate.is_some());
    pipeline.shutdown().await.unwrap();
    let stopped = collected_then(&pipeline).await;
    assert!(stopped.is_err(), "{stopped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_default_scope_is_the_tree_rooted_here() {
    let pipeline = Pipeline::builder()
        .gpu_source(|| None)
        .spawn()
        .await
        .unwrap();
    match pipeline.target() {
        ScopeTarget::ProcessTree(root) => assert_eq!(root.pid, std::process::id()),
        other => panic!("{other:?}"),
    }
    let first = pipeline.collect().await.unwrap();
    assert!(first.cpu.as_ref().unwrap().consumption_rate.is_none());
    let second = pipeline.collect().await.unwrap();
    assert!(second.cpu.as_ref().unwrap().consumption_rate.is_some());
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_child_cannot_use_the_parents_pipeline() {
    let pipeline = Pipeline::builder()
        .gpu_source(|| None)
        .spawn()
        .await
        .unwrap();
    assert!(pipeline.ensure_same_process().is_ok());
    // SAFETY: the child only calls the allocation-free check and `_exit`s.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let code = match pipeline.ensure_same_process() {
            Err(wattline::Error::ForkedChild { .. }) => 42,
            _ => 1,
        };
        // SAFETY: _exit ends the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    assert!(child > 0);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 42);
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_sampling() {
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let pipeline = Pipeline::builder()
        .config(polling_config(50, false))
        .gpu_source(move || {
            let mut gpu = ConstantPowerGpu::new(10.0);
            gpu.calls = Arc::clone(&counted);
            Some(Box::new(gpu))
        })
        .spawn()
        .await
        .unwrap();
    wait_for(
        || calls.load(std::sync::atomic::Ordering::SeqCst) >= 3,
        Duration::from_secs(10),
    )
    .await;
    drop(pipeline);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after_drop = calls.load(std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        after_drop,
        "still sampling after drop"
    );
}

/// A GPU source that blocks inside `sample` while its gate is shut, like a driver
/// call that hangs, and counts the samples that got inside.
struct GatedGpu {
    open: Arc<std::sync::atomic::AtomicBool>,
    inside: Arc<std::sync::atomic::AtomicU64>,
}

impl wattline::gpu::GpuSource for GatedGpu {
    fn name(&self) -> &str {
        "test-gated"
    }

    fn sample(
        &mut self,
        _request: &wattline::gpu::GpuSampleRequest,
    ) -> Option<wattline::gpu::GpuSample> {
        use std::sync::atomic::Ordering;
        self.inside.fetch_add(1, Ordering::SeqCst);
        while !self.open.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
        }
        Some(wattline::gpu::GpuSample {
            devices: vec![support::device("GPU-gated", 100.0)],
            processes: Vec::new(),
            taken_at: std::time::Instant::now(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_scopes_start_and_end_while_a_poll_is_stuck_in_flight() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let open = Arc::new(AtomicBool::new(true));
    let inside = Arc::new(AtomicU64::new(0));
    let events = Arc::new(CollectingEventSink::default());
    let (source_open, source_inside) = (Arc::clone(&open), Arc::clone(&inside));
    let pipeline = Pipeline::builder()
        .config(polling_config(100, true))
        .environment(Default::default())
        // A poll waits for its samplers far longer than this test does.
        .tick_deadline(Duration::from_secs(60))
        .event_sink(events.clone())
        .gpu_source(move || {
            Some(Box::new(GatedGpu {
                open: Arc::clone(&source_open),
                inside: Arc::clone(&source_inside),
            }))
        })
        .spawn()
        .await
        .unwrap();
    // Shut the gate and wait until a sample is stuck inside it.
    open.store(false, Ordering::SeqCst);
    let stuck_from = inside.load(Ordering::SeqCst);
    wait_for(
        || inside.load(Ordering::SeqCst) > stuck_from,
        Duration::from_secs(10),
    )
    .await;
    let scopes = |category: ScopeCategory| {
        events
            .events()
            .iter()
            .filter(|event| {
                matches!(event, PipelineEvent::Scope(scope)
                    if &*scope.name == "planner" && scope.scope_category == category)
            })
            .count()
    };
    // Neither call waits for the poll, and the merger, which writes the events in
    // order with its polls, writes both while the poll is still stuck. Each runs on a
    // blocking thread, so that a call that blocks fails the test instead of hanging it.
    let pipeline = Arc::new(pipeline);
    let starting = Arc::clone(&pipeline);
    let agent = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || starting.agent_scope("planner")),
    )
    .await
    .expect("agent_scope waited for the poll in flight")
    .unwrap()
    .unwrap();
    wait_for(
        || scopes(ScopeCategory::Start) == 1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(scopes(ScopeCategory::Start), 1);
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::task::spawn_blocking(move || agent.end()),
    )
    .await
    .expect("end waited for the poll in flight")
    .unwrap()
    .unwrap();
    wait_for(|| scopes(ScopeCategory::End) == 1, Duration::from_secs(10)).await;
    assert_eq!(scopes(ScopeCategory::End), 1);
    assert!(!open.load(Ordering::SeqCst), "the gate was shut throughout");
    open.store(true, Ordering::SeqCst);
    pipeline.shutdown().await.unwrap();
}

/// Starting, nesting and ending a scope are plain calls: a thread that never entered a
/// runtime makes them, and the merger writes their events. Ending a scope after the
/// pipeline shut down (which ended it) says so, and writes no second end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_start_and_end_outside_any_runtime_and_an_end_after_shutdown_says_so() {
    let events = Arc::new(CollectingEventSink::default());
    let pipeline = Arc::new(
        Pipeline::builder()
            .config(polling_config(100, true))
            .environment(Default::default())
            .event_sink(events.clone())
            .gpu_source(|| None)
            .spawn()
            .await
            .unwrap(),
    );
    let outside = Arc::clone(&pipeline);
    let (parent, child_uuid) = std::thread::spawn(move || {
        assert!(
            tokio::runtime::Handle::try_current().is_err(),
            "this thread is outside every runtime"
        );
        let parent = outside.agent_scope("outside")?;
        let child = parent.child("inner")?;
        let child_uuid = child.uuid();
        child.end()?;
        Ok::<_, wattline::Error>((parent, child_uuid))
    })
    .join()
    .expect("the thread ran to its end")
    .unwrap();
    let count = |name: &str, category: ScopeCategory| {
        events
            .events()
            .iter()
            .filter(|event| {
                matches!(event, PipelineEvent::Scope(scope)
                    if &*scope.name == name && scope.scope_category == category)
            })
            .count()
    };
    wait_for(
        || count("inner", ScopeCategory::End) == 1,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(count("outside", ScopeCategory::Start), 1);
    assert_eq!(count("inner", ScopeCategory::Start), 1);
    let inner_parent = events.events().iter().find_map(|event| match event {
        PipelineEvent::Scope(scope) if scope.uuid == child_uuid => scope.parent_uuid,
        _ => None,
    });
    assert_eq!(inner_parent, Some(parent.uuid()));
    assert_eq!(count("outside", ScopeCategory::End), 0, "still live");

    pipeline.shutdown().await.unwrap();
    assert_eq!(count("outside", ScopeCategory::End), 1, "ended at shutdown");
    let parent_uuid = parent.uuid();
    match parent.end() {
        Err(error @ wattline::Error::ScopeAfterShutdown { uuid }) => {
            assert_eq!(uuid, parent_uuid);
            assert!(error.to_string().contains("shut down"), "{error}");
        }
        other => panic!("an end after shutdown is refused: {other:?}"),
    }
    assert_eq!(count("outside", ScopeCategory::End), 1, "no second end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_demand_collection_waits_for_a_source_slower_than_the_poll_deadline() {
    // Polling off at a 100 ms interval (a poll would give each sampler 80 ms); the GPU
    // source answers in 150 ms. collect() is awaited: the GPU category is filled.
    let mut config = polling_config(100, false);
    if let Some(resource) = config.resource_metrics.as_mut() {
        resource.polling.enabled = false;
    }
    let pipeline = Pipeline::builder()
        .config(config)
        .gpu_source(|| {
            let mut slow = ConstantPowerGpu::new(100.0);
            slow.delay = Duration::from_millis(150);
            Some(Box::new(slow))
        })
        .spawn()
        .await
        .unwrap();
    let snapshot = pipeline.collect().await.unwrap();
    pipeline.shutdown().await.unwrap();
    let gpu = snapshot
        .gpu
        .expect("the GPU category is enabled and answered");
    let devices = gpu.device_metrics.expect("device records");
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].device_identifier, "GPU-test-0");
}

/// A driver that reports one process of ours and one of another PID namespace.
struct DriverWithForeignProcess;

impl wattline::gpu::GpuSource for DriverWithForeignProcess {
    fn name(&self) -> &str {
        "test-foreign-pid"
    }

    fn sample(
        &mut self,
        request: &wattline::gpu::GpuSampleRequest,
    ) -> Option<wattline::gpu::GpuSample> {
        // Answers like a driver: every process it knows, whatever was asked.
        let process = |pid: u32| wattline::gpu::GpuProcessReading {
            vendor: wattline::gpu::GpuVendor::Nvidia,
            device_identifier: "GPU-test-0".into(),
            device_index: Some(0),
            process_id: pid,
            memory_used_bytes: Some(1 << 20),
            compute_utilization_percent: None,
        };
        // Above the kernel's largest pid_max (2^22): never a process of this namespace.
        let foreign = 4_194_305;
        Some(wattline::gpu::GpuSample {
            devices: vec![support::device("GPU-test-0", 100.0)],
            processes: if request.process_metrics {
                vec![process(std::process::id()), process(foreign)]
            } else {
                Vec::new()
            },
            taken_at: std::time::Instant::now(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_process_records_are_visible_processes_only_in_global_scope_too() {
    let mut config = polling_config(1000, false);
    if let Some(resource) = config.resource_metrics.as_mut() {
        resource.polling.enabled = false;
    }
    let pipeline = Pipeline::builder()
        .config(config)
        .scope(ScopeTarget::Global)
        .gpu_source(|| Some(Box::new(DriverWithForeignProcess)))
        .spawn()
        .await
        .unwrap();
    let snapshot = pipeline.collect().await.unwrap();
    pipeline.shutdown().await.unwrap();
    let processes = snapshot.gpu.unwrap().process_metrics.unwrap();
    let pids: Vec<u32> = processes.iter().map(|p| p.process_id).collect();
    assert_eq!(pids, vec![std::process::id()]);
}

fn plugin_component(
    diagnostics: &wattline::diagnostics::PluginDiagnostics,
) -> Result<wattline::diagnostics::DiagnosticComponent, wattline::diagnostics::DiagnosticError> {
    use wattline::diagnostics::{BuiltinDiagnosticCode, ComponentDeclaration, DiagnosticCode};
    diagnostics.component_lazy(|| ComponentDeclaration {
        name: "plugin.lookup",
        codes: &[DiagnosticCode::Builtin(
            BuiltinDiagnosticCode::PluginUnavailable,
        )],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_records_reads_only_with_the_grant_and_is_revoked_at_shutdown() {
    for granted in [false, true] {
        let mut config = polling_config(1000, false);
        config.resource_metrics = None;
        if let Some(limits) = config.diagnostics.as_mut() {
            // The lowest plugin budget: the pipeline's own four still start.
            limits.max_live_components = 1;
            limits.grant_plugin_reads = granted;
        }
        let pipeline = Pipeline::builder()
            .config(config)
            .gpu_source(|| None)
            .spawn()
            .await
            .expect("starts with one plugin slot");
        let diagnostics = pipeline.diagnostics();
        assert_eq!(
            diagnostics.availability(),
            wattline::diagnostics::Availability::Enabled
        );
        let component = plugin_component(&diagnostics).expect("the one plugin slot");
        let read = diagnostics.snapshot();
        if granted {
            let snapshot = read.expect("granted");
            assert!(
                snapshot
                    .components
                    .iter()
                    .any(|c| c.name == "plugin.lookup")
            );
        } else {
            assert_eq!(read.expect_err("no grant").reason(), "read_not_granted");
        }
        assert!(pipeline.diagnostics_snapshot().is_some(), "the host reads");
        pipeline.shutdown().await.unwrap();
        assert!(
            component.is_closed(),
            "teardown revokes the plugin's handle"
        );
        assert_eq!(
            plugin_component(&diagnostics)
                .expect_err("no registration after teardown")
                .reason(),
            "closed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_diagnostics_off_a_plugin_gets_a_disabled_facade() {
    let mut config = polling_config(1000, false);
    config.resource_metrics = None;
    config.diagnostics = None;
    let pipeline = Pipeline::builder()
        .config(config)
        .gpu_source(|| None)
        .spawn()
        .await
        .expect("starts without diagnostics");
    let diagnostics = pipeline.diagnostics();
    assert_eq!(
        diagnostics.availability(),
        wattline::diagnostics::Availability::Disabled
    );
    let component = plugin_component(&diagnostics).expect("a disabled component, no error");
    assert!(!component.is_enabled());
    assert!(pipeline.diagnostics_snapshot().is_none());
    pipeline.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_built_in_code_is_checked_by_the_files_rules() {
    let mut config = wattline::library_default_config();
    if let Some(resource) = config.resource_metrics.as_mut() {
        resource.polling.enabled = true;
        resource.polling.interval_millis = 0;
    }
    let error = wattline::Pipeline::builder()
        .config(config)
        .spawn()
        .await
        .err()
        .expect("an interval of 0 is refused, not a silently stopped clock");
    assert_eq!(
        error.to_string(),
        "<code>: resource_metrics.polling.interval_millis: must be greater than zero (got 0)"
    );

    let mut config = wattline::library_default_config();
    if let Some(energy) = config.energy.as_mut() {
        energy.config.cost_per_kwh = -1.0;
    }
    let error = wattline::Pipeline::builder()
        .config(config)
        .spawn()
        .await
        .err()
        .expect("a negative price is refused");
    assert!(
        error
            .to_string()
            .starts_with("<code>: energy.cost_per_kwh: must be a finite number >= 0"),
        "{error}"
    );
}

/// A GPU source slower than the period: every tick finds it still reading, so it gets
/// no new request (one outstanding at a time), and what expired while queued is not
/// served late. The flush's own last sample therefore waits for one read at most, not
/// for a backlog: the source is called a handful of times during the flush, not once
/// per missed tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampler_slower_than_the_period_builds_no_backlog() {
    let mut gpu = ConstantPowerGpu::new(300.0);
    gpu.delay = Duration::from_millis(250);
    let calls = Arc::clone(&gpu.calls);
    let source = Mutex::new(Some(gpu));
    let pipeline = Pipeline::builder()
        .config(polling_config(40, true))
        .gpu_source(move || {
            source
                .lock()
                .unwrap()
                .take()
                .map(|gpu| Box::new(gpu) as Box<dyn wattline::gpu::GpuSource>)
        })
        .spawn()
        .await
        .unwrap();
    // About 30 ticks, each of which an unbounded queue would keep.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let before_flush = calls.load(Ordering::SeqCst);
    let report = pipeline.flush().await.unwrap();
    let during_flush = calls.load(Ordering::SeqCst) - before_flush;
    assert!(
        during_flush <= 3,
        "the flush waited behind {during_flush} queued reads"
    );
    assert_eq!(report.last_sample_missing, None);
    assert!(report.total.gpu_energy_kwh.is_some());
    let diagnostics = pipeline.diagnostics_json().unwrap().unwrap();
    assert!(
        diagnostics.contains("still reading an earlier tick"),
        "{diagnostics}"
    );
    pipeline.shutdown().await.unwrap();
    // Nothing queued is served after the pipeline stopped.
    let at_shutdown = calls.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(calls.load(Ordering::SeqCst), at_shutdown);
}

/// A last sample that cannot be taken (the GPU sampler fails on it) is named in the
/// report and recorded, and the report still comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_whose_last_sample_cannot_be_taken_says_so() {
    let mut config = polling_config(5000, true);
    config.resource_metrics.as_mut().unwrap().polling.enabled = false;
    let pipeline = Pipeline::builder()
        .config(config)
        .gpu_source(|| Some(Box::new(PanickingGpu)))
        .spawn()
        .await
        .unwrap();
    let report = pipeline.flush().await.unwrap();
    let reason = report.last_sample_missing.clone().expect("named");
    assert!(reason.contains("GPU sampler"), "{reason}");
    assert!(wattline::report::render_table(&report).contains("Last power sample not taken"));
    let diagnostics = pipeline.diagnostics_json().unwrap().unwrap();
    assert!(
        diagnostics.contains("the report's last power sample"),
        "{diagnostics}"
    );
    pipeline.shutdown().await.unwrap();
}

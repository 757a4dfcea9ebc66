//! A clock or actor that stops on its own is not silent: `health()` lists it, the
//! diagnostics hold `pipeline.task_failed`, and the report carries it.

use std::sync::Arc;
use std::time::Duration;

use wattline_actors::pipeline::{RunningPipeline, open_diagnostics};
use wattline_diagnostics::DiagnosticsLimits;
use wattline_model::category::SamplerCategory;
use wattline_model::events::CollectingEventSink;

mod pipeline_support;

async fn spawn_polling_pipeline() -> RunningPipeline {
    let diagnostics = open_diagnostics(Some(DiagnosticsLimits::default())).unwrap();
    let sink = Arc::new(CollectingEventSink::default());
    RunningPipeline::spawn(pipeline_support::spec(
        Some(pipeline_support::polling(50)),
        None,
        diagnostics,
        sink,
    ))
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_merger_shows_in_health_and_diagnostics() {
    let pipeline = spawn_polling_pipeline().await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(pipeline.health().is_healthy(), "{:?}", pipeline.health());

    pipeline.stop_merger_for_tests();
    // The poll clock notices at its next tick that the merger is gone.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let health = loop {
        let health = pipeline.health();
        if health.problems.len() >= 2 || tokio::time::Instant::now() > deadline {
            break health;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let components: Vec<&str> = health
        .problems
        .iter()
        .map(|problem| problem.component.as_str())
        .collect();
    assert!(components.contains(&"merger"), "{health:?}");
    assert!(components.contains(&"poll clock"), "{health:?}");
    let clock = health
        .problems
        .iter()
        .find(|problem| problem.component == "poll clock")
        .unwrap();
    assert_eq!(clock.detail, "stopped: the actor it drives is gone");

    let snapshot = pipeline.diagnostics().unwrap().snapshot().unwrap();
    let json = serde_json::to_value(&snapshot).unwrap();
    let text = json.to_string();
    assert!(text.contains("pipeline.task_failed"), "{text}");
    assert!(text.contains("poll clock: stopped"), "{text}");
    // Untouched parts are not blamed.
    assert!(!components.contains(&"supervisor"), "{health:?}");
    let _ = pipeline.restart_count(SamplerCategory::Cpu).await;
}

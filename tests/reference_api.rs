//! The reference's documented Rust API shape (`nemo_relay::api::resource_metrics`,
//! `nemo_relay::plugin::dynamic::initialize`, `activation.close()`): its snippet from
//! the specification runs with only the crate name changed, and its behaviour holds
//! (one on-demand series per activation, rates from the second call on; `collect()`
//! needs an active `resource_metrics` component; one host per process).

use std::sync::Mutex;

use wattline::api::resource_metrics;
use wattline::plugin::dynamic::initialize;
use wattline::plugin::{PluginComponentSpec, PluginConfig, PluginError};

/// The process has one plugin host: these tests take turns.
static HOST: Mutex<()> = Mutex::new(());

/// The specification's "Collect One Snapshot" Rust example, `nemo_relay` → `wattline`.
mod reference_snippet {
    use wattline::api::resource_metrics;
    use wattline::plugin::dynamic::initialize;
    use wattline::plugin::{PluginComponentSpec, PluginConfig};

    #[tokio::main]
    pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
        let config = PluginConfig {
            components: vec![PluginComponentSpec::new("resource_metrics")],
            ..PluginConfig::default()
        };
        let mut activation = initialize(config, None).await?;
        let result = resource_metrics::collect().await;
        activation.close()?;
        let snapshot = result?;
        println!("{snapshot:#?}");
        Ok(())
    }
}

fn quiet_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    // SAFETY: tests in this binary take `HOST` before touching the environment.
    unsafe {
        std::env::set_var("HOME", home.path());
        std::env::set_var("XDG_CONFIG_HOME", home.path().join("config"));
    }
    home
}

/// Runs `body` on a multi-threaded runtime (as `#[tokio::main]` does) while holding
/// the process's plugin host, in a home without the developer's configuration.
fn with_host(body: impl std::future::Future<Output = ()>) {
    let _host = HOST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _home = quiet_home();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(body);
}

#[test]
fn the_references_documented_snippet_runs() {
    let _host = HOST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let _home = quiet_home();
    reference_snippet::main().expect("the snippet runs");
    // Closed: collect() is refused again, with the reference's words.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let refused = runtime.block_on(resource_metrics::collect()).unwrap_err();
    assert!(
        matches!(refused, PluginError::NoResourceMetrics),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("requires an active resource_metrics component"),
        "{refused}"
    );
}

#[test]
fn successive_collects_in_one_activation_are_one_series() {
    with_host(successive_collects());
}

async fn successive_collects() {
    let config = PluginConfig {
        components: vec![PluginComponentSpec::new("resource_metrics")],
        ..PluginConfig::default()
    };
    let mut activation = initialize(config.clone(), None).await.unwrap();
    // One host per process, as the reference: a second activation is refused.
    let second = initialize(config.clone(), None).await.unwrap_err();
    assert!(matches!(second, PluginError::Conflict), "{second}");

    let first = resource_metrics::collect().await.unwrap();
    let busy_until = std::time::Instant::now() + std::time::Duration::from_millis(300);
    while std::time::Instant::now() < busy_until {
        std::hint::black_box(0u64);
    }
    let second = resource_metrics::collect().await.unwrap();
    activation.close().unwrap();

    let first_cpu = first.cpu.expect("cpu on by default");
    let second_cpu = second.cpu.expect("cpu on by default");
    assert!(
        first_cpu.consumption_rate.is_none(),
        "the first sample of a series has no rate"
    );
    assert!(
        second_cpu.consumption_rate.is_some(),
        "the second call continues the series: it has a rate"
    );
    // No backend here: the reference's empty groups.
    let gpu = second.gpu.expect("gpu on by default");
    assert!(gpu.device_metrics.is_some() && gpu.process_metrics.is_some());

    // A new activation starts a new series, as the reference's does.
    let mut again = initialize(config, None).await.unwrap();
    let fresh = resource_metrics::collect().await.unwrap();
    again.close().unwrap();
    assert!(fresh.cpu.unwrap().consumption_rate.is_none());
}

#[test]
fn collect_needs_the_resource_metrics_component_and_config_errors_name_the_field() {
    with_host(needs_the_component());
}

async fn needs_the_component() {
    let mut energy_only = initialize(
        PluginConfig {
            components: vec![PluginComponentSpec::new("energy")],
            ..PluginConfig::default()
        },
        None,
    )
    .await
    .unwrap();
    let refused = resource_metrics::collect().await.unwrap_err();
    energy_only.close().unwrap();
    assert!(
        matches!(refused, PluginError::NoResourceMetrics),
        "{refused}"
    );

    let mut bad = PluginComponentSpec::new("resource_metrics");
    bad.config.insert("bogus".into(), serde_json::json!(1));
    let Err(PluginError::Config(error)) = initialize(
        PluginConfig {
            components: vec![bad],
            ..PluginConfig::default()
        },
        None,
    )
    .await
    else {
        panic!("an unknown field is refused")
    };
    assert_eq!(error.source_name, "<config>");
    assert_eq!(error.field_path, "components[0].config.bogus");
}

/// A source that never observes anything: a machine without a GPU backend.
struct NothingAnswers;

impl wattline::gpu::GpuSource for NothingAnswers {
    fn name(&self) -> &str {
        "nothing"
    }

    fn sample(
        &mut self,
        _request: &wattline::gpu::GpuSampleRequest,
    ) -> Option<wattline::gpu::GpuSample> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_groups_are_empty_without_an_answer_and_null_only_when_turned_off() {
    let spawn = |source: Option<fn() -> Box<dyn wattline::gpu::GpuSource>>| async move {
        let builder = wattline::Pipeline::builder();
        let builder = match source {
            Some(make) => builder.gpu_source(move || Some(make())),
            None => builder.gpu_source(|| None),
        };
        builder.spawn().await.unwrap()
    };
    // No backend answers: the reference's `[]` in both groups.
    let pipeline = spawn(Some(|| Box::new(NothingAnswers))).await;
    let snapshot = pipeline.collect().await.unwrap();
    pipeline.shutdown().await.unwrap();
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(
        json["gpu"],
        serde_json::json!({"device_metrics": [], "process_metrics": []})
    );
    // GPU reading turned off by the host (no source): the groups are null.
    let pipeline = spawn(None).await;
    let snapshot = pipeline.collect().await.unwrap();
    pipeline.shutdown().await.unwrap();
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(
        json["gpu"],
        serde_json::json!({"device_metrics": null, "process_metrics": null})
    );
}

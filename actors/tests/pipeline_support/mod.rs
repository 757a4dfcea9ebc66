//! Helpers shared by the tests that run a whole pipeline.
#![allow(dead_code)]

use std::sync::Arc;

use wattline_actors::ScopeTarget;
use wattline_actors::pipeline::PipelineSpec;
use wattline_config::ResourceMetricsConfig;
use wattline_config::energy::EnergySettings;
use wattline_diagnostics::{Diagnostics, PipelineDiagnostics};
use wattline_model::energy::Epoch;
use wattline_model::events::EventSink;

/// Resource metrics polled every `interval_millis`.
pub fn polling(interval_millis: u64) -> ResourceMetricsConfig {
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = interval_millis;
    resource
}

/// A pipeline over the whole machine with no GPU source, these components, and its
/// events going to `sink`.
pub fn spec(
    resource: Option<ResourceMetricsConfig>,
    energy: Option<EnergySettings>,
    diagnostics: Option<(Diagnostics, PipelineDiagnostics)>,
    sink: Arc<dyn EventSink>,
) -> PipelineSpec {
    PipelineSpec {
        root: "/".into(),
        target: ScopeTarget::Global,
        run_id: wattline_model::events::new_uuid(),
        resource,
        energy,
        diagnostics,
        gpu_source: Arc::new(|_| None),
        sink,
        tick_deadline: None,
        epoch: Epoch::now(),
        prepared_gpu: None,
        measuring_from: None,
        gpu_selection: None,
        command_group: None,
        command_group_notes: Vec::new(),
    }
}

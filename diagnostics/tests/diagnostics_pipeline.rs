//! Diagnostics: the pipeline's own components.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::io;
use std::num::NonZeroU64;

use wattline_diagnostics::{
    CodeOrigin, ComponentDeclaration, DiagnosticCode, DiagnosticComponent, DiagnosticOutcome,
    Diagnostics, ExporterCode, FailureClass, GpuCode, PipelineCode, PipelineComponent,
    PipelineDiagnostics, RecordOutcome, SamplerFailure, Severity,
};
use wattline_model::category::SamplerCategory;

use diagnostics_support::*;

// ---------------------------------------------------------------- pipeline components

#[test]
fn the_pipelines_components_have_their_own_budget_and_plugins_keep_all_of_theirs() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("pipeline registers");
    let usage = diagnostics.usage().expect("usage");
    let limits = diagnostics.capabilities().expect("enabled");
    assert_eq!(
        usage.live_components, 0,
        "the host's four cost plugins nothing"
    );
    assert_eq!(usage.extension_declarations, 0);
    assert_eq!(usage.registration_text_bytes, 0);
    for component in PipelineComponent::ALL {
        assert!(component.declaration().codes.len() <= 32);
        assert_eq!(pipeline.component(component).name(), Some(component.name()));
    }

    // Every slot and all sixteen extensions stay the plugins'.
    let sixteen = names("plugin_ext", 16);
    let codes = success_extensions(&sixteen);
    let _plugin = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "plugin.with_extensions",
            codes: &codes,
        })
        .expect("16 extensions fit next to the pipeline");
    let _others: Vec<DiagnosticComponent> = (1..limits.max_live_components)
        .map(|i| builtin_component(&diagnostics, &format!("plugin.o{i}")).expect("slot"))
        .collect();
    assert_eq!(
        builtin_component(&diagnostics, "plugin.too_many")
            .expect_err("ninth plugin component")
            .reason(),
        "component_limit"
    );

    // Registering the pipeline twice is refused.
    let again = PipelineDiagnostics::register(&context()).expect("other context is fine");
    drop(again);
    let twice = PipelineDiagnostics::register(&diagnostics).expect_err("once per context");
    assert_eq!(twice.reason(), "duplicate_component");
}

#[test]
fn the_pipeline_starts_under_the_lowest_limits_a_configuration_can_set() {
    // What `config check` accepts, the pipeline starts with: its own declarations are
    // held to the spec's maxima, not to the plugins' lowered budget.
    let diagnostics = context_with(|limits| {
        limits.max_live_components = 1;
        limits.max_codes_per_component = 1;
        limits.max_registration_text_bytes = 1;
        limits.max_extension_declarations = 0;
        limits.max_input_text_bytes = 1;
    });
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("the host registers");
    let recorded = pipeline.record_sampler_failure(
        SamplerCategory::Cpu,
        SamplerFailure::ReadFailed,
        "a detail longer than one byte",
    );
    assert!(
        matches!(recorded, Ok(RecordOutcome::Recorded(_))),
        "{recorded:?}"
    );
    let plugin = diagnostics.component_lazy(|| ComponentDeclaration {
        name: "p",
        codes: &[DiagnosticCode::Builtin(
            wattline_diagnostics::BuiltinDiagnosticCode::PluginUnavailable,
        )],
    });
    assert!(
        plugin.is_err(),
        "the plugins' budget is what was configured"
    );
}

#[test]
fn after_teardown_no_handle_records_and_what_was_recorded_stays_readable() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let plugin = builtin_component(&diagnostics, "plugin.kept").expect("registers");
    pipeline
        .record_sampler_failure(SamplerCategory::Cpu, SamplerFailure::ReadFailed, "before")
        .expect("recorded");
    diagnostics.revoke();
    let after =
        pipeline.record_sampler_failure(SamplerCategory::Cpu, SamplerFailure::ReadFailed, "after");
    assert_eq!(after.expect_err("revoked").reason(), "closed");
    assert!(plugin.is_closed());
    assert_eq!(
        builtin_component(&diagnostics, "plugin.late")
            .expect_err("no registration after teardown")
            .reason(),
        "closed"
    );
    let snapshot = diagnostics.snapshot().expect("readable");
    assert_eq!(snapshot.recent_events.len(), 1);
}

#[test]
fn pipeline_helpers_record_every_code_by_name() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let codes: Vec<PipelineCode> = PipelineCode::all().collect();
    assert_eq!(codes.len(), 39);
    for code in &codes {
        receipt(pipeline.record(*code, code.name()));
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    for code in &codes {
        let row = snapshot
            .component(code.component().name())
            .expect("component row");
        let declared = &row.codes[code.position() as usize - 1];
        assert_eq!(declared.code, code.name(), "position of {code:?}");
        assert_eq!(declared.origin, CodeOrigin::Builtin);
        assert_eq!(declared.occurrences, 1, "{}", code.name());
    }
    let by_name = |name: &str| {
        snapshot
            .recent_events
            .iter()
            .find(|e| e.code == name)
            .expect("event")
    };
    let no_devices = by_name("gpu.nvidia_smi.no_devices");
    assert_eq!(no_devices.outcome, DiagnosticOutcome::Unknown);
    assert_eq!(no_devices.failure_class, None);
    assert_eq!(no_devices.severity, Severity::Info);
    let cpu_read = by_name("sampler.cpu.read_failed");
    assert_eq!(cpu_read.component, "sampler");
    assert_eq!(cpu_read.failure_class, Some(FailureClass::Io));
    assert_eq!(
        by_name("exporter.otlp.dropped").failure_class,
        Some(FailureClass::ResourceExhausted)
    );
    assert_eq!(
        by_name("pipeline.tick_missed").failure_class,
        Some(FailureClass::Timeout)
    );
}

#[test]
fn pipeline_typed_helpers_pick_code_and_class() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    pipeline
        .record_sampler_failure(
            SamplerCategory::Network,
            SamplerFailure::DeadlineMissed,
            "late",
        )
        .expect("deadline");
    pipeline
        .record_sampler_io_error(
            SamplerCategory::Disk,
            &io::Error::new(io::ErrorKind::NotFound, "no /proc/diskstats"),
        )
        .expect("not found");
    pipeline
        .record_sampler_io_error(
            SamplerCategory::Cpu,
            &io::Error::new(io::ErrorKind::PermissionDenied, "denied"),
        )
        .expect("denied");
    pipeline
        .record_gpu(GpuCode::SmiStartFailed, "spawn failed")
        .expect("gpu");
    pipeline
        .record_exporter(ExporterCode::AtofWriteFailed, "disk full")
        .expect("exporter");
    pipeline.record_tick_missed("").expect("tick");
    let wrong = pipeline
        .record_as(
            PipelineCode::Exporter(ExporterCode::OtlpDropped),
            Some(FailureClass::Io),
            "x",
        )
        .expect_err("io not allowed for dropped");
    assert_eq!(wrong.reason(), "invalid_observation");

    let snapshot = diagnostics.snapshot().expect("snapshot");
    let events: Vec<(&str, Option<FailureClass>, Option<&str>)> = snapshot
        .recent_events
        .iter()
        .map(|e| (e.code.as_str(), e.failure_class, e.detail.as_deref()))
        .collect();
    assert_eq!(
        events,
        vec![
            (
                "sampler.network.deadline_missed",
                Some(FailureClass::Timeout),
                Some("late")
            ),
            (
                "sampler.disk.read_failed",
                Some(FailureClass::NotFound),
                Some("no /proc/diskstats")
            ),
            (
                "sampler.cpu.permission_denied",
                Some(FailureClass::PermissionDenied),
                Some("denied")
            ),
            (
                "gpu.nvidia_smi.start_failed",
                Some(FailureClass::ExecutionFailed),
                Some("spawn failed")
            ),
            (
                "exporter.atof.write_failed",
                Some(FailureClass::Io),
                Some("disk full")
            ),
            ("pipeline.tick_missed", Some(FailureClass::Timeout), None),
        ]
    );
    pipeline.close();
    assert_eq!(
        pipeline
            .record_tick_missed("x")
            .expect_err("closed")
            .reason(),
        "closed"
    );
    assert_eq!(diagnostics.usage().expect("usage").live_components, 0);
}

#[test]
fn pipeline_on_disabled_context_is_a_no_op() {
    let pipeline = PipelineDiagnostics::register(&Diagnostics::disabled()).expect("disabled ok");
    assert_eq!(
        pipeline.record_tick_missed("x").expect("no-op"),
        RecordOutcome::Disabled
    );
}

#[test]
fn pipeline_recordings_from_many_threads_lose_no_count() {
    // The pipeline's own recordings retry when the context is busy, so actors on
    // several threads never drop an occurrence.
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let pipeline = pipeline.clone();
            std::thread::spawn(move || {
                for _ in 0..500 {
                    pipeline
                        .record_counted(
                            PipelineCode::TickMissed,
                            Some(FailureClass::Timeout),
                            NonZeroU64::new(2).expect("two"),
                            "late",
                        )
                        .expect("recorded despite contention");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
    let snapshot = diagnostics.snapshot().expect("snapshot");
    let occurrences = snapshot
        .components
        .iter()
        .flat_map(|c| &c.codes)
        .find(|c| c.code == "pipeline.tick_missed")
        .map(|c| c.occurrences);
    assert_eq!(occurrences, Some(8 * 500 * 2));
}

//! Diagnostics: the pipeline's own components.

#[path = "diagnostics_support/mod.rs"]
mod diagnostics_support;

use std::io;
use std::num::NonZeroU64;

use wattline_actors::diagnostics::{
    CodeOrigin, ComponentDeclaration, DiagnosticCode, DiagnosticComponent, DiagnosticOutcome,
    Diagnostics, ExporterCode, FailureClass, GpuCode, PipelineCode, PipelineComponent,
    PipelineDiagnostics, RecordOutcome, SamplerCategory, SamplerFailure, Severity,
};

use diagnostics_support::*;

// ---------------------------------------------------------------- pipeline components

#[test]
fn pipeline_registers_within_limits_and_leaves_room() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("pipeline registers");
    let usage = diagnostics.usage().expect("usage");
    let limits = diagnostics.capabilities().expect("enabled");
    assert_eq!(usage.live_components, 4);
    assert_eq!(limits.max_live_components - usage.live_components, 4);
    assert_eq!(usage.extension_declarations, 0);
    let expected_text: usize = PipelineComponent::ALL
        .iter()
        .map(|c| {
            c.name().len()
                + c.declaration()
                    .codes
                    .iter()
                    .map(|code| match code {
                        DiagnosticCode::Builtin(b) => b.name().len(),
                        DiagnosticCode::Extension { .. } => panic!("pipeline uses built-ins"),
                    })
                    .sum::<usize>()
        })
        .sum();
    assert_eq!(usage.registration_text_bytes, expected_text);
    assert!(usage.registration_text_bytes < 1536, "{expected_text}");
    for component in PipelineComponent::ALL {
        assert!(component.declaration().codes.len() <= 32);
        assert_eq!(pipeline.component(component).name(), Some(component.name()));
    }

    // The remaining four slots and all sixteen extensions stay usable.
    let sixteen = names("plugin_ext", 16);
    let codes = success_extensions(&sixteen);
    let _plugin = diagnostics
        .component_lazy(|| ComponentDeclaration {
            name: "plugin.with_extensions",
            codes: &codes,
        })
        .expect("16 extensions fit next to the pipeline");
    let _others: Vec<DiagnosticComponent> = (0..3)
        .map(|i| builtin_component(&diagnostics, &format!("plugin.o{i}")).expect("slot"))
        .collect();
    assert_eq!(
        builtin_component(&diagnostics, "plugin.too_many")
            .expect_err("ninth")
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
fn pipeline_helpers_record_every_code_by_name() {
    let diagnostics = context();
    let pipeline = PipelineDiagnostics::register(&diagnostics).expect("registers");
    let codes: Vec<PipelineCode> = PipelineCode::all().collect();
    assert_eq!(codes.len(), 36);
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

"""The Python worker SDK (`wattline.worker`) against wattline's own host: as a worker
plugin started from plugins.toml, and as the program under `wattline run`; the queue's
bound, the lazy factory and the inert facade."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from worker_support import worker_config

PLUGIN = textwrap.dedent(
    """
    from wattline.worker import (DiagnosticCodeDefinition, DiagnosticExtensionDefinition,
        DiagnosticObservation, DiagnosticObservationOutcome, DiagnosticObservationSeverity,
        WorkerPlugin, serve_plugin)

    class Lookup(WorkerPlugin):
        plugin_id = "acme.pylookup"

        def validate(self, config):
            return None if "backend" in config else "backend is required"

        async def register(self, ctx, config):
            diagnostics = await ctx.runtime.diagnostics()
            assert diagnostics.availability == "available", diagnostics.availability
            component = await diagnostics.component("backend", [
                DiagnosticCodeDefinition(builtin_name="plugin.timeout"),
                DiagnosticCodeDefinition(extension=DiagnosticExtensionDefinition(
                    name="lookup_failed", description="The backend lookup failed",
                    outcome=DiagnosticObservationOutcome.FAILURE,
                    allowed_failure_classes=["unavailable"])),
            ])
            component.try_record_lazy(lambda: DiagnosticObservation(
                code=2, count=3, failure_class="unavailable",
                outcome=DiagnosticObservationOutcome.Value("DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE"),
                severity=DiagnosticObservationSeverity.WARNING,
                detail=f"backend {config['backend']} down", observed_unix_micros=1_700_000_000_000_000))
            await diagnostics.flush(timeout=2.0)

    serve_plugin(Lookup())
    """
)

UNDER_RUN = textwrap.dedent(
    """
    import asyncio, json
    from wattline.worker import (DiagnosticCodeDefinition, DiagnosticDeliveryError,
        DiagnosticExtensionDefinition, DiagnosticObservation, DiagnosticObservationOutcome,
        host_diagnostics)

    async def main():
        diagnostics = await host_diagnostics()
        steps = await diagnostics.component("steps", [DiagnosticCodeDefinition(
            extension=DiagnosticExtensionDefinition(name="step_done", description="A step finished",
                outcome=DiagnosticObservationOutcome.SUCCESS))])
        made, full = 0, 0
        def make():
            nonlocal made
            made += 1
            return DiagnosticObservation(code=1, count=1, outcome=DiagnosticObservationOutcome.SUCCESS)
        # A burst without awaiting: the queue admits pending + one in flight, no more.
        for _ in range(200):
            try:
                steps.try_record_lazy(make)
            except DiagnosticDeliveryError as error:
                assert error.kind == "full", error.kind
                full += 1
        await diagnostics.flush(timeout=5.0)
        stats = diagnostics.delivery_stats()
        await diagnostics.close(timeout=5.0)
        print(json.dumps({"made": made, "full": full, "dropped": stats.dropped, "delivered": stats.delivered}))

    asyncio.run(main())
    """
)


def component(diagnostics, name):
    return next(c for c in diagnostics["components"] if c["name"] == name)


def test_a_python_worker_plugin_from_plugins_toml_reports(wattline_binary, quiet_home, tmp_path):
    script = tmp_path / "lookup_worker.py"
    script.write_text(PLUGIN)
    config = worker_config(tmp_path, "acme.pylookup", script, """
        [components.config.config]
        backend = "primary"
    """)
    printed = subprocess.run(
        [str(wattline_binary), "diagnostics", "--compact", "--config", str(config)],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    diagnostics = json.loads(printed)
    backend = component(diagnostics, "worker.acme_pylookup.backend")
    codes = {code["code"]: code for code in backend["codes"]}
    assert codes["plugin.timeout"]["origin"] == "builtin"
    assert codes["lookup_failed"]["occurrences"] == 3
    event = next(e for e in diagnostics["recent_events"] if e["component"] == "worker.acme_pylookup.backend")
    assert event["detail"] == "backend primary down", "the plugin got its config"
    assert event["failure_class"] == "unavailable"
    assert event["provenance"]["observed_at"] == "2023-11-14T22:13:20Z", "the producer's time kept"
    pipeline = component(diagnostics, "pipeline")
    failed = next(code for code in pipeline["codes"] if code["code"] == "pipeline.worker_failed")
    assert failed["occurrences"] == 0


def test_a_plugin_whose_validate_refuses_is_recorded_as_failed(wattline_binary, quiet_home, tmp_path):
    script = tmp_path / "lookup_worker.py"
    script.write_text(PLUGIN)
    config = worker_config(tmp_path, "acme.pylookup", script)
    printed = subprocess.run(
        [str(wattline_binary), "diagnostics", "--compact", "--config", str(config)],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    diagnostics = json.loads(printed)
    pipeline = component(diagnostics, "pipeline")
    failed = next(code for code in pipeline["codes"] if code["code"] == "pipeline.worker_failed")
    assert failed["occurrences"] == 1
    details = [e["detail"] for e in diagnostics["recent_events"] if e["component"] == "pipeline"]
    assert any("acme.pylookup" in (detail or "") for detail in details), details


def test_the_program_under_run_records_and_the_queue_is_bounded(wattline_binary, quiet_home, tmp_path):
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--report", "json", "--", sys.executable, "-c", UNDER_RUN],
        capture_output=True, text=True, timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    first_line, rest = finished.stdout.split("\n", 1)
    counts = json.loads(first_line)
    report = json.loads(rest)
    # The factory ran only for admitted records; every refusal is a `full` and a drop.
    assert counts["full"] > 0
    assert counts["made"] + counts["full"] == 200
    assert counts["dropped"] == counts["full"]
    assert counts["delivered"] >= counts["made"], counts
    steps = component(report["diagnostics"], "worker.command.steps")
    assert steps["codes"][0]["occurrences"] == counts["made"], "nothing admitted was lost"


def test_wrong_credentials_give_an_inert_facade(monkeypatch, tmp_path):
    import asyncio

    from wattline.worker import DiagnosticObservation, host_diagnostics

    monkeypatch.setenv("WATTLINE_HOST_SOCKET", str(tmp_path / "no-such.sock"))
    monkeypatch.setenv("WATTLINE_HOST_ACTIVATION_ID", "01234567-89ab-7def-8123-456789abcdef")
    monkeypatch.setenv("WATTLINE_HOST_TOKEN", "wrong")

    async def main():
        diagnostics = await host_diagnostics()
        assert diagnostics.availability == "unavailable"
        component = await diagnostics.component("inert", [])
        called = []
        component.try_record_lazy(lambda: called.append(1) or DiagnosticObservation(code=1))
        assert called == [], "an inert facade skips the factory"
        assert diagnostics.delivery_stats().delivered == 0

    asyncio.run(main())

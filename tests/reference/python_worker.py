"""A worker plugin written against the reference system's published Python worker
SDK (nemo-relay-plugin==0.11.0rc3), unchanged: at Register it opens diagnostics on
the host, registers one component with an extension code and a built-in, records one
observation of each, and flushes. wattline's host endpoint must take them as the
reference host does."""
import asyncio
import os
import sys

from nemo_relay_plugin import (
    DiagnosticCodeDefinition,
    DiagnosticExtensionDefinition,
    DiagnosticObservation,
    DiagnosticObservationOutcome,
    DiagnosticObservationSeverity,
    Json,
    PluginContext,
    WorkerPlugin,
    serve_plugin,
)


class DiagPlugin(WorkerPlugin):
    plugin_id = "acme.diag"

    async def register(self, ctx: PluginContext, config: Json) -> None:
        diagnostics = await ctx.runtime.diagnostics()  # negotiates with RelayDiagnostics on the host socket
        print(f"[worker] config={config!r} availability={diagnostics.availability}", file=sys.stderr, flush=True)
        component = await diagnostics.component(
            "probe",
            [
                DiagnosticCodeDefinition(
                    extension=DiagnosticExtensionDefinition(
                        name="probe.started",
                        description="Worker probe started.",
                        outcome=DiagnosticObservationOutcome.Value("DIAGNOSTIC_OBSERVATION_OUTCOME_SUCCESS"),
                    )
                ),
                DiagnosticCodeDefinition(builtin_name="plugin.timeout"),
            ],
        )
        component.try_record_lazy(
            lambda: DiagnosticObservation(
                code=1,  # one-based position in the codes list above
                count=1,
                outcome=DiagnosticObservationOutcome.Value("DIAGNOSTIC_OBSERVATION_OUTCOME_SUCCESS"),
                severity=DiagnosticObservationSeverity.Value("DIAGNOSTIC_OBSERVATION_SEVERITY_INFO"),
                detail="hello from python",
            )
        )
        component.try_record_lazy(
            lambda: DiagnosticObservation(
                code=2,
                count=2,
                outcome=DiagnosticObservationOutcome.Value("DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE"),
                severity=DiagnosticObservationSeverity.Value("DIAGNOSTIC_OBSERVATION_SEVERITY_WARNING"),
                failure_class="timeout",
                detail=f"backend slow; config {config!r}",
            )
        )
        await diagnostics.flush()
        if os.environ.get("WORKER_DIE_AFTER_REGISTER") == "1":
            # A crash mid-session: gone before the host's Shutdown.
            asyncio.get_running_loop().call_later(0.2, os._exit, 9)
        print(f"[worker] flushed stats={diagnostics.delivery_stats()}", file=sys.stderr, flush=True)


async def main() -> None:
    await serve_plugin(DiagPlugin())


if __name__ == "__main__":
    asyncio.run(main())

"""The Python worker SDK as the reference's users write for it: the spec's own
example (spec/plugin-diagnostics.md, "Python worker lookup diagnostics") run unchanged
as a worker plugin under `wattline run`, over a Unix socket and over loopback TCP; the
protobuf enum names, the error's base class, the 2.0 s lifecycle defaults, and
`PluginRuntime.agent_scope`."""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest
from worker_support import worker_config

SPEC_EXAMPLE = pathlib.Path(__file__).parent / "spec" / "lookup_diagnostics.py"

# The worker around the spec's functions; it prints, as workers do, which must not
# reach wattline's stdout.
HARNESS = textwrap.dedent(
    """

    from nemo_relay_plugin import WorkerPlugin, serve_plugin

    class Lookup(WorkerPlugin):
        plugin_id = "acme.lookup"

        async def register(self, ctx, config):
            diagnostics, component = await register_lookup_diagnostics(ctx.runtime)
            record_lookup_failure(component, "request-1")
            record_lookup_success(component, "request-2")
            await diagnostics.flush()
            print("lookup worker registered", flush=True)

    serve_plugin(Lookup())
    """
)


def component(diagnostics, name):
    return next(c for c in diagnostics["components"] if c["name"] == name)


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_the_specs_python_example_runs_unchanged_as_a_worker_under_run(wattline_binary, quiet_home, tmp_path, transport):
    # Over the host's Unix socket, and over loopback TCP (tcp://127.0.0.1:0, the port
    # announced in NEMO_RELAY_WORKER_ENDPOINT_FILE) as worker-protocol.md allows.
    # The spec imports the reference's package; here that name is wattline's SDK.
    package = tmp_path / "modules" / "nemo_relay_plugin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from wattline.worker import *  # noqa: F401,F403\n")
    script = tmp_path / "lookup_worker.py"
    script.write_text(SPEC_EXAMPLE.read_text() + HARNESS)
    config = worker_config(tmp_path, "acme.lookup", script, f"""
        env = {{ PYTHONPATH = {json.dumps(str(package.parent) + ":" + ":".join(sys.path))} }}
        transport = "{transport}"
    """)
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--report", "json", "--config", str(config), "--", "true"],
        capture_output=True, text=True, timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    assert "[acme.lookup] lookup worker registered" in finished.stderr.splitlines()
    diagnostics = report["diagnostics"]
    lookup = component(diagnostics, "worker.acme_lookup.example.lookup")
    codes = {code["code"]: code["occurrences"] for code in lookup["codes"]}
    assert codes == {"lookup_failed": 1, "lookup_completed": 1}
    events = {
        e["correlation"]["request_id"]: e
        for e in diagnostics["recent_events"]
        if e["component"] == "worker.acme_lookup.example.lookup"
    }
    failure, success = events["request-1"], events["request-2"]
    assert (failure["outcome"], failure["severity"], failure["failure_class"]) == ("failure", "error", "unavailable")
    assert failure["detail"] == "The lookup backend was unavailable"
    assert (success["outcome"], success["severity"], success["failure_class"]) == ("success", "info", None)
    pipeline = component(diagnostics, "pipeline")
    failed = next(code for code in pipeline["codes"] if code["code"] == "pipeline.worker_failed")
    assert failed["occurrences"] == 0


def test_the_enums_carry_the_protobuf_names_and_the_short_ones_alias_them():
    from wattline.worker import DiagnosticObservationOutcome as Outcome
    from wattline.worker import DiagnosticObservationSeverity as Severity

    # The wire's numbers (nemo.relay.worker.v1).
    assert [int(Outcome.DIAGNOSTIC_OBSERVATION_OUTCOME_UNKNOWN), int(Outcome.DIAGNOSTIC_OBSERVATION_OUTCOME_SUCCESS),
            int(Outcome.DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE)] == [0, 1, 2]
    assert [int(getattr(Severity, f"DIAGNOSTIC_OBSERVATION_SEVERITY_{name}"))
            for name in ("UNSPECIFIED", "TRACE", "DEBUG", "INFO", "WARNING", "ERROR")] == [0, 1, 2, 3, 4, 5]
    assert Outcome.FAILURE is Outcome.DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE
    assert Severity.ERROR is Severity.DIAGNOSTIC_OBSERVATION_SEVERITY_ERROR
    assert Outcome.Value("DIAGNOSTIC_OBSERVATION_OUTCOME_SUCCESS") == 1
    assert Severity.Name(4) == "DIAGNOSTIC_OBSERVATION_SEVERITY_WARNING"


def test_a_delivery_error_is_a_runtime_error_with_its_kind():
    from wattline import WattlineError
    from wattline.worker import DiagnosticDeliveryError

    error = DiagnosticDeliveryError("full")
    assert isinstance(error, RuntimeError) and isinstance(error, WattlineError)
    assert error.kind == "full"
    with pytest.raises(RuntimeError):
        raise error


def test_flush_and_close_wait_two_seconds_unless_told_otherwise():
    from wattline.worker import WorkerDiagnostics

    class Recording:
        """The native facade, recording the timeout each call is given."""

        def __init__(self):
            self.calls = []

        def flush(self, timeout):
            self.calls.append(("flush", timeout))

        def close(self, timeout):
            self.calls.append(("close", timeout))

    native = Recording()
    diagnostics = WorkerDiagnostics(native)

    async def main():
        await diagnostics.flush()
        await diagnostics.close()
        await diagnostics.flush(timeout=5.0)
        await diagnostics.close(0.5)

    asyncio.run(main())
    assert native.calls == [("flush", 2.0), ("close", 2.0), ("flush", 5.0), ("close", 0.5)]


AGENT_SCOPE = textwrap.dedent(
    """
    import asyncio
    from wattline.worker import host_runtime

    async def main():
        runtime = host_runtime()
        async with await runtime.agent_scope("planner") as scope:
            assert scope.name == "planner" and scope.scope_id
            await asyncio.sleep(0.2)
        await scope.end()  # a second end does nothing

    asyncio.run(main())
    """
)


def test_plugin_runtime_agent_scope_marks_a_step_in_the_run(wattline_binary, quiet_home):
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--report", "json", "--", sys.executable, "-c", AGENT_SCOPE],
        capture_output=True, text=True, timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    names = [scope["name"] for scope in report["agent_scopes"]]
    assert names == ["planner"], names
    assert "left" not in finished.stderr, "the scope was ended, not left open"


STEP_PLUGIN = textwrap.dedent(
    """
    import asyncio
    from wattline.worker import WorkerPlugin, serve_plugin

    class Steps(WorkerPlugin):
        plugin_id = "acme.steps"

        async def register(self, ctx, config):
            async with await ctx.runtime.agent_scope("indexing"):
                await asyncio.sleep(0.3)
            # Left open: it ends when the plugin stops, flagged as its exit.
            self.open = await ctx.runtime.agent_scope("serving")

    serve_plugin(Steps())
    """
)


def test_a_worker_plugin_marks_its_steps_as_agent_scopes(wattline_binary, quiet_home, tmp_path):
    # A plugin's runtime serves agent_scope as a program's under `wattline run` does:
    # its steps land in the run's report, attributed to the plugin's process.
    script = tmp_path / "steps_worker.py"
    script.write_text(STEP_PLUGIN)
    config = worker_config(tmp_path, "acme.steps", script, f"""
        env = {{ PYTHONPATH = {json.dumps(":".join(sys.path))} }}
    """)
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--report", "json", "--config", str(config), "--", "sleep", "1"],
        capture_output=True, text=True, timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    report = json.loads(finished.stdout)
    scopes = {scope["name"]: scope for scope in report["agent_scopes"]}
    assert set(scopes) == {"indexing", "serving"}, report["agent_scopes"]
    assert scopes["indexing"]["ended_at"] is not None
    assert scopes["indexing"]["process_id"] is not None

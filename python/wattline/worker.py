"""The Python worker SDK: a worker plugin (``kind = "worker"`` in plugins.toml) or the
program under ``wattline run`` records diagnostics into the pipeline's diagnostics
context over the host endpoint, with the reference system's Python gRPC API
(``nemo_relay_plugin``): the same class, method and field names, the same delivery
contract. Delivery itself is the Rust worker SDK's (``worker/``), reached through the
native module, so both languages queue, sequence and retry identically.

A worker plugin::

    from wattline.worker import (DiagnosticCodeDefinition, DiagnosticObservation,
        DiagnosticObservationOutcome, DiagnosticObservationSeverity, WorkerPlugin,
        serve_plugin)

    class Lookup(WorkerPlugin):
        plugin_id = "acme.lookup"

        async def register(self, ctx, config):
            diagnostics = await ctx.runtime.diagnostics()
            component = await diagnostics.component(
                "backend", [DiagnosticCodeDefinition(builtin_name="plugin.timeout")])
            component.try_record_lazy(lambda: DiagnosticObservation(
                code=1, count=1, failure_class="timeout",
                outcome=DiagnosticObservationOutcome.DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE,
                severity=DiagnosticObservationSeverity.DIAGNOSTIC_OBSERVATION_SEVERITY_WARNING,
                detail="backend slow"))
            await diagnostics.flush()

    serve_plugin(Lookup())

A program under ``wattline run``: ``diagnostics = await host_diagnostics()``, or
``runtime = host_runtime()`` for its diagnostics and ``await runtime.agent_scope(name)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import inspect
import json
import threading
from typing import Any, Callable, List, Optional, Sequence, Union

from . import _native

# The reference SDK's limit for flush() and close() when none is given, seconds.
_LOCAL_LIFECYCLE_TIMEOUT = 2.0

__all__ = [
    "AgentScope",
    "DiagnosticCodeDefinition",
    "DiagnosticComponent",
    "DiagnosticDeliveryError",
    "DiagnosticDeliveryStats",
    "DiagnosticExtensionDefinition",
    "DiagnosticObservation",
    "DiagnosticObservationOutcome",
    "DiagnosticObservationSeverity",
    "PluginContext",
    "PluginRuntime",
    "WorkerDiagnostics",
    "WorkerPlugin",
    "host_diagnostics",
    "host_runtime",
    "serve_plugin",
]


class _ProtoEnum(enum.IntEnum):
    """An enum with the wire's numbers and the generated protobuf names the reference
    SDK exposes (``Outcome.DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE``, ``Value(name)``,
    ``Name(number)``); the short names (``FAILURE``) are aliases of the same members."""

    @classmethod
    def Value(cls, name: str) -> "_ProtoEnum":  # noqa: N802 (the protobuf name)
        return cls[name]

    @classmethod
    def Name(cls, number: int) -> str:  # noqa: N802 (the protobuf name)
        return cls(number).name


class DiagnosticObservationOutcome(_ProtoEnum):
    DIAGNOSTIC_OBSERVATION_OUTCOME_UNKNOWN = 0
    DIAGNOSTIC_OBSERVATION_OUTCOME_SUCCESS = 1
    DIAGNOSTIC_OBSERVATION_OUTCOME_FAILURE = 2
    UNKNOWN = 0
    SUCCESS = 1
    FAILURE = 2


class DiagnosticObservationSeverity(_ProtoEnum):
    DIAGNOSTIC_OBSERVATION_SEVERITY_UNSPECIFIED = 0
    DIAGNOSTIC_OBSERVATION_SEVERITY_TRACE = 1
    DIAGNOSTIC_OBSERVATION_SEVERITY_DEBUG = 2
    DIAGNOSTIC_OBSERVATION_SEVERITY_INFO = 3
    DIAGNOSTIC_OBSERVATION_SEVERITY_WARNING = 4
    DIAGNOSTIC_OBSERVATION_SEVERITY_ERROR = 5
    UNSPECIFIED = 0
    TRACE = 1
    DEBUG = 2
    INFO = 3
    WARNING = 4
    ERROR = 5


@dataclasses.dataclass(frozen=True)
class DiagnosticExtensionDefinition:
    """A plugin-defined code: name (≤ 32 bytes), description, outcome, and the failure
    classes a failure may carry."""

    name: str
    description: str
    outcome: Union[DiagnosticObservationOutcome, int]
    allowed_failure_classes: Sequence[str] = ()


@dataclasses.dataclass(frozen=True)
class DiagnosticCodeDefinition:
    """One code of a component: a built-in ``plugin.*`` name or an extension."""

    builtin_name: Optional[str] = None
    extension: Optional[DiagnosticExtensionDefinition] = None


@dataclasses.dataclass(frozen=True)
class DiagnosticObservation:
    """New occurrences of one declared code (its 1-based position)."""

    code: int
    count: int = 1
    outcome: Union[DiagnosticObservationOutcome, int] = DiagnosticObservationOutcome.UNKNOWN
    # The host refuses an unspecified severity: default to INFO.
    severity: Union[DiagnosticObservationSeverity, int] = DiagnosticObservationSeverity.INFO
    failure_class: Optional[str] = None
    detail: Optional[str] = None
    request_id: Optional[str] = None
    session_id: Optional[str] = None
    observed_unix_micros: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class DiagnosticDeliveryStats:
    """SDK-local delivery totals."""

    dropped: int = 0
    rejected: int = 0
    uncertain: int = 0
    delivered: int = 0


class DiagnosticDeliveryError(_native.WattlineError, RuntimeError):
    """A delivery outcome with a stable ``kind``: ``full``, ``invalid``,
    ``not_consumed``, ``rejected``, ``uncertain`` or ``closed``. A ``RuntimeError``,
    as the reference's, and a ``WattlineError``."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"diagnostic delivery: {kind}")
        self.kind = kind


def _delivery(call: Callable[..., Any], *arguments: Any) -> Any:
    try:
        return call(*arguments)
    except _native.NativeDeliveryError as error:
        raise DiagnosticDeliveryError(str(error.args[0])) from None


async def _in_thread(call: Callable[..., Any], *arguments: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(_delivery, call, *arguments))


def _encode_code(definition: Any) -> "tuple[Optional[str], Optional[tuple[str, str, int, List[str]]]]":
    builtin = getattr(definition, "builtin_name", None) or None
    extension = getattr(definition, "extension", None)
    if builtin is not None:
        return builtin, None
    if extension is not None:
        return None, (
            extension.name,
            extension.description,
            int(extension.outcome),
            list(extension.allowed_failure_classes),
        )
    return None, None


def _encode_observation(observation: Any) -> tuple:
    return (
        int(observation.code),
        int(observation.count),
        int(observation.outcome),
        int(observation.severity),
        observation.failure_class or None,
        observation.detail,
        observation.request_id,
        observation.session_id,
        observation.observed_unix_micros,
    )


class DiagnosticComponent:
    """A registered component; closed ones refuse records with ``closed``."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def try_record_lazy(self, make: Callable[[], DiagnosticObservation]) -> None:
        """Calls ``make`` only when the queue admits the record (never when it is full
        or diagnostics are off); raises ``DiagnosticDeliveryError`` (``full``,
        ``invalid``, ``closed``) when nothing was recorded."""
        _delivery(self._native.try_record_lazy, lambda: _encode_observation(make()))

    async def close(self) -> None:
        """Closes the registration after everything recorded before it."""
        await _in_thread(self._native.close)


class WorkerDiagnostics:
    """The activation's diagnostics facade; inert (records skipped, no error) when the
    host has no diagnostics for it."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def availability(self) -> str:
        """``available``, ``disabled``, ``unavailable`` or ``unsupported``."""
        return self._native.availability()

    def delivery_stats(self) -> DiagnosticDeliveryStats:
        return DiagnosticDeliveryStats(**self._native.delivery_stats())

    async def component(self, name: str, codes: Sequence[DiagnosticCodeDefinition]) -> DiagnosticComponent:
        """Registers ``name`` with its complete code list and waits for the receipt."""
        encoded = [_encode_code(code) for code in codes]
        return DiagnosticComponent(await _in_thread(self._native.component, name, encoded))

    async def flush(self, timeout: Optional[float] = None) -> None:
        """Waits, at most ``timeout`` seconds (2.0 when ``None``, as the reference),
        until everything accepted is settled."""
        await _in_thread(self._native.flush, _LOCAL_LIFECYCLE_TIMEOUT if timeout is None else timeout)

    async def close(self, timeout: Optional[float] = None) -> None:
        """Flushes, then closes the session, within ``timeout`` seconds (2.0 when
        ``None``)."""
        await _in_thread(self._native.close, _LOCAL_LIFECYCLE_TIMEOUT if timeout is None else timeout)


class AgentScope:
    """An Agent scope started on the host; end it with ``await scope.end()``, or use
    it as ``async with await runtime.agent_scope("name"):``."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def scope_id(self) -> str:
        return self._native.scope_id

    async def end(self) -> None:
        """Ends the scope on the host; a second call does nothing."""
        await _in_thread(self._native.end)

    async def __aenter__(self) -> "AgentScope":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.end()


class PluginRuntime:
    """The activation's handle on the host."""

    def __init__(self, native: Any) -> None:
        self._native = native
        self._diagnostics: Optional[WorkerDiagnostics] = None

    async def diagnostics(self) -> WorkerDiagnostics:
        """The diagnostics facade, negotiated with the host on the first call."""
        if self._diagnostics is None:
            self._diagnostics = WorkerDiagnostics(await _in_thread(self._native.diagnostics))
        return self._diagnostics

    async def agent_scope(self, name: str) -> AgentScope:
        """Starts the Agent scope ``name`` on the host (wattline's ``AgentScopes``;
        the Rust worker SDK's ``PluginRuntime::agent_scope``); raises
        ``WattlineError`` when the name is refused or the host does not serve scopes."""
        return AgentScope(await _in_thread(self._native.agent_scope, name))


@dataclasses.dataclass(frozen=True)
class PluginContext:
    """What ``register`` is given."""

    plugin_id: str
    activation_id: str
    runtime: Optional[PluginRuntime]


class WorkerPlugin:
    """Subclass it: set ``plugin_id``, implement ``register`` (plain or ``async``);
    ``validate`` returns a problem (a string, or a list of them) or nothing."""

    plugin_id: str = ""
    allows_multiple_components: bool = False

    def register(self, ctx: PluginContext, config: Any) -> Any:
        raise NotImplementedError

    def validate(self, config: Any) -> Any:
        return None


class _Adapter:
    """What the native serve loop calls: runs the plugin's methods, coroutines on an
    event loop of the worker's own, and hands back plain values."""

    def __init__(self, plugin: WorkerPlugin) -> None:
        if not getattr(plugin, "plugin_id", ""):
            raise _native.WattlineError("a WorkerPlugin needs a non-empty plugin_id")
        self.plugin = plugin
        self.plugin_id = plugin.plugin_id
        self.allows_multiple_components = bool(getattr(plugin, "allows_multiple_components", False))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="wattline-worker", daemon=True)
        self._thread.start()

    def _run(self, result: Any) -> Any:
        if inspect.isawaitable(result):
            return asyncio.run_coroutine_threadsafe(_awaited(result), self._loop).result()
        return result

    def register(self, plugin_id: str, activation_id: str, runtime: Any, config_json: str) -> None:
        context = PluginContext(plugin_id, activation_id, PluginRuntime(runtime) if runtime is not None else None)
        self._run(self.plugin.register(context, json.loads(config_json)))

    def validate(self, config_json: str) -> Optional[str]:
        problems = self._run(self.plugin.validate(json.loads(config_json)))
        if not problems:
            return None
        if isinstance(problems, str):
            return problems
        return "; ".join(str(getattr(problem, "message", problem)) for problem in problems)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def serve_plugin(plugin: WorkerPlugin) -> None:
    """Serves ``plugin`` with the environment the host set (``NEMO_RELAY_WORKER_*``)
    until the host calls ``Shutdown``. Blocks, as the reference SDK's does."""
    adapter = _Adapter(plugin)
    try:
        _native.serve_plugin(adapter)
    finally:
        adapter.stop()


def host_runtime() -> PluginRuntime:
    """The runtime of a program under ``wattline run``: ``await
    runtime.diagnostics()`` (components under ``worker.command.<name>``) and ``await
    runtime.agent_scope(name)`` (its steps, in the run's report)."""
    return PluginRuntime(_native.host_runtime())


async def host_diagnostics() -> WorkerDiagnostics:
    """The diagnostics facade of a program under ``wattline run``; its components land
    under ``worker.command.<name>``."""
    return WorkerDiagnostics(await _in_thread(_native.host_diagnostics))

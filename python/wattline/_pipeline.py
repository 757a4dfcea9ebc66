"""The three ways in: ``collect()`` and the async ``Pipeline``; ``measure()`` without
asyncio; ``agent_scope()`` at module level, which marks a step in the pipeline of
``wattline run`` when the program runs under it.

Every native call that waits releases the GIL; from a coroutine it runs on a worker
thread, or (``Pipeline.collect()``) on wattline's own runtime, which hands the result
to the loop, so the event loop never blocks. Cancelling an awaiting coroutine does not stop
a call already running: it completes and the pipeline stays consistent (as the spec
says of ``collect()``).
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import functools
import inspect
import itertools
import json
import os
import threading
import weakref
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, TypeVar, Union

from . import _gpu, _native
from ._model import Snapshot
from ._report import EnergyReport
from ._scope import AgentScope, _in_thread

__all__ = ["AgentScope", "Measure", "Pipeline", "agent_scope", "collect", "measure"]

ConfigLike = Union[None, str, "os.PathLike[str]", Mapping[str, Any]]
F = TypeVar("F", bound=Callable[..., Any])

_SCOPES = ("global", "application_process", "process_tree", "runtime_default")


def _config_arguments(config: ConfigLike) -> Dict[str, Any]:
    """A path goes to the native loader as a path (layered like the CLI's), a mapping
    as a plugins.toml table (errors name it ``<config>``)."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        try:
            return {"config_json": json.dumps(config)}
        except (TypeError, ValueError) as error:
            raise _native.ConfigError(f"<config>: not JSON-like data: {error}") from None
    if isinstance(config, (str, os.PathLike)):
        return {"config_path": os.fspath(config)}
    raise _native.ConfigError(
        f"config: must be a path or a mapping (got {type(config).__name__})"
    )


def _check_scope(scope: Optional[str]) -> Optional[str]:
    if scope is not None and scope not in _SCOPES:
        raise _native.ConfigError(
            f"scope: must be one of {', '.join(_SCOPES)} (got {scope!r})"
        )
    return scope


class _Completions:
    """Where wattline's runtime leaves the results of native calls for one event loop
    (``_native.Completions``): a finished call queues its result and wakes the loop
    through a pipe the loop watches, without taking the GIL on the runtime's thread.
    Needs a loop that watches file descriptors (``add_reader``: asyncio's loops on
    Linux and macOS, uvloop)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Not the loop itself: the loop's reader holds this, and a reference back would
        # keep both (and the pipe) alive.
        self.queue = _native.Completions()
        self._waiting: Dict[int, "asyncio.Future[Any]"] = {}
        # Taken from the queue, not settled yet (an exception stopped the last batch).
        self._pending: "collections.deque[Tuple[int, Optional[str], Any]]" = (
            collections.deque()
        )
        self._tokens = itertools.count()
        self._wake = self.queue.fileno()
        os.set_blocking(self._wake, False)
        loop.add_reader(self._wake, self._settle_ready)

    def start(
        self, loop: asyncio.AbstractEventLoop, start: Callable[[Any, int], None]
    ) -> "asyncio.Future[Any]":
        """A future on ``loop`` (this one's) of the native call ``start(queue, token)``."""
        token = next(self._tokens)
        future = loop.create_future()
        self._waiting[token] = future
        # Forgotten once done (a cancelled one too): a loop that never runs again is
        # not kept alive through a future waiting here for its result.
        future.add_done_callback(functools.partial(_forget, self._waiting, token))
        try:
            start(self.queue, token)
        except BaseException:
            self._waiting.pop(token, None)
            raise
        return future

    def _settle_ready(self) -> None:
        # The pipe first, then the queue: a result queued after this read wakes the
        # loop again; none is left behind.
        try:
            os.read(self._wake, 64)
        except BlockingIOError:
            pass
        self._pending.extend(self.queue.take())
        try:
            while self._pending:
                token, result, error = self._pending.popleft()
                future = self._waiting.pop(token, None)
                if future is None or future.done():
                    continue  # cancelled: the call completed all the same
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)
        finally:
            if self._pending:  # interrupted (KeyboardInterrupt): the rest next turn
                asyncio.get_running_loop().call_soon(self._settle_ready)


def _forget(waiting: "Dict[int, asyncio.Future[Any]]", token: int, _future: Any) -> None:
    waiting.pop(token, None)


# One per event loop. A closed loop's goes (its pipe closed) when the next loop gets
# one, not only when the loop itself is freed: a program that runs many short loops
# (``asyncio.run`` per call) keeps no pipes behind.
_COMPLETIONS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Completions]" = (
    weakref.WeakKeyDictionary()
)
_COMPLETIONS_LOCK = threading.Lock()


def _completions_of(loop: asyncio.AbstractEventLoop) -> _Completions:
    completions = _COMPLETIONS.get(loop)
    if completions is not None:
        return completions
    with _COMPLETIONS_LOCK:
        completions = _COMPLETIONS.get(loop)
        if completions is None:
            # keyrefs(): a copy made in one call, safe from removals by other threads.
            for reference in _COMPLETIONS.keyrefs():
                other = reference()
                if other is not None and other.is_closed():
                    _COMPLETIONS.pop(other, None)
            completions = _COMPLETIONS[loop] = _Completions(loop)
    return completions


async def _on_runtime(start: Callable[[Any, int], None]) -> Any:
    """Awaits a native call that runs on wattline's runtime and leaves its result in
    the loop's completions (``start(queue, token)``): no worker thread of the loop's
    waits on it, and no runtime thread takes the GIL to hand it over."""
    loop = asyncio.get_running_loop()
    return await _completions_of(loop).start(loop, start)


async def collect(
    scope: Optional[str] = None,
    pid: Optional[int] = None,
    config: ConfigLike = None,
) -> Snapshot:
    """One snapshot on this process's on-demand series for these arguments, as
    ``wattline collect`` takes it. The first call starts a pipeline (kept until the
    interpreter exits; without arguments, the one module-level ``agent_scope`` uses),
    later calls with the same arguments continue its series: rates and GPU process use
    from the second call on. Default scope: the process tree rooted at this process
    (or at ``pid``)."""
    key = (_check_scope(scope), pid, json.dumps(_config_arguments(config), sort_keys=True))
    pipeline = _series_now(key)
    if pipeline is None:
        pipeline = await _in_thread(_series, key, scope, pid, config)
    try:
        return await pipeline.collect()
    except _native.ConfigError:
        # Nothing to collect with this configuration: no series to keep.
        await _in_thread(_forget_series, key, pipeline)
        raise


class Pipeline:
    """A measuring pipeline in this process: ``async with Pipeline() as pipeline:``, or
    ``await start()`` then ``await shutdown()``.

    ``config`` is a plugins.toml path or a mapping of the same shape (default: the
    library defaults, no file read); ``scope`` overrides its measurement scope
    (default: the process tree rooted at this process); ``interval_ms`` turns polling
    on; ``atof_dir`` and ``otlp_endpoint`` turn those exporters on; ``gpu=False``
    reads no GPU.
    """

    def __init__(
        self,
        config: ConfigLike = None,
        *,
        scope: Optional[str] = None,
        interval_ms: Optional[int] = None,
        atof_dir: Union[None, str, "os.PathLike[str]"] = None,
        otlp_endpoint: Optional[str] = None,
        gpu: bool = True,
    ) -> None:
        self._options: Dict[str, Any] = dict(
            _config_arguments(config),
            scope=_check_scope(scope),
            interval_ms=interval_ms,
            atof_dir=os.fspath(atof_dir) if atof_dir is not None else None,
            otlp_endpoint=otlp_endpoint,
            gpu=bool(gpu),
        )
        self._native: Optional[Any] = None
        self._report: Optional[EnergyReport] = None
        self._stopped = False

    # --- lifecycle (blocking forms shared by the async ones and by measure()) ---------

    def _start_blocking(self) -> "Pipeline":
        if self._native is not None or self._stopped:
            raise _native.WattlineError("a Pipeline starts once; make a new one")
        options = dict(self._options)
        if options["gpu"]:
            options.update(_gpu._pipeline_options())
        self._native = _native.NativePipeline.start(**options)
        return self

    def _shutdown_blocking(self) -> Optional[EnergyReport]:
        if self._native is None or self._stopped:
            return self._report
        text = self._native.shutdown_json()
        self._stopped = True
        self._report = EnergyReport(json.loads(text)) if text is not None else None
        return self._report

    def _running(self) -> Any:
        if self._native is None or self._stopped:
            raise _native.WattlineError("the pipeline is not running")
        return self._native

    async def start(self) -> "Pipeline":
        """Starts measuring; the first poll runs now."""
        return await _in_thread(self._start_blocking)

    async def shutdown(self) -> Optional[EnergyReport]:
        """Stops measuring, ending live scopes; the final report (also ``report``)."""
        return await asyncio.shield(_in_thread(self._shutdown_blocking))

    async def __aenter__(self) -> "Pipeline":
        return await self.start()

    async def __aexit__(self, *_: Any) -> None:
        await self.shutdown()

    # --- while running -----------------------------------------------------------------

    async def collect(self) -> Snapshot:
        """One snapshot on the on-demand series (no mark)."""
        text = await _on_runtime(self._running().collect_json_into)
        return Snapshot.from_dict(json.loads(text))

    def agent_scope(
        self,
        name: str,
        weight: Optional[float] = None,
        traceparent: Optional[str] = None,
        parent: Optional[AgentScope] = None,
    ) -> AgentScope:
        """An Agent scope of this pipeline (``with``, ``async with`` or decorator);
        ``weight`` (tokens, batch size; 1 when ``None``) is its share of the energy it
        shares with the scopes live beside it. Entered inside another scope of this
        pipeline (``wattline.current_scope()``), or with ``parent`` (an entered scope),
        it is that scope's child. Its span's parent is ``traceparent``, else the
        current OpenTelemetry span, else its parent scope's span."""
        return AgentScope(
            name,
            lambda scope_name, scope_weight, span, parent_id: self._running().start_scope(
                scope_name, scope_weight, span, parent_id
            ),
            lambda scope_id: self._running().end_scope(scope_id),
            weight,
            traceparent=traceparent,
            owner=self._running,
            parent=parent,
        )

    async def flush(self) -> EnergyReport:
        """The energy report so far."""
        text = await _in_thread(self._running().flush_json)
        return EnergyReport(json.loads(text))

    @property
    def report(self) -> Optional[EnergyReport]:
        """The final report, once shut down."""
        return self._report

    @property
    def running(self) -> bool:
        """Whether the pipeline measures now."""
        return self._native is not None and not self._stopped


class Measure:
    """``with measure(...) as m: ...`` then ``m.report``; or ``@measure(...)`` on a
    function, whose ``report`` attribute then holds its last call's report. Each use
    starts a new pipeline and stops it fully at the end."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._pipeline: Optional[Pipeline] = None
        self.report: Optional[EnergyReport] = None

    def __enter__(self) -> "Measure":
        self._pipeline = Pipeline(**self._options)._start_blocking()
        self.report = None
        return self

    def __exit__(self, *_: Any) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            self.report = pipeline._shutdown_blocking()

    def agent_scope(
        self,
        name: str,
        weight: Optional[float] = None,
        traceparent: Optional[str] = None,
        parent: Optional[AgentScope] = None,
    ) -> AgentScope:
        """An Agent scope of the pipeline measuring now (``weight``, ``traceparent``
        and ``parent`` as for ``Pipeline.agent_scope``)."""
        if self._pipeline is None:
            raise _native.WattlineError("agent_scope() needs an entered measure()")
        return self._pipeline.agent_scope(name, weight, traceparent, parent)

    def __call__(self, function: F) -> F:
        if inspect.iscoroutinefunction(function):
            raise _native.WattlineError(
                "measure() decorates plain functions; use `async with Pipeline()` for coroutines"
            )

        @functools.wraps(function)
        def measured(*arguments: Any, **named: Any) -> Any:
            measurement = Measure(**self._options)
            try:
                with measurement:
                    return function(*arguments, **named)
            finally:
                measured.report = measurement.report  # type: ignore[attr-defined]
                self.report = measurement.report

        measured.report = None  # type: ignore[attr-defined]
        return measured  # type: ignore[return-value]


def measure(
    config: ConfigLike = None,
    *,
    scope: Optional[str] = None,
    interval_ms: Optional[int] = None,
    atof_dir: Union[None, str, "os.PathLike[str]"] = None,
    otlp_endpoint: Optional[str] = None,
    gpu: bool = True,
) -> Measure:
    """Measures a block or a function without asyncio (options as for ``Pipeline``)."""
    return Measure(
        config=config,
        scope=scope,
        interval_ms=interval_ms,
        atof_dir=atof_dir,
        otlp_endpoint=otlp_endpoint,
        gpu=gpu,
    )


# --- module-level agent_scope --------------------------------------------------------

_default_lock = threading.Lock()
_default_pipeline: Optional[Pipeline] = None
# The process that started the pipelines below: a forked child starts its own.
_owner_pid = os.getpid()
# Module-level collect()'s pipelines, one per set of arguments other than none.
_series_pipelines: Dict[Any, Pipeline] = {}
_DEFAULT_KEY = (None, None, "{}")


def _forget_forked_parent() -> None:
    """In a forked child the parent's pipelines cannot be used (nor stopped): forget
    them. Holds ``_default_lock``."""
    global _default_pipeline, _owner_pid
    if _owner_pid != os.getpid():
        _owner_pid = os.getpid()
        _default_pipeline = None
        _series_pipelines.clear()


def _default() -> Pipeline:
    """The process-wide pipeline module-level scopes and ``collect()`` use outside
    ``wattline run``: started on first use, stopped at interpreter exit."""
    global _default_pipeline
    with _default_lock:
        _forget_forked_parent()
        if _default_pipeline is None or not _default_pipeline.running:
            _default_pipeline = Pipeline()._start_blocking()
            atexit.register(_default_pipeline._shutdown_blocking)
        return _default_pipeline


def _series_now(key: Any) -> Optional[Pipeline]:
    """The running pipeline of ``key``'s series, if started (no waiting)."""
    with _default_lock:
        if _owner_pid != os.getpid():
            return None
        pipeline = _default_pipeline if key == _DEFAULT_KEY else _series_pipelines.get(key)
        return pipeline if pipeline is not None and pipeline.running else None


def _series(key: Any, scope: Optional[str], pid: Optional[int], config: ConfigLike) -> Pipeline:
    """The pipeline of ``key``'s series, started now if it is not running."""
    if key == _DEFAULT_KEY:
        return _default()
    with _default_lock:
        _forget_forked_parent()
        pipeline = _series_pipelines.get(key)
        if pipeline is None or not pipeline.running:
            pipeline = Pipeline(config, scope=scope)
            pipeline._options["pid"] = pid
            pipeline._start_blocking()
            atexit.register(pipeline._shutdown_blocking)
            _series_pipelines[key] = pipeline
        return pipeline


def _forget_series(key: Any, pipeline: Pipeline) -> None:
    """Stops and forgets a series pipeline that cannot collect."""
    with _default_lock:
        if key != _DEFAULT_KEY and _series_pipelines.get(key) is pipeline:
            del _series_pipelines[key]
        else:
            return
    pipeline._shutdown_blocking()


def default_pipeline_report() -> Optional[EnergyReport]:
    """Stops the process-wide pipeline and returns its report (``None`` if none ran)."""
    global _default_pipeline
    with _default_lock:
        _forget_forked_parent()
        pipeline, _default_pipeline = _default_pipeline, None
    return pipeline._shutdown_blocking() if pipeline is not None else None


def under_wattline_run() -> bool:
    """Whether this process was started by ``wattline run`` (its host endpoint is set)."""
    return bool(os.environ.get("WATTLINE_HOST_SOCKET"))


# Module-level scopes under `wattline run` all live in the run's pipeline.
_RUN_PIPELINE = object()


def agent_scope(
    name: str,
    weight: Optional[float] = None,
    traceparent: Optional[str] = None,
    parent: Optional[AgentScope] = None,
) -> AgentScope:
    """An Agent scope for this program: under ``wattline run`` it marks the step in the
    run's pipeline over its host endpoint; elsewhere in a process-wide default
    pipeline. ``with``, ``async with`` or decorator. ``weight`` (tokens, batch size; 1
    when ``None``) is its share of the energy it shares with the scopes live beside
    it. Entered inside another module-level scope (or with ``parent``), it is that
    scope's child. With spans exported, its span is a child of ``traceparent`` (W3C)
    when given, else of the OpenTelemetry span current when it is entered, else of its
    parent scope's span."""
    if under_wattline_run():
        return AgentScope(
            name,
            _native.host_start_scope,
            _native.host_end_scope,
            weight,
            blocking=True,
            traceparent=traceparent,
            owner=lambda: _RUN_PIPELINE,
            parent=parent,
        )
    return AgentScope(
        name,
        lambda scope_name, scope_weight, span, parent_id: _default()._running().start_scope(
            scope_name, scope_weight, span, parent_id
        ),
        lambda scope_id: _default()._running().end_scope(scope_id),
        weight,
        traceparent=traceparent,
        owner=lambda: _default()._running(),
        parent=parent,
    )

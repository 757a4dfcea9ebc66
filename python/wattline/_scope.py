"""Agent scopes and the current scope.

The current scope lives in a ``contextvars`` variable, with OpenTelemetry's meaning: a
scope entered while another of the same pipeline is current is that scope's child
(its ``parent_uuid`` in the event file, its energy counted in its parent's, its span a
child of its parent's). asyncio tasks copy the context when they are created, so a
task started inside a scope inherits it; a thread started with ``threading.Thread``
does not (``asyncio.to_thread`` and ``contextvars.copy_context().run`` carry it over).
Pass ``parent=`` to name the parent explicitly; it always wins.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import math
import threading
from typing import Any, Callable, List, Optional, Tuple, TypeVar

from . import _native

__all__ = ["AgentScope", "current_scope"]

F = TypeVar("F", bound=Callable[..., Any])

# start(name, weight, traceparent, parent scope id) -> scope id
StartScope = Callable[[str, Optional[float], Optional[str], Optional[str]], str]


async def _in_thread(function: Callable[..., Any], *arguments: Any, **named: Any) -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(function, *arguments, **named))


_opentelemetry_trace: Any = None


def _current_traceparent() -> Optional[str]:
    """The W3C ``traceparent`` of the OpenTelemetry span current here, when the
    ``opentelemetry`` API is installed and a valid span is current (no hard
    dependency: without the package, scopes start traces of their own)."""
    global _opentelemetry_trace
    if _opentelemetry_trace is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _opentelemetry_trace = False
            return None
        _opentelemetry_trace = trace
    if _opentelemetry_trace is False:
        return None
    context = _opentelemetry_trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class _Entered:
    """One entry of an ``AgentScope``: the scope it started, the pipeline that holds
    it, and the entry that was current when it began."""

    __slots__ = ("scope", "scope_id", "owner", "parent", "span_at_entry", "ended")

    def __init__(
        self,
        scope: "AgentScope",
        scope_id: str,
        owner: Any,
        parent: Optional["_Entered"],
        span_at_entry: Optional[str],
    ) -> None:
        self.scope = scope
        self.scope_id = scope_id
        self.owner = owner
        self.parent = parent
        self.span_at_entry = span_at_entry
        self.ended = False


_CURRENT: "contextvars.ContextVar[Optional[_Entered]]" = contextvars.ContextVar(
    "wattline_current_scope", default=None
)


def _live_current(owner: Any = None) -> Optional[_Entered]:
    """The innermost entry current here that has not ended (a task that outlived its
    scope nests in that scope's nearest live ancestor), of ``owner`` when given."""
    entry = _CURRENT.get()
    while entry is not None and (entry.ended or (owner is not None and entry.owner is not owner)):
        entry = entry.parent
    return entry


def current_scope() -> Optional["AgentScope"]:
    """The Agent scope current here (the innermost entered and not yet exited in this
    context), or ``None``."""
    entry = _live_current()
    return entry.scope if entry is not None else None


class AgentScope:
    """An Agent scope named ``name``: marks and energy attribute to it while it is
    entered. Use it as ``with``, ``async with`` or as a decorator of a function or a
    coroutine function (a new scope per call). It may be entered again and nested.

    Entered while another scope of the same pipeline is current, it is that scope's
    child; ``parent`` (an entered ``AgentScope``) names the parent explicitly. With
    spans exported, its span is a child of ``traceparent`` (a W3C value) when given,
    else of the OpenTelemetry span current when it is entered, else of its parent
    scope's span."""

    def __init__(
        self,
        name: str,
        start: StartScope,
        end: Callable[[str], bool],
        weight: Optional[float] = None,
        blocking: bool = False,
        traceparent: Optional[str] = None,
        owner: Callable[[], Any] = lambda: None,
        parent: Optional["AgentScope"] = None,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise _native.WattlineError("agent scope name must be a non-blank string")
        if weight is not None and (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight <= 0
        ):
            raise _native.WattlineError(
                f"agent scope weight {weight!r}: a positive, finite number"
            )
        if traceparent is not None and not isinstance(traceparent, str):
            raise _native.WattlineError(
                f"agent scope traceparent {traceparent!r}: a W3C traceparent string"
            )
        if parent is not None and not isinstance(parent, AgentScope):
            raise _native.WattlineError(
                f"agent scope parent {parent!r}: an AgentScope (entered)"
            )
        self.name = name
        self.weight = None if weight is None else float(weight)
        self.traceparent = traceparent
        self.parent = parent
        self._start = start
        self._end = end
        self._owner = owner
        # Whether starting and ending wait on something (the run's host endpoint, over
        # a socket): then `async with` takes them off the event loop's thread. In
        # process they wait for no device read and no poll, and run in place.
        self._blocking = blocking
        self._open: List[Tuple[_Entered, "contextvars.Token[Optional[_Entered]]"]] = []
        self._lock = threading.Lock()

    @property
    def uuid(self) -> Optional[str]:
        """The UUID of this scope's entry current here (else its latest open one):
        the ``parent_uuid`` of its children; ``None`` while not entered."""
        entry = self._entry()
        return entry.scope_id if entry is not None else None

    def _entry(self) -> Optional[_Entered]:
        entry = _CURRENT.get()
        while entry is not None and entry.scope is not self:
            entry = entry.parent
        if entry is not None and not entry.ended:
            return entry
        with self._lock:
            return self._open[-1][0] if self._open else None

    def _parent_entry(self, owner: Any) -> Optional[_Entered]:
        """The entry this scope nests in: the explicit parent's, else the current one
        of the same pipeline."""
        if self.parent is None:
            return _live_current(owner)
        entry = self.parent._entry()
        if entry is None:
            raise _native.WattlineError(
                f"agent scope {self.name!r}: its parent {self.parent.name!r} is not entered"
            )
        if entry.owner is not owner:
            raise _native.WattlineError(
                f"agent scope {self.name!r}: its parent {self.parent.name!r} "
                "belongs to another pipeline"
            )
        return entry

    def _plan(self) -> Tuple[Any, Optional[_Entered], Optional[str], Optional[str]]:
        """Owner, parent entry, the span to pass and the span current now."""
        owner = self._owner()
        parent = self._parent_entry(owner)
        span_now = _current_traceparent()
        if self.traceparent is not None:
            span = self.traceparent
        elif parent is not None and span_now == parent.span_at_entry:
            # No span opened since the parent began: the parent's span is the nearer.
            span = None
        else:
            span = span_now
        return owner, parent, span, span_now

    def _entered(
        self, scope_id: str, owner: Any, parent: Optional[_Entered], span_now: Optional[str]
    ) -> None:
        entry = _Entered(self, scope_id, owner, parent, span_now)
        token = _CURRENT.set(entry)
        with self._lock:
            self._open.append((entry, token))

    def _exited(self) -> Optional[str]:
        """Forgets the entry this context entered (else the latest) and makes its
        parent current again; its scope id."""
        current = _CURRENT.get()
        with self._lock:
            if not self._open:
                return None
            at = next(
                (i for i, (entry, _) in enumerate(self._open) if entry is current),
                len(self._open) - 1,
            )
            entry, token = self._open.pop(at)
        entry.ended = True
        try:
            _CURRENT.reset(token)
        except ValueError:
            # Exited in another context than it was entered in: that context keeps
            # the entry, which is skipped now that it has ended.
            pass
        return entry.scope_id

    def __enter__(self) -> "AgentScope":
        owner, parent, span, span_now = self._plan()
        parent_id = parent.scope_id if parent is not None else None
        scope_id = self._start(self.name, self.weight, span, parent_id)
        self._entered(scope_id, owner, parent, span_now)
        return self

    def __exit__(self, *_: Any) -> None:
        scope_id = self._exited()
        if scope_id is not None:
            self._end(scope_id)

    async def __aenter__(self) -> "AgentScope":
        owner, parent, span, span_now = self._plan()
        parent_id = parent.scope_id if parent is not None else None
        if self._blocking:
            scope_id = await _in_thread(self._start, self.name, self.weight, span, parent_id)
        else:
            scope_id = self._start(self.name, self.weight, span, parent_id)
        self._entered(scope_id, owner, parent, span_now)
        return self

    async def __aexit__(self, *_: Any) -> None:
        scope_id = self._exited()
        if scope_id is None:
            return
        if self._blocking:
            # Shielded: a cancelled task still ends its scope.
            await asyncio.shield(_in_thread(self._end, scope_id))
        else:
            self._end(scope_id)

    def _again(self) -> "AgentScope":
        """A new scope like this one, for one call of a decorated function."""
        return AgentScope(
            self.name,
            self._start,
            self._end,
            self.weight,
            self._blocking,
            self.traceparent,
            self._owner,
            self.parent,
        )

    def __call__(self, function: F) -> F:
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def scoped_coroutine(*arguments: Any, **named: Any) -> Any:
                async with self._again():
                    return await function(*arguments, **named)

            return scoped_coroutine  # type: ignore[return-value]

        @functools.wraps(function)
        def scoped(*arguments: Any, **named: Any) -> Any:
            with self._again():
                return function(*arguments, **named)

        return scoped  # type: ignore[return-value]


"""Steps with no code: OpenTelemetry GenAI spans become Agent scopes.

Add one processor to the program's tracer provider and every span that carries a
`gen_ai.operation.name` (an agent invocation, a tool call, a model call, as the
OpenTelemetry GenAI conventions and the frameworks that follow them name them)
becomes an Agent scope, nested as the spans nest::

    from opentelemetry.sdk.trace import TracerProvider
    import wattline.spans

    provider = TracerProvider()
    provider.add_span_processor(wattline.spans.GenAISpanProcessor())

Constructed with no arguments the processor uses the pipeline of ``wattline run``
when the program runs under it, else the process-wide pipeline the module-level
``wattline.agent_scope`` uses; pass ``pipeline=`` for one of your own. Each scope is
named after its span, its energy span (when spans are exported) is a child of the
framework's span, and it nests in the scope of the nearest ancestor span that became
one (else in the current scope, ``wattline.current_scope()``). The processor never
raises into the traced program: a scope it cannot start is logged and skipped.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Callable, Dict, Iterable, Optional, Set, Tuple

from . import _native, _remote_estimates
from ._pipeline import Pipeline, _default, _RUN_PIPELINE, under_wattline_run
from ._scope import _live_current

try:
    from opentelemetry.sdk.trace import SpanProcessor
except ImportError as missing:  # pragma: no cover - the SDK is the point of this module
    raise ImportError(
        "wattline.spans needs the OpenTelemetry SDK: pip install opentelemetry-sdk"
    ) from missing

__all__ = ["DEFAULT_OPERATIONS", "GenAISpanProcessor", "SpanSteps"]

_log = logging.getLogger("wattline.spans")

#: The `gen_ai.operation.name` values that become scopes by default: every operation
#: the OpenTelemetry GenAI conventions name.
DEFAULT_OPERATIONS = frozenset(
    {
        "invoke_agent",
        "create_agent",
        "execute_tool",
        "chat",
        "text_completion",
        "embeddings",
        "generate_content",
    }
)

OPERATION_ATTRIBUTE = "gen_ai.operation.name"

# start(name, weight, traceparent, parent scope id) -> scope id;
# end(scope id, the span's end as JSON or None) -> bool
_Start = Callable[[str, Optional[float], Optional[str], Optional[str]], str]
_End = Callable[[str, Optional[str]], bool]


def _traceparent(span: Any) -> str:
    """The W3C `traceparent` of `span` itself: the scope's span becomes its child."""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class SpanSteps:
    """The steps of one tracer's spans, whichever tracing API reports them: each span
    by its id and its parent's id, a step or not. A step nests in the step of its
    nearest ancestor span that became one (through spans that are not steps), else in
    the current scope of the pipeline. Used by :class:`GenAISpanProcessor` and by
    ``wattline.openai_agents``."""

    def __init__(self, pipeline: Optional[Pipeline] = None) -> None:
        if pipeline is not None and not isinstance(pipeline, Pipeline):
            raise _native.WattlineError(f"pipeline {pipeline!r}: a wattline.Pipeline")
        self._pipeline = pipeline
        # Per live span (by span id): the scope it nests its descendants in (its own,
        # or its parent's for a span that is not a step), and its own scope, if any.
        self._spans: Dict[Any, Tuple[Optional[str], Optional[Tuple[str, _End]]]] = {}
        # The scopes started here that have not ended.
        self._live: Set[str] = set()
        self._lock = threading.Lock()

    def _target(self) -> Tuple[_Start, _End, Any]:
        """How to start and end scopes now, and the pipeline they live in."""
        if self._pipeline is not None:
            running = self._pipeline._running()
            return running.start_scope, running.end_scope, running
        if under_wattline_run():
            return _native.host_start_scope, _native.host_end_scope, _RUN_PIPELINE
        running = _default()._running()
        return running.start_scope, running.end_scope, running

    def _inherited(self, parent_id: Any) -> Optional[str]:
        """The scope the span `parent_id` nests its descendants in, while it is live."""
        if parent_id is None:
            return None
        with self._lock:
            known = self._spans.get(parent_id)
            # An ancestor's step that has ended (its span did) holds no more children.
            if known is None or known[0] not in self._live:
                return None
            return known[0]

    def started(
        self,
        span_id: Any,
        parent_id: Any,
        name: Optional[str],
        weight: Optional[float] = None,
        traceparent: Optional[str] = None,
    ) -> None:
        """Span `span_id` (child of `parent_id`) started; a step named `name` when
        given. Never raises: a step that cannot start is logged and skipped."""
        inherited = self._inherited(parent_id)
        if name is None:
            # Not a step: its descendants nest where it does.
            if inherited is not None:
                with self._lock:
                    self._spans[span_id] = (inherited, None)
            return
        try:
            start, end, owner = self._target()
            if inherited is None:
                current = _live_current(owner)
                inherited = current.scope_id if current is not None else None
            scope_id = start(name, weight, traceparent, inherited)
        except Exception as error:  # never into the traced program
            _log.warning("wattline: span %r did not become a step: %s", name, error)
            return
        with self._lock:
            self._spans[span_id] = (scope_id, (scope_id, end))
            self._live.add(scope_id)

    def ended(self, span_id: Any, span_end: Optional[str] = None) -> None:
        """Span `span_id` ended: its step, if it has one, ends. `span_end`: a model
        call's span at its end, as the core reads it (JSON), for a remote call's
        estimate."""
        with self._lock:
            known = self._spans.pop(span_id, None)
            if known is None or known[1] is None:
                return
            scope_id, end = known[1]
            self._live.discard(scope_id)
        try:
            end(scope_id, span_end)
        except Exception as error:  # never into the traced program
            _log.warning("wattline: a span's step did not end: %s", error)

    def owns(self, span_id: Any) -> bool:
        """Whether span `span_id` became a step that has not ended."""
        with self._lock:
            known = self._spans.get(span_id)
            return known is not None and known[1] is not None

    def end_all(self) -> None:
        """Ends the steps of spans still open."""
        with self._lock:
            open_steps = [own for _, own in self._spans.values() if own is not None]
            self._spans.clear()
            self._live.clear()
        for scope_id, end in open_steps:
            try:
                end(scope_id, None)
            except Exception:  # the pipeline may be gone already
                pass


class GenAISpanProcessor(SpanProcessor):
    """Turns GenAI spans into Agent scopes (see the module's documentation).

    ``operations``: the `gen_ai.operation.name` values that become scopes (default
    :data:`DEFAULT_OPERATIONS`); ``predicate``: instead of that, a function of the
    span deciding it; ``weight_attribute``: an attribute whose positive number, when
    the span has it at its start, is the scope's weight (e.g.
    `gen_ai.request.max_tokens`); ``pipeline``: the pipeline the scopes live in."""

    def __init__(
        self,
        pipeline: Optional[Pipeline] = None,
        *,
        operations: Iterable[str] = DEFAULT_OPERATIONS,
        predicate: Optional[Callable[[Any], bool]] = None,
        weight_attribute: Optional[str] = None,
    ) -> None:
        self._steps = SpanSteps(pipeline)
        self._operations = frozenset(operations)
        self._predicate = predicate
        self._weight_attribute = weight_attribute

    def _selected(self, span: Any) -> bool:
        if self._predicate is not None:
            return bool(self._predicate(span))
        attributes = span.attributes or {}
        return attributes.get(OPERATION_ATTRIBUTE) in self._operations

    def _weight(self, span: Any) -> Optional[float]:
        if self._weight_attribute is None:
            return None
        value = (span.attributes or {}).get(self._weight_attribute)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value) if math.isfinite(value) and value > 0 else None

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        parent = span.parent.span_id if span.parent is not None else None
        span_id = span.get_span_context().span_id
        if not self._selected(span):
            self._steps.started(span_id, parent, None)
            return
        self._steps.started(span_id, parent, span.name, self._weight(span), _traceparent(span))

    def on_end(self, span: Any) -> None:
        span_id = span.get_span_context().span_id
        if not self._steps.owns(span_id):
            self._steps.ended(span_id)
            return
        self._steps.ended(
            span_id,
            _remote_estimates.span_end(span.attributes, _remote_estimates.span_latency(span)),
        )

    def shutdown(self) -> None:
        """Ends the steps of spans still open."""
        self._steps.end_all()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

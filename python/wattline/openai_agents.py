"""The OpenAI Agents SDK's traces as steps: its agent, model and tool spans become
Agent scopes, nested as the spans nest, with no other code::

    import agents
    import wattline.openai_agents

    agents.add_trace_processor(wattline.openai_agents.AgentStepsProcessor())

The Agents SDK traces through processors of its own (not OpenTelemetry), so this is
one of them. Steps are named as the OpenTelemetry GenAI conventions name the
operations: ``invoke_agent <agent>``, ``chat <model>`` for a model call (a
generation, or a response of the Responses API), ``execute_tool <function>``. With
no arguments it uses the pipeline of ``wattline run`` when the program runs under it,
else the process-wide one; it never raises into the agent.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ._pipeline import Pipeline
from .spans import SpanSteps

try:
    from agents.tracing import TracingProcessor
except ImportError as missing:  # pragma: no cover - the SDK is the point of this module
    raise ImportError(
        "wattline.openai_agents needs the OpenAI Agents SDK: pip install openai-agents"
    ) from missing

__all__ = ["DEFAULT_KINDS", "AgentStepsProcessor"]

#: The Agents SDK span kinds (`span_data.type`) that become steps by default.
DEFAULT_KINDS = frozenset({"agent", "generation", "response", "function"})


def step_name(data: Any) -> str:
    """The step's name for span data of the Agents SDK, in the GenAI conventions'
    words."""
    kind = data.type
    if kind == "agent":
        return f"invoke_agent {data.name}"
    if kind == "function":
        return f"execute_tool {data.name}"
    if kind in ("generation", "response"):
        model = getattr(data, "model", None)
        return f"chat {model}" if model else "chat"
    return str(getattr(data, "name", None) or kind)


class AgentStepsProcessor(TracingProcessor):
    """An Agents SDK trace processor whose spans of ``kinds`` (default
    :data:`DEFAULT_KINDS`) become steps of ``pipeline``."""

    def __init__(self, pipeline: Optional[Pipeline] = None, *, kinds: Iterable[str] = DEFAULT_KINDS) -> None:
        self._steps = SpanSteps(pipeline)
        self._kinds = frozenset(kinds)

    def on_trace_start(self, trace: Any) -> None:
        pass

    def on_trace_end(self, trace: Any) -> None:
        pass

    def on_span_start(self, span: Any) -> None:
        data = span.span_data
        name = step_name(data) if data.type in self._kinds else None
        self._steps.started(span.span_id, span.parent_id, name)

    def on_span_end(self, span: Any) -> None:
        self._steps.ended(span.span_id)

    def shutdown(self) -> None:
        self._steps.end_all()

    def force_flush(self) -> None:
        pass

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

from datetime import datetime
from typing import Any, Iterable, Optional

from . import _remote_estimates
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


def model_call_attributes(data: Any) -> Optional[dict]:
    """A model call's span data as the OpenTelemetry GenAI attributes of its span
    (the operation, provider, model and token counts), for a remote call's estimate;
    None for other span data. The Agents SDK's models are OpenAI's."""
    if data.type == "generation":
        model, usage = getattr(data, "model", None), getattr(data, "usage", None) or {}
        tokens = (usage.get("input_tokens"), usage.get("output_tokens"))
    elif data.type == "response":
        response = getattr(data, "response", None)
        model = getattr(response, "model", None)
        usage = getattr(response, "usage", None)
        tokens = (getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None))
    else:
        return None
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai"}
    if model:
        attributes["gen_ai.request.model"] = model
    for key, count in zip(("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"), tokens):
        if isinstance(count, int):
            attributes[key] = count
    return attributes


def _seconds_between(started: Optional[str], ended: Optional[str]) -> Optional[float]:
    """Seconds between two ISO 8601 instants of the Agents SDK, when both parse."""
    try:
        return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    except (TypeError, ValueError):
        return None


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
        if not self._steps.owns(span.span_id):
            self._steps.ended(span.span_id)
            return
        attributes = model_call_attributes(span.span_data)
        latency = _seconds_between(span.started_at, span.ended_at) if attributes else None
        self._steps.ended(span.span_id, _remote_estimates.span_end(attributes, latency))

    def shutdown(self) -> None:
        self._steps.end_all()

    def force_flush(self) -> None:
        pass

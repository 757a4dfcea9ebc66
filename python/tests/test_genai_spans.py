"""OpenTelemetry GenAI spans become Agent scopes with no other code: the official SDK's
tracer with `wattline.spans.GenAISpanProcessor` added; each span carrying a
`gen_ai.operation.name` is a scope nested as the spans nest (through spans that are
not steps), its energy span a child of the framework's span; configurable by
operations, a predicate and a weight attribute; under `wattline run` with no
arguments; and never an error in the traced program."""

from __future__ import annotations

import textwrap

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import wattline
import wattline.spans
from test_nesting import first_starts, scope_events, starts_under_run
from test_spans import by_name, receiver, spans_to  # noqa: F401 (a fixture)


def traced(processor) -> "tuple[object, InMemorySpanExporter]":
    """A tracer whose spans go through `processor` and are kept in memory."""
    provider = TracerProvider()
    provider.add_span_processor(processor)
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    return provider.get_tracer("agent framework"), kept


def agent_run(tracer) -> None:
    """An agent as a framework traces it: an agent invocation holding a model call and,
    under an HTTP span that is no step, a tool call; then a span of no GenAI kind."""
    with tracer.start_as_current_span(
        "invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={"gen_ai.operation.name": "chat", "gen_ai.request.max_tokens": 300},
        ):
            pass
        with tracer.start_as_current_span("GET /search"):
            with tracer.start_as_current_span(
                "execute_tool search", attributes={"gen_ai.operation.name": "execute_tool"}
            ):
                pass
    with tracer.start_as_current_span("render page"):
        pass


async def test_genai_spans_become_nested_steps_whose_spans_are_the_frameworks_children(
    receiver, quiet_home, tmp_path  # noqa: F811 (the fixture)
):
    config = spans_to(receiver)
    config["components"].append({"kind": "atof", "config": {"output_directory": str(tmp_path)}})
    async with wattline.Pipeline(config=config, gpu=False) as pipeline:
        processor = wattline.spans.GenAISpanProcessor(
            pipeline, weight_attribute="gen_ai.request.max_tokens"
        )
        tracer, kept = traced(processor)
        agent_run(tracer)
        report = await pipeline.flush()
    starts = first_starts(scope_events(tmp_path))
    assert set(starts) == {"invoke_agent planner", "chat gpt-4o", "execute_tool search"}
    planner = starts["invoke_agent planner"]["uuid"]
    assert starts["chat gpt-4o"]["parent_uuid"] == planner
    assert starts["execute_tool search"]["parent_uuid"] == planner, "through the HTTP span"
    weights = {step.name: step.weight for step in report.agent_scopes}
    assert weights["chat gpt-4o"] == 300.0
    assert weights["invoke_agent planner"] is None

    framework = {span.name: span for span in kept.get_finished_spans()}
    ours = receiver.spans()
    for name in starts:
        step_span = by_name(ours, name)
        theirs = framework[name].get_span_context()
        assert step_span.trace_id.hex() == format(theirs.trace_id, "032x"), name
        assert step_span.parent_span_id.hex() == format(theirs.span_id, "016x"), name


async def test_operations_a_predicate_and_a_stopped_pipeline(quiet_home, tmp_path):
    async with wattline.Pipeline(gpu=False, atof_dir=str(tmp_path / "chat")) as pipeline:
        tracer, _ = traced(wattline.spans.GenAISpanProcessor(pipeline, operations={"chat"}))
        agent_run(tracer)
    assert set(first_starts(scope_events(tmp_path / "chat"))) == {"chat gpt-4o"}

    async with wattline.Pipeline(gpu=False, atof_dir=str(tmp_path / "picked")) as pipeline:
        processor = wattline.spans.GenAISpanProcessor(
            pipeline, predicate=lambda span: span.name.startswith("render")
        )
        tracer, _ = traced(processor)
        agent_run(tracer)
    assert set(first_starts(scope_events(tmp_path / "picked"))) == {"render page"}

    # The pipeline is gone: the program's spans go on, the steps are logged and skipped.
    tracer, kept = traced(wattline.spans.GenAISpanProcessor(pipeline))
    agent_run(tracer)
    assert len(kept.get_finished_spans()) == 5

    with pytest.raises(wattline.WattlineError, match="a wattline.Pipeline"):
        wattline.spans.GenAISpanProcessor("not a pipeline")  # type: ignore[arg-type]


UNDER_RUN = textwrap.dedent(
    """
    from opentelemetry.sdk.trace import TracerProvider
    import wattline.spans

    provider = TracerProvider()
    provider.add_span_processor(wattline.spans.GenAISpanProcessor())
    tracer = provider.get_tracer("agent framework")
    with tracer.start_as_current_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
            pass
    print("traced")
    """
)


def test_with_no_arguments_it_uses_the_pipeline_of_wattline_run(wattline_binary, quiet_home, tmp_path):
    starts = starts_under_run(wattline_binary, UNDER_RUN, tmp_path / "runs", "traced")
    assert starts["chat gpt-4o"]["parent_uuid"] == starts["invoke_agent planner"]["uuid"]
    assert starts["chat gpt-4o"]["attributes"] == ["remote"]

"""Real frameworks end to end: the official `openai` client, instrumented by
`opentelemetry-instrumentation-openai-v2`, calls a local OpenAI-compatible server
(`fake_openai.py`) inside an agent span; `wattline.spans.GenAISpanProcessor` turns the
GenAI spans into steps. Asserted on the OTLP wattline sends, decoded with the official
proto types: one wattline span per framework span, parented under it, with energy,
and the scope tree equal to the span tree."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import wattline
import wattline.spans
from fake_openai import CHAT_USAGE, FakeOpenAI
from test_nesting import first_starts, scope_events
from test_spans import receiver, spans_to  # noqa: F401 (a fixture)


@pytest.fixture
def model_server():
    server = FakeOpenAI()
    yield server
    server.close()


def step_tree(steps: list) -> list:
    """Each step's name with its parent step's name (None at the top), sorted."""
    names_by_uuid = {event["uuid"]: event["name"] for event in steps}
    return sorted(
        (event["name"], names_by_uuid.get(event["parent_uuid"]))
        for event in steps
        if event["scope_category"] == "start"
    )


def attributes_of(span) -> dict:
    """An OTLP span's attributes as plain values."""
    values = {}
    for attribute in span.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind) if kind else None
    return values


async def test_the_official_openai_instrumentation_s_spans_become_steps_with_energy(
    receiver, model_server, stand_in_nvidia_smi, quiet_home, tmp_path  # noqa: F811
):
    import openai
    from ecologits.tracers.utils import llm_impacts
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    config = spans_to(receiver)
    config["components"].append({"kind": "atof", "config": {"output_directory": str(tmp_path)}})
    instrumentor = OpenAIInstrumentor()
    async with wattline.Pipeline(config=config, interval_ms=100) as pipeline:
        provider = TracerProvider()
        provider.add_span_processor(wattline.spans.GenAISpanProcessor(pipeline))
        kept = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(kept))
        instrumentor.instrument(tracer_provider=provider)
        try:
            client = openai.OpenAI(base_url=model_server.base_url, api_key="not-a-key")
            tracer = provider.get_tracer("agent")
            with tracer.start_as_current_span(
                "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}
            ):
                messages = [{"role": "user", "content": "hi"}]
                client.chat.completions.create(model="gpt-4o-mini", messages=messages)
                stream = client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                assert "".join(
                    chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices
                ) == "Hello there"
                client.embeddings.create(model="text-embedding-3-small", input="hi")
        finally:
            instrumentor.uninstrument()
        provider.force_flush()
    framework = kept.get_finished_spans()
    names = sorted(span.name for span in framework)
    assert names == [
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "embeddings text-embedding-3-small",
        "invoke_agent support",
    ]
    chat = [span for span in framework if span.name == "chat gpt-4o-mini"]
    assert all(span.attributes["gen_ai.usage.output_tokens"] == CHAT_USAGE["completion_tokens"] for span in chat)

    # One wattline span per framework span, its child, with energy.
    ours = {span.parent_span_id.hex(): span for span in receiver.spans()}
    assert len(ours) == len(framework)
    for span in framework:
        context = span.get_span_context()
        step = ours[format(context.span_id, "016x")]
        assert step.name == span.name
        assert step.trace_id.hex() == format(context.trace_id, "032x")
        energy = attributes_of(step)
        assert energy["wattline.energy.window_gpu_joules"] > 0, span.name
        assert energy["wattline.energy.attributed_gpu_joules"] >= 0, span.name
        # A model call (no server.address: taken as served elsewhere) carries its
        # estimate apart from the measured figures: EcoLogits' own, for its tokens
        # and latency; the embedding model has none, and only its name is said.
        if span.name == "chat gpt-4o-mini":
            impacts = llm_impacts(
                provider="openai",
                model_name="gpt-4o-mini",
                output_token_count=CHAT_USAGE["completion_tokens"],
                request_latency=(span.end_time - span.start_time) / 1e9,
            )
            low = energy["wattline.energy.remote_estimated.low_joules"]
            high = energy["wattline.energy.remote_estimated.high_joules"]
            assert abs(low - impacts.energy.value.min * 3.6e6) <= 1e-9 * low
            assert abs(high - impacts.energy.value.max * 3.6e6) <= 1e-9 * high
            assert energy["wattline.energy.remote_estimated.method"] == "estimated"
        elif span.name.startswith("embeddings"):
            assert energy["wattline.remote_call.model"] == "text-embedding-3-small"
            assert "wattline.energy.remote_estimated.low_joules" not in energy
        else:
            assert "wattline.remote_call.model" not in energy

    # The scope tree is the span tree: every model call the agent's child.
    steps = scope_events(tmp_path)
    tree = step_tree(steps)
    names_by_uuid = {event["uuid"]: event["name"] for event in steps}
    spans_by_id = {span.get_span_context().span_id: span.name for span in framework}
    span_tree = sorted(
        (span.name, spans_by_id.get(span.parent.span_id) if span.parent else None)
        for span in framework
    )
    assert tree == span_tree
    assert first_starts(steps)["invoke_agent support"]["parent_uuid"] not in names_by_uuid


async def test_the_openai_agents_sdk_s_agent_model_and_tool_spans_become_steps(
    receiver, model_server, stand_in_nvidia_smi, quiet_home, tmp_path  # noqa: F811
):
    import agents
    from agents.tracing import TracingProcessor
    from openai import AsyncOpenAI

    import wattline.openai_agents

    class Recording(TracingProcessor):
        """The SDK's own spans, as it reports them: id, parent and step name."""

        def __init__(self) -> None:
            self.spans = {}

        def on_trace_start(self, trace) -> None:
            pass

        def on_trace_end(self, trace) -> None:
            pass

        def on_span_start(self, span) -> None:
            self.spans[span.span_id] = (span.parent_id, span.span_data)

        def on_span_end(self, span) -> None:
            pass

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    @agents.function_tool
    def lookup_weather() -> str:
        """Today's weather."""
        return "sunny"

    config = spans_to(receiver)
    config["components"].append({"kind": "atof", "config": {"output_directory": str(tmp_path)}})
    recording = Recording()
    async with wattline.Pipeline(config=config, interval_ms=100) as pipeline:
        agents.set_default_openai_client(
            AsyncOpenAI(base_url=model_server.base_url, api_key="not-a-key"), use_for_tracing=False
        )
        agents.set_default_openai_api("chat_completions")
        agents.set_trace_processors([wattline.openai_agents.AgentStepsProcessor(pipeline), recording])
        try:
            agent = agents.Agent(
                name="support", instructions="Answer.", tools=[lookup_weather], model="gpt-4o-mini"
            )
            result = await agents.Runner.run(agent, "What is the weather?")
        finally:
            agents.set_trace_processors([])
    assert result.final_output == "Hello there"

    # The SDK's span tree, its steps' names in the conventions' words, each step under
    # its nearest ancestor that is one.
    def step_parent(parent_id):
        while parent_id is not None and parent_id in recording.spans:
            grandparent, data = recording.spans[parent_id]
            if data.type in wattline.openai_agents.DEFAULT_KINDS:
                return wattline.openai_agents.step_name(data)
            parent_id = grandparent
        return None

    expected = sorted(
        (wattline.openai_agents.step_name(data), step_parent(parent_id))
        for parent_id, data in recording.spans.values()
        if data.type in wattline.openai_agents.DEFAULT_KINDS
    )
    assert expected == [
        ("chat gpt-4o-mini", "invoke_agent support"),
        ("chat gpt-4o-mini", "invoke_agent support"),
        ("execute_tool lookup_weather", "invoke_agent support"),
        ("invoke_agent support", None),
    ]
    tree = step_tree(scope_events(tmp_path))
    assert tree == expected

    # Over OTLP: one span per step, with energy, nested as the steps are.
    ours = receiver.spans()
    by_id = {span.span_id: span.name for span in ours}
    received = sorted((span.name, by_id.get(span.parent_span_id)) for span in ours)
    assert received == expected
    for span in ours:
        assert attributes_of(span)["wattline.energy.window_gpu_joules"] > 0, span.name
        # The model calls carry their estimate (EcoLogits knows gpt-4o-mini).
        estimated = attributes_of(span).get("wattline.energy.remote_estimated.estimator")
        assert estimated == ("ecologits 0.11.3" if span.name.startswith("chat") else None), span.name

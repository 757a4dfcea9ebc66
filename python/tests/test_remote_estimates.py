"""Remote model calls, estimated and labelled: a GenAI model-call span whose server is
not this machine gets an estimate of its energy where it ran, apart from the measured
figures. With EcoLogits installed, its estimate (equal to its own function's, called
here); for a model it does not know, the factor table's (closed form from the shipped
row); for a model neither knows, none, and the report names it."""

from __future__ import annotations

import textwrap
import time

from opentelemetry.sdk.trace import TracerProvider

import wattline
import wattline.spans
from test_nesting import starts_under_run


def model_call(tracer, name: str, model: str, input_tokens: int, output_tokens: int, seconds: float, **more) -> None:
    """A model call's span as the OpenAI instrumentation leaves it, lasting `seconds`."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": more.pop("system", "openai"),
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": input_tokens,
        "gen_ai.usage.output_tokens": output_tokens,
        **more,
    }
    start = time.time_ns()
    span = tracer.start_span(name, attributes=attributes, start_time=start)
    span.end(end_time=start + int(seconds * 1e9))


def scopes_by_name(report) -> dict:
    return {scope["name"]: scope for scope in report.agent_scopes}


async def test_remote_calls_get_ecologits_or_the_tables_estimate_and_unknown_models_are_named(quiet_home):
    from ecologits.tracers.utils import llm_impacts

    async with wattline.Pipeline(gpu=False) as pipeline:
        provider = TracerProvider()
        provider.add_span_processor(wattline.spans.GenAISpanProcessor(pipeline))
        tracer = provider.get_tracer("agent framework")
        model_call(tracer, "chat gpt-4o-mini", "gpt-4o-mini", 120, 80, 1.5)
        model_call(tracer, "chat haiku", "claude-3-5-haiku-20241022", 1000, 500, 2.0, system="anthropic")
        model_call(tracer, "chat mystery", "mystery-model", 10, 10, 0.5)
        model_call(tracer, "chat local", "gpt-4o-mini", 10, 10, 0.5, **{"server.address": "localhost"})
        with tracer.start_as_current_span("execute_tool search", attributes={"gen_ai.operation.name": "execute_tool"}):
            pass
        report = await pipeline.flush()
    scopes = scopes_by_name(report)

    # EcoLogits knows gpt-4o-mini: its own function, called here, gives the figures.
    expected = llm_impacts(provider="openai", model_name="gpt-4o-mini", output_token_count=80, request_latency=1.5)
    estimate = scopes["chat gpt-4o-mini"]["remote_call"]["estimate"]
    assert (estimate["low_kwh"], estimate["high_kwh"]) == (expected.energy.value.min, expected.energy.value.max)
    assert estimate["method"] == "estimated"
    assert estimate["estimator"] == "ecologits 0.11.3"

    # It does not know this Claude: the shipped row (config/data/remote_model_energy.toml,
    # output 2.6 to 5.4 Wh per 1,000 tokens, input 0.026 to 2.0) gives
    # 1.0·0.026 + 0.5·2.6 = 1.326 Wh and 1.0·2.0 + 0.5·5.4 = 4.7 Wh.
    call = scopes["chat haiku"]["remote_call"]
    assert (call["input_tokens"], call["output_tokens"]) == (1000, 500)
    assert abs(call["estimate"]["low_kwh"] - 1.326e-3) < 1e-12
    assert abs(call["estimate"]["high_kwh"] - 4.7e-3) < 1e-12
    assert call["estimate"]["estimator"] == "factor-table"
    assert "Jegham" in call["estimate"]["source"]

    # Neither knows it: no estimate, and the report says which model.
    assert "estimate" not in scopes["chat mystery"]["remote_call"]
    totals = report.remote_estimates
    assert (totals["calls"], totals["estimated_calls"]) == (3, 2)
    assert totals["models_without_estimate"] == ["mystery-model"]
    assert abs(totals["high_kwh"] - (expected.energy.value.max + 4.7e-3)) < 1e-12
    assert "no estimate for mystery-model" in str(report)

    # Served on this machine, or no model call: no remote call.
    assert "remote_call" not in scopes["chat local"]
    assert "remote_call" not in scopes["execute_tool search"]


UNDER_RUN = textwrap.dedent(
    """
    import time
    from opentelemetry.sdk.trace import TracerProvider
    import wattline.spans

    provider = TracerProvider()
    provider.add_span_processor(wattline.spans.GenAISpanProcessor())
    tracer = provider.get_tracer("agent framework")
    for model in ("claude-3-5-haiku-20241022", "mystery-model"):
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "anthropic",
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": 1000,
            "gen_ai.usage.output_tokens": 500,
        }
        with tracer.start_as_current_span("chat " + model, attributes=attributes):
            time.sleep(0.01)
    print("traced")
    """
)


def test_under_wattline_run_the_estimate_crosses_the_host_endpoint_and_stays_in_the_file(
    wattline_binary, quiet_home, tmp_path
):
    starts_under_run(wattline_binary, UNDER_RUN, tmp_path / "runs", "traced")
    (atof,) = [path for path in (tmp_path / "runs").rglob("*") if path.is_file()]
    report = wattline.report_from_atof(atof)
    scopes = scopes_by_name(report)
    estimate = scopes["chat claude-3-5-haiku-20241022"]["remote_call"]["estimate"]
    assert abs(estimate["low_kwh"] - 1.326e-3) < 1e-12 and abs(estimate["high_kwh"] - 4.7e-3) < 1e-12
    assert report.remote_estimates["models_without_estimate"] == ["mystery-model"]
    assert report.remote_estimates["calls"] == 2

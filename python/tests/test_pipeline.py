"""The async pipeline: agent scopes (context managers and decorators) get their
energy from a stand-in `nvidia-smi`, the report has every field of the JSON report,
and cancellation leaves the pipeline working."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import wattline


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(10_000))


async def test_agent_scopes_get_energy_from_the_gpu(stand_in_nvidia_smi, quiet_home):
    async with wattline.Pipeline(interval_ms=100) as pipeline:
        async with pipeline.agent_scope("planner"):
            await asyncio.sleep(0.6)

        @pipeline.agent_scope("coder")
        def code() -> str:
            busy(0.3)
            return "done"

        @pipeline.agent_scope("reviewer")
        async def review() -> str:
            await asyncio.sleep(0.3)
            return "ok"

        assert code() == "done"
        assert await review() == "ok"
        with pipeline.agent_scope("tester"):
            busy(0.2)
        report = await pipeline.flush()
    assert pipeline.report is not None and not pipeline.running

    assert report.gpu_source == "nvidia-smi"
    assert report.devices[0].name == "NVIDIA H200"
    steps = {step.name: step for step in pipeline.report.agent_scopes}
    assert set(steps) == {"planner", "coder", "reviewer", "tester"}
    planner = steps["planner"]
    # About 250 W over its ~0.6 s, from its own start and end.
    seconds = planner.gpu_energy_kwh * 3_600_000 / 250.0
    assert 0.4 < seconds < 1.5, seconds
    assert planner.ended_at > planner.started_at
    assert pipeline.report.total.gpu_energy_kwh > planner.gpu_energy_kwh


async def test_concurrent_scopes_divide_the_energy_they_share_by_weight(
    stand_in_nvidia_smi, quiet_home
):
    async def step(name: str, weight: float) -> None:
        async with pipeline.agent_scope(name, weight=weight):
            await asyncio.sleep(0.6)

    async with wattline.Pipeline(interval_ms=100) as pipeline:
        await asyncio.gather(step("heavy", 3), step("light", 1))
        report = await pipeline.flush()
    steps = {step.name: step for step in report.agent_scopes}
    heavy, light = steps["heavy"], steps["light"]
    assert (heavy.weight, light.weight) == (3.0, 1.0)
    # Live together (within the event loop's hop): 3 : 1 of what they shared, while
    # each window holds all of it.
    ratio = heavy.attributed_gpu_energy_kwh / light.attributed_gpu_energy_kwh
    assert 2.7 < ratio < 3.3, ratio
    shared = heavy.attributed_gpu_energy_kwh + light.attributed_gpu_energy_kwh
    assert shared < 1.1 * min(heavy.gpu_energy_kwh, light.gpu_energy_kwh)
    gpu = next(domain for domain in report.domains if domain.domain == "gpu")
    assert shared + gpu.unattributed_kwh == pytest.approx(gpu.energy_kwh, rel=1e-9)
    assert report.scope_attribution == "process-share-then-weight"
    with pytest.raises(wattline.WattlineError, match="weight"):
        wattline.agent_scope("bad", weight=0)


async def test_the_report_has_every_json_field_as_an_attribute_and_the_clis_table(quiet_home):
    async with wattline.Pipeline(gpu=False) as pipeline:
        with pipeline.agent_scope("step"):
            pass
        report = await pipeline.flush()
    data = report.to_dict()
    assert data == json.loads(json.dumps(data)), "plain JSON data"
    for key in data:
        getattr(report, key)  # every field is an attribute
    assert report.total.to_dict() == data["total"]
    assert report.cost_per_kwh.origin.kind == "default"
    with pytest.raises(AttributeError):
        report.total = None  # type: ignore[misc]
    text = str(report)
    assert text.startswith("wattline energy report"), text
    assert "agent step" in text
    assert "GPU energy not measured: GPU reading is off" in text


async def test_collect_in_a_pipeline_has_a_rate_on_its_second_sample(quiet_home):
    async with wattline.Pipeline(gpu=False) as pipeline:
        first = await pipeline.collect()
        busy(0.2)
        second = await pipeline.collect()
    assert first.cpu.consumption_rate is None
    assert second.cpu.consumption_rate is not None
    assert second.cpu.consumption_rate.unit == "logical_processors"
    assert isinstance(second.cpu.consumption_rate.value, float)


async def test_a_cancelled_wait_leaves_the_pipeline_working(quiet_home):
    async with wattline.Pipeline(gpu=False) as pipeline:
        waiting = asyncio.ensure_future(pipeline.collect())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        snapshot = await pipeline.collect()
        assert snapshot.cpu is not None
        scope = pipeline.agent_scope("after-cancel")
        async with scope:
            pass
    assert [step.name for step in pipeline.report.agent_scopes] == ["after-cancel"]


async def test_a_pipeline_starts_once(quiet_home):
    pipeline = wattline.Pipeline(gpu=False)
    await pipeline.start()
    with pytest.raises(wattline.WattlineError):
        await pipeline.start()
    first = await pipeline.shutdown()
    assert await pipeline.shutdown() is first, "shutting down again gives the same report"
    with pytest.raises(wattline.WattlineError, match="not running"):
        await pipeline.collect()

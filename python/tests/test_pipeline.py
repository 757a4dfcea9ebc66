"""The async pipeline: agent scopes (context managers and decorators) get their
energy from a stand-in `nvidia-smi`, the report has every field of the JSON report,
and cancellation leaves the pipeline working."""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import threading
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


async def test_concurrent_collects_each_get_their_own_snapshot_and_a_cancelled_one_harms_none(
    quiet_home,
):
    async with wattline.Pipeline(gpu=False) as pipeline:
        waits = [asyncio.ensure_future(pipeline.collect()) for _ in range(12)]
        await asyncio.sleep(0)  # every native call has started
        waits[3].cancel()
        results = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 60)
    assert isinstance(results[3], asyncio.CancelledError)
    snapshots = [result for index, result in enumerate(results) if index != 3]
    assert all(isinstance(snapshot, wattline.Snapshot) for snapshot in snapshots), results
    # Each is a collection of its own, not one result handed to every waiter.
    assert len({snapshot.timestamp for snapshot in snapshots}) == len(snapshots)


async def test_many_collects_cancelled_at_random_moments_all_settle(quiet_home):
    """Rounds of collects, some cancelled before they start, some while their native
    call runs: every other one gets its snapshot, none is left waiting."""
    from wattline import _pipeline

    chooser = random.Random(20261203)
    loop = asyncio.get_running_loop()
    async with wattline.Pipeline(gpu=False) as pipeline:
        for _ in range(8):
            waits = [asyncio.ensure_future(pipeline.collect()) for _ in range(40)]
            cancelled = set(chooser.sample(range(40), 12))
            for index in sorted(cancelled)[:4]:
                waits[index].cancel()  # before it starts
            await asyncio.sleep(0)
            for index in sorted(cancelled)[4:]:
                loop.call_later(chooser.uniform(0, 0.02), waits[index].cancel)
            results = await asyncio.wait_for(
                asyncio.gather(*waits, return_exceptions=True), 60
            )
            for index, result in enumerate(results):
                if index in cancelled and isinstance(result, asyncio.CancelledError):
                    continue  # a late cancel may find it done: then it has its snapshot
                assert isinstance(result, wattline.Snapshot), (index, result)
        await asyncio.sleep(0.5)  # the cancelled calls' results arrive and are dropped
        assert _pipeline._completions_of(loop)._waiting == {}


def test_collects_on_two_event_loops_in_two_threads_settle_on_their_own_loops(quiet_home):
    failures = []

    def run_loop() -> None:
        async def collect_twice() -> None:
            async with wattline.Pipeline(gpu=False) as pipeline:
                for _ in range(5):
                    snapshot = await pipeline.collect()
                    assert snapshot.cpu is not None

        try:
            asyncio.run(collect_twice())
        except BaseException as error:  # reported below, from the test's thread
            failures.append(error)

    threads = [threading.Thread(target=run_loop, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []


def test_event_loops_run_one_after_another_leave_no_pipes_behind(quiet_home):
    """Each loop gets a pipe of its own for finished collections; a closed loop's is
    closed, even when the loop closed with a collection in flight."""

    def one_loop() -> None:
        async def collect() -> None:
            async with wattline.Pipeline(gpu=False) as pipeline:
                await pipeline.collect()
                asyncio.ensure_future(pipeline.collect())  # in flight at the close
                await asyncio.sleep(0)

        asyncio.run(collect())

    one_loop()
    time.sleep(0.5)  # the last call in flight ends
    descriptors = len(os.listdir("/dev/fd"))
    for _ in range(20):
        one_loop()
    time.sleep(0.5)
    # Two per loop kept would be forty more.
    assert len(os.listdir("/dev/fd")) <= descriptors + 2


def test_a_forked_child_starts_and_uses_a_pipeline_of_its_own(quiet_home):
    """The parent's runtime threads do not survive a fork: the child's pipeline runs on
    a runtime of its own (on the parent's, starting it waited for ever), and so does
    the module-level collect()."""

    async def one_pipeline() -> None:
        async with wattline.Pipeline(gpu=False) as pipeline:
            assert (await pipeline.collect()).cpu is not None

    async def module_level() -> None:
        assert (await wattline.collect()).cpu is not None

    asyncio.run(one_pipeline())
    asyncio.run(module_level())
    child = os.fork()
    if child == 0:  # the child: its exit status is the verdict
        code = 1
        try:
            asyncio.run(one_pipeline())
            asyncio.run(module_level())
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(child, 9)
        os.waitpid(child, 0)
        pytest.fail("the child's pipeline did not start within 60 s")
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_fork_while_another_thread_calls_in_leaves_the_child_free(quiet_home, monkeypatch):
    """Forking while another thread is inside a native call (a DataLoader forking its
    workers while agent steps run): the child's first call must not wait for a lock the
    parent's thread held at the fork. Each call here goes through the runtime and fails
    at once (no host endpoint), so the parent's thread is in and out of it all the time.
    """
    from wattline import _native

    for name in [name for name in os.environ if name.startswith("WATTLINE_HOST_")]:
        monkeypatch.delenv(name)

    def call_in() -> None:
        try:
            _native.host_start_scope("step")
        except _native.WattlineError:
            pass

    stop = threading.Event()

    def keep_calling() -> None:
        while not stop.is_set():
            call_in()

    caller = threading.Thread(target=keep_calling)
    caller.start()
    children = []
    try:
        for _ in range(60):
            child = os.fork()
            if child == 0:  # the child: its exit status is the verdict
                code = 1
                try:
                    call_in()
                    code = 0
                finally:
                    os._exit(code)
            children.append(child)
    finally:
        stop.set()
        caller.join()
    deadline = time.monotonic() + 30
    stuck = []
    for child in children:
        while True:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            if time.monotonic() > deadline:
                os.kill(child, 9)
                os.waitpid(child, 0)
                stuck.append(child)
                break
            time.sleep(0.01)
    assert not stuck, f"{len(stuck)} of {len(children)} children never returned from their call"


async def test_a_snapshot_is_handed_over_without_the_gil(quiet_home):
    """The runtime thread that finishes a collection leaves it for the loop without
    taking the GIL: it is waiting though this thread never lets the GIL go."""
    from wattline import _native

    async with wattline.Pipeline(gpu=False) as pipeline:
        await pipeline.collect()  # the first sample's baselines
        completions = _native.Completions()
        interval = sys.getswitchinterval()
        # No other thread may take the GIL from this one for the next minute.
        sys.setswitchinterval(60.0)
        try:
            pipeline._running().collect_json_into(completions, 7)
            deadline = time.monotonic() + 20.0
            taken = []
            while not taken and time.monotonic() < deadline:
                taken = completions.take()  # holds the GIL throughout
        finally:
            sys.setswitchinterval(interval)
    assert len(taken) == 1, "no snapshot within 20 s while this thread held the GIL"
    token, text, error = taken[0]
    assert (token, error) == (7, None)
    assert "cpu" in json.loads(text)


async def test_a_pipeline_starts_once(quiet_home):
    pipeline = wattline.Pipeline(gpu=False)
    await pipeline.start()
    with pytest.raises(wattline.WattlineError):
        await pipeline.start()
    first = await pipeline.shutdown()
    assert await pipeline.shutdown() is first, "shutting down again gives the same report"
    with pytest.raises(wattline.WattlineError, match="not running"):
        await pipeline.collect()

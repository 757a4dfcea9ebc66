"""`measure()` without asyncio, again and again in one process (a notebook): each use
is a new pipeline fully stopped at its end, with no thread or descriptor left."""

from __future__ import annotations

import os
import threading

import wattline


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_measure_gives_a_report(quiet_home):
    with wattline.measure(gpu=False, interval_ms=100) as measurement:
        with measurement.agent_scope("work"):
            sum(i * i for i in range(200_000))
    assert measurement.report is not None
    assert [step.name for step in measurement.report.agent_scopes] == ["work"]
    assert measurement.report.ended_at >= measurement.report.started_at


def test_measure_decorates_a_function_with_a_new_pipeline_per_call(quiet_home):
    @wattline.measure(gpu=False)
    def train(steps: int) -> int:
        return sum(range(steps))

    assert train(1000) == 499500
    first = train.report
    assert train(10) == 45
    assert train.report is not None and train.report is not first
    assert train.report.started_at >= first.ended_at


def test_measure_again_and_again_leaks_no_thread_or_descriptor(quiet_home):
    for _ in range(3):  # the process-wide runtime and its pools start here
        with wattline.measure(gpu=False, interval_ms=50):
            pass
    before = (threads(), descriptors())
    for _ in range(15):
        with wattline.measure(gpu=False, interval_ms=50) as measurement:
            sum(range(10_000))
        assert measurement.report is not None
    after = (threads(), descriptors())
    assert after[0] <= before[0] + 2, f"threads {before[0]} -> {after[0]}"
    assert after[1] <= before[1], f"descriptors {before[1]} -> {after[1]}"
    assert threading.active_count() == 1, "no Python thread left running"

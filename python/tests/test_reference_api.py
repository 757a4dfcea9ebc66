"""Code written for the reference runs on wattline with only the package name changed:
the specification's snippet, `plugin.activate` + `resource_metrics.collect()`, and the
module-level `collect()` as one series (rates from the second call), each beside the
reference's own behaviour in the same process. And the GPU source hook."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest

import wattline
from wattline import plugin, resource_metrics

# The specification's "Collect One Snapshot" Python example, verbatim.
REFERENCE_SNIPPET = """\
import asyncio
from nemo_relay import plugin, resource_metrics

async def main() -> None:
    config = plugin.PluginConfig(
        components=[plugin.ComponentSpec(kind="resource_metrics")]
    )
    async with plugin.activate(config):
        snapshot = await resource_metrics.collect()
        print(snapshot)

asyncio.run(main())
"""


def run_python(source: str, home) -> subprocess.CompletedProcess:
    environment = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg"))
    return subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        env=environment,
        cwd=str(home),
        timeout=120,
    )


def test_the_references_snippet_runs_with_only_the_package_name_changed(reference, quiet_home):
    theirs = run_python(REFERENCE_SNIPPET, quiet_home)
    ours = run_python(REFERENCE_SNIPPET.replace("nemo_relay", "wattline"), quiet_home)
    assert "from wattline import plugin, resource_metrics" in REFERENCE_SNIPPET.replace(
        "nemo_relay", "wattline"
    )
    # The reference may crash at interpreter exit after printing; its output counts.
    assert theirs.stdout.startswith("ResourceMetricsSnapshot("), theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.startswith("Snapshot(timestamp="), ours.stdout


SERIES_PROGRAM = textwrap.dedent(
    """
    import asyncio, json, time
    from nemo_relay import plugin, resource_metrics
    import wattline

    def rates(snapshot):
        return {
            "cpu": snapshot.cpu.consumption_rate is not None,
            "network": snapshot.network.system is None
            or snapshot.network.system.receive_throughput is not None,
        }

    def busy(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    async def main():
        config = plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
        async with plugin.activate(config):
            theirs = [await resource_metrics.collect()]
            busy(0.3)
            theirs.append(await resource_metrics.collect())
            busy(0.3)
            theirs.append(await resource_metrics.collect())
        ours = [await wattline.collect()]
        busy(0.3)
        ours.append(await wattline.collect())
        busy(0.3)
        ours.append(await wattline.collect())
        print(json.dumps({"theirs": [rates(s) for s in theirs], "ours": [rates(s) for s in ours]}))

    asyncio.run(main())
    """
)


def test_module_level_collect_is_one_series_as_the_references_collect(reference, quiet_home):
    finished = run_python(SERIES_PROGRAM, quiet_home)
    line = [text for text in finished.stdout.splitlines() if text.startswith("{")]
    assert line, finished.stderr
    import json

    seen = json.loads(line[-1])
    no_rate = {"cpu": False, "network": False}
    with_rate = {"cpu": True, "network": True}
    # The reference: only the first sample of the series lacks rates.
    assert seen["theirs"] == [no_rate, with_rate, with_rate], seen
    # wattline's module-level collect(): the same.
    assert seen["ours"] == seen["theirs"], seen


async def test_activate_then_collect_is_one_series_and_needs_an_active_host(quiet_home):
    config = plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
    async with plugin.activate(config) as activation:
        assert activation.is_active
        # One host per process, as the reference.
        with pytest.raises(wattline.WattlineError, match="conflict"):
            await plugin.initialize(config)
        first = await resource_metrics.collect()
        await asyncio.sleep(0.3)
        second = await resource_metrics.collect()
    assert not activation.is_active
    assert first.cpu.consumption_rate is None
    assert second.cpu.consumption_rate is not None
    assert isinstance(second, resource_metrics.ResourceMetricsSnapshot)
    with pytest.raises(
        wattline.WattlineError, match="requires an active resource_metrics component"
    ):
        await resource_metrics.collect()
    # A mapping in the reference's JSON shape (policy included) is taken too; bad
    # fields are named.
    async with plugin.activate(
        {"version": 1, "components": [{"kind": "resource_metrics"}], "policy": {}}
    ):
        assert (await resource_metrics.collect()).cpu is not None
    bad = plugin.ComponentSpec(kind="resource_metrics", config={"bogus": 1})
    with pytest.raises(wattline.ConfigError, match=r"components\[0\]\.config\.bogus"):
        await plugin.initialize(plugin.PluginConfig(components=[bad]))


@dataclasses.dataclass
class Device:
    index: int
    uuid: str
    memory_used: float
    utilization: float
    power_draw: float


class FixedGpu:
    """Two devices, as a vendor tool would answer."""

    name = "fixed"

    def __init__(self) -> None:
        self.calls = 0

    def sample(self):
        self.calls += 1
        return [
            {"index": 0, "uuid": "GPU-a", "memory_used": 1024, "utilization": 40, "power_draw": 250},
            Device(index=1, uuid="GPU-b", memory_used=2.5, utilization=0, power_draw=60),
        ]


class AsyncGpu:
    async def sample(self):
        await asyncio.sleep(0)
        return [{"index": 0, "uuid": "GPU-c", "memory_used": 10}]


async def test_a_python_gpu_source_replaces_selection_and_none_turns_gpu_off(quiet_home):
    source = FixedGpu()
    try:
        wattline.set_gpu_source(lambda: source)
        async with wattline.Pipeline() as pipeline:
            snapshot = await pipeline.collect()
        devices = snapshot.gpu.device_metrics
        assert [device.device_identifier for device in devices] == ["GPU-a", "GPU-b"]
        # MiB in, KiB out (the snapshot's default unit): 1024 MiB = 1048576 KiB.
        assert devices[0].memory_used.value == 1024 * 1024
        assert devices[1].memory_used.value == int(2.5 * 1024)
        assert devices[0].compute_utilization.value == 40
        assert source.calls >= 1
        # Its power reaches the energy stage: the report names the source.
        assert "fixed" in (pipeline.report.gpu_source or "")

        wattline.set_gpu_source(lambda: AsyncGpu())
        async with plugin.activate(
            plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
        ):
            snapshot = await resource_metrics.collect()
        assert [device.device_identifier for device in snapshot.gpu.device_metrics] == ["GPU-c"]

        wattline.set_gpu_source(lambda: None)
        async with wattline.Pipeline() as pipeline:
            snapshot = await pipeline.collect()
        assert snapshot.gpu is None
    finally:
        wattline.set_gpu_source(None)
    with pytest.raises(TypeError, match="factory"):
        wattline.set_gpu_source(FixedGpu())  # type: ignore[arg-type]

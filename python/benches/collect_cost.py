"""Per-call cost of collect() from Python, wattline beside the reference system
(nemo-relay), in one process, one run: wall and CPU time per call, medians, and the
ratio to the reference. Not a test: figures to read on a quiet machine.

    .ci/venv/bin/python python/benches/collect_cost.py [calls]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time


async def per_call(collect, calls: int) -> "tuple[float, float]":
    await collect()  # the first sample of a series starts its baselines
    walls, cpus = [], []
    for _ in range(calls):
        wall, cpu = time.perf_counter(), time.process_time()
        await collect()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e6, statistics.median(cpus) * 1e6


async def main(calls: int) -> None:
    import wattline

    rows = []
    try:
        from nemo_relay import plugin, resource_metrics

        config = plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
        async with plugin.activate(config):
            rows.append(("nemo-relay resource_metrics.collect() (active plugin)", *await per_call(resource_metrics.collect, calls)))
    except ImportError:
        print("nemo-relay not installed: no reference figure", file=sys.stderr)
    async with wattline.Pipeline(gpu=False) as pipeline:
        rows.append(("wattline Pipeline.collect() (running pipeline)", *await per_call(pipeline.collect, calls)))
    rows.append(("wattline.collect() (starts and stops a pipeline)", *await per_call(lambda: wattline.collect(), max(calls // 5, 5))))

    reference = rows[0][1] if rows and rows[0][0].startswith("nemo-relay") else None
    print(f"collect() per call, process-tree scope of this process, median of {calls}")
    print(f"{'':56} {'wall µs':>10} {'CPU µs':>10} {'wall ratio':>11}")
    for name, wall, cpu in rows:
        ratio = f"{wall / reference:.2f}" if reference else "-"
        print(f"{name:56} {wall:10.0f} {cpu:10.0f} {ratio:>11}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 50))

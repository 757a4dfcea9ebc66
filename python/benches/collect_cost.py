"""Per-call cost of collect() from Python, wattline beside the reference system
(nemo-relay), in one process, one run: wall and CPU time per call, medians, and the
ratio to the reference. The two running pipelines' calls alternate, so drift in the
machine's load hits both alike. Not a test: figures to read on a quiet machine.

    .ci/venv/bin/python python/benches/collect_cost.py [calls]

``--reference-json`` measures only the reference and prints its figures as JSON (the
Node.js bench, node/bench/collect_cost.js, runs it beside its own). ``--idle-reference``
activates the reference's plugin as the measuring process has it, prints ``ready`` and
waits for standard input to close: a process like the reference's own, for the
Node.js bench to measure too.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time


async def per_call(collects, calls: int) -> "list[tuple[float, float]]":
    """Median wall and CPU µs per call of each of ``collects``, called in turn."""
    for collect in collects:
        await collect()  # the first sample of a series starts its baselines
    walls = [[] for _ in collects]
    cpus = [[] for _ in collects]
    for _ in range(calls):
        for index, collect in enumerate(collects):
            wall, cpu = time.perf_counter(), time.process_time()
            await collect()
            walls[index].append(time.perf_counter() - wall)
            cpus[index].append(time.process_time() - cpu)
    return [
        (statistics.median(wall) * 1e6, statistics.median(cpu) * 1e6)
        for wall, cpu in zip(walls, cpus)
    ]


def reference_active() -> "contextlib.AbstractAsyncContextManager":
    """The reference's plugin, active with resource_metrics; ImportError without it."""
    from nemo_relay import plugin

    config = plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
    return plugin.activate(config)


async def reference_per_call(calls: int) -> "tuple[float, float]":
    from nemo_relay import resource_metrics

    async with reference_active():
        return (await per_call([resource_metrics.collect], calls))[0]


async def main(calls: int) -> None:
    import wattline

    rows = []
    # The reference reads `private` memory (a page walk) at every call; wattline's
    # default reads it again only as its CPU budget allows, so back-to-back calls
    # reuse it. The second pipeline reads it at every call, like for like.
    every_read = {
        "version": 1,
        "components": [
            {"kind": "resource_metrics", "config": {"memory": {"private_max_cpu_share": 1}}}
        ],
    }
    async with wattline.Pipeline(gpu=False) as pipeline, wattline.Pipeline(
        every_read, gpu=False
    ) as every_read_pipeline:
        collects = [pipeline.collect, every_read_pipeline.collect]
        try:
            from nemo_relay import resource_metrics

            async with reference_active():
                reference, *ours = await per_call([resource_metrics.collect, *collects], calls)
            rows.append(("nemo-relay resource_metrics.collect() (active plugin)", *reference))
        except ImportError:
            print("nemo-relay not installed: no reference figure", file=sys.stderr)
            ours = await per_call(collects, calls)
        rows.append(("wattline Pipeline.collect() (running pipeline)", *ours[0]))
        rows.append(("  the same, private read at every call (share 1)", *ours[1]))
    (one_shot,) = await per_call([lambda: wattline.collect()], max(calls // 5, 5))
    rows.append(("wattline.collect() (starts and stops a pipeline)", *one_shot))

    reference = rows[0][1] if rows[0][0].startswith("nemo-relay") else None
    print(f"collect() per call, process-tree scope of this process, median of {calls}")
    print(f"{'':56} {'wall µs':>10} {'CPU µs':>10} {'wall ratio':>11}")
    for name, wall, cpu in rows:
        ratio = f"{wall / reference:.2f}" if reference else "-"
        print(f"{name:56} {wall:10.0f} {cpu:10.0f} {ratio:>11}")


async def idle_reference() -> None:
    """The reference's plugin active, as in ``reference_per_call``, until stdin closes."""
    from nemo_relay import resource_metrics

    async with reference_active():
        await resource_metrics.collect()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    if "--idle-reference" in sys.argv:
        asyncio.run(idle_reference())
        sys.exit(0)
    arguments = [argument for argument in sys.argv[1:] if argument != "--reference-json"]
    calls = int(arguments[0]) if arguments else 50
    if "--reference-json" in sys.argv:
        import json

        wall, cpu = asyncio.run(reference_per_call(calls))
        print(json.dumps({"wall_us": wall, "cpu_us": cpu}))
    else:
        asyncio.run(main(calls))

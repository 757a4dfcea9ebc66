"""Per-scope cost from Python: an Agent scope opened and ended (``with`` and ``async
with``), beside an OpenTelemetry SDK span started and ended in the same process (the
SDK's BatchSpanProcessor in front of an exporter that discards), one run, medians of
wall and CPU time, and the ratio to the span. Not a test: figures to read.

    .ci/venv/bin/pip install opentelemetry-sdk   # the yardstick, once
    .ci/venv/bin/python python/benches/scope_cost.py [rounds]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time


def per_round_sync(body, rounds: int) -> "tuple[float, float]":
    for _ in range(max(rounds // 10, 1)):
        body()
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        body()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e6, statistics.mean(cpus) * 1e6


async def per_round_async(body, rounds: int) -> "tuple[float, float]":
    for _ in range(max(rounds // 10, 1)):
        await body()
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        await body()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1e6, statistics.mean(cpus) * 1e6


def span_row(rounds: int):
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        print("opentelemetry-sdk not installed: no span yardstick (see the docstring)", file=sys.stderr)
        return None

    class Discard(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    tracer = provider.get_tracer("bench")

    def body() -> None:
        with tracer.start_as_current_span("step"):
            pass

    row = ("OpenTelemetry SDK span (with)", *per_round_sync(body, rounds))
    provider.shutdown()
    return row


async def main(rounds: int) -> None:
    import wattline

    rows = []
    span = span_row(rounds)
    if span:
        rows.append(span)
    async with wattline.Pipeline(gpu=False) as pipeline:

        def sync_body() -> None:
            with pipeline.agent_scope("step"):
                pass

        async def async_body() -> None:
            async with pipeline.agent_scope("step"):
                pass

        rows.append(("wattline agent_scope (with)", *per_round_sync(sync_body, rounds)))
        rows.append(("wattline agent_scope (async with)", *await per_round_async(async_body, rounds)))

    reference = span[1] if span else None
    print(f"one scope opened and ended, median wall and mean CPU of {rounds} rounds")
    print(f"{'':40} {'wall µs':>9} {'CPU µs':>9} {'× span':>7}")
    for name, wall, cpu in rows:
        ratio = f"{wall / reference:.1f}" if reference else "-"
        print(f"{name:40} {wall:9.1f} {cpu:9.1f} {ratio:>7}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000))

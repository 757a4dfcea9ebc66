"""Per-scope cost from Python: an Agent scope opened and ended (``with`` and ``async
with``), without a GPU source and with one (a stand-in ``nvidia-smi`` first on PATH,
answering in the real CSV format as a 250 W H200, its power stream included), beside
an OpenTelemetry SDK span started and ended in the same process (the SDK's
BatchSpanProcessor in front of an exporter that discards), and that span again with
``wattline.spans.GenAISpanProcessor`` making it a step; one run, medians of wall and
CPU time, and the ratio to the span. Not a test: figures to read.

    .ci/venv/bin/pip install opentelemetry-sdk   # the yardstick, once
    .ci/venv/bin/python python/benches/scope_cost.py [rounds]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time

# A stand-in nvidia-smi in the real CSV format: one H200 at 250 W, and its loop mode
# for the power stream.
STAND_IN_NVIDIA_SMI = r"""#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
"""


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


def span_row(rounds: int, extra_processor=None, label="OpenTelemetry SDK span (with)"):
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
    if extra_processor is not None:
        provider.add_span_processor(extra_processor)
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    tracer = provider.get_tracer("bench")
    attributes = {"gen_ai.operation.name": "chat"}

    def body() -> None:
        with tracer.start_as_current_span("chat model", attributes=attributes):
            pass

    row = (label, *per_round_sync(body, rounds))
    provider.shutdown()
    return row


async def main(rounds: int) -> None:
    import wattline

    rows = []
    span = span_row(rounds)
    if span:
        rows.append(span)
    async def scope_rows(pipeline, label: str) -> None:
        def sync_body() -> None:
            with pipeline.agent_scope("step"):
                pass

        async def async_body() -> None:
            async with pipeline.agent_scope("step"):
                pass

        rows.append((f"wattline agent_scope (with){label}", *per_round_sync(sync_body, rounds)))
        rows.append(
            (f"wattline agent_scope (async with){label}", *await per_round_async(async_body, rounds))
        )

    async with wattline.Pipeline(gpu=False) as pipeline:
        await scope_rows(pipeline, ", no GPU")
        # The same span with wattline.spans turning it into a step: the processor's
        # cost is this row less the span's.
        import wattline.spans

        processed = span_row(
            rounds,
            wattline.spans.GenAISpanProcessor(pipeline),
            "SDK span made a step (GenAISpanProcessor), no GPU",
        )
        if processed:
            rows.append(processed)
    with tempfile.TemporaryDirectory() as folder:
        program = os.path.join(folder, "nvidia-smi")
        with open(program, "w") as file:
            file.write(STAND_IN_NVIDIA_SMI)
        os.chmod(program, 0o755)
        os.environ["PATH"] = folder + os.pathsep + os.environ.get("PATH", "")
        async with wattline.Pipeline() as pipeline:
            await scope_rows(pipeline, ", GPU")
        source = pipeline.report.gpu_source if pipeline.report else None

    reference = span[1] if span else None
    print(f"one scope opened and ended, median wall and mean CPU of {rounds} rounds")
    print(f"{'':48} {'wall µs':>9} {'CPU µs':>9} {'× span':>7}")
    for name, wall, cpu in rows:
        ratio = f"{wall / reference:.1f}" if reference else "-"
        print(f"{name:48} {wall:9.1f} {cpu:9.1f} {ratio:>7}")
    print(f"GPU source of the GPU rows: {source}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000))

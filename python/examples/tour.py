import asyncio
import time

import wattline


def plan() -> None:
    time.sleep(0.2)  # the step's real work


async def main() -> None:
    snapshot = await wattline.collect()  # the process tree rooted here
    print(snapshot.cpu.total_time.value, snapshot.cpu.total_time.unit)  # e.g. 130 milliseconds
    plan()
    rate = (await wattline.collect()).cpu.consumption_rate  # one series: rates from the 2nd call
    print(rate.value, rate.unit)  # e.g. 0.02 logical_processors
    async with wattline.Pipeline(interval_ms=1000) as pipeline:
        async with pipeline.agent_scope("planner"):  # also `with`, and a decorator
            plan()
        print(await pipeline.flush())  # the CLI's table
    print(pipeline.report.total.energy_kwh)  # None where no GPU or RAPL is readable


asyncio.run(main())

with wattline.measure() as m:  # no asyncio; a new pipeline each time
    with m.agent_scope("training"):
        plan()
print([step.name for step in m.report.agent_scopes], m.report.to_dict()["currency"])

with wattline.agent_scope("planner"):  # under `wattline run`: the run's pipeline
    plan()

# Traced with OpenTelemetry? Its GenAI spans (agents, model and tool calls) become steps:
#     provider.add_span_processor(wattline.spans.GenAISpanProcessor())

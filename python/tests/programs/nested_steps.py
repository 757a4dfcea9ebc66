"""One nested agent program, run under the reference system (`nemo-relay` 0.10.4) or
under wattline, each writing its ATOF event file: tests/test_nesting.py compares their
scope trees. Arguments: `reference` or `wattline`, then the output directory.

The program is written once against `step(name)`; only the adapter differs: the
reference's `nemo_relay.scope.scope(name, Agent)`, wattline's
`pipeline.agent_scope(name)`, each nesting in the scope current when it is entered.
"""

import asyncio
import contextlib
import sys


async def program(step) -> None:
    async with step("request"):
        await asyncio.sleep(0.05)
        async with step("plan"):
            async with step("lookup"):
                await asyncio.sleep(0.05)
            async with step("rank"):
                await asyncio.sleep(0.05)
        async with step("summarize"):
            async with step("draft"):
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.05)
    async with step("followup"):
        await asyncio.sleep(0.05)


async def under_reference(output: str) -> None:
    import nemo_relay
    from nemo_relay import plugin

    config = plugin.PluginConfig(
        components=[
            plugin.ComponentSpec(
                kind="observability",
                config={
                    "version": 4,
                    "atof": {"enabled": True, "sinks": [{"type": "file", "output_directory": output}]},
                },
            )
        ]
    )

    @contextlib.asynccontextmanager
    async def step(name):
        with nemo_relay.scope.scope(name, nemo_relay.ScopeType.Agent):
            yield

    async with plugin.activate(config):
        await program(step)


async def under_wattline(output: str) -> None:
    import wattline

    async with wattline.Pipeline(gpu=False, atof_dir=output) as pipeline:
        await program(pipeline.agent_scope)


if __name__ == "__main__":
    run = {"reference": under_reference, "wattline": under_wattline}[sys.argv[1]]
    asyncio.run(run(sys.argv[2]))

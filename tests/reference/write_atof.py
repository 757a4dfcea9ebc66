"""Makes the reference system write its own ATOF file, for tests/atof_conformance.rs.

Run with the `nemo-relay` package (0.10.4). Arguments: the output directory, then
optionally a JSON object of `units` for `resource_metrics`. It prints its pid, waits
for a line on stdin (wattline is then measuring the same process tree), polls every
500 ms and opens the Agent scopes on the same schedule as the Rust side: 1.2 s under
the root, `planner` for 1.2 s, `coder` inside it for 1.2 s, then 0.8 s more. The
reference sometimes crashes on exit after writing: the test judges it by its file.
"""

import asyncio
import json
import sys

import nemo_relay
from nemo_relay import plugin


async def main() -> None:
    resource = {
        "measurement_scope": "process_tree",
        "polling": {"enabled": True, "interval_millis": 500},
    }
    if len(sys.argv) > 2:
        resource["units"] = json.loads(sys.argv[2])
    config = plugin.PluginConfig(
        components=[
            plugin.ComponentSpec(kind="resource_metrics", config=resource),
            plugin.ComponentSpec(
                kind="observability",
                config={
                    "version": 4,
                    "atof": {
                        "enabled": True,
                        "sinks": [{"type": "file", "output_directory": sys.argv[1]}],
                    },
                },
            ),
        ]
    )
    print(__import__("os").getpid(), flush=True)
    sys.stdin.readline()
    async with plugin.activate(config):
        await asyncio.sleep(1.2)
        with nemo_relay.scope.scope("planner", nemo_relay.ScopeType.Agent):
            await asyncio.sleep(1.2)
            with nemo_relay.scope.scope("coder", nemo_relay.ScopeType.Agent):
                await asyncio.sleep(1.2)
        await asyncio.sleep(0.8)


asyncio.run(main())

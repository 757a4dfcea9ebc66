"""Prints the reference system's snapshot of this process, then waits.

Run by tests/reference_conformance.rs with the `nemo-relay` package (0.10.4): it
activates `resource_metrics` for the scope named by the first argument (default
`application_process`, this Python process; `process_tree` is rooted here too),
collects twice so rates exist, prints the second snapshot as one JSON line, and keeps
the process alive until stdin closes so wattline can measure the same process.
"""

import asyncio
import json
import sys

from nemo_relay import plugin
from nemo_relay._native import _collect_resource_metrics


async def main() -> None:
    config = plugin.PluginConfig(
        components=[
            plugin.ComponentSpec(
                kind="resource_metrics",
                config={
                    "measurement_scope": sys.argv[1] if len(sys.argv) > 1 else "application_process",
                    "disk": {"filesystem_paths": ["/", "/nonexistent-wattline-path"]},
                    "network": {"interfaces": ["lo"]},
                },
            )
        ]
    )
    async with plugin.activate(config):
        await _collect_resource_metrics()
        await asyncio.sleep(0.3)
        snapshot = await _collect_resource_metrics()
        print(json.dumps(snapshot), flush=True)
        # Stay as measured: wattline reads this process while the plugin is active.
        sys.stdin.read()


asyncio.run(main())

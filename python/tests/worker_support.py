"""Writing a plugins.toml that runs a Python script as a worker plugin."""

from __future__ import annotations

import json
import sys
import textwrap


def worker_config(tmp_path, plugin_id: str, script, extra: str = ""):
    """A plugins.toml in `tmp_path` running `script` with this Python as the worker
    `plugin_id`; `extra` is more TOML for `[components.config]` (env, transport, and
    a `[components.config.config]` table last)."""
    config = tmp_path / "plugins.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            version = 1
            [[components]]
            kind = "worker"
            [components.config]
            plugin_id = "{plugin_id}"
            command = [{json.dumps(sys.executable)}, {json.dumps(str(script))}]
            """
        )
        + textwrap.dedent(extra)
    )
    return config

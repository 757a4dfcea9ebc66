"""Errors: a refused configuration names its file or argument, the field path and the
rule, as the CLI does; every error is a WattlineError; nothing panics into Python."""

from __future__ import annotations

import pytest

import wattline


def test_a_bad_plugins_toml_names_file_field_and_rule(tmp_path, quiet_home):
    config = tmp_path / "plugins.toml"
    config.write_text(
        'version = 1\n[[components]]\nkind = "resource_metrics"\n'
        "[components.config.polling]\ninterval_millis = 0\n"
    )
    with pytest.raises(wattline.ConfigError) as raised:
        wattline.Pipeline(config)._start_blocking()
    message = str(raised.value)
    assert str(config) in message
    assert "components[0].config.polling.interval_millis" in message
    assert "greater than zero" in message
    assert isinstance(raised.value, wattline.WattlineError)


async def test_a_mapping_config_is_checked_by_the_same_rules(quiet_home):
    bad = {"version": 1, "components": [{"kind": "resource_metrics", "config": {"bogus": 1}}]}
    with pytest.raises(wattline.ConfigError, match=r"<config>: components\[0\]\.config\.bogus"):
        await wattline.collect(config=bad)
    with pytest.raises(wattline.ConfigError, match="TOML has no null"):
        await wattline.collect(config={"version": 1, "components": None})


async def test_arguments_are_checked(quiet_home):
    with pytest.raises(wattline.ConfigError, match="scope: must be one of"):
        await wattline.collect(scope="everything")
    with pytest.raises(wattline.ConfigError, match="interval_ms: must be greater than zero"):
        await wattline.Pipeline(interval_ms=0).start()
    with pytest.raises(wattline.ConfigError, match="atof_dir"):
        await wattline.Pipeline(atof_dir="").start()
    with pytest.raises(wattline.ConfigError, match="otlp_endpoint"):
        await wattline.Pipeline(otlp_endpoint="not a url").start()
    with pytest.raises(wattline.WattlineError, match="cannot be measured"):
        await wattline.collect(scope="process_tree", pid=2**31 - 1)
    with pytest.raises(wattline.WattlineError, match="non-blank"):
        wattline.agent_scope("  ")


def test_a_disabled_resource_metrics_has_nothing_to_collect(quiet_home):
    import asyncio

    config = {"version": 1, "components": [{"kind": "resource_metrics", "enabled": False}]}
    with pytest.raises(wattline.ConfigError, match="nothing to collect"):
        asyncio.run(wattline.collect(config=config))


def test_the_readme_example_is_the_tour_and_it_runs(quiet_home):
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    tour = (root / "python" / "examples" / "tour.py").read_text()
    assert f"```python\n{tour}```\n" in (root / "README.md").read_text()
    finished = subprocess.run([sys.executable, "-c", tour], capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr
    assert "wattline energy report" in finished.stdout
    assert "['training'] USD" in finished.stdout


def test_every_error_is_a_runtime_error_as_the_references_are(tmp_path, quiet_home):
    # Code written for the reference catches RuntimeError: it catches wattline's too.
    assert issubclass(wattline.WattlineError, RuntimeError)
    assert issubclass(wattline.ConfigError, wattline.WattlineError)
    config = tmp_path / "plugins.toml"
    config.write_text("version = 1\n[[components]]\nkind = \"no_such_kind\"\n")
    with pytest.raises(RuntimeError):
        wattline.Pipeline(config)._start_blocking()

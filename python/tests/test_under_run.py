"""Under `wattline run`, module-level `agent_scope` marks the step in the run's own
pipeline over its host endpoint; outside it, a process-wide default pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import wattline

PROGRAM = textwrap.dedent(
    """
    import asyncio, time, wattline
    assert wattline.under_wattline_run()

    with wattline.agent_scope("planner"):
        time.sleep(0.5)

    @wattline.agent_scope("coder")
    async def code():
        await asyncio.sleep(0.3)

    asyncio.run(code())
    print("steps done")
    """
)


def test_steps_land_in_the_pipeline_of_wattline_run(wattline_binary, stand_in_nvidia_smi, quiet_home, tmp_path):
    atof = tmp_path / "runs"
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--interval", "100", "--report", "json",
         "--atof", str(atof), "--", sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    stdout = finished.stdout
    assert stdout.startswith("steps done"), stdout
    report = json.loads(stdout[stdout.index("{"):])
    steps = {step["name"]: step for step in report["agent_scopes"]}
    assert set(steps) == {"planner", "coder"}
    seconds = steps["planner"]["gpu_energy_kwh"] * 3_600_000 / 250.0
    assert 0.3 < seconds < 1.5, seconds
    events = [json.loads(line) for path in atof.glob("*.jsonl") for line in path.read_text().splitlines()]
    planner = [event for event in events if event["kind"] == "scope" and event["name"] == "planner"]
    assert [event["scope_category"] for event in planner] == ["start", "end"]
    assert planner[0]["attributes"] == ["remote"], "started over the host endpoint"


def test_outside_run_a_process_wide_pipeline_takes_the_steps(quiet_home):
    assert not wattline.under_wattline_run()
    with wattline.agent_scope("outside"):
        sum(range(100_000))
    report = wattline.default_pipeline_report()
    assert [step.name for step in report.agent_scopes] == ["outside"]
    assert report.agent_scopes[0].ended_at is not None

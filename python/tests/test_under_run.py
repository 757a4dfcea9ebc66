"""Under `wattline run`, module-level `agent_scope` marks the step in the run's own
pipeline over its host endpoint; outside it, a process-wide default pipeline."""

from __future__ import annotations

import datetime
import json
import pathlib
import subprocess
import sys
import textwrap

import wattline

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]

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


WEIGHTED = textwrap.dedent(
    """
    import asyncio, time, wattline

    try:
        wattline.agent_scope("unweighable", weight=0)
    except wattline.WattlineError as refused:
        print("refused:", refused)

    async def step(name, weight, after, seconds):
        await asyncio.sleep(after)
        async with wattline.agent_scope(name, weight=weight):
            await asyncio.sleep(seconds)

    async def steps():
        await asyncio.gather(step("retrieve", 3, 0.0, 1.0), step("rank", 1, 0.2, 0.6))

    asyncio.run(steps())
    # Still running a while after its last step: the readings after its end list it.
    time.sleep(0.5)
    print("weighted steps done")
    """
)

# The command's half of the stand-in: waits until it has listed the program twice,
# then becomes the program, keeping its pid.
AFTER_LISTED = REPOSITORY / "gpu" / "tests" / "fixtures" / "fake-smi" / "after_listed.sh"

WATTS = 250.0


def unix_seconds(stamp: str) -> float:
    """An RFC 3339 instant with up to nanoseconds (`...T12:00:00.123456789Z`)."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    at = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc)
    return at.timestamp() + (float("0." + fraction) if fraction else 0.0)


def weighted_parts(steps):
    """Each step's attributed energy, J, at the stand-in's constant power held by their
    one process: steps (start, end, weight), each stretch between two boundaries
    divided among the steps live in it by weight."""
    cuts = sorted(t for start, end, _ in steps for t in (start, end))
    parts = [0.0] * len(steps)
    for a, b in zip(cuts, cuts[1:]):
        live = [i for i, (start, end, _) in enumerate(steps) if start <= a and b <= end]
        weights = sum(steps[i][2] for i in live)
        for i in live:
            parts[i] += WATTS * (b - a) * steps[i][2] / weights
    return parts


def test_weights_from_the_module_level_api_divide_what_the_steps_share(
    wattline_binary, nvidia_smi_listing_the_command, quiet_home
):
    listed = nvidia_smi_listing_the_command / "listed"
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--interval", "100", "--report", "json",
         "--", "sh", str(AFTER_LISTED), str(listed), sys.executable, "-c", WEIGHTED],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    stdout = finished.stdout
    assert "weighted steps done" in stdout, stdout
    # Refused before anything is sent, naming the weight.
    assert "refused: agent scope weight 0: a positive, finite number" in stdout, stdout
    report = json.loads(stdout[stdout.index("{"):])
    steps = {step["name"]: step for step in report["agent_scopes"]}
    assert set(steps) == {"retrieve", "rank"}, steps
    retrieve, rank = steps["retrieve"], steps["rank"]
    assert (retrieve["weight"], rank["weight"]) == (3.0, 1.0)
    # The one process the stand-in listed is the program, which opened both steps.
    pids = {int(line) for line in listed.read_text().split()}
    assert pids == {retrieve["process_id"]} == {rank["process_id"]}, pids
    assert report["devices"][0]["attribution"] == "memory"
    # The closed form from the steps' own stamps: each window is 250 W × its own
    # duration; each attributed part its weight's share of every stretch it was live
    # in. The stamps are wall-clock times worked out from the monotonic instants energy
    # is cut at, at most 2 ms apart (0.5 J); a weight lost makes the split 1 : 1,
    # 37.5 J off.
    stamps = [
        (unix_seconds(step["started_at"]), unix_seconds(step["ended_at"]), weight)
        for step, weight in ((retrieve, 3.0), (rank, 1.0))
    ]
    for step, (start, end, _), part in zip((retrieve, rank), stamps, weighted_parts(stamps)):
        window = step["gpu_energy_kwh"] * 3_600_000
        attributed = step["attributed_gpu_energy_kwh"] * 3_600_000
        assert abs(window - WATTS * (end - start)) <= 0.5, (step["name"], window, end - start)
        assert abs(attributed - part) <= 0.5, (step["name"], attributed, part)


def test_outside_run_a_process_wide_pipeline_takes_the_steps(quiet_home):
    assert not wattline.under_wattline_run()
    with wattline.agent_scope("outside"):
        sum(range(100_000))
    report = wattline.default_pipeline_report()
    assert [step.name for step in report.agent_scopes] == ["outside"]
    assert report.agent_scopes[0].ended_at is not None

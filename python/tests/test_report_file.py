"""An event file read back into the report object: the concurrent-steps fixture
(tests/fixtures/concurrent_steps/, hand-worked figures in its expected.json) through
``wattline.report_from_atof``: each step's window and attributed figures, as the hand
gives them, and a folded step's part."""

from __future__ import annotations

import json
import pathlib

import pytest

import wattline

FIXTURE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "concurrent_steps"
JOULES_PER_KWH = 3.6e6


def fixture_run(name: str) -> "tuple[dict, dict]":
    expected = json.loads((FIXTURE / "expected.json").read_text())
    return expected, next(run for run in expected["runs"] if run["name"] == name)


def kwh(joules: float) -> float:
    return joules / JOULES_PER_KWH


def test_each_step_has_its_window_and_its_part():
    fixture, run = fixture_run("base")
    report = wattline.report_from_atof(FIXTURE / run["file"])
    assert isinstance(report, wattline.EnergyReport)
    assert report.currency == fixture["currency"]
    steps = {scope.name: scope for scope in report.agent_scopes}
    assert set(steps) == {step["name"] for step in run["steps"]}
    price, intensity = fixture["cost_per_kwh"], fixture["gco2e_per_kwh"]
    for step in run["steps"]:
        scope = steps[step["name"]]
        window = step["window_gpu_joules"] + step["window_cpu_joules"]
        part = step["attributed_gpu_joules"] + step["attributed_cpu_joules"]
        figures = {
            "gpu_energy_kwh": kwh(step["window_gpu_joules"]),
            "energy_kwh": kwh(window),
            "cost": kwh(window) * price,
            "co2_grams": kwh(window) * intensity,
            "attributed_gpu_energy_kwh": kwh(step["attributed_gpu_joules"]),
            "attributed_energy_kwh": kwh(part),
            "attributed_cost": kwh(part) * price,
            "attributed_co2_grams": kwh(part) * intensity,
        }
        for field, value in figures.items():
            assert getattr(scope, field) == pytest.approx(value, rel=1e-9, abs=1e-15), (
                step["name"],
                field,
            )
        assert scope.weight == step["weight"]
        assert scope.process_id == step["process"]
        assert (scope.ended_at - scope.started_at).total_seconds() == pytest.approx(
            step["to"] - step["from"]
        )
    gpu = next(domain for domain in report.domains if domain.domain == "gpu")
    assert gpu.unattributed_kwh == pytest.approx(kwh(run["unattributed_gpu_joules"]), rel=1e-9)
    # The CLI's table, from the same object.
    assert "agent request" in str(report)


def test_a_folded_step_keeps_its_part():
    _, run = fixture_run("base_folded")
    report = wattline.report_from_atof(FIXTURE / run["file"])
    kept = [scope.name for scope in report.agent_scopes]
    assert kept == [step["name"] for step in run["steps"] if step["detailed"]]
    folded = {entry.name: entry for entry in report.folded_scopes}
    for step in (step for step in run["steps"] if not step["detailed"]):
        part = kwh(step["attributed_gpu_joules"] + step["attributed_cpu_joules"])
        assert folded[step["name"]].count == 1
        assert folded[step["name"]].attributed_energy_kwh.sum == pytest.approx(part, rel=1e-9)


def test_a_file_that_cannot_be_read_is_named(tmp_path):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(wattline.WattlineError, match="missing.jsonl"):
        wattline.report_from_atof(missing)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"kind": "mark"\n')
    with pytest.raises(wattline.WattlineError, match="broken.jsonl"):
        wattline.report_from_atof(str(broken))

"""The snapshot's Python shape: against the reference system's own Python snapshot of
the same process, and against the JSON of `wattline collect`."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import os
import subprocess

import pytest

import wattline



def shape(value, path="", out=None):
    """Every path of a snapshot object: its field names, measurement number type and
    unit, list/dict/None-ness, leaf type."""
    out = {} if out is None else out
    if dataclasses.is_dataclass(value):
        names = tuple(f.name for f in dataclasses.fields(value) if not f.name.startswith("_"))
        if set(names) == {"value", "unit"}:
            out[path] = ("measurement", type(value.value).__name__, str(value.unit.value), type(value.unit).__name__)
            return out
        out[path] = ("object", names)
        for name in names:
            shape(getattr(value, name), f"{path}.{name}", out)
    elif isinstance(value, list):
        out[path] = ("list", bool(value))
        for item in value[:1]:
            shape(item, f"{path}[]", out)
    elif isinstance(value, dict):
        out[path] = ("dict",)
    elif value is None:
        out[path] = None
    elif isinstance(value, enum.Enum):
        out[path] = ("str",)
    else:
        out[path] = (type(value).__name__,)
    return out


def cli_collect(binary) -> str:
    """`wattline collect` of this process's tree, as printed."""
    return subprocess.run(
        [str(binary), "collect", "--scope", "process-tree", "--pid", str(os.getpid())],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


async def test_every_field_name_nesting_unit_and_null_is_the_references(reference, quiet_home):
    plugin, resource_metrics = reference
    config = plugin.PluginConfig(components=[plugin.ComponentSpec(kind="resource_metrics")])
    async with plugin.activate(config):
        theirs = await resource_metrics.collect()
    # Both the first sample of a series (module-level collect() continues one).
    async with wattline.Pipeline() as pipeline:
        ours = await pipeline.collect()

    their_shape, our_shape = shape(theirs), shape(ours)
    differences = {
        path: (their_shape.get(path, "missing"), our_shape.get(path, "missing"))
        for path in set(their_shape) | set(our_shape)
        if their_shape.get(path, "missing") != our_shape.get(path, "missing")
    }
    # GPU groups included: with no backend both give [] (the reason is in diagnostics).
    assert not differences, differences
    assert theirs.gpu.device_metrics == ours.gpu.device_metrics == []
    # Dataclass-level names too: the reference's classes are frozen dataclasses.
    assert dataclasses.fields(type(ours.cpu))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ours.cpu = None  # type: ignore[misc]
    # Same process, same scope: the same process coverage.
    assert ours.measurement_scope == theirs.measurement_scope == "process_tree"
    assert ours.process_sampling.visible_processes == theirs.process_sampling.visible_processes


async def test_types_are_python_types():
    snapshot = await wattline.collect()
    assert snapshot.timestamp.tzinfo is not None
    assert snapshot.timestamp.utcoffset() == datetime.timedelta(0)
    assert isinstance(snapshot.cpu.total_time.value, int), "milliseconds of CPU time are whole"
    assert snapshot.cpu.total_time.unit is wattline.DurationUnit.MILLISECONDS
    assert snapshot.cpu.total_time.unit == "milliseconds", "a str enum equals its JSON string"
    assert snapshot.operating_system == wattline.OperatingSystem.LINUX
    assert isinstance(snapshot.process_sampling.field_sampled_processes["cpu.total_time"], int)


def test_to_dict_is_the_json_of_wattline_collect_for_the_same_reading(wattline_binary, quiet_home):
    printed = cli_collect(wattline_binary)
    reading = json.loads(printed)
    snapshot = wattline.Snapshot.from_dict(reading)
    assert snapshot.to_dict() == reading
    # Nanoseconds survive the round trip although a datetime holds microseconds.
    assert snapshot.to_dict()["timestamp"] == reading["timestamp"]
    # A unit the spec does not name is refused, by the enum's own error.
    bad_unit = json.loads(printed)
    bad_unit["cpu"]["total_time"]["unit"] = "fortnights"
    with pytest.raises(ValueError, match="fortnights"):
        wattline.Snapshot.from_dict(bad_unit)
    # The snapshot shares no list or map with the dictionary it was made of.
    reading["process_sampling"]["field_sampled_processes"]["cpu.total_time"] = -1
    assert snapshot.process_sampling.field_sampled_processes["cpu.total_time"] != -1


async def test_our_collect_has_the_clis_keys_and_nesting(wattline_binary, quiet_home):
    ours = (await wattline.collect(scope="process_tree")).to_dict()
    printed = cli_collect(wattline_binary)
    theirs = json.loads(printed)

    def keys(value, path=""):
        if isinstance(value, dict) and not (set(value) == {"value", "unit"}):
            found = {path}
            for key, item in value.items():
                if path.endswith("field_sampled_processes"):
                    continue
                found |= keys(item, f"{path}.{key}")
            return found
        if isinstance(value, list) and value:
            return keys(value[0], f"{path}[]")
        return {path}

    assert keys(ours) == keys(theirs)


def test_a_class_whose_converter_cannot_be_built_fails_the_same_way_each_time():
    from wattline import _model

    @dataclasses.dataclass(frozen=True)
    class Broken:
        field: "NoSuchType"  # noqa: F821  (the point: it cannot be resolved)

    for _ in range(2):
        with pytest.raises(NameError, match="NoSuchType"):
            _model.from_json_value(Broken, {"field": 1})

"""The energy/cost report: every field of the JSON report (``wattline run --report
json``) as an attribute, nested objects as read-only records, ``to_dict()`` for the
JSON itself and ``str()`` for the CLI's table."""

from __future__ import annotations

import datetime as _datetime
import json
import os
from typing import Any, Dict, Iterator, Mapping, Union

from . import _native
from ._model import parse_timestamp

__all__ = ["EnergyReport", "Record", "report_from_atof"]

_TIMESTAMP_FIELDS = frozenset({"started_at", "ended_at"})


class Record(Mapping[str, Any]):
    """A read-only JSON object whose keys are also attributes (``record.energy_kwh``);
    nested objects are records too and ``*_at`` times are UTC ``datetime``s."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", dict(data))

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(name, self._data[name])
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return _wrap(key, self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __dir__(self) -> "list[str]":
        return sorted(set(super().__dir__()) | set(self._data))

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self._data.items())
        return f"{type(self).__name__}({fields})"

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object, as decoded by ``json.loads``."""
        return _unwrap(self._data)


def _wrap(key: str, value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(key, item) for item in value]
    if key in _TIMESTAMP_FIELDS and isinstance(value, str):
        return parse_timestamp(value)[0]
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, Record):
        return _unwrap(value._data)
    if isinstance(value, dict):
        return {key: _unwrap(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unwrap(item) for item in value]
    return value


class EnergyReport(Record):
    """What a run cost: ``total`` (``energy_kwh``, ``gpu_energy_kwh``, ``cost``,
    ``co2_grams`` …), ``devices``, ``domains``, ``cpu_zones``, ``agent_scopes`` (each
    step's window figures, ``energy_kwh`` …, overlap and never add up; its attributed
    ones, ``attributed_energy_kwh`` …, do), ``processes``, the factors used (``cost_per_kwh``,
    ``carbon_intensity``, ``pue``, each with its ``origin``), ``diagnostics`` and more,
    exactly the fields of the JSON report. Each measured figure has its ``receipt``
    (``method``, the 95% interval ``low_kwh`` to ``high_kwh``, ``resolution``); a step
    that called a model on another machine, its ``remote_call`` with the estimate."""

    __slots__ = ()

    started_at: _datetime.datetime
    ended_at: _datetime.datetime

    def __str__(self) -> str:
        return _native.report_table(json.dumps(self._data))


def report_from_atof(path: Union[str, "os.PathLike[str]"]) -> EnergyReport:
    """The report rebuilt from an event file written with ``atof_dir`` (or by
    ``wattline run --atof``): plain, zstd-compressed, or any part of a rotated set, as
    ``wattline report FILE`` rebuilds it. Raises ``WattlineError`` naming the file and
    line when it cannot be read."""
    return EnergyReport(json.loads(_native.report_json_from_atof(os.fspath(path))))

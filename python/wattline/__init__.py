"""wattline: what a program costs the machine it runs on (CPU, memory, processes,
disk, network, GPU) and the energy, money and CO2 behind it.

Three ways in:

- ``await wattline.collect()`` and ``async with wattline.Pipeline() as pipeline:``;
- ``with wattline.measure() as m: ...`` then ``m.report``, without asyncio;
- ``with wattline.agent_scope("planner"):`` marks a step; under ``wattline run`` it
  lands in the run's own pipeline.

Code written for the reference runs as it is with ``from wattline import plugin,
resource_metrics``; ``set_gpu_source`` plugs in a GPU source written in Python.
"""

from . import plugin, resource_metrics
from ._gpu import GpuDevice, GpuSource, set_gpu_source
from ._model import *  # noqa: F401,F403
from ._model import __all__ as _model_names
from ._native import ConfigError, WattlineError
from ._pipeline import (
    AgentScope,
    Measure,
    Pipeline,
    agent_scope,
    collect,
    default_pipeline_report,
    measure,
    under_wattline_run,
)
from ._report import EnergyReport, Record, report_from_atof
from ._scope import current_scope

__all__ = [
    *_model_names,
    "AgentScope",
    "ConfigError",
    "EnergyReport",
    "GpuDevice",
    "GpuSource",
    "Measure",
    "Pipeline",
    "Record",
    "WattlineError",
    "agent_scope",
    "collect",
    "current_scope",
    "default_pipeline_report",
    "measure",
    "plugin",
    "report_from_atof",
    "resource_metrics",
    "set_gpu_source",
    "under_wattline_run",
]

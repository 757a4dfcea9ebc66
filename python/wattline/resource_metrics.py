"""The reference's ``nemo_relay.resource_metrics``: ``await collect()`` on the active
plugin host (``wattline.plugin``), and the snapshot types under the reference's
names."""

from __future__ import annotations

import json

from . import _native
from ._model import *  # noqa: F401,F403
from ._model import __all__ as _model_names
from ._model import (
    FilesystemMetrics,
    LimitEvent,
    LimitEventKind,
    LimitResource,
    Measurement,
    ProcessSampling,
    Snapshot,
)
from ._pipeline import _on_runtime

# The reference's names for the same types.
ResourceMetricsSnapshot = Snapshot
ResourceMeasurement = Measurement
ProcessSamplingMetadata = ProcessSampling
FilesystemCapacityMetrics = FilesystemMetrics
ResourceLimitEventCount = LimitEvent
ResourceLimitEventKind = LimitEventKind
ResourceLimitResource = LimitResource

__all__ = [
    *_model_names,
    "FilesystemCapacityMetrics",
    "ProcessSamplingMetadata",
    "ResourceLimitEventCount",
    "ResourceLimitEventKind",
    "ResourceLimitResource",
    "ResourceMeasurement",
    "ResourceMetricsSnapshot",
    "collect",
]


async def collect() -> Snapshot:
    """One snapshot on the active host's on-demand series (no mark): the first has no
    rates, later ones do. Needs an active ``resource_metrics`` component
    (``plugin.activate``), as in the reference; ``WattlineError`` otherwise."""
    text = await _on_runtime(_native.host_collect_json_into)
    return Snapshot.from_dict(json.loads(text))

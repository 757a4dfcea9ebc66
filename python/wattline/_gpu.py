"""A GPU source written in Python, in place of wattline's own (NVML, ``nvidia-smi``,
DRM): ``set_gpu_source(lambda: source)``, as ``setGpuSource`` in Node.js."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import threading
from typing import Any, Callable, Dict, Mapping, Optional, Protocol, Sequence, TypedDict

__all__ = ["GpuDevice", "GpuSource", "set_gpu_source"]


class GpuDevice(TypedDict, total=False):
    """One device as ``sample()`` answers it, in the ``gen_ai.gpu.*`` units; every
    field optional (absent or ``None``: not read, never 0). A mapping, a dataclass or
    an object with these attributes. Other names are refused, naming the record."""

    index: int
    uuid: str  # the device's identifier; default ``gpu-<index>``
    name: str
    vendor: str  # nvidia (default), amd, intel, apple, other
    utilization: float  # %
    memory_utilization: float  # %
    memory_used: float  # MiB
    memory_total: float  # MiB
    temperature: float  # °C
    power_draw: float  # W
    power_limit: float  # W
    sm_clock: float  # MHz
    memory_clock: float  # MHz
    fan_speed: float  # %


class GpuSource(Protocol):
    """Anything with ``sample()``: plain or ``async``, answering the devices now, or
    ``None`` when it observed nothing. Its optional ``name`` names it in reports."""

    def sample(self) -> Any: ...


GpuSourceFactory = Callable[[], Optional[GpuSource]]

_lock = threading.Lock()
_factory: Optional[GpuSourceFactory] = None


def set_gpu_source(factory: Optional[GpuSourceFactory]) -> None:
    """Replaces GPU source selection for every pipeline started from now on (the
    module-level ``collect()``'s, ``Pipeline``, ``measure()``, ``plugin.activate``):
    ``factory()`` is called at each start and returns the source, or ``None``, which
    turns GPU reading off (the ``gpu`` category is then ``None``).
    ``set_gpu_source(None)`` restores wattline's own sources."""
    global _factory
    if factory is not None and not callable(factory):
        raise TypeError(f"set_gpu_source: a factory returning a source, or None (got {factory!r})")
    with _lock:
        _factory = factory


def _record(device: Any) -> Dict[str, Any]:
    if isinstance(device, Mapping):
        return dict(device)
    if dataclasses.is_dataclass(device) and not isinstance(device, type):
        return dataclasses.asdict(device)
    return {name: value for name, value in vars(device).items() if not name.startswith("_")}


class _Adapter:
    """What the native source calls, on a blocking worker: the user's ``sample()``
    (awaited on a loop of its own when it is a coroutine) as JSON text."""

    def __init__(self, source: GpuSource) -> None:
        if not callable(getattr(source, "sample", None)):
            raise TypeError(f"a GPU source needs a sample() method (got {source!r})")
        self._source = source
        self.name = str(getattr(source, "name", None) or type(source).__name__)

    def _sample_json(self) -> Optional[str]:
        answer = self._source.sample()
        if inspect.isawaitable(answer):
            answer = asyncio.run(_awaited(answer))
        if answer is None:
            return None
        devices: Sequence[Any] = answer
        return json.dumps([_record(device) for device in devices])


async def _awaited(answer: Any) -> Any:
    return await answer


def _pipeline_options() -> Dict[str, Any]:
    """The native start options the hook sets now: none without a factory, ``gpu``
    off when it returns ``None``, else the source's adapter."""
    with _lock:
        factory = _factory
    if factory is None:
        return {}
    source = factory()
    if source is None:
        return {"gpu": False}
    return {"gpu_source": _Adapter(source)}

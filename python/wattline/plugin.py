"""The reference's plugin-host shape (``nemo_relay.plugin``), for code written
against it: ``async with plugin.activate(plugin.PluginConfig(components=[
plugin.ComponentSpec(kind="resource_metrics")])):`` then ``await
resource_metrics.collect()``. A thin facade: the activation is a wattline pipeline
started from the configuration (the crate's ``wattline::plugin``), the one
process-wide host that ``wattline.resource_metrics.collect()`` reads.

Unlike the reference, unknown fields and values are refused whatever ``policy``
says (``ConfigError`` names the field), and only wattline's component kinds exist.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from typing import Any, AsyncIterator, Dict, List, Mapping, Union

from . import _gpu, _native
from ._pipeline import _in_thread

__all__ = [
    "ComponentSpec",
    "ConfigPolicy",
    "PluginConfig",
    "PluginHostActivation",
    "activate",
    "initialize",
]

JsonObject = Dict[str, Any]


@dataclasses.dataclass
class ConfigPolicy:
    """The reference's unsupported-configuration policy. Accepted for its shape;
    wattline refuses every unknown component, field and value."""

    unknown_component: str = "warn"
    unknown_field: str = "warn"
    unsupported_value: str = "error"

    def to_dict(self) -> JsonObject:
        """The policy as the reference's JSON shape."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ComponentSpec:
    """One top-level component: its ``kind``, whether it is ``enabled``, and its own
    ``config`` fields (as in ``plugins.toml``)."""

    kind: str
    enabled: bool = True
    config: JsonObject = dataclasses.field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        """The component as ``plugins.toml`` has it."""
        return {"kind": self.kind, "enabled": self.enabled, "config": dict(self.config)}


@dataclasses.dataclass
class PluginConfig:
    """The configuration given in code: it overrides the ``plugins.toml`` files."""

    version: int = 1
    components: List[Any] = dataclasses.field(default_factory=list)
    policy: ConfigPolicy = dataclasses.field(default_factory=ConfigPolicy)

    def to_dict(self) -> JsonObject:
        """The document as ``plugins.toml`` has it (``policy`` is not part of it)."""
        return {
            "version": self.version,
            "components": [
                component.to_dict() if hasattr(component, "to_dict") else dict(component)
                for component in self.components
            ],
        }


def _document(config: Union[PluginConfig, Mapping[str, Any]]) -> str:
    if isinstance(config, PluginConfig):
        document = config.to_dict()
    elif isinstance(config, Mapping):
        document = {name: value for name, value in config.items() if name != "policy"}
    else:
        raise _native.ConfigError(
            f"<config>: a PluginConfig or a mapping (got {type(config).__name__})"
        )
    try:
        return json.dumps(document)
    except (TypeError, ValueError) as error:
        raise _native.ConfigError(f"<config>: not JSON-like data: {error}") from None


class PluginHostActivation:
    """The owned lifetime of the process's plugin host: ``await close()`` (or leave
    the ``async with`` block) to stop it; repeated calls are safe."""

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def is_active(self) -> bool:
        """Whether it has not been closed."""
        return bool(self._native.is_active)

    async def close(self) -> None:
        """Stops the host's pipeline; later ``collect()`` calls are refused."""
        await _in_thread(self._native.close)

    async def __aenter__(self) -> "PluginHostActivation":
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.close()


async def initialize(
    config: Union[PluginConfig, Mapping[str, Any]],
    additional_plugins_toml: Union[None, str, "os.PathLike[str]"] = None,
) -> PluginHostActivation:
    """Starts the process's plugin host: the ``plugins.toml`` files
    (``additional_plugins_toml`` in place of the user's), then ``config`` over them.
    Refused (``WattlineError``) while another activation is active."""
    document = _document(config)
    path = os.fspath(additional_plugins_toml) if additional_plugins_toml is not None else None

    def start() -> Any:
        options = _gpu._pipeline_options()
        return _native.NativePluginHost.start(document, path, **options)

    return PluginHostActivation(await _in_thread(start))


@contextlib.asynccontextmanager
async def activate(
    config: Union[PluginConfig, Mapping[str, Any]],
    additional_plugins_toml: Union[None, str, "os.PathLike[str]"] = None,
) -> AsyncIterator[PluginHostActivation]:
    """``initialize`` and ``close`` around an ``async with`` block."""
    activation = await initialize(config, additional_plugins_toml)
    try:
        yield activation
    finally:
        await activation.close()

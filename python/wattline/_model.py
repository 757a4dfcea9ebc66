"""The snapshot as frozen dataclasses: field names, nesting, units and ``None`` exactly
as the spec's ``resource_metrics`` snapshot (and the JSON of ``wattline collect``).

Built from the JSON the native module returns by converters derived from the type
annotations (once per class), so a field added to a class here is filled with no
other change. The records between the ``generated`` lines are written from the Rust
model by ``WATTLINE_UPDATE_BINDINGS=1 cargo test --test model_languages``.
"""

from __future__ import annotations

import dataclasses
import datetime as _datetime
import enum
import sys
import threading
import typing
from typing import Any, Dict, Generic, List, Optional, TypeVar, Union

__all__ = [
    "AcceleratorDeviceMetrics",
    "AcceleratorProcessMetrics",
    "AcceleratorVendor",
    "BandwidthUnit",
    "CapacityUnit",
    "CountUnit",
    "CpuMetrics",
    "CpuUnit",
    "DataUnit",
    "DiskMetrics",
    "DurationUnit",
    "FilesystemMetrics",
    "GpuMetrics",
    "LimitEvent",
    "LimitEventKind",
    "LimitResource",
    "Measurement",
    "MeasurementScope",
    "MemoryMetrics",
    "NetworkInterfaceMetrics",
    "NetworkMetrics",
    "NetworkTrafficMetrics",
    "OperatingSystem",
    "ProcessMetrics",
    "ProcessSampling",
    "Snapshot",
    "UtilizationUnit",
]


class _StrEnum(str, enum.Enum):
    """A string enum whose value is the JSON string (``StrEnum`` before 3.11)."""

    def __str__(self) -> str:
        return str(self.value)


class DurationUnit(_StrEnum):
    MICROSECONDS = "microseconds"
    MILLISECONDS = "milliseconds"
    SECONDS = "seconds"
    MINUTES = "minutes"


class CapacityUnit(_StrEnum):
    BYTES = "bytes"
    KILOBYTES = "kilobytes"
    MEGABYTES = "megabytes"
    GIGABYTES = "gigabytes"
    TERABYTES = "terabytes"
    KIBIBYTES = "kibibytes"
    MEBIBYTES = "mebibytes"
    GIBIBYTES = "gibibytes"
    TEBIBYTES = "tebibytes"


class DataUnit(_StrEnum):
    BYTES = "bytes"
    KILOBYTES = "kilobytes"
    MEGABYTES = "megabytes"
    GIGABYTES = "gigabytes"
    TERABYTES = "terabytes"
    KIBIBYTES = "kibibytes"
    MEBIBYTES = "mebibytes"
    GIBIBYTES = "gibibytes"
    TEBIBYTES = "tebibytes"


class BandwidthUnit(_StrEnum):
    BYTES_PER_SECOND = "bytes_per_second"
    KIBIBYTES_PER_SECOND = "kibibytes_per_second"
    MEBIBYTES_PER_SECOND = "mebibytes_per_second"
    GIBIBYTES_PER_SECOND = "gibibytes_per_second"
    BITS_PER_SECOND = "bits_per_second"
    MEGABITS_PER_SECOND = "megabits_per_second"
    GIGABITS_PER_SECOND = "gigabits_per_second"


class CpuUnit(_StrEnum):
    LOGICAL_PROCESSORS = "logical_processors"
    MILLICORES = "millicores"


class UtilizationUnit(_StrEnum):
    PERCENTAGE = "percentage"
    FRACTION = "fraction"


class CountUnit(_StrEnum):
    PROCESSES = "processes"
    THREADS = "threads"
    FILE_DESCRIPTORS = "file_descriptors"
    HANDLES = "handles"
    EVENTS = "events"
    OPERATIONS = "operations"
    PACKETS = "packets"
    ERRORS = "errors"


class OperatingSystem(_StrEnum):
    LINUX = "linux"
    MACOS = "macos"
    WINDOWS = "windows"
    UNSUPPORTED = "unsupported"


class MeasurementScope(_StrEnum):
    GLOBAL = "global"
    APPLICATION_PROCESS = "application_process"
    PROCESS_TREE = "process_tree"


class AcceleratorVendor(_StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    APPLE = "apple"
    OTHER = "other"


class LimitResource(_StrEnum):
    CPU = "cpu"
    MEMORY = "memory"
    PROCESSES = "processes"


class LimitEventKind(_StrEnum):
    THROTTLED = "throttled"
    HIGH = "high"
    MAXIMUM = "maximum"
    OUT_OF_MEMORY = "out_of_memory"
    TERMINATED = "terminated"


U = TypeVar("U")


@dataclasses.dataclass(frozen=True)
class Measurement(Generic[U]):
    """One available reading: ``value`` (an ``int`` where the conversion is exact, else a
    ``float``) in ``unit``. An unavailable reading is ``None``, never a zero."""

    value: Union[int, float]
    unit: U


# --- begin generated from model/src (snapshot records): do not edit ---


@dataclasses.dataclass(frozen=True)
class LimitEvent:
    """A cumulative limit-event count."""

    #: The limited resource.
    resource: LimitResource
    #: The event.
    event: LimitEventKind
    #: The cumulative count, in `events`.
    count: Optional[Measurement[CountUnit]]


@dataclasses.dataclass(frozen=True)
class ProcessSampling:
    """How many processes each process-summed field covers."""

    #: Processes listed when collection began.
    visible_processes: int
    #: Processes whose base query succeeded.
    sampled_processes: int
    #: Readable values per process-summed field, keyed by canonical path
    #: (`cpu.total_time`, as is in every language: data, not a field name); a missing
    #: key means the sum was not attempted.
    field_sampled_processes: Dict[str, int]


@dataclasses.dataclass(frozen=True)
class CpuMetrics:
    """The CPU category."""

    #: User-mode CPU time of the scope. Default unit milliseconds.
    user_time: Optional[Measurement[DurationUnit]]
    #: Kernel-mode CPU time of the scope.
    system_time: Optional[Measurement[DurationUnit]]
    #: User plus system time.
    total_time: Optional[Measurement[DurationUnit]]
    #: Average CPU use since the previous sample of the same series, in logical
    #: processors by default; `null` on a series' first sample.
    consumption_rate: Optional[Measurement[CpuUnit]]
    #: Time the environment was throttled (exclusive cgroup only).
    throttled_time: Optional[Measurement[DurationUnit]]
    #: CPU capacity available to the environment.
    effective_limit: Optional[Measurement[CpuUnit]]
    #: Time some work stalled on CPU.
    some_pressure_stall_time: Optional[Measurement[DurationUnit]]
    #: Time all work stalled on CPU.
    full_pressure_stall_time: Optional[Measurement[DurationUnit]]
    #: Supported cumulative CPU limit-event counts.
    limit_events: List[LimitEvent]


@dataclasses.dataclass(frozen=True)
class MemoryMetrics:
    """The memory category."""

    #: System memory in use. Default unit KiB.
    system_used: Optional[Measurement[CapacityUnit]]
    #: Total system memory.
    system_total: Optional[Measurement[CapacityUnit]]
    #: System memory available.
    system_available: Optional[Measurement[CapacityUnit]]
    #: Resident memory of the scope.
    resident: Optional[Measurement[CapacityUnit]]
    #: Private memory of the scope.
    private: Optional[Measurement[CapacityUnit]]
    #: macOS physical footprint.
    physical_footprint: Optional[Measurement[CapacityUnit]]
    #: Virtual address space.
    virtual_memory: Optional[Measurement[CapacityUnit]]
    #: Peak resident memory of one process; `null` for trees.
    peak_resident: Optional[Measurement[CapacityUnit]]
    #: Memory limit of the environment.
    limit: Optional[Measurement[CapacityUnit]]
    #: Memory charged to the environment.
    environment_accounted: Optional[Measurement[CapacityUnit]]
    #: Time some work stalled on memory.
    some_pressure_stall_time: Optional[Measurement[DurationUnit]]
    #: Time all work stalled on memory.
    full_pressure_stall_time: Optional[Measurement[DurationUnit]]
    #: Cumulative OOM events.
    out_of_memory_event_count: Optional[Measurement[CountUnit]]
    #: Supported cumulative memory limit-event counts.
    limit_events: List[LimitEvent]


@dataclasses.dataclass(frozen=True)
class ProcessMetrics:
    """The process category."""

    #: Process IDs found when collection began.
    active_count: Optional[Measurement[CountUnit]]
    #: Live descendants, excluding the root.
    descendant_count: Optional[Measurement[CountUnit]]
    #: Threads across the scope.
    thread_count: Optional[Measurement[CountUnit]]
    #: Windows Job Object creations.
    lifetime_creation_count: Optional[Measurement[CountUnit]]
    #: Open file descriptors across the scope.
    open_file_descriptor_count: Optional[Measurement[CountUnit]]
    #: Windows kernel handles.
    windows_handle_count: Optional[Measurement[CountUnit]]
    #: Supported cumulative process-limit event counts.
    limit_events: List[LimitEvent]


@dataclasses.dataclass(frozen=True)
class FilesystemMetrics:
    """Capacity of the filesystem holding one configured path."""

    #: The configured path.
    path: str
    #: Total capacity. Default unit bytes.
    total_capacity: Optional[Measurement[CapacityUnit]]
    #: Space available to the calling user.
    available_capacity: Optional[Measurement[CapacityUnit]]
    #: Free space including reserved blocks.
    free_capacity: Optional[Measurement[CapacityUnit]]


@dataclasses.dataclass(frozen=True)
class DiskMetrics:
    """The disk category."""

    #: Storage bytes read by the scope.
    read_data: Optional[Measurement[DataUnit]]
    #: Storage bytes written by the scope.
    write_data: Optional[Measurement[DataUnit]]
    #: Read rate since the previous sample.
    read_throughput: Optional[Measurement[BandwidthUnit]]
    #: Write rate since the previous sample.
    write_throughput: Optional[Measurement[BandwidthUnit]]
    #: Read system calls.
    read_operations: Optional[Measurement[CountUnit]]
    #: Write system calls.
    write_operations: Optional[Measurement[CountUnit]]
    #: One entry per configured path; `[]` when none are configured.
    filesystems: List[FilesystemMetrics]


@dataclasses.dataclass(frozen=True)
class AcceleratorDeviceMetrics:
    """A whole-device GPU record."""

    #: The vendor.
    vendor: AcceleratorVendor
    #: The backend's device ID (NVML: the UUID).
    device_identifier: str
    #: The backend-local index, when supplied.
    device_index: Optional[int]
    #: Device memory in use. Default unit KiB.
    memory_used: Optional[Measurement[CapacityUnit]]
    #: Device activity. Default unit percentage.
    compute_utilization: Optional[Measurement[UtilizationUnit]]


@dataclasses.dataclass(frozen=True)
class AcceleratorProcessMetrics:
    """A per-process GPU record."""

    #: The vendor.
    vendor: AcceleratorVendor
    #: The backend's device ID.
    device_identifier: str
    #: The backend-local index, when supplied.
    device_index: Optional[int]
    #: The owning process.
    process_id: int
    #: GPU memory used by the process.
    memory_used: Optional[Measurement[CapacityUnit]]
    #: The process's GPU activity since the previous sample of the same series.
    compute_utilization: Optional[Measurement[UtilizationUnit]]


@dataclasses.dataclass(frozen=True)
class GpuMetrics:
    """The GPU category: each group `null` when disabled (or GPU reading is turned
    off), a list otherwise: empty when no backend answered, as the reference gives
    it (why nothing answered is in diagnostics, `doctor` and the report).
    """

    #: Device records.
    device_metrics: Optional[List[AcceleratorDeviceMetrics]]
    #: Process records.
    process_metrics: Optional[List[AcceleratorProcessMetrics]]


@dataclasses.dataclass(frozen=True)
class NetworkTrafficMetrics:
    """Traffic counters of one network record."""

    #: Bytes received.
    received_data: Optional[Measurement[DataUnit]]
    #: Bytes sent.
    transmitted_data: Optional[Measurement[DataUnit]]
    #: Receive rate since the previous sample.
    receive_throughput: Optional[Measurement[BandwidthUnit]]
    #: Send rate since the previous sample.
    transmit_throughput: Optional[Measurement[BandwidthUnit]]
    #: Packets received.
    received_packets: Optional[Measurement[CountUnit]]
    #: Packets sent.
    transmitted_packets: Optional[Measurement[CountUnit]]
    #: Receive errors.
    receive_errors: Optional[Measurement[CountUnit]]
    #: Send errors.
    transmit_errors: Optional[Measurement[CountUnit]]


@dataclasses.dataclass(frozen=True)
class NetworkInterfaceMetrics:
    """One selected interface."""

    #: Interface name.
    name: str
    #: Its counters.
    traffic: NetworkTrafficMetrics


@dataclasses.dataclass(frozen=True)
class NetworkMetrics:
    """The network category: always system-wide."""

    #: Always `global`.
    measurement_scope: MeasurementScope
    #: The aggregate of the selected interfaces.
    system: NetworkTrafficMetrics
    #: One record per selected visible interface.
    interfaces: List[NetworkInterfaceMetrics]


# --- end generated ---


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """One resource snapshot. ``timestamp`` is a timezone-aware UTC ``datetime``; a
    disabled category is ``None``."""

    timestamp: _datetime.datetime
    operating_system: OperatingSystem
    measurement_scope: MeasurementScope
    process_sampling: Optional[ProcessSampling]
    cpu: Optional[CpuMetrics]
    memory: Optional[MemoryMetrics]
    process: Optional[ProcessMetrics]
    disk: Optional[DiskMetrics]
    gpu: Optional[GpuMetrics]
    network: Optional[NetworkMetrics]
    # Nanoseconds of the second: a datetime holds microseconds, the reading holds more.
    _nanosecond: int = dataclasses.field(default=0, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Snapshot":
        """The snapshot of a ``wattline collect`` JSON object."""
        snapshot = from_json_value(cls, data)
        object.__setattr__(snapshot, "_nanosecond", parse_timestamp(data["timestamp"])[1])
        return snapshot

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object ``wattline collect`` prints for this reading."""
        data = to_json_value(self)
        data["timestamp"] = format_timestamp(self.timestamp, self._nanosecond)
        return data


# --- conversion, driven by the annotations -------------------------------------------


def parse_timestamp(text: str) -> "tuple[_datetime.datetime, int]":
    """An RFC 3339 UTC timestamp with up to nanoseconds: the ``datetime`` (microseconds)
    and the nanoseconds of its second."""
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    main, sign, offset = text[:-6], text[-6], text[-5:]
    nanosecond = 0
    if "." in main:
        main, fraction = main.split(".", 1)
        nanosecond = int((fraction + "000000000")[:9])
    moment = _datetime.datetime.fromisoformat(f"{main}{sign}{offset}")
    moment = moment.replace(microsecond=nanosecond // 1000).astimezone(_datetime.timezone.utc)
    return moment, nanosecond


def format_timestamp(moment: _datetime.datetime, nanosecond: int = 0) -> str:
    """The timestamp as the Rust side writes it: UTC, ``Z``, 0, 3, 6 or 9 fraction
    digits (the fewest that are exact)."""
    moment = moment.astimezone(_datetime.timezone.utc)
    if nanosecond // 1000 != moment.microsecond:
        nanosecond = moment.microsecond * 1000
    head = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if nanosecond == 0:
        return f"{head}Z"
    if nanosecond % 1_000_000 == 0:
        return f"{head}.{nanosecond // 1_000_000:03d}Z"
    if nanosecond % 1000 == 0:
        return f"{head}.{nanosecond // 1000:06d}Z"
    return f"{head}.{nanosecond:09d}Z"


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    return _HINTS[cls]


Converter = typing.Callable[[Any], Any]

# One converter per annotation, built on first use: reading the annotations (and
# `dataclasses.fields`) on every call cost more than the snapshot's JSON decoding.
_CONVERTERS: Dict[Any, Converter] = {}


def from_json_value(annotation: Any, value: Any) -> Any:
    """``value`` (decoded JSON) as ``annotation`` says."""
    return _converter(annotation)(value)


def _converter(annotation: Any) -> Converter:
    """The converter of ``value`` of ``annotation``, ``None`` included."""
    converter = _CONVERTERS.get(annotation)
    if converter is None:
        inner = _inner_converter(annotation)
        if inner is None:
            converter = _identity
        else:

            def converter(value: Any) -> Any:
                return None if value is None else inner(value)

        _CONVERTERS[annotation] = converter
    return converter


def _identity(value: Any) -> Any:
    return value


# The converter of a non-null value of each annotation; ``None`` where the decoded JSON
# value is already the answer (numbers, strings).
_INNER: Dict[Any, Optional[Converter]] = {}


# Converters are built once, by one thread at a time (a class under construction is
# reachable from its own fields only on the thread building it).
_BUILDING = threading.RLock()


def _inner_converter(annotation: Any) -> Optional[Converter]:
    try:
        return _INNER[annotation]
    except KeyError:
        pass
    with _BUILDING:
        if annotation in _INNER:
            return _INNER[annotation]
        if not (dataclasses.is_dataclass(annotation) and isinstance(annotation, type)):
            _INNER[annotation] = _build_converter(annotation)
            return _INNER[annotation]
        # A class's fields may name the class: they find it here while it is built.
        built: List[Converter] = []
        _INNER[annotation] = lambda value: built[0](value)
        try:
            built.append(_dataclass_converter(annotation))
        except BaseException:
            del _INNER[annotation]  # the next call meets the same error, not this stand-in
            raise
        _INNER[annotation] = built[0]
        return built[0]


def _enum_converter(annotation: Any) -> Converter:
    members = dict(annotation._value2member_map_)

    def convert(value: Any) -> Any:
        member = members.get(value) if isinstance(value, str) else None
        # Anything else goes through the enum itself, for its own error.
        return member if member is not None else annotation(value)

    return convert


def _build_converter(annotation: Any) -> Optional[Converter]:
    """The converter of a non-null ``value`` of ``annotation``; ``None`` for the value
    itself."""
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is Union:
        inner = [argument for argument in arguments if argument is not type(None)]
        return _inner_converter(inner[0]) if len(inner) == 1 else None
    # Lists and maps are copied, as before: a caller's own dictionary shares nothing
    # with the snapshot made of it.
    if origin in (list, List):
        if _inner_converter(arguments[0]) is None:
            return list
        item = _converter(arguments[0])
        return lambda value: [item(entry) for entry in value]
    if origin in (dict, Dict):
        if _inner_converter(arguments[1]) is None:
            return dict
        item = _converter(arguments[1])
        return lambda value: {key: item(entry) for key, entry in value.items()}
    if origin is Measurement:
        return _measurement_converter(arguments[0])
    if annotation is _datetime.datetime:
        return lambda value: parse_timestamp(value)[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_converter(annotation)
    return None


def _measurement_converter(unit_annotation: Any) -> Converter:
    """Every unit is an enum. Half a snapshot's objects are measurements, so the unit is
    looked up here in place, not through a call of ``_enum_converter``'s function."""
    # A frozen instance made as its ``__init__`` would leave it (no ``__post_init__``),
    # without a ``setattr`` per field.
    new = object.__new__
    members = dict(unit_annotation._value2member_map_)

    def convert_with_unit(value: Any) -> Any:
        measurement = new(Measurement)
        unit = value["unit"]
        member = members.get(unit) if unit.__class__ is str else None
        if member is None and unit is not None:
            member = unit_annotation(unit)  # the enum's own error for an unknown unit
        measurement.__dict__.update(value=value["value"], unit=member)
        return measurement

    return convert_with_unit


def _dataclass_converter(cls: type) -> Converter:
    """A function written for ``cls``: one dictionary display of its fields, each read
    and converted in place (a snapshot is some sixty objects, each a call of this)."""
    hints = _hints(cls)
    fields = [field for field in dataclasses.fields(cls) if not field.name.startswith("_")]
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(cls)
        if field.name.startswith("_") and field.default is not dataclasses.MISSING
    }
    if hasattr(cls, "__post_init__"):
        converters = [(field.name, _converter(hints[field.name])) for field in fields]
        return lambda value: cls(**{name: convert(value[name]) for name, convert in converters})
    namespace: Dict[str, Any] = {"_cls": cls, "_allocate": object.__new__, "_defaults": defaults}
    entries = []
    for index, field in enumerate(fields):
        name = field.name
        inner = _inner_converter(hints[name])
        if inner is None:
            entries.append(f"{name!r}: value[{name!r}]")
        else:
            namespace[f"_convert_{index}"] = inner
            entries.append(
                f"{name!r}: None if (field := value[{name!r}]) is None else _convert_{index}(field)"
            )
    update_defaults = "\n    instance.__dict__.update(_defaults)" if defaults else ""
    source = (
        "def convert(value):\n"
        "    instance = _allocate(_cls)\n"
        "    instance.__dict__.update({" + ", ".join(entries) + "})"
        f"{update_defaults}\n"
        "    return instance\n"
    )
    exec(compile(source, f"<wattline converter of {cls.__name__}>", "exec"), namespace)
    return namespace["convert"]


def to_json_value(value: Any) -> Any:
    """A dataclass tree as decoded JSON: enums as their strings, ``None`` as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: to_json_value(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if not field.name.startswith("_")
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list):
        return [to_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json_value(item) for key, item in value.items()}
    if isinstance(value, _datetime.datetime):
        return format_timestamp(value)
    return value

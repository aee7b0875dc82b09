"""What the monitor reports: per-device readings, window totals and per-step energy."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from greentrain.provenance import Source

__all__ = ["DeviceReading", "WindowEnergy", "StepEnergy", "weakest_source"]

_STRENGTH = [Source.MEASURED, Source.INTEGRATED, Source.INTERPOLATED, Source.ESTIMATED, Source.STATIC, Source.FORECAST]


def weakest_source(sources: Iterable[Source]) -> Source:
    """The least direct label among ``sources`` (ESTIMATED when there are none: nothing was measured)."""
    found = list(sources)
    return max(found, key=_STRENGTH.index) if found else Source.ESTIMATED


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """One device's figures; ``energy_j`` is cumulative since the monitor started."""

    kind: Literal["gpu", "cpu"]
    name: str
    """Unique key within the monitor: 'gpu0', 'package-0', 'cpu-estimate'."""
    index: int | None
    uuid: str | None
    energy_j: float
    power_w: float | None
    power_limit_w: float | None
    sm_clock_hz: float | None
    source: Source
    failed: bool
    error: str | None
    model: str | None = None
    """Marketing name of a GPU (e.g. 'NVIDIA A40'); None for CPU domains."""


@dataclass(frozen=True, slots=True)
class WindowEnergy:
    """Energy between ``Monitor.begin(name)`` and ``Monitor.end(name)``."""

    name: str
    duration_s: float
    energy_j: float
    per_device_j: dict[str, float] = field(default_factory=dict)
    source: Source = Source.ESTIMATED


@dataclass(frozen=True, slots=True)
class StepEnergy:
    """Energy and duration of one training step (``step_begin``/``step_end``)."""

    step: int
    """Steps ended so far by this monitor, counting this one (1-based)."""
    duration_s: float
    energy_j: float
    per_device_j: dict[str, float] = field(default_factory=dict)
    source: Source = Source.ESTIMATED

    @property
    def power_w(self) -> float:
        """Average power over the step."""
        return self.energy_j / self.duration_s if self.duration_s > 0 else 0.0

"""Carbon-intensity providers: one ABC, results as typed points.

A provider turns one source (a live API, a CSV export, a static average) into
``IntensityPoint``s with aware-UTC interval bounds and a provenance label. It
raises ``SignalError`` (never anything else) on any fault; the fallback chain
catches that and serves the next provider, with the staleness visible.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import ClassVar

__all__ = [
    "Kind",
    "EmissionFactor",
    "IntensityPoint",
    "ProviderStatus",
    "CarbonIntensityProvider",
]


class Kind(StrEnum):
    """Whether a value was observed, predicted, or is a long-run average."""

    ACTUAL = "actual"
    FORECAST = "forecast"
    STATIC = "static"


class EmissionFactor(StrEnum):
    """Direct (combustion) or lifecycle (LCA) emission factors."""

    DIRECT = "direct"
    LIFECYCLE = "lifecycle"


@dataclass(frozen=True, slots=True, kw_only=True)
class IntensityPoint:
    """Grid carbon intensity over [start, end)."""

    start: datetime
    end: datetime
    intensity_g_per_kwh: float
    kind: Kind
    provider: str
    zone: str
    emission_factor: EmissionFactor = EmissionFactor.DIRECT
    estimated: bool = False
    """The provider itself flagged the value as estimated/modelled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderStatus:
    """What the signal in use is and how old it is (feeds carbon_signal_age_seconds)."""

    provider: str
    zone: str
    age_s: float
    stale: bool
    last_error: str | None = None


class CarbonIntensityProvider(ABC):
    """A source of carbon intensity for a grid zone."""

    name: ClassVar[str] = "custom"
    """Registry name, e.g. 'electricitymaps', 'csv' (a provider from Python that sets none: 'custom')."""
    uses_network: ClassVar[bool] = True
    """Whether answers may wait on the network (then the engine reads it off the training thread)."""
    issues_forecasts: ClassVar[bool] = True
    """Whether ``forecast()`` is the source's own forecast, worth recording in the forecast archive
    (False for a trace replayed through greentrain's forecaster, or a static average)."""

    @abstractmethod
    def latest(self, zone: str) -> IntensityPoint:
        """The most recent value for ``zone``."""

    @abstractmethod
    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        """Points from now up to ``horizon_h`` hours ahead, in time order (may be empty)."""

    @abstractmethod
    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        """Actual points overlapping [start, end), in time order."""

    def configured(self) -> bool:
        """Whether credentials/data this provider needs are present (no network call)."""
        return True

    def close(self) -> None:
        """Release connections."""

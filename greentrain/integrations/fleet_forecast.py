"""Carbon intensity per plan hour for the fleet controller.

The controller plans in hours counted from its journal's origin (an hour is
``hour_s`` seconds: 3600, or less for a compressed test clock). Two sources:

* ``ReplayIntensity``: recorded traces replayed as if ``replay_start`` were
  the controller's origin ("plan as if the grid did this again"), for tests,
  demos and what-if runs; the trace's own values serve as the forecast.
* ``ProviderIntensity``: a live provider through ``ProviderForecasts`` (its
  current interval, then its forecast, filled by greentrain's forecaster where
  the provider gives none), averaged into plan hours. A provider that fails
  gives what it knows and a note; hours it cannot cover get the mean of the
  rest (the planner's rule), and with nothing at all the plan cannot be made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import numpy as np

from greentrain.clock import Clock, ensure_aware_utc
from greentrain.errors import ConfigError, SignalError
from greentrain.signals.base import IntensityPoint
from greentrain.signals.trace import load_trace

__all__ = ["PlanIntensity", "ReplayIntensity", "ProviderIntensity"]


class PlanIntensity(Protocol):
    """g/kWh for ``hours`` plan hours from ``first_hour`` (index 0 = the hour containing now)."""

    notes: list[str]

    def __call__(self, zone: str, first_hour: int, hours: int, *, time_of: Callable[[float], datetime]) -> np.ndarray:
        ...


class ReplayIntensity:
    """Hourly traces by zone; plan hour ``h`` is the trace's hour ``replay_start + h``."""

    def __init__(self, paths: Sequence[str | Path], *, replay_start: datetime,
                 by_zone: Mapping[str, str | Path] | None = None) -> None:
        """``paths``: traces keyed by the zone they record; ``by_zone``: traces for the zone named (a
        ``--partition NAME=ZONE:GPUS:TRACE``), whatever zone their file records."""
        if not paths and not by_zone:
            raise ConfigError("--replay-trace: give at least one CSV file")
        self.notes: list[str] = []
        self._by_zone: dict[str, np.ndarray] = {}
        start = ensure_aware_utc(replay_start, "--replay-start")
        named = [(path, zone) for zone, path in (by_zone or {}).items()]
        for path, given in [*named, *((path, None) for path in paths)]:
            points = load_trace(path)
            zone = given or points[0].zone
            if zone in self._by_zone:
                raise ConfigError(f"--replay-trace: {path}: a second trace for zone {zone!r}")
            hourly = [p.intensity_g_per_kwh for p in points if p.start >= start]
            if not hourly:
                raise ConfigError(f"--replay-start: {path} has no data after {start.isoformat()}")
            self._by_zone[zone] = np.array(hourly, dtype=float)

    @property
    def zones(self) -> list[str]:
        return sorted(self._by_zone)

    def __call__(self, zone: str, first_hour: int, hours: int, *, time_of: Callable[[float], datetime]) -> np.ndarray:
        values = self._by_zone.get(zone)
        if values is None:
            raise ConfigError(f"zone {zone!r}: no --replay-trace for it (have: {', '.join(self.zones)})")
        first = max(0, first_hour)
        if first >= values.size:
            raise ConfigError(f"--replay-trace for {zone}: the replayed trace has ended (plan hour {first_hour})")
        return values[first : first + hours]


class ProviderIntensity:
    """A live provider's current value and forecast, averaged into plan hours."""

    def __init__(self, spec: str, *, clock: Clock, horizon_h: float = 96.0) -> None:
        from greentrain.integrations.forecasts import ProviderForecasts

        self._source = ProviderForecasts(spec, clock=clock, horizon_h=horizon_h)
        self.notes = self._source.notes

    def __call__(self, zone: str, first_hour: int, hours: int, *, time_of: Callable[[float], datetime]) -> np.ndarray:
        try:
            points = self._source(zone)
        except SignalError as e:
            self.notes.append(f"carbon signal for {zone} unavailable ({e})")
            points = []
        return hourly_means(points, [time_of(first_hour + k) for k in range(hours + 1)])

    def close(self) -> None:
        self._source.close()


def hourly_means(points: Sequence[IntensityPoint], edges: Sequence[datetime]) -> np.ndarray:
    """Time-weighted mean intensity of ``points`` in each [edges[k], edges[k+1]); hours they do not
    touch get the mean of the others; ConfigError when they touch none."""
    out = np.full(len(edges) - 1, np.nan)
    for k in range(len(edges) - 1):
        lo, hi = edges[k], edges[k + 1]
        weight = total = 0.0
        for p in points:
            overlap_s = (min(hi, p.end) - max(lo, p.start)).total_seconds()
            if overlap_s > 0:
                weight += overlap_s
                total += overlap_s * p.intensity_g_per_kwh
        if weight > 0:
            out[k] = total / weight
    known = ~np.isnan(out)
    if not known.any():
        raise ConfigError("carbon intensity: the provider gave nothing for the planning horizon")
    out[~known] = float(out[known].mean())
    return out


def whole_hours(span: timedelta, hour_s: float) -> int:
    """Plan hours (rounded up) in ``span``."""
    return max(1, math.ceil(span.total_seconds() / hour_s))

"""The run log's ``carbon`` and ``forecast`` events, written only when what they say changed.

The engine reads the forecast every ``forecast_refresh_s`` and again at every
re-plan of a wait. Writing each read put 72 points (3.4 KB) in the run log
per read: 80 % of a log of 11 KB per step. ``SignalLog`` writes

- a ``forecast`` event only with the points that are new or changed since
  the last one (values rounded to 0.1 g/kWh), and none when nothing changed;
  ``count`` is the number of points in the forecast read. The first event has
  every point (what the report plots), so folding the events in order gives
  the forecast in hand at any time;
- a ``carbon`` event only when the current value or its interval changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from greentrain.signals.base import IntensityPoint

__all__ = ["SignalLog", "VALUE_DECIMALS"]

VALUE_DECIMALS = 1
"""Decimals of g/kWh kept in a logged forecast (a provider's own precision is coarser)."""


class SignalLog:
    """Writes carbon and forecast events through ``write(event, **fields)`` when they change."""

    def __init__(self, write: Callable[..., None]) -> None:
        self._write = write
        self._forecast: dict[datetime, float] = {}
        self._carbon: tuple[object, ...] | None = None

    def carbon(self, point: IntensityPoint) -> bool:
        """Log the current intensity if it differs from the last logged one; whether it was written."""
        key = (point.start, point.end, round(point.intensity_g_per_kwh, VALUE_DECIMALS), point.kind, point.provider)
        if key == self._carbon:
            return False
        self._carbon = key
        self._write("carbon", intensity_g_per_kwh=point.intensity_g_per_kwh, kind=point.kind.value,
                    provider=point.provider, zone=point.zone, start=point.start)
        return True

    def forecast(self, points: Sequence[IntensityPoint]) -> int:
        """Log the points of ``points`` that are new or changed; the number written (0: no event)."""
        changed: list[list[object]] = []
        for point in points:
            value = round(point.intensity_g_per_kwh, VALUE_DECIMALS)
            if self._forecast.get(point.start) != value:
                self._forecast[point.start] = value
                changed.append([point.start, value])
        if points:  # forget what has passed: the map stays the size of one forecast
            first = min(p.start for p in points)
            self._forecast = {start: v for start, v in self._forecast.items() if start >= first}
        if changed:
            self._write("forecast", points=changed, count=len(points))
        return len(changed)

"""The run log's ``carbon`` and ``forecast`` events, written only when what they say changed.

The engine reads the forecast every ``forecast_refresh_s`` and again at every
re-plan of a wait. Writing each read put 72 points (3.4 KB) in the run log
per read: 80 % of a log of 11 KB per step. ``SignalLog`` writes

- a ``forecast`` event only with the span of points that are new or changed
  since the last one (values rounded to 0.1 g/kWh), and none when nothing
  changed: ``start``, ``interval_s`` and ``values`` (``points`` as
  ``[start, value]`` pairs when unevenly spaced); ``count`` is the number of
  points in the forecast read. The first event has every point (what the
  report plots), so folding the events in order gives the forecast in hand
  at any time (``greentrain.events.forecast_points`` reads either form);
- a ``carbon`` event only when the current value or its interval changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from greentrain.signals.base import IntensityPoint

__all__ = ["SignalLog", "VALUE_DECIMALS", "forecast_fields"]

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
        ordered = sorted(points, key=lambda p: p.start)
        changed = [i for i, p in enumerate(ordered)
                   if self._forecast.get(p.start) != round(p.intensity_g_per_kwh, VALUE_DECIMALS)]
        self._forecast = {p.start: round(p.intensity_g_per_kwh, VALUE_DECIMALS) for p in ordered}
        if not changed:
            return 0
        span = ordered[changed[0]: changed[-1] + 1]
        self._write("forecast", count=len(ordered), **forecast_fields(span))
        return len(span)


def forecast_fields(span: Sequence[IntensityPoint]) -> dict[str, object]:
    """A run of points as ``start``, ``interval_s`` and ``values`` when evenly spaced (a tenth of the size of
    ``[start, value]`` pairs), else as ``points``."""
    values = [round(p.intensity_g_per_kwh, VALUE_DECIMALS) for p in span]
    step_s = (span[1].start - span[0].start).total_seconds() if len(span) > 1 else 3600.0
    even = step_s > 0 and all((b.start - a.start).total_seconds() == step_s for a, b in zip(span, span[1:]))
    if even:
        return {"start": span[0].start, "interval_s": step_s, "values": values}
    return {"points": [[p.start, v] for p, v in zip(span, values, strict=True)]}

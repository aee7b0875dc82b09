"""A perfect-foresight 'forecaster' for evaluation only: it returns the trace's actual future.

Benchmarks run each policy with it and with the real forecaster, so policy
quality and forecast quality can be told apart. Never use it for decisions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from greentrain.signals.base import IntensityPoint, Kind

__all__ = ["PerfectForecaster"]


class PerfectForecaster:
    """Forecasts = the actual values of ``trace`` after the interval containing ``now``."""

    horizon_independent = True

    def __init__(self, trace: Sequence[IntensityPoint]) -> None:
        self._points = list(trace)
        self._starts = [p.start for p in self._points]

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        i = bisect_right(self._starts, now)  # first interval starting after now
        return [replace(p, kind=Kind.FORECAST) for p in self._points[i : i + horizon_h]]

"""A carbon signal over a recorded trace with the real causal forecaster (the SignalChain interface).

Used only where the signals package's CSV provider is not what is under test:
in-process tests of the demo runner. The subprocess tests run the real
``csv:`` provider the demo uses.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace
from pathlib import Path

from greentrain.clock import Clock
from greentrain.signals.base import IntensityPoint, ProviderStatus
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace

__all__ = ["TraceChain"]


class TraceChain:
    """``latest()``, ``forecast(horizon_h=)``, ``status()`` at ``clock.now()``; forecasts see only the past."""

    def __init__(self, trace: Path, clock: Clock, zone: str = "GB") -> None:
        self.points: list[IntensityPoint] = load_trace(trace)
        self.clock, self.zone = clock, zone
        self._starts = [p.start for p in self.points]
        self._forecaster = Forecaster()
        self.forecasts = 0

    def latest(self) -> IntensityPoint:
        i = bisect_right(self._starts, self.clock.now()) - 1
        return replace(self.points[max(0, i)], zone=self.zone)

    def forecast(self, horizon_h: float = 72.0) -> list[IntensityPoint]:
        self.forecasts += 1
        now = self.clock.now()
        history = self.points[: bisect_right(self._starts, now)]
        return self._forecaster.forecast(history, now, int(horizon_h))

    def status(self) -> ProviderStatus:
        return ProviderStatus(provider="trace", zone=self.zone, age_s=0.0, stale=False)

    def close(self) -> None:
        pass

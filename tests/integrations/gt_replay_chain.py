"""A carbon signal replaying a recorded trace at the job clock's time (the SignalChain interface)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from greentrain.clock import Clock
from greentrain.signals.base import IntensityPoint, Kind, ProviderStatus

__all__ = ["ReplayChain"]


class ReplayChain:
    """``latest()``, ``forecast(horizon_h=)``, ``status()`` over hourly points, read at ``clock.now()``."""

    def __init__(self, points: list[IntensityPoint], clock: Clock, zone: str = "GB") -> None:
        self.points, self.clock, self.zone = points, clock, zone

    def latest(self) -> IntensityPoint:
        now = self.clock.now()
        return next(p for p in self.points if p.start <= now < p.end)

    def forecast(self, horizon_h: float = 72.0) -> list[IntensityPoint]:
        now = self.clock.now()
        until = now + timedelta(hours=horizon_h)
        return [replace(p, kind=Kind.FORECAST) for p in self.points if p.end > now and p.start < until]

    def status(self) -> ProviderStatus:
        return ProviderStatus(provider="replay", zone=self.zone, age_s=0.0, stale=False)

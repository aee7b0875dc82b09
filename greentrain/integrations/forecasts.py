"""Where ``submit`` and the Kubernetes controller get their forecasts from.

Either a live provider (``greentrain.signals.make_provider``), or a recorded
Electricity Maps CSV replayed as if ``replay_start`` in the trace were now:
'plan as if the grid did this again' — for what-if planning, demos and tests.
A provider that fails yields an empty forecast plus a note; callers then fall
back to starting now instead of failing the submission.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from greentrain.clock import Clock, ensure_aware_utc
from greentrain.errors import ConfigError, SignalError
from greentrain.integrations.placement import shift_points
from greentrain.signals.base import IntensityPoint
from greentrain.signals.trace import load_trace

if TYPE_CHECKING:
    from greentrain.signals import SignalChain

__all__ = ["ForecastSource", "TraceForecasts", "ProviderForecasts"]

ForecastSource = Callable[[str], Sequence[IntensityPoint]]
"""zone -> forecast points from now on (empty when nothing is known)."""


class TraceForecasts:
    """Forecasts replayed from recorded traces, one per zone, shifted so ``replay_start`` maps to ``now``."""

    def __init__(self, paths: Sequence[str | Path], *, replay_start: datetime, now: datetime,
                 horizon_h: float = 72.0) -> None:
        if not paths:
            raise ConfigError("--replay-trace: give at least one CSV file")
        offset = ensure_aware_utc(now, "now") - ensure_aware_utc(replay_start, "--replay-start")
        until = ensure_aware_utc(now, "now") + timedelta(hours=horizon_h)
        self._by_zone: dict[str, list[IntensityPoint]] = {}
        for path in paths:
            points = shift_points(load_trace(path), offset)
            zone = points[0].zone
            if zone in self._by_zone:
                raise ConfigError(f"--replay-trace: {path}: a second trace for zone {zone!r}")
            self._by_zone[zone] = [p for p in points if p.end > now and p.start < until]
            if not self._by_zone[zone]:
                raise ConfigError(f"--replay-start: {path} has no data after {replay_start.isoformat()}")

    @property
    def zones(self) -> list[str]:
        """Zones with a trace."""
        return sorted(self._by_zone)

    def __call__(self, zone: str) -> list[IntensityPoint]:
        try:
            return self._by_zone[zone]
        except KeyError:
            raise ConfigError(f"zone {zone!r}: no --replay-trace for it (have: {', '.join(self.zones)})") from None


class ProviderForecasts:
    """Forecasts from a live provider through a ``SignalChain`` per zone (cache, backoff, forecaster fill).

    The current interval comes from ``latest()``, the rest from ``forecast()``. A provider
    that fails gives what is known (possibly []) and records why in ``notes``.
    """

    def __init__(self, spec: str, *, clock: Clock, horizon_h: float = 72.0) -> None:
        try:
            from greentrain.signals import SignalChain, make_provider
        except ImportError:
            raise ConfigError("--provider: live providers are not available here; use --replay-trace") from None
        self._spec, self._clock, self._horizon_h = spec, clock, horizon_h
        self._make, self._chain_type = make_provider, SignalChain
        self._chains: dict[str, SignalChain] = {}
        self.notes: list[str] = []

    def _chain(self, zone: str) -> SignalChain:
        if zone not in self._chains:
            provider = self._make(self._spec, clock=self._clock)
            self._chains[zone] = self._chain_type([provider], zone=zone, clock=self._clock)
        return self._chains[zone]

    def __call__(self, zone: str) -> list[IntensityPoint]:
        chain = self._chain(zone)
        points: list[IntensityPoint] = []
        try:
            points = list(chain.forecast(int(math.ceil(self._horizon_h))))
            current = chain.latest()
        except SignalError as e:
            # Never block a submission on a carbon API: the caller starts the job now instead.
            self.notes.append(f"carbon signal for {zone} unavailable ({e}); planning with what is known")
            return points
        if not points or points[0].start > current.start:
            points.insert(0, current)
        return points

    def close(self) -> None:
        """Release the providers' connections."""
        for chain in self._chains.values():
            chain.close()

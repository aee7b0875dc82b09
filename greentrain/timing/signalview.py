"""The engine's view of the carbon signal: cached, fault-tolerant, logged.

Wraps a ``SignalChain`` (or anything with ``latest()``, ``forecast(horizon_h=)``)
so that a step boundary never waits on the network more than once per
interval, every failure becomes a note and a fallback (the last value, or no
signal = run now), and every value seen lands in the ledger for pricing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from greentrain.signals.base import IntensityPoint

__all__ = ["SignalView"]


class SignalView:
    """Cached access to ``latest`` and ``forecast`` with notes instead of exceptions."""

    def __init__(
        self,
        signals: Any,
        *,
        horizon_h: float = 72.0,
        latest_refresh_s: float = 300.0,
        forecast_refresh_s: float = 900.0,
        on_note: Callable[[str], None] = lambda message: None,
        on_event: Callable[..., None] = lambda event, **fields: None,
    ) -> None:
        self.signals = signals
        self.horizon_h = horizon_h
        self.latest_refresh_s = latest_refresh_s
        self.forecast_refresh_s = forecast_refresh_s
        self._on_note = on_note
        self._on_event = on_event
        self._latest: IntensityPoint | None = None
        self._latest_at: datetime | None = None
        self._forecast: tuple[IntensityPoint, ...] = ()
        self._forecast_at: datetime | None = None
        self.failure: str | None = None
        """Why the last read of the current intensity failed (None after a success)."""
        self.version = 0
        """Incremented whenever a fresh value arrives (rank 0 shares new points with the other ranks)."""

    @property
    def last(self) -> IntensityPoint | None:
        """The most recent point read (no I/O)."""
        return self._latest

    def known_points(self) -> tuple[IntensityPoint, ...]:
        """The latest point and the forecast in hand (no I/O), for other ranks' ledgers."""
        return ((self._latest,) if self._latest is not None else ()) + self._forecast

    def fingerprint(self) -> tuple:
        """The carbon data in hand (no I/O): equal fingerprints mean a decision would see the same inputs."""
        latest = self._latest
        head = (latest.start, latest.intensity_g_per_kwh) if latest is not None else None
        return head, tuple((p.start, p.intensity_g_per_kwh) for p in self._forecast)

    def invalidate(self) -> None:
        """Force a fresh read next time (a re-plan during a pause)."""
        self._latest_at = None
        self._forecast_at = None

    def latest(self, now: datetime, ledger: Any = None) -> IntensityPoint | None:
        """Current intensity, or the last good one, or None when there never was one."""
        if self.signals is None:
            return None
        if self._fresh(self._latest_at, now, self.latest_refresh_s) and self._covers(self._latest, now):
            return self._latest
        try:
            point = self.signals.latest()
        except Exception as e:  # SignalError or a provider bug: degrade, never raise into training
            self.failure = f"{type(e).__name__}: {e}"
            self._on_note(f"carbon signal unavailable ({type(e).__name__}: {e}); using last value or running now")
            self._latest_at = now
            return self._latest
        self._latest, self._latest_at = point, now
        self.failure = None
        self.version += 1
        if ledger is not None:
            ledger.observe(point)
        self._on_event("carbon", intensity_g_per_kwh=point.intensity_g_per_kwh, kind=point.kind.value,
                       provider=point.provider, zone=point.zone, start=point.start)
        return point

    def forecast(self, now: datetime, ledger: Any = None) -> tuple[IntensityPoint, ...]:
        """Future points in time order (possibly empty); refreshed at most every ``forecast_refresh_s``."""
        if self.signals is None:
            return ()
        if self._fresh(self._forecast_at, now, self.forecast_refresh_s):
            return tuple(p for p in self._forecast if p.end > now)
        try:
            hours = max(1, math.ceil(self.horizon_h))  # SignalChain takes whole hours
            points = tuple(sorted(self.signals.forecast(horizon_h=hours), key=lambda p: p.start))
        except Exception as e:
            self._on_note(f"carbon forecast unavailable ({type(e).__name__}: {e}); planning without it")
            self._forecast_at = now
            return tuple(p for p in self._forecast if p.end > now)
        self._forecast, self._forecast_at = points, now
        self.version += 1
        if ledger is not None:
            ledger.observe_many(points)
        if points:
            self._on_event("forecast", points=[[p.start, p.intensity_g_per_kwh] for p in points])
        return tuple(p for p in points if p.end > now)

    def backfill(self, start: datetime, end: datetime, ledger: Any) -> int:
        """Load actual points of [start, end) into ``ledger`` where the source keeps history (a relaunch
        needs them to price the run-now counterfactual of hours before it started); the count loaded."""
        history = getattr(self.signals, "history", None)
        if history is None or start >= end:
            return 0
        try:
            points = list(history(start, end))
        except Exception as e:  # optional: without history the counterfactual uses the nearest known value
            self._on_note(f"carbon history unavailable ({type(e).__name__}: {e}); "
                          "emissions avoided before this relaunch are estimated from later values")
            return 0
        ledger.observe_many(points)
        return len(points)

    def unknown_reason(self) -> str:
        """Why no intensity is known: no signal configured, or the provider's last failure."""
        if self.signals is None:
            return "no carbon signal (no zone or provider given)"
        if self.failure:
            return f"carbon signal unavailable ({self.failure})"
        return "no carbon intensity known for this time"

    def status(self) -> Any:
        """The wrapped chain's ``status()`` (None if it has none or fails)."""
        try:
            return self.signals.status() if self.signals is not None else None
        except Exception:
            return None

    @staticmethod
    def _fresh(at: datetime | None, now: datetime, max_age_s: float) -> bool:
        return at is not None and timedelta(0) <= now - at < timedelta(seconds=max_age_s)

    @staticmethod
    def _covers(point: IntensityPoint | None, now: datetime) -> bool:
        return point is not None and point.start <= now < point.end

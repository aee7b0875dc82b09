"""A cache-only view of the carbon signal for the scrape thread.

A scrape must never wait on a carbon API. If the signal object offers
``peek()`` (cached latest point, no I/O), the view reads it directly and
cheaply. Otherwise a daemon thread of ours refreshes ``latest()``,
``forecast()`` and ``status()`` every ``refresh_s`` and the scrape reads what it
stored last; a failing provider only leaves the old values (whose age keeps
growing, so the staleness stays visible).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from greentrain.signals.base import IntensityPoint, ProviderStatus

if TYPE_CHECKING:
    from greentrain.signals.chain import SignalChain

__all__ = ["SignalReading", "SignalView"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SignalReading:
    """What the exporter shows about the signal, as of ``read_at_monotonic_s``."""

    latest: IntensityPoint | None
    forecast: tuple[IntensityPoint, ...]
    status: ProviderStatus | None
    read_at_monotonic_s: float

    def forecast_at(self, now: datetime) -> IntensityPoint | None:
        """The forecast point covering ``now`` (else the next one), or None."""
        for point in self.forecast:
            if point.end > now:
                return point
        return None

    def age_s(self) -> float | None:
        """Signal age now: the status's age plus the time since we read it."""
        if self.status is None:
            return None
        return self.status.age_s + max(0.0, time.monotonic() - self.read_at_monotonic_s)


_EMPTY = SignalReading(None, (), None, 0.0)


class SignalView:
    """Reads a SignalChain without blocking the caller."""

    def __init__(self, signals: SignalChain, *, refresh_s: float = 60.0, forecast_horizon_h: float = 24.0) -> None:
        self._signals = signals
        self._refresh_s = refresh_s
        self._horizon_h = forecast_horizon_h
        self._reading = _EMPTY
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cache_only = callable(getattr(signals, "peek", None))

    def read(self) -> SignalReading:
        """The latest stored reading; with ``peek()`` available, a fresh cache-only read."""
        if self._cache_only:
            self._refresh()
        else:
            self._ensure_thread()
        with self._lock:
            return self._reading

    def close(self) -> None:
        """Stop the refresher thread, if any."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _ensure_thread(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._loop, name="greentrain-signal-view", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._refresh()
            self._stop.wait(self._refresh_s)

    def _refresh(self) -> None:
        s = self._signals
        try:
            if self._cache_only:
                latest = s.peek()
                peek_forecast = getattr(s, "peek_forecast", None)
                forecast = tuple(peek_forecast()) if callable(peek_forecast) else ()
            else:
                latest = s.latest()
                forecast = tuple(s.forecast(self._horizon_h)) if callable(getattr(s, "forecast", None)) else ()
            status = s.status() if callable(getattr(s, "status", None)) else None
        except Exception as e:  # a carbon API fault must never reach the scrape or the training step
            log.warning("carbon signal read for metrics failed: %s", type(e).__name__)
            return
        with self._lock:
            self._reading = SignalReading(latest, forecast, status, time.monotonic())

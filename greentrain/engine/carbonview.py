"""The engine's view of the carbon signal: cached, fault-tolerant, logged.

Wraps a ``SignalChain`` (or anything with ``latest()``, ``forecast(horizon_h=)``)
so that a step boundary never waits on the network more than once per
interval, every failure becomes a note and a fallback (the last value, or no
signal = run now), and every value seen lands in the ledger for pricing.

A source that says ``uses_network = True`` (every chain with a live provider)
is read on a background thread: the step waits at most ``fetch_budget_s``,
then goes on with the last value or the chain's offline fallback (a static or
CSV provider), marks the signal ``stale``, and picks the answer up at a later
step. Sources without network I/O (traces, replays) are read directly, so a
replayed run stays deterministic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from greentrain.signals.base import IntensityPoint, ProviderStatus

if TYPE_CHECKING:
    from greentrain.engine.collaborators import CarbonSignal
    from greentrain.engine.ledger import CarbonLedger
from greentrain.engine.collaborators import KeepsHistory, OfflineFallback, UsesNetwork
from greentrain.engine.background import PENDING, BackgroundFetch, Fetched, FetchFailed, FetchOutcome
from greentrain.engine.signallog import SignalLog

__all__ = ["CarbonView", "FETCH_BUDGET_S"]

T = TypeVar("T")

FETCH_BUDGET_S = 0.5
"""Longest a step boundary waits for a carbon fetch before going on with the last value or the fallback."""


class CarbonView:
    """Cached access to ``latest`` and ``forecast`` with notes instead of exceptions."""

    def __init__(
        self,
        signals: CarbonSignal | None,
        *,
        horizon_h: float = 72.0,
        latest_refresh_s: float = 300.0,
        forecast_refresh_s: float = 900.0,
        on_note: Callable[[str], None] = lambda message: None,
        on_event: Callable[..., None] = lambda event, **fields: None,
        fetch_budget_s: float = FETCH_BUDGET_S,
    ) -> None:
        self.signals = signals
        self.fetch_budget_s = fetch_budget_s
        self.fetcher = BackgroundFetch() if isinstance(signals, UsesNetwork) and signals.uses_network else None
        """Reads the source off the training thread (None: a source without network I/O, read directly)."""
        self.stale = False
        """True while the value in use is not a fresh answer (a fetch overran its budget, or failed)."""
        self._backfill_ledger: CarbonLedger | None = None
        self._budget_at: datetime | None = None
        self._budget_left_s = fetch_budget_s
        self.horizon_h = horizon_h
        self.latest_refresh_s = latest_refresh_s
        self.forecast_refresh_s = forecast_refresh_s
        self._on_note = on_note
        self._on_event = on_event
        self._log = SignalLog(on_event)
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

    def latest(self, now: datetime, ledger: CarbonLedger | None = None) -> IntensityPoint | None:
        """Current intensity, or the last good one, or None when there never was one."""
        if self.signals is None:
            return None
        self._collect_backfill()
        if self._fresh(self._latest_at, now, self.latest_refresh_s) and self._covers(self._latest, now):
            return self._latest
        outcome = self._fetch("latest", self.signals.latest, now)
        if outcome is PENDING:
            return self._fallback_latest(now, ledger)
        if isinstance(outcome, FetchFailed):  # SignalError or a provider bug: degrade, never raise into training
            e = outcome.error
            self.failure = f"{type(e).__name__}: {e}"
            self._on_note(f"carbon signal unavailable ({type(e).__name__}: {e}); using last value or running now")
            self._latest_at, self.stale = now, True
            return self._latest
        point = outcome.value
        self._latest, self._latest_at, self.stale = point, now, False
        self.failure = None
        self.version += 1
        if ledger is not None:
            ledger.observe(point)
        self._log.carbon(point)  # only when it changed (engine/signallog.py)
        return point

    def forecast(self, now: datetime, ledger: CarbonLedger | None = None) -> tuple[IntensityPoint, ...]:
        """Future points in time order (possibly empty); refreshed at most every ``forecast_refresh_s``."""
        signals = self.signals
        if signals is None:
            return ()
        if self._fresh(self._forecast_at, now, self.forecast_refresh_s):
            return tuple(p for p in self._forecast if p.end > now)
        hours = max(1, math.ceil(self.horizon_h))  # SignalChain takes whole hours
        outcome = self._fetch("forecast", lambda: signals.forecast(horizon_h=hours), now)
        if outcome is PENDING:  # keep planning on the forecast in hand; collected at a later step
            return tuple(p for p in self._forecast if p.end > now)
        if isinstance(outcome, FetchFailed):
            e = outcome.error
            self._on_note(f"carbon forecast unavailable ({type(e).__name__}: {e}); planning without it")
            self._forecast_at = now
            return tuple(p for p in self._forecast if p.end > now)
        points = tuple(sorted(outcome.value, key=lambda p: p.start))
        self._forecast, self._forecast_at = points, now
        self.version += 1
        if ledger is not None:
            ledger.observe_many(points)
        self._log.forecast(points)  # the new or changed points only (engine/signallog.py)
        return tuple(p for p in points if p.end > now)

    def backfill(self, start: datetime, end: datetime, ledger: CarbonLedger) -> int:
        """Load actual points of [start, end) into ``ledger`` where the source keeps history (a relaunch
        needs them to price the run-now counterfactual of hours before it started); the count loaded."""
        signals = self.signals
        if not isinstance(signals, KeepsHistory) or start >= end:
            return 0
        outcome = self._fetch("history", lambda: list(signals.history(start, end)))
        if outcome is PENDING:  # loaded into the ledger by a later step when it arrives
            self._backfill_ledger = ledger
            return 0
        return self._apply_backfill(outcome, ledger)

    def _apply_backfill(self, outcome: FetchOutcome[list[IntensityPoint]], ledger: CarbonLedger) -> int:
        if outcome is PENDING:
            return 0
        if isinstance(outcome, FetchFailed):  # optional: without history the counterfactual uses the nearest value
            e = outcome.error
            self._on_note(f"carbon history unavailable ({type(e).__name__}: {e}); "
                          "emissions avoided before this relaunch are estimated from later values")
            return 0
        ledger.observe_many(outcome.value)
        return len(outcome.value)

    def _collect_backfill(self) -> None:
        if self._backfill_ledger is None or self.fetcher is None:
            return
        outcome: FetchOutcome[list[IntensityPoint]] = self.fetcher.poll("history")
        if outcome is not PENDING:
            ledger, self._backfill_ledger = self._backfill_ledger, None
            self._apply_backfill(outcome, ledger)

    def _fetch(self, key: str, call: Callable[[], T], now: datetime | None = None) -> FetchOutcome[T]:
        """``call()`` directly for an offline source; else on the background thread within the budget.

        Calls made at the same ``now`` (one step boundary: latest, then forecast) share one budget."""
        if self.fetcher is None:
            try:
                return Fetched(call())
            except Exception as e:  # noqa: BLE001 - handed back as an outcome
                return FetchFailed(e)
        if now is None or now != self._budget_at:
            self._budget_at, self._budget_left_s = now, self.fetch_budget_s
        fresh = not self.fetcher.busy(key)
        started = time.monotonic()
        outcome = self.fetcher.poll(key, call, self._budget_left_s)
        self._budget_left_s = max(0.0, self._budget_left_s - (time.monotonic() - started))
        if outcome is PENDING and fresh:
            self._on_note(f"carbon {key} fetch still running after {self.fetch_budget_s:g} s; "
                          "training goes on with the last value or the fallback (signal stale)")
        return outcome

    def _fallback_latest(self, now: datetime, ledger: CarbonLedger | None) -> IntensityPoint | None:
        """While a fetch runs: the last value, else the source's offline fallback, else None (run now)."""
        self.stale = True
        if self._latest is not None:
            return self._latest
        point = self.signals.offline_latest() if isinstance(self.signals, OfflineFallback) else None
        if point is not None:
            self._latest = point  # in use until the live answer arrives; _latest_at stays unset: poll again
            if ledger is not None:
                ledger.observe(point)
        return point

    def unknown_reason(self) -> str:
        """Why no intensity is known: no signal configured, or the provider's last failure."""
        if self.signals is None:
            return "no carbon signal (no zone or provider given)"
        if self.failure:
            return f"carbon signal unavailable ({self.failure})"
        return "no carbon intensity known for this time"

    def status(self) -> ProviderStatus | None:
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

"""An ordered fallback chain of providers with cache, backoff and visible staleness.

``latest()`` asks each provider in order (skipping any still backing off),
takes the first good answer, and never raises while it has *some* value: when
every provider fails it serves the last good one and ``status()`` says it is
stale. ``forecast()`` prefers a provider's own forecast and fills the rest of
the horizon (or all of it) with the causal ``Forecaster`` over recent history.

Every forecast a provider issues, the actuals read and greentrain's own
forecast (hourly) are recorded in the forecast archive (``archive``: on by
default, in ``cache_dir`` or the user cache; see ``signals/archive/chain``),
and the provider's forecast is blended with greentrain's own by the skill
that archive measured.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from greentrain.clock import Clock
from greentrain.errors import GreentrainError, RateLimitedError, SignalError
from greentrain.signals.backoff import Backoff
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, ProviderStatus
from greentrain.signals.cache import CachedProvider
from greentrain.signals.archive.chain import ChainArchive
from greentrain.signals.forecast.forecaster import Forecaster, floor_hour
from greentrain.signals.archive.recording import ArchiveRecorder, default_archive_path

__all__ = ["SignalChain"]

log = logging.getLogger(__name__)


def _describe(error: Exception) -> str:
    """Error text safe to show: our own messages are redacted at the source; others only by type."""
    if isinstance(error, GreentrainError):
        return str(error)[:300]
    return f"{type(error).__name__} (unexpected provider error)"


class SignalChain:
    """Carbon signal for one zone from an ordered list of providers."""

    def __init__(
        self,
        providers: Sequence[CarbonIntensityProvider],
        *,
        zone: str,
        clock: Clock,
        forecaster: Forecaster | None = None,
        ttl_s: float = 300.0,
        stale_after_s: float = 3600.0,
        cache_dir: Path | str | None = None,
        backoff_base_s: float = 30.0,
        backoff_max_s: float = 3600.0,
        history_days: int = 28,
        rng: random.Random | None = None,
        archive: ChainArchive | Path | str | bool = True,
    ) -> None:
        """Each provider is wrapped in a TTL cache (``cache_dir`` shares it across processes).

        ``archive``: the forecast archive file; True = the default one (``default_archive_path``: in
        ``cache_dir``, ``$GREENTRAIN_FORECAST_ARCHIVE`` or the user cache), False = record nothing.
        Only chains with a provider that issues forecasts record, and their provider's forecast is
        weighed against greentrain's own by the archive's measured skill; a ``ChainArchive`` of your
        own sets that up otherwise (e.g. ``blend=False``: record only).
        """
        if not providers:
            raise SignalError("SignalChain: needs at least one provider")
        self.zone, self._clock = zone, clock
        self._providers = [
            p if isinstance(p, CachedProvider) else CachedProvider(p, clock=clock, ttl_s=ttl_s, cache_dir=cache_dir)
            for p in providers
        ]
        self._forecaster = forecaster or Forecaster()
        self._stale_after_s = stale_after_s
        self._history = timedelta(days=history_days)
        shared_rng = rng or random.Random()
        # One schedule per (provider, query): a plan without /forecast access must not silence /latest.
        self._backoff = {
            (index, query): Backoff(base_s=backoff_base_s, max_s=backoff_max_s, rng=shared_rng)
            for index in range(len(providers))
            for query in ("latest", "forecast", "history")
        }
        self._lock = threading.RLock()
        self._last_good: tuple[IntensityPoint, datetime] | None = None
        self._serving_last_good = False
        self._last_error: str | None = None
        self._last_forecast: list[IntensityPoint] = []
        self._archive = archive if isinstance(archive, ChainArchive) else self._default_archive(archive, cache_dir)

    def _default_archive(self, archive: Path | str | bool, cache_dir: Path | str | None) -> ChainArchive | None:
        path = default_archive_path(cache_dir) if archive is True else (Path(archive) if archive else None)
        if path is None or not any(p.issues_forecasts for p in self._providers):
            return None
        return ChainArchive(ArchiveRecorder(path, clock=self._clock), self.zone)

    @property
    def archive(self) -> ChainArchive | None:
        """What this chain records into and blends by (None: recording off, or nothing to record)."""
        return self._archive

    @property
    def uses_network(self) -> bool:
        """Whether any provider may wait on the network (the engine then reads this chain off-thread)."""
        return any(p.uses_network for p in self._providers)

    def offline_latest(self) -> IntensityPoint | None:
        """The first answer of a provider without network I/O (static, CSV), or None; takes no lock,
        so it answers while a network fetch holds the chain."""
        for provider in self._providers:
            if provider.uses_network:
                continue
            try:
                return provider.latest(self.zone)
            except Exception:  # noqa: BLE001 - a fallback that fails is no fallback
                continue
        return None

    @property
    def providers(self) -> list[CarbonIntensityProvider]:
        """The wrapped providers, in order."""
        return list(self._providers)

    def _try(self, index: int, call, query: str = "latest"):  # type: ignore[no-untyped-def]
        """Run ``call(provider)`` for provider ``index``; record success/failure. None on failure."""
        provider, backoff = self._providers[index], self._backoff[(index, query)]
        now = self._clock.now()
        if not backoff.ready(now):
            return None
        try:
            result = call(provider)
        except Exception as e:  # noqa: BLE001 - a provider fault must never reach training
            retry_after = e.retry_after_s if isinstance(e, RateLimitedError) else None
            wait_s = backoff.failed(now, retry_after)
            said = _describe(e)
            self._last_error = said if said.startswith(f"{provider.name}:") else f"{provider.name}: {said}"
            log.warning("carbon provider %s failed, retry in %.0f s: %s", provider.name, wait_s, _describe(e))
            return None
        backoff.succeeded()
        return result

    def latest(self) -> IntensityPoint:
        """The current value from the first working provider, or the last good one (stale)."""
        with self._lock:
            for index in range(len(self._providers)):
                entry = self._try(index, lambda p: p.latest_entry(self.zone))
                if entry is not None and self._archive is not None:
                    self._archive.record_actuals([entry[0]])
                if entry is not None:
                    self._last_good, self._serving_last_good = entry, False
                    if index == 0:
                        self._last_error = None  # the preferred provider is back
                    return entry[0]
            if self._last_good is None:
                raise SignalError(f"no carbon signal for zone {self.zone!r}: {self._last_error}")
            self._serving_last_good = True
            return self._last_good[0]

    def forecast(self, horizon_h: float = 72) -> list[IntensityPoint]:
        """Hourly-or-finer points covering up to ``horizon_h`` hours ahead; [] if nothing is known."""
        with self._lock:
            now = self._clock.now()
            hours = -int(-horizon_h // 1)  # whole hours (callers pass 72.0)
            for index in range(len(self._providers)):
                # A failed forecast call still leaves history + Forecaster (e.g. a plan without /forecast).
                entry = self._try(index, lambda p: p.forecast_entry(self.zone, float(horizon_h)), "forecast")
                points = [p for p in (entry[0] if entry else []) if p.end > now]
                own = self._archived(index, entry, points, now, hours)
                covered_until = points[-1].end if points else floor_hour(now) + timedelta(hours=1)
                if covered_until >= now + timedelta(hours=horizon_h):
                    self._last_forecast = points
                    return points
                extension = own if own is not None else self._own_forecast(index, now, hours)
                tail = [p for p in extension if p.start >= covered_until]
                if points or tail:
                    self._last_forecast = points + tail
                    return points + tail
            return []

    def _archived(self, index: int, entry: tuple[list[IntensityPoint], datetime] | None,
                  points: list[IntensityPoint], now: datetime, hours: int) -> list[IntensityPoint] | None:
        """Record provider ``index``'s forecast, and blend ``points`` in place by the archive's skill; returns
        greentrain's own forecast when one was made for that (else None)."""
        provider = self._providers[index]
        if self._archive is None or not provider.issues_forecasts:
            return None
        if entry is not None:
            self._archive.record_forecast(entry[0], entry[1], provider.name)
        if not points or not self._archive.wants_own(provider.name, now):
            return None
        own = self._own_forecast(index, now, hours)
        self._archive.record_own(own, now)
        points[:] = self._archive.blend(points, own, provider.name, now)
        return own

    def peek(self) -> IntensityPoint | None:
        """The value in use, from memory: no I/O and no waiting on a fetch (for scrape threads)."""
        last_good = self._last_good  # one attribute read: atomic, so no lock is needed
        return None if last_good is None else last_good[0]

    def peek_forecast(self) -> list[IntensityPoint]:
        """The last forecast, from memory, without points that have already ended (no I/O, no waiting)."""
        now = self._clock.now()
        return [p for p in self._last_forecast if p.end > now]

    def _own_forecast(self, index: int, now: datetime, horizon_h: int) -> list[IntensityPoint]:
        """The Forecaster over provider ``index``'s recent history (empty if it has none)."""
        end = floor_hour(now) + timedelta(hours=1)
        history = self._try(index, lambda p: p.history(self.zone, end - self._history, end), "history")
        if not history:
            return []
        if self._archive is not None:
            self._archive.record_actuals(history)
        return self._forecaster.forecast(history, now, horizon_h)

    def history(self, start: datetime, end: datetime) -> list[IntensityPoint]:
        """Actual points over [start, end) from the first provider that has them."""
        with self._lock:
            for index in range(len(self._providers)):
                points = self._try(index, lambda p: p.history(self.zone, start, end), "history")
                if points:
                    if self._archive is not None:
                        self._archive.record_actuals(points)
                    return points
            return []

    def status(self) -> ProviderStatus:
        """Provider in use, age of its value (s), whether stale, and the last error (no secrets).

        Reads attributes without the chain's lock, so a scrape never waits behind a slow fetch."""
        last_good, last_error = self._last_good, self._last_error
        if last_good is None:
            return ProviderStatus(provider="none", zone=self.zone, age_s=float("inf"), stale=True,
                                  last_error=last_error)
        point, fetched_at = last_good
        now = self._clock.now()
        age_s = max(0.0, (now - fetched_at).total_seconds(), (now - point.end).total_seconds())
        return ProviderStatus(
            provider=point.provider,
            zone=self.zone,
            age_s=age_s,
            stale=self._serving_last_good or age_s > self._stale_after_s,
            last_error=last_error,
        )

    def close(self) -> None:
        """Close every provider's connections (and the archive file)."""
        for provider in self._providers:
            provider.close()
        if self._archive is not None:
            self._archive.close()

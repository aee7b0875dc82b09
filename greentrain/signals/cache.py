"""Per-provider TTL cache, in memory and on disk.

Restarts and the many ranks of one job on a node share ``cache_dir``, so a
provider is asked at most once per TTL however many processes need the
value. Files are written atomically (temp file + ``os.replace``), so a reader
never sees half a file; an unreadable file is just a miss.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

from greentrain.clock import Clock, SystemClock
from greentrain.errors import ConfigError
from greentrain.signals.base import CarbonIntensityProvider, EmissionFactor, IntensityPoint, Kind
from greentrain.userfile import JSONObject, JSONValue

__all__ = ["TTLCache", "CacheEntry", "CachedProvider", "point_to_dict", "point_from_dict"]

CacheEntry = tuple[list[IntensityPoint], datetime]
"""(points, when they were fetched from the provider)."""


def point_to_dict(point: IntensityPoint) -> JSONObject:
    """JSON-ready form of a point (times as ISO-8601 UTC)."""
    return {
        "start": point.start.isoformat(),
        "end": point.end.isoformat(),
        "intensity_g_per_kwh": point.intensity_g_per_kwh,
        "kind": point.kind.value,
        "provider": point.provider,
        "zone": point.zone,
        "emission_factor": point.emission_factor.value,
        "estimated": point.estimated,
    }


def _text(value: JSONValue) -> str:
    """``value`` if a string; TypeError otherwise, which callers treat like a missing key."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _float(value: JSONValue) -> float:
    """``float(value)`` for what ``float`` accepts from JSON (a number or a numeric string); else TypeError."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    return float(value)


def point_from_dict(data: Mapping[str, JSONValue]) -> IntensityPoint:
    """Inverse of ``point_to_dict``; KeyError/ValueError/TypeError if malformed."""
    return IntensityPoint(
        start=datetime.fromisoformat(_text(data["start"])),
        end=datetime.fromisoformat(_text(data["end"])),
        intensity_g_per_kwh=_float(data["intensity_g_per_kwh"]),
        kind=Kind(str(data["kind"])),
        provider=str(data["provider"]),
        zone=str(data["zone"]),
        emission_factor=EmissionFactor(str(data["emission_factor"])),
        estimated=bool(data["estimated"]),
    )


class TTLCache:
    """Point lists by key, fresh for ``ttl_s`` seconds of ``clock`` time."""

    def __init__(self, *, clock: Clock, ttl_s: float, cache_dir: Path | str | None = None) -> None:
        if ttl_s < 0:
            raise ConfigError(f"ttl_s: must be >= 0, got {ttl_s}")
        self._clock, self.ttl_s = clock, float(ttl_s)
        self._dir = None if cache_dir is None else Path(cache_dir).expanduser()
        self._memory: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def _path(self, key: str) -> Path | None:
        if self._dir is None:
            return None
        return self._dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def get(self, key: str) -> CacheEntry | None:
        """The entry for ``key`` if fetched within the TTL, else None (a miss)."""
        ttl = timedelta(seconds=self.ttl_s)
        with self._lock:
            entry = self._memory.get(key)
            if entry is None or self._clock.now() - entry[1] > ttl:
                # Another process (rank, restart) may have refreshed the disk copy since.
                disk = self._read(key)
                if disk is not None and (entry is None or disk[1] > entry[1]):
                    entry = disk
            if entry is not None and self._clock.now() - entry[1] <= ttl:
                self._memory[key] = entry
                self.hits += 1
                return entry
            self.misses += 1
            return None

    def put(self, key: str, points: list[IntensityPoint]) -> CacheEntry:
        """Store ``points`` as fetched now; returns the entry."""
        entry = (list(points), self._clock.now())
        with self._lock:
            self._memory[key] = entry
            self._write(key, entry)
        return entry

    def _read(self, key: str) -> CacheEntry | None:
        path = self._path(key)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data["key"] != key:
                return None
            return [point_from_dict(p) for p in data["points"]], datetime.fromisoformat(data["fetched_at"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write(self, key: str, entry: CacheEntry) -> None:
        path = self._path(key)
        if path is None:
            return
        body = {"key": key, "fetched_at": entry[1].isoformat(), "points": [point_to_dict(p) for p in entry[0]]}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(body, handle)
            os.replace(tmp, path)
        except OSError:
            # A cache that cannot write is only slower; the value is still served from memory.
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass


class CachedProvider(CarbonIntensityProvider):
    """Wraps a provider so latest/forecast/history answers are reused for ``ttl_s``."""

    name: ClassVar[str] = "cached"

    def __init__(
        self,
        inner: CarbonIntensityProvider,
        *,
        clock: Clock | None = None,
        ttl_s: float = 300.0,
        cache_dir: Path | str | None = None,
        key_prefix: str = "",
    ) -> None:
        """``key_prefix`` separates instances that talk to different endpoints (e.g. the api_base)."""
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # report the wrapped provider's name
        self.uses_network = inner.uses_network  # type: ignore[misc]
        self.issues_forecasts = inner.issues_forecasts  # type: ignore[misc]
        self.cache = TTLCache(clock=clock or SystemClock(), ttl_s=ttl_s, cache_dir=cache_dir)
        self._prefix = f"{key_prefix}|{inner.name}"

    def _cached(self, key: str, fetch: Callable[[], list[IntensityPoint]]) -> CacheEntry:
        full_key = f"{self._prefix}|{key}"
        entry = self.cache.get(full_key)
        return entry if entry is not None else self.cache.put(full_key, fetch())

    def latest_entry(self, zone: str) -> tuple[IntensityPoint, datetime]:
        """The latest point and when it was fetched from the provider."""
        points, fetched_at = self._cached(f"latest|{zone}", lambda: [self.inner.latest(zone)])
        return points[0], fetched_at

    def latest(self, zone: str) -> IntensityPoint:
        return self.latest_entry(zone)[0]

    def forecast_entry(self, zone: str, horizon_h: float = 72.0) -> CacheEntry:
        """The forecast and when it was fetched from the provider (its issue time for the archive)."""
        points, fetched_at = self._cached(f"forecast|{zone}|{horizon_h}", lambda: self.inner.forecast(zone, horizon_h))
        return list(points), fetched_at

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        return self.forecast_entry(zone, horizon_h)[0]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        key = f"history|{zone}|{start.isoformat()}|{end.isoformat()}"
        return list(self._cached(key, lambda: self.inner.history(zone, start, end))[0])

    def configured(self) -> bool:
        return self.inner.configured()

    def close(self) -> None:
        self.inner.close()


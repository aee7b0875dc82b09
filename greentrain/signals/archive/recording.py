"""Recording fetched forecasts into the archive, without ever failing the caller.

``ArchiveRecorder`` is what the signal chain and ``greentrain carbon record``
write through. Points become hourly rows (greentrain plans by the hour; an
hour is written only when the points cover all of it, and a forecast only for
hours starting at or after its issue time). It opens the file on the first
write, so a chain that never sees a forecast never touches the disk.

Training never fails because the archive did: a file that is locked past the
busy timeout costs one write (counted, reported once); a corrupt file is set
aside (renamed ``NAME.corrupt-<UTC time>``) with a warning and a fresh archive
started; any other fault (a full disk, a read-only directory) is reported once
and recording stops for this process after a few in a row.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from greentrain.clock import Clock, SystemClock
from greentrain.hours import floor_hour
from greentrain.signals.archive.store import (
    UNIT,
    ArchiveCorruptError,
    ArchiveError,
    ArchiveLockedError,
    ForecastArchive,
)
from greentrain.signals.base import IntensityPoint, Kind

__all__ = ["ArchiveRecorder", "DEFAULT_MAX_BYTES", "ENV_ARCHIVE", "default_archive_path", "hourly_rows",
           "OWN_SOURCE"]

log = logging.getLogger(__name__)
T = TypeVar("T")

ENV_ARCHIVE = "GREENTRAIN_FORECAST_ARCHIVE"
"""A path for the default archive, or 'off' to record nothing."""
DEFAULT_MAX_BYTES = 128 << 20
"""Size cap of the default archive: about a year of one provider re-fetched every 15 minutes."""
OWN_SOURCE = "greentrain"
"""The provider name greentrain's own forecasts are recorded under (their skill is measured the same way)."""
_OFF = {"off", "0", "false", "no", "none"}
_HOUR = timedelta(hours=1)
_MAX_FAILURES = 3
_SAME_FORECAST_S = 3600
"""An unchanged forecast is written again after this long (so the archive shows it was still current)."""


def default_archive_path(cache_dir: str | Path | None = None) -> Path | None:
    """``$GREENTRAIN_FORECAST_ARCHIVE`` ('off': None), else ``cache_dir``/forecasts.sqlite, else the user
    cache (``$XDG_CACHE_HOME`` or ~/.cache)/greentrain/signals/forecasts.sqlite."""
    env = os.environ.get(ENV_ARCHIVE, "").strip()
    if env:
        return None if env.lower() in _OFF else Path(env).expanduser()
    if cache_dir is not None:
        return Path(cache_dir).expanduser() / "forecasts.sqlite"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "greentrain" / "signals" / "forecasts.sqlite"


def hourly_rows(points: Sequence[IntensityPoint], *, not_before: datetime | None = None,
                whole_hours: bool = True) -> list[tuple[int, float]]:
    """(hour start in unix seconds, time-weighted mean g/kWh) per hour the points cover (entirely, with
    ``whole_hours``: an actual of part of an hour is not the hour's; a forecast's part is its best guess).

    With ``not_before``, hours that start before it are left out (a forecast's targets come after its issue).
    """
    sums: dict[datetime, list[float]] = {}
    for point in points:
        start = point.start
        while start < point.end:
            hour = floor_hour(start)
            stop = min(point.end, hour + _HOUR)
            seconds = (stop - start).total_seconds()
            acc = sums.setdefault(hour, [0.0, 0.0])
            acc[0] += seconds * point.intensity_g_per_kwh
            acc[1] += seconds
            start = stop
    rows = []
    for hour in sorted(sums):
        total, seconds = sums[hour]
        if (seconds >= 3600 - 1e-6 or not whole_hours) and (not_before is None or hour >= not_before):
            rows.append((int(hour.timestamp()), total / seconds))
    return rows


class ArchiveRecorder:
    """Writes forecasts and actuals to one archive file; every error is handled here."""

    def __init__(self, path: str | Path, *, max_bytes: int | None = DEFAULT_MAX_BYTES, clock: Clock | None = None,
                 on_problem: Callable[[str], None] | None = None, busy_timeout_s: float = 5.0) -> None:
        """``on_problem`` receives each reported problem as one line (default: a logged warning);
        ``busy_timeout_s``: how long a write waits for another writer's lock before it is skipped."""
        self.path = Path(path).expanduser()
        self.max_bytes = max_bytes
        self.busy_timeout_s = busy_timeout_s
        self._clock = clock or SystemClock()
        self._report = on_problem or (lambda message: log.warning("greentrain: %s", message))
        self._archive: ForecastArchive | None = None
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], tuple[int, list[tuple[int, float]]]] = {}
        self._failures = 0
        self.disabled = False
        """True once recording gave up for this process (the reason was reported)."""
        self.skipped_writes = 0
        """Writes lost to a locked or unusable file."""
        self.rows_written = 0
        self.set_aside: list[Path] = []
        """Corrupt files renamed out of the way."""

    def record_forecast(self, points: Sequence[IntensityPoint], *, issued_at: datetime, provider: str,
                        zone: str) -> int:
        """Record one fetched forecast (its whole hours from ``issued_at`` on); the rows written."""
        issued_s = int(issued_at.timestamp())
        rows = hourly_rows([p for p in points if p.kind == Kind.FORECAST], not_before=issued_at, whole_hours=False)
        if not rows:
            return 0
        key = (provider, zone)
        last = self._last.get(key)
        if last is not None and (last[0] == issued_s or (rows == last[1][-len(rows):] and 0 <= issued_s - last[0]
                                                          < _SAME_FORECAST_S)):
            return 0  # the same fetch again (a cache hit), or an unchanged forecast written within the hour
        written = self._write(provider, zone, forecasts=[(issued_s, t, v) for t, v in rows])
        if written is not None:
            self._last[key] = (issued_s, rows)
        return written or 0

    def record_actuals(self, points: Sequence[IntensityPoint]) -> int:
        """Record the whole hours of measured (``kind=actual``) points, per provider and zone."""
        by_series: dict[tuple[str, str], list[IntensityPoint]] = {}
        for point in points:
            if point.kind == Kind.ACTUAL:
                by_series.setdefault((point.provider, point.zone), []).append(point)
        written = 0
        for (provider, zone), group in by_series.items():
            rows = hourly_rows(group)
            if rows:
                written += self._write(provider, zone, actuals=rows) or 0
        return written

    def _write(self, provider: str, zone: str, **rows: list) -> int | None:
        """One transaction; None when the write was lost (locked, unusable file, recording disabled)."""
        with self._lock:
            if self.disabled:
                return None
            for attempt in (1, 2):
                try:
                    if self._archive is None:
                        self._archive = ForecastArchive(self.path, max_bytes=self.max_bytes,
                                                        busy_timeout_s=self.busy_timeout_s)
                    written = self._archive.write(provider, zone, unit=UNIT, **rows)
                except ArchiveLockedError as e:
                    self._lost(f"forecast archive write skipped: {e}")
                    return None
                except ArchiveCorruptError as e:
                    if attempt == 1 and self._set_aside(e):
                        continue  # a fresh file in its place: try once more
                    self._lost(f"forecast archive unusable: {e}")
                    return None
                except ArchiveError as e:  # another program's SQLite file, a newer schema, no folder: leave it be
                    self._lost(f"forecast archive unusable: {e}; recording stopped for this process", final=True)
                    return None
                except Exception as e:  # noqa: BLE001 - a full disk or a bug must never reach training
                    self._lost(f"forecast archive write failed ({type(e).__name__}: {e})")
                    return None
                self._failures = 0
                self.rows_written += written
                return written
        return None

    def _lost(self, message: str, *, final: bool = False) -> None:
        """Count a lost write; report the first of a run of failures (and a final one); give up after a few."""
        self.skipped_writes += 1
        self._failures += 1
        if self._failures == 1 or final:
            self._report(message)
        if final:
            self.disabled = True
        elif self._failures >= _MAX_FAILURES:
            self.disabled = True
            self._report(f"forecast recording stopped for this process after {self._failures} failed writes "
                         f"to {self.path}")
        return None

    def _set_aside(self, error: ArchiveCorruptError) -> bool:
        """Rename a corrupt archive (and its WAL) out of the way; False if that cannot be done."""
        if self._archive is not None:
            self._archive.close()
            self._archive = None
        if not self.path.is_file():
            return False
        stamp = self._clock.now().strftime("%Y%m%dT%H%M%SZ")
        target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        try:
            os.replace(self.path, target)
            for suffix in ("-wal", "-shm"):
                side = Path(f"{self.path}{suffix}")
                if side.exists():
                    os.replace(side, Path(f"{target}{suffix}"))
        except OSError:
            return False
        self.set_aside.append(target)
        self._report(f"{error}; set aside as {target.name}, recording into a fresh archive")
        return True

    def read(self, query: Callable[[ForecastArchive], T]) -> T | None:
        """``query(archive)`` on the open file (opened if it exists); None when there is none or recording
        was disabled. Errors of the query itself reach the caller."""
        with self._lock:
            if self.disabled:
                return None
            if self._archive is None:
                if not self.path.is_file():
                    return None
                self._archive = ForecastArchive(self.path, max_bytes=self.max_bytes,
                                                busy_timeout_s=self.busy_timeout_s)
            archive = self._archive
        return query(archive)

    def close(self) -> None:
        """Close the archive file (recording reopens it if asked again)."""
        with self._lock:
            if self._archive is not None:
                self._archive.close()
                self._archive = None

"""Filling an archive from outside: the long CSV format, and WattTime's past forecasts.

``import_csv`` adds a checked long-format file (``longcsv``) as one
series. ``import_watttime_history`` pulls ``/v3/forecast/historical`` for a
region and date range, an hour of issue times per request (WattTime issues a
forecast every five minutes, 72 h of five-minute values each: a day per
request would pass the body cap), keeps one forecast per ``every_s`` and
stores it as hourly values, one transaction per request. A failure stops the
import with what was already stored kept; running the same range again adds
only what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol, runtime_checkable

from greentrain.errors import ConfigError
from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.archive.longcsv import read_forecast_csv
from greentrain.signals.base import IntensityPoint
from greentrain.signals.archive.recording import hourly_rows

__all__ = ["ImportResult", "import_csv", "import_watttime_history"]

_CHUNK = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import added."""

    issues: int
    """Forecasts (issue times) read and kept."""
    rows_added: int
    """Rows new to the archive (rows already there are kept as they were)."""
    skipped: int
    """Exact repeats in a CSV, or WattTime forecasts thinned out by ``every_s``."""


@runtime_checkable
class ForecastHistorySource(Protocol):
    """What the WattTime import needs (``WattTimeProvider.forecast_history``)."""

    def forecast_history(self, zone: str, start: datetime, end: datetime,
                         horizon_h: float = 72.0) -> list[tuple[datetime, list[IntensityPoint]]]:
        ...


def import_csv(archive: ForecastArchive, path: str | Path, *, provider: str, zone: str) -> ImportResult:
    """Add a long-format CSV as the series (``provider``, ``zone``); ConfigError naming each bad row."""
    if not provider.strip() or not zone.strip():
        raise ConfigError("--provider and --zone: name the series the file's forecasts belong to")
    rows = read_forecast_csv(path)
    added = archive.write(provider, zone, forecasts=zip(rows.issued_s.tolist(), rows.target_s.tolist(),
                                                         rows.value_g_per_kwh.tolist()))
    issues = len(set(rows.issued_s.tolist()))
    return ImportResult(issues, added, rows.repeated_rows)


def import_watttime_history(source: ForecastHistorySource, archive: ForecastArchive, region: str, start: datetime,
                            end: datetime, *, every_s: float = 3600.0, horizon_h: float = 72.0,
                            progress: Callable[[datetime, int], None] | None = None) -> ImportResult:
    """Forecasts WattTime generated in [start, end), one kept per ``every_s``, into series ``watttime``/``region``.

    ``progress(chunk_start, rows_added)`` is called after each request's transaction.
    """
    if end <= start:
        raise ConfigError("--end: must be after --start")
    if every_s < 300:
        raise ConfigError(f"--every: WattTime issues a forecast every 5 minutes; {every_s:g} s is less")
    issues = added = skipped = 0
    kept_slot: int | None = None
    chunk_start = start
    while chunk_start < end:
        chunk_end = min(chunk_start + _CHUNK, end)
        rows: list[tuple[int, int, float]] = []
        for generated_at, points in source.forecast_history(region, chunk_start, chunk_end, horizon_h):
            slot = int(generated_at.timestamp() // every_s)
            if not chunk_start <= generated_at < chunk_end or slot == kept_slot:
                skipped += generated_at < chunk_end and generated_at >= chunk_start
                continue
            kept_slot = slot
            issues += 1
            issued_s = int(generated_at.timestamp())
            rows.extend((issued_s, t, v) for t, v in hourly_rows(points, not_before=generated_at, whole_hours=False))
        written = archive.write("watttime", region, forecasts=rows)
        added += written
        if progress is not None:
            progress(chunk_start, written)
        chunk_start = chunk_end
    return ImportResult(issues, added, skipped)

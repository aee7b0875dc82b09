"""The archive's long CSV format: ``issued_at,target_time,intensity_g_per_kwh``, one forecast value a row.

What ``greentrain carbon archive export --csv`` writes and ``carbon archive
import`` and ``greentrain simulate --forecast-archive`` read, so forecasts
recorded elsewhere (a scraper of the GB API, a spreadsheet) can be replayed.
Times are ISO-8601 in UTC (``Z`` or ``+00:00``). Rows are checked one by one:
a time that is not UTC, a target before its issue time, a negative or
non-numeric value, or the same (issued_at, target_time) given twice with two
values is an error naming the file and row (every bad row, up to a screenful);
an exact repeat of a row is skipped and counted.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

import numpy as np

from greentrain.errors import ConfigError
from greentrain.userfile import TRACE_MAX_BYTES, read_text

__all__ = ["HEADER", "CSVForecasts", "read_forecast_csv", "write_forecast_csv", "iso_z"]

HEADER = ("issued_at", "target_time", "intensity_g_per_kwh")
_MAX_REPORTED = 10
_ZERO = timedelta(0)


def iso_z(seconds: int) -> str:
    """Unix seconds as ISO-8601 UTC with a 'Z'."""
    return datetime.fromtimestamp(int(seconds), UTC).isoformat().replace("+00:00", "Z")


def write_forecast_csv(rows: Iterable[tuple[int, int, float]], handle: TextIO) -> int:
    """Write the header and (issued_at_s, target_time_s, value) rows; returns the rows written."""
    writer = csv.writer(handle, lineterminator="\n")
    writer.writerow(HEADER)
    count = 0
    for issued_s, target_s, value in rows:
        writer.writerow((iso_z(issued_s), iso_z(target_s), f"{value:.6g}"))
        count += 1
    return count


@dataclass(frozen=True, slots=True)
class CSVForecasts:
    """The rows of a long-format file, as arrays ordered by issue then target time."""

    issued_s: np.ndarray
    target_s: np.ndarray
    value_g_per_kwh: np.ndarray
    repeated_rows: int
    """Exact repeats of an earlier row, skipped."""


def _utc_seconds(text: str, column: str) -> int:
    """Unix seconds of an ISO-8601 UTC time; ValueError with the reason otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{column} {text.strip()[:40]!r} is not an ISO-8601 time") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{column} {text.strip()[:40]!r} has no time zone (write it in UTC, e.g. 2022-03-01T00:00Z)")
    if parsed.utcoffset() != _ZERO:
        raise ValueError(f"{column} {text.strip()[:40]!r} is not UTC (offset {parsed.utcoffset()}); convert it to UTC")
    return int(parsed.timestamp())


def _header_problem(fields: list[str] | None) -> str | None:
    names = [f.strip().lower() for f in fields or []]
    if tuple(names) == HEADER:
        return None
    if len(names) == 3 and names[:2] == list(HEADER[:2]) and names[2].startswith("intensity_"):
        return (f"column {fields[2]!r} is in a unit greentrain does not read here; "  # type: ignore[index]
                f"convert the values to g/kWh and name the column {HEADER[2]}")
    return f"header must be {','.join(HEADER)}, got {','.join(fields or []) or 'nothing'}"


def read_forecast_csv(path: str | Path) -> CSVForecasts:
    """Parse and check a long-format file; ConfigError listing every bad row (file:row: reason)."""
    path = Path(path)
    text = read_text(path, what="forecast archive CSV", max_bytes=TRACE_MAX_BYTES)
    reader = csv.reader(io.StringIO(text, newline=""))
    fields = next(reader, None)
    problem = _header_problem(fields)
    if problem is not None:
        raise ConfigError(f"{path}:1: {problem}")
    seen: dict[tuple[int, int], tuple[float, int]] = {}
    problems: list[str] = []
    repeated = 0
    for row_no, row in enumerate(reader, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(problems) > _MAX_REPORTED:
            break
        try:
            if len(row) != 3:
                raise ValueError(f"expected 3 columns, got {len(row)}")
            issued_s = _utc_seconds(row[0], "issued_at")
            target_s = _utc_seconds(row[1], "target_time")
            value = float(row[2])
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"intensity {row[2].strip()[:20]!r} is not a finite value >= 0")
            if target_s < issued_s:
                raise ValueError(f"target_time {row[1].strip()} is before issued_at {row[0].strip()}")
        except ValueError as e:
            problems.append(f"{path}:{row_no}: {e}")
            continue
        earlier = seen.get((issued_s, target_s))
        if earlier is None:
            seen[(issued_s, target_s)] = (value, row_no)
        elif earlier[0] == value:
            repeated += 1
        else:
            problems.append(f"{path}:{row_no}: overlaps row {earlier[1]} (same issued_at and target_time, "
                            f"value {value:g} against {earlier[0]:g})")
    if problems:
        if len(problems) > _MAX_REPORTED:
            problems[_MAX_REPORTED:] = [f"{path}: more bad rows follow; fix these first"]
        raise ConfigError("\n".join(problems))
    keys = sorted(seen)
    issued = np.array([k[0] for k in keys], dtype=np.int64)
    target = np.array([k[1] for k in keys], dtype=np.int64)
    values = np.array([seen[k][0] for k in keys], dtype=np.float64)
    return CSVForecasts(issued, target, values, repeated)

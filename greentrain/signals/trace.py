"""Read an Electricity Maps data-portal CSV export into hourly IntensityPoints.

The export has one row per hour (``Datetime (UTC)`` marks the interval start),
a ``direct`` and an ``LCA`` intensity column and a ``Data Estimated`` flag.
"""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.signals.base import EmissionFactor, IntensityPoint, Kind
from greentrain.userfile import TRACE_MAX_BYTES, read_text

__all__ = ["load_trace", "COLUMNS"]

COLUMNS = {
    "direct": ("Carbon Intensity gCO₂eq/kWh (direct)", EmissionFactor.DIRECT),
    "lca": ("Carbon Intensity gCO₂eq/kWh (LCA)", EmissionFactor.LIFECYCLE),
}
_TIME_COLUMN = "Datetime (UTC)"
_ZONE_COLUMN = "Zone Id"
_MAX_REPORTED = 10


def _parse_time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def load_trace(path: str | Path, column: str = "direct", provider: str = "csv") -> list[IntensityPoint]:
    """Parse ``path``; ``column`` is 'direct' or 'lca'. Raises ConfigError naming file/row/column."""
    path = Path(path)
    key = column.lower()
    if key not in COLUMNS:
        raise ConfigError(f"column: {column!r} is not one of {', '.join(COLUMNS)}")
    header, factor = COLUMNS[key]
    text = read_text(path, what="trace", max_bytes=TRACE_MAX_BYTES)
    points: list[IntensityPoint] = []
    with io.StringIO(text, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in (_TIME_COLUMN, header) if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path}: not an Electricity Maps export, missing column(s) {missing}")
        problems: list[str] = []
        for row_no, row in enumerate(reader, start=2):
            if len(problems) > _MAX_REPORTED:
                break
            try:
                start = _parse_time(row[_TIME_COLUMN])
                value = float(row[header])
            except (TypeError, ValueError, AttributeError):
                problems.append(f"{path}:{row_no}: bad time or {key} intensity")
                continue
            if not math.isfinite(value) or value < 0:
                problems.append(f"{path}:{row_no}: intensity {value} is not a finite value >= 0")
                continue
            if points and start <= points[-1].start:
                problems.append(f"{path}:{row_no}: time {start.isoformat()} is not after the previous row")
                continue
            points.append(
                IntensityPoint(
                    start=start,
                    end=start + timedelta(hours=1),
                    intensity_g_per_kwh=value,
                    kind=Kind.ACTUAL,
                    provider=provider,
                    zone=(row.get(_ZONE_COLUMN) or "").strip() or path.stem,
                    emission_factor=factor,
                    estimated=(row.get("Data Estimated") or "").strip().lower() == "true",
                )
            )
    if problems:  # all of them (up to a screenful), one line each, so one edit fixes the file
        if len(problems) > _MAX_REPORTED:
            problems[_MAX_REPORTED:] = [f"{path}: more bad rows follow; fix these first"]
        raise ConfigError("\n".join(problems))
    if not points:
        raise ConfigError(f"{path}: trace has no rows")
    # Rows are hourly starts; the last interval ends an hour after its start.
    return points

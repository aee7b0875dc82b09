"""``greentrain simulate --forecast-archive``: the simulator's side of replaying forecasts as issued.

Loads the archive (the SQLite file or the long CSV format) for the trace's
zone, leaves out what does not belong (other zones or units, malformed rows,
targets before their issue, negative values), counting each, and builds the
``signals.archive.replay.ArchiveForecaster`` the replay asks at every decision.
``summary`` is what ``simulate`` prints about it: the file, the series, the
rows left out, and the decision hours that fell back to the trace-only
forecaster because the archive had a gap there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from greentrain.errors import ConfigError
from greentrain.signals.archive.store import UNIT, ForecastArchive, is_sqlite_file
from greentrain.signals.archive.longcsv import read_forecast_csv
from greentrain.signals.archive.replay import ArchiveForecaster, OwnForecaster
from greentrain.signals.archive.issued import IssuedForecasts

__all__ = ["BLENDS", "LoadedArchive", "load_forecast_archive", "make_archive_forecaster", "summary"]

BLENDS = ("skill", "latest")
"""skill: provider and own forecast weighted by measured error; latest: the latest forecast taken as exact."""
CSV_SOURCE = "archive"
"""The series name a CSV archive's forecasts get (the format names no provider)."""


@dataclass(slots=True)
class LoadedArchive:
    """One series of an archive, ready for lookups, and what was left out of the file."""

    path: Path
    issued: IssuedForecasts
    skipped: dict[str, int] = field(default_factory=dict)


def _clean(path: Path, issued_s: np.ndarray, target_s: np.ndarray, value: np.ndarray, provider: str, zone: str,
           skipped: dict[str, int]) -> LoadedArchive:
    bad_value = ~np.isfinite(value) | (value < 0)
    early = target_s < issued_s
    for reason, mask in (("negative or non-numeric values", bad_value), ("targets before their issue time", early)):
        if mask.any():
            skipped[reason] = int(mask.sum())
    keep = ~(bad_value | early)
    issued = IssuedForecasts(issued_s[keep], target_s[keep], value[keep], provider=provider, zone=zone)
    if issued.counts.too_far:
        skipped["targets over two weeks after their issue"] = issued.counts.too_far
    if issued.empty:
        raise ConfigError(f"--forecast-archive: {path} has no usable forecasts for zone {zone!r}")
    return LoadedArchive(path, issued, skipped)


def load_forecast_archive(path: Path, zone: str, provider: str | None = None) -> LoadedArchive:
    """The series of ``zone`` (and ``provider``, when the archive has several) from ``path``."""
    if not path.is_file():
        raise ConfigError(f"--forecast-archive: {path}: no such file")
    if not is_sqlite_file(path):
        rows = read_forecast_csv(path)
        skipped = {"repeated rows": rows.repeated_rows} if rows.repeated_rows else {}
        return _clean(path, rows.issued_s, rows.target_s, rows.value_g_per_kwh, provider or CSV_SOURCE, zone, skipped)
    with ForecastArchive(path, create=False) as archive:
        series = archive.series()
        series = [s for s in series if s.forecast_rows]
        mine = [s for s in series if s.zone == zone and s.unit == UNIT and provider in (None, s.provider)]
        if len(mine) != 1:
            have = ", ".join(f"{s.provider}/{s.zone} ({s.unit})" for s in series) or "no forecasts"
            which = "no" if not mine else "several"
            hint = "" if not mine else "; choose one with --archive-provider"
            raise ConfigError(f"--forecast-archive: {path} has {which} series in {UNIT} for zone {zone!r}"
                              f"{' from ' + provider if provider else ''} (it has {have}){hint}")
        chosen = mine[0]
        skipped = {f"rows of {s.provider}/{s.zone} ({s.unit}): another zone, provider or unit": s.forecast_rows
                   for s in series if s != chosen and s.forecast_rows}
        malformed = archive.malformed_rows(chosen.provider, zone)
        if malformed:
            skipped["rows with non-integer times or a non-numeric value"] = malformed
        issued_s, target_s, value_g_per_kwh = archive.forecast_rows(chosen.provider, zone)
    return _clean(path, issued_s, target_s, value_g_per_kwh, chosen.provider, zone, skipped)


def make_archive_forecaster(loaded: LoadedArchive, own: OwnForecaster, *, blend: str = "skill",
                            max_age_h: float | None = None) -> ArchiveForecaster:
    """The forecaster the replay asks: ``blend`` 'skill' (weighted by measured error) or 'latest' (as exact)."""
    if blend not in BLENDS:
        raise ConfigError(f"--forecast-blend: {blend!r} is not one of {', '.join(BLENDS)}")
    return ArchiveForecaster(loaded.issued, own, blend=blend == "skill", max_age_h=max_age_h)


def summary(loaded: LoadedArchive, forecaster: ArchiveForecaster, blend: str) -> dict[str, Any]:
    """The ``forecast_archive`` entry of ``simulate --json``'s summary."""
    issued = loaded.issued
    return {
        "file": str(loaded.path),
        "provider": issued.provider,
        "zone": issued.zone,
        "blend": blend,
        "issues": int(issued.issued_s.size),
        "rows": issued.counts.rows,
        "skipped_rows": dict(loaded.skipped),
        "forecast_hours": forecaster.hours,
        "fallback_hours": forecaster.fallback_hours,
        "extended_hours": forecaster.extended_hours,
        "max_age_hours": round(forecaster.max_age_s / 3600.0, 3),
    }

"""Error by hours ahead for every source of one zone in an archive (``greentrain carbon skill``).

The frame is the planner's (``signals/forecast/skill``): at every hour from the
first issue on, the latest forecast issued at or before it (not older than
``max_age_h``; by default 6 h or twice the source's usual time between
issues), against the actual of each hour ahead. Actuals come from the
archive (what the chain or ``carbon record`` read) or from a trace the user
gives. With ``with_own``, greentrain's own forecaster is run at each of those
hours on the actuals up to it, as one more source ("greentrain (computed)").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from greentrain.errors import ConfigError
from greentrain.signals.archive.store import UNIT, ForecastArchive
from greentrain.signals.base import IntensityPoint
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.forecast.skill import HorizonErrors, actual_table, horizon_errors

__all__ = ["COMPUTED_OWN", "ZoneSkill", "hourly_actuals_from_points", "zone_skill"]

COMPUTED_OWN = "greentrain (computed)"


class ZoneSkill:
    """The errors of each source, the hours they were measured over, and the rows left out."""

    def __init__(self, zone: str, errors: dict[str, HorizonErrors], origins: int, skipped: dict[str, int]) -> None:
        self.zone, self.errors, self.origins, self.skipped = zone, errors, origins, skipped


def _hourly(target_s: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, int]:
    """Hourly means of (time, value) rows as an array from the first hour, and that hour in seconds."""
    if target_s.size == 0:
        return np.zeros(0), 0
    hours = target_s // 3600
    first = int(hours.min())
    total = np.zeros(int(hours.max()) - first + 1)
    count = np.zeros_like(total)
    np.add.at(total, hours - first, value)
    np.add.at(count, hours - first, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1.0), np.nan), first * 3600


def zone_skill(archive: ForecastArchive, zone: str, *, providers: Sequence[str] = (),
               actuals: Sequence[IntensityPoint] | None = None, with_own: bool = False, horizon_h: int = 72,
               max_age_h: float | None = None) -> ZoneSkill:
    """Errors by hour ahead of each series of ``zone`` (or only ``providers``); ConfigError when nothing fits."""
    everything = archive.series()
    series = [s for s in everything if s.zone == zone and s.forecast_rows and (not providers or s.provider in providers)]
    skipped = {f"{s.provider}/{s.zone} ({s.unit})": s.forecast_rows for s in everything
               if s not in series and s.forecast_rows and (s.zone != zone or s.unit != UNIT)}
    foreign_unit = [s for s in series if s.unit != UNIT]
    for s in foreign_unit:
        skipped[f"{s.provider}/{s.zone} ({s.unit})"] = s.forecast_rows
    series = [s for s in series if s.unit == UNIT]
    if not series:
        have = ", ".join(f"{s.provider}/{s.zone}" for s in everything if s.forecast_rows) or "nothing"
        raise ConfigError(f"{archive.path}: no forecasts in {UNIT} for zone {zone!r}"
                          f"{' from ' + ', '.join(providers) if providers else ''} (the archive has {have})")
    if actuals is not None:
        hourly = hourly_actuals_from_points(actuals)
    else:
        # Every provider's actuals of the zone: what happened does not depend on who forecast it.
        rows = [archive.actual_rows(s.provider, zone) for s in everything if s.zone == zone and s.unit == UNIT]
        hourly = _hourly(np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows]))
    values, first_s = hourly
    if values.size == 0:
        raise ConfigError(f"{archive.path}: no actual values for zone {zone!r} to score the forecasts against; "
                          "give --actuals TRACE.csv")
    sources = {s.provider: IssuedForecasts(*archive.forecast_rows(s.provider, zone), provider=s.provider, zone=zone)
               for s in series}
    issued = [f for f in sources.values() if not f.empty]
    start_s = max(min(int(f.issued_s[0]) for f in issued) // 3600 * 3600, first_s)
    # From the first issue to the last actual, but not past the hours any source still spoke for.
    max_age_s = {name: f.default_max_age_s() if max_age_h is None else max_age_h * 3600.0
                 for name, f in sources.items()}
    end_s = min(first_s + 3600 * (values.size - 1),
                max(int(f.issued_s[-1]) + int(max_age_s[f.provider]) for f in issued))
    origins = np.arange(start_s, end_s + 1, 3600, dtype=np.int64)
    truth = actual_table(values, first_s, origins, horizon_h)
    errors = {name: horizon_errors(f.table(origins, horizon_h, max_age_s=max_age_s[name]), truth)
              for name, f in sources.items()}
    if with_own:
        errors[COMPUTED_OWN] = horizon_errors(_own_table(values, first_s, origins, horizon_h), truth)
    return ZoneSkill(zone, errors, int(origins.size), skipped)


def hourly_actuals_from_points(points: Sequence[IntensityPoint]) -> tuple[np.ndarray, int]:
    """Hourly means of measured points as an array from their first hour, and that hour in seconds."""
    if not points:
        return np.zeros(0), 0
    starts = np.array([int(p.start.timestamp()) for p in points], dtype=np.int64)
    return _hourly(starts, np.array([p.intensity_g_per_kwh for p in points]))


def _own_table(values: np.ndarray, first_s: int, origins: np.ndarray, horizon_h: int) -> np.ndarray:
    """The default Forecaster at each origin, on the hourly actuals up to it (causal)."""
    forecaster = Forecaster()
    lookback_h = forecaster.lookback_days * 24
    out = np.full((origins.size, horizon_h), np.nan)
    for row, origin in enumerate(origins):
        end = int((origin - first_s) // 3600)
        series = values[max(0, end - lookback_h + 1): end + 1]
        if series.size and not np.isnan(series).all():
            predicted = forecaster.predict(series, horizon_h)
            if predicted is not None:
                out[row] = predicted
    return out

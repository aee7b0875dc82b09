"""Two trace-only forecasters weighed by their measured skill at each hour ahead.

``SkillBlendForecaster(first, second)`` has the forecaster interface. At each
decision hour it runs both sources at every hour of the last ``window_h``
(each source's forecast at an hour is made once and kept), scores them
against the actuals that had arrived by then, and mixes them with the
least-squares weights of ``skill.blend_weights`` (the weights the forecast
archive's ``ArchiveForecaster`` uses for a provider against greentrain's own
forecaster). Where one source is better at a horizon, it gets the weight; where
their errors partly cancel, the mix beats both. ``errors_g_per_kwh(history,
now)`` is the mix's own mean absolute error by hours ahead over the same
window: what a planner can hedge against.

``fleet.feed.blend_forecaster`` pairs ``Forecaster`` (seasonal profile and
anomaly persistence: best in the first hours) with ``SeasonalNaiveForecaster``
(same hour yesterday: at times better a day ahead); with ``second=None`` a
single source gets its measured error, for a planner to hedge against.
Causal: forecasts at past hours see the history up to those hours, and only
actuals up to ``now`` score them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable

import numpy as np

from greentrain.errors import ConfigError
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import floor_hour, hourly_series
from greentrain.signals.forecast.skill import actual_table, blend_weights, combine, horizon_errors

__all__ = ["HourlyForecaster", "SKILL_WINDOW_H", "SkillBlendForecaster", "extend_last", "forecast_values",
           "past_actuals"]

SKILL_WINDOW_H = 28 * 24
"""Past hours over which two sources' errors are measured (four weeks: every hour of day and day of week)."""
_HOUR = timedelta(hours=1)
_MIN_SKILL_H = 72


class HourlyForecaster(Protocol):
    """Anything with ``Forecaster``'s ``forecast`` (hourly points after the hour containing ``now``)."""

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        ...


@runtime_checkable
class GivesValues(Protocol):
    """A forecaster that can give bare hourly values (a benchmark's table of precomputed forecasts)."""

    def forecast_values(self, history: Sequence[IntensityPoint], now: datetime,
                        horizon_h: int) -> Sequence[float] | np.ndarray | None:
        ...


def forecast_values(source: HourlyForecaster, history: Sequence[IntensityPoint], hour: datetime,
                    need: int) -> np.ndarray | None:
    """``need`` hourly values of ``source``'s forecast at ``hour`` (NaN past its end), or None if it has none.

    A forecaster that can give bare values (``forecast_values``, e.g. a benchmark's table of precomputed
    forecasts) skips building points."""
    if isinstance(source, GivesValues):
        values = source.forecast_values(history, hour, need)
        values = [] if values is None else np.asarray(values, dtype=float)[:need]
    else:
        values = [p.intensity_g_per_kwh for p in source.forecast(history, hour, need)[:need]]
    if len(values) == 0 or np.isnan(values).all():
        return None
    out = np.full(need, np.nan)
    out[: len(values)] = values
    return out


def past_actuals(history: Sequence[IntensityPoint], hour: datetime, window_h: int,
                 skill_h: int) -> tuple[list[datetime], np.ndarray]:
    """The ``window_h`` hours before ``hour`` (the origins) and the (origins × ``skill_h``) table of the
    actuals that followed each, as known at ``hour`` (NaN where not yet arrived)."""
    origins = [hour - (window_h - i) * _HOUR for i in range(window_h)]
    origins_s = np.array([int(o.timestamp()) for o in origins], dtype=np.int64)
    actual = hourly_series(history, hour, window_h + 1)
    first_s = int((hour - window_h * _HOUR).timestamp())
    return origins, actual_table(actual, first_s, origins_s, skill_h)


class SkillBlendForecaster:
    """``first`` and ``second`` mixed per hour ahead by their errors over the last ``window_h`` hours.

    ``second=None``: ``first`` alone, with its measured errors (``errors_g_per_kwh``)."""

    horizon_independent = True
    """The value h hours ahead does not depend on ``horizon_h`` (the skill is measured on a fixed span)."""

    def __init__(self, first: HourlyForecaster, second: HourlyForecaster | None, *, window_h: int = SKILL_WINDOW_H,
                 skill_h: int = _MIN_SKILL_H, provider: str = "greentrain-blend") -> None:
        if window_h < 24:
            raise ConfigError(f"window_h: need at least a day of past hours, got {window_h}")
        if skill_h < 1:
            raise ConfigError(f"skill_h: must be >= 1, got {skill_h}")
        self.sources = (first,) if second is None else (first, second)
        self.window_h, self.skill_h, self.provider = int(window_h), int(skill_h), provider
        self._values: tuple[dict[datetime, np.ndarray | None], ...] = ({}, {})
        self._skill: dict[datetime, tuple[np.ndarray, np.ndarray]] = {}

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        """Hourly points for the ``horizon_h`` hours after the one containing ``now``; [] without history."""
        values = self.forecast_values(history, now, horizon_h)
        if values is None:
            return []
        hour = floor_hour(now)
        template = next(p for p in reversed(history) if p.start <= hour)
        return [IntensityPoint(start=hour + (i + 1) * _HOUR, end=hour + (i + 2) * _HOUR,
                               intensity_g_per_kwh=float(v), kind=Kind.FORECAST, provider=self.provider,
                               zone=template.zone, emission_factor=template.emission_factor, estimated=True)
                for i, v in enumerate(values)]

    def forecast_values(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int) -> np.ndarray | None:
        """The blended values (``horizon_h`` of them), or None when neither source has a forecast."""
        hour = floor_hour(now)
        first, second = (self._at(i, history, hour, horizon_h) for i in range(2))
        if first is None and second is None:
            return None
        nan = np.full(horizon_h, np.nan)
        first, second = (nan if v is None else v[:horizon_h] for v in (first, second))
        values = _mix(first, second, extend_last(self._skill_at(history, hour)[0], horizon_h))
        usable = horizon_h if not np.isnan(values).any() else int(np.argmax(np.isnan(values)))
        return values[:usable] if usable else None

    def errors_g_per_kwh(self, history: Sequence[IntensityPoint], now: datetime) -> np.ndarray:
        """The blend's mean absolute error by hours ahead (``skill_h`` of them; index 0: the next hour),
        measured over the window up to ``now``; NaN where nothing was scored yet."""
        return self._skill_at(history, floor_hour(now))[1]

    def _at(self, index: int, history: Sequence[IntensityPoint], hour: datetime, horizon_h: int) -> np.ndarray | None:
        """Source ``index``'s forecast at ``hour`` (kept; at least ``skill_h`` hours long)."""
        if index >= len(self.sources):
            return None
        need = max(horizon_h, self.skill_h)
        cache = self._values[index]
        if hour in cache:
            cached = cache[hour]
            if cached is None or cached.size >= need:
                return cached
        cached = forecast_values(self.sources[index], history, hour, need)
        cache[hour] = cached
        return cached

    def _skill_at(self, history: Sequence[IntensityPoint], hour: datetime) -> tuple[np.ndarray, np.ndarray]:
        """(weight of ``first``, the blend's MAE) per hour ahead, from the window before ``hour``."""
        cached = self._skill.get(hour)
        if cached is not None:
            return cached
        origins, actual = past_actuals(history, hour, self.window_h, self.skill_h)
        tables = []
        for index in range(2):  # a missing second source: a table of NaN (weight 1, the first alone)
            table = np.full((len(origins), self.skill_h), np.nan)
            for row, origin in enumerate(origins):
                values = self._at(index, history, origin, self.skill_h)
                if values is not None:
                    table[row] = values[: self.skill_h]
            tables.append(table)
        weight = blend_weights(tables[0], tables[1], actual)
        blended = _mix(tables[0], tables[1], weight[None, :])
        cached = (weight, horizon_errors(blended, actual).mae_g_per_kwh)
        self._skill[hour] = cached
        return cached


def _mix(first: np.ndarray, second: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``weight`` × first + (1 - ``weight``) × second; either alone where the other said nothing."""
    return np.where(np.isnan(second), first, combine(first, second, weight))


def extend_last(per_h: np.ndarray, horizon_h: int) -> np.ndarray:
    """``per_h`` to ``horizon_h`` values, its last one repeated past its end."""
    if per_h.size >= horizon_h:
        return per_h[:horizon_h]
    return np.concatenate([per_h, np.full(horizon_h - per_h.size, per_h[-1])])

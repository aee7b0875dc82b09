"""A recorded carbon trace as the fleet simulator sees it: hourly actuals, and forecasts made causally.

At a decision inside hour ``h`` the current hour's intensity is known (as a
provider's ``latest()`` gives it; the single-job simulator does the same) and
later hours come from a forecaster fed the trace up to hour ``h`` only. One
forecast is made per hour, at the longest horizon asked so far, and shared by
every decision in that hour (the forecaster's value for ``k`` hours ahead does
not depend on the horizon asked: ``horizon_independent``).

``blend_forecaster`` is greentrain's ``Forecaster`` and same-hour-yesterday
weighed by their errors at each hour ahead over the last four weeks
(``signals/forecast/blend.py``). On the development weeks it planned no better than
``Forecaster`` alone (docs/benchmarks.md, "Fleet"), which ``greentrain fleet
simulate`` therefore keeps. A forecaster that measures its own error by hours
ahead (``errors_g_per_kwh``, as the blend does) gives ``errors``: what the
planner can hedge against.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.signals.base import IntensityPoint
from greentrain.signals.forecast.blend import HourlyForecaster, SkillBlendForecaster
from greentrain.signals.forecast.deviation import ForecastDeviation
from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster

__all__ = ["ForecastDeviation", "TraceFeed", "HourlyForecaster", "blend_forecaster"]

_HOUR = timedelta(hours=1)


def blend_forecaster() -> SkillBlendForecaster:
    """``Forecaster`` and same-hour-yesterday, weighed by their measured skill at each hour ahead."""
    return SkillBlendForecaster(Forecaster(), SeasonalNaiveForecaster())


class TraceFeed:
    """Hourly intensities of one zone; ``view(hour, horizon)`` is what a decision then could know."""

    def __init__(self, points: Sequence[IntensityPoint], name: str, forecaster: HourlyForecaster | None) -> None:
        """``forecaster=None``: perfect foresight (the trace's own future), for bounds and evaluation only."""
        if not points:
            raise ConfigError(f"{name}: trace has no points")
        self.name = name
        self.zone = points[0].zone
        self.epoch = ensure_aware_utc(points[0].start, "trace start").replace(minute=0, second=0, microsecond=0)
        self.points = list(points)
        self.actual = self._hourly(self.points, name)
        self._forecaster = forecaster
        self._cache: dict[int, np.ndarray] = {}
        self._index = {int((p.start - self.epoch) / _HOUR): i for i, p in enumerate(self.points)}
        self.forecasts_made = 0

    def _hourly(self, points: Sequence[IntensityPoint], name: str) -> np.ndarray:
        hours = int(np.ceil((points[-1].end - self.epoch) / _HOUR))
        total, count = np.zeros(hours), np.zeros(hours)
        for p in points:
            index = int((p.start - self.epoch) // _HOUR)
            total[index] += p.intensity_g_per_kwh
            count[index] += 1
        if (count == 0).any():
            gap = self.epoch + int(np.argmax(count == 0)) * _HOUR
            raise ConfigError(f"{name}: no intensity for the hour starting {gap.isoformat()}; the trace needs "
                              "every hour the jobs span")
        return total / count

    @property
    def hours(self) -> int:
        return self.actual.size

    def hour_of(self, when: datetime) -> float:
        """Plan hours since the trace's first hour."""
        return (ensure_aware_utc(when, "time") - self.epoch) / _HOUR

    def at(self, hour: float) -> datetime:
        return self.epoch + timedelta(hours=hour)

    def view(self, hour: int, horizon_h: int) -> np.ndarray:
        """[actual of ``hour``, forecasts for the next ``horizon_h`` hours] as known during ``hour``."""
        if self._forecaster is None:
            return self.actual[hour : hour + horizon_h + 1]
        cached = self._cache.get(hour)
        if cached is None or cached.size < horizon_h:
            cached = self._forecast(hour, max(horizon_h, 1 if cached is None else 2 * cached.size))
            self._cache[hour] = cached  # kept: another policy replays the same hours
        return np.concatenate([[self.actual[hour]], cached[:horizon_h]])

    def errors(self, hour: int, horizon_h: int) -> np.ndarray:
        """[0 for ``hour`` (known), the forecast's measured mean absolute error 1..``horizon_h`` hours ahead]
        as known during ``hour``, g/kWh; 0 where nothing was measured (perfect foresight: all 0)."""
        out = np.zeros(horizon_h + 1)
        measure = getattr(self._forecaster, "errors_g_per_kwh", None)
        if measure is None:
            return out
        measured = np.nan_to_num(np.asarray(measure(self.points[: self._last_point(hour) + 1], self.at(hour)),
                                            dtype=float))
        if measured.size:  # past the horizons measured: the last one's error
            out[1:] = np.concatenate([measured, np.full(max(0, horizon_h - measured.size), measured[-1])])[:horizon_h]
        return out

    def realised_error(self, ahead_h: int = 24) -> ForecastDeviation | None:
        """The forecasts made so far against the trace, ``ahead_h`` hours ahead (measured); None with perfect
        foresight or no forecast that reached that far inside the trace."""
        pairs = [(cached[ahead_h - 1], self.actual[hour + ahead_h]) for hour, cached in self._cache.items()
                 if cached.size >= ahead_h and hour + ahead_h < self.hours]
        if self._forecaster is None or not pairs:
            return None
        made, came = np.array(pairs).T
        return ForecastDeviation(float(np.abs(made - came).mean()), float((made - came).mean()),
                                 float(came.mean()), len(pairs))

    def _forecast(self, hour: int, horizon_h: int) -> np.ndarray:
        assert self._forecaster is not None
        last = self._last_point(hour)
        points = self._forecaster.forecast(self.points[: last + 1], self.at(hour), horizon_h)
        self.forecasts_made += 1
        values = np.array([p.intensity_g_per_kwh for p in points], dtype=float)
        if values.size == 0:  # no usable history: persist the current hour
            values = np.full(horizon_h, self.actual[hour])
        return values

    def _last_point(self, hour: int) -> int:
        while hour >= 0 and hour not in self._index:
            hour -= 1
        return self._index.get(hour, 0)

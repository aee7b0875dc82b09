"""Replaying forecasts as issued: what the provider had said at each moment, weighed by its measured skill.

``ArchiveForecaster`` has the forecaster interface (``forecast(history, now,
horizon_h)``), so the simulator and any replay use it where they would use
the trace-only ``Forecaster``. At ``now`` it takes the latest archived
forecast issued at or before ``now``; hours past that forecast's end come from
greentrain's own forecaster (``own``) on the history; with no forecast issued
within ``max_age_h`` (an archive gap; by default 6 h, or twice the archive's
usual time between issues when longer) every hour does, and the hour is
counted in ``fallback_hours``.

With ``blend`` (the default) each hour ahead is ``w`` × the provider's value
+ (1 - ``w``) × greentrain's own, ``w`` from both sources' errors over the
last ``skill_window_h`` hours (``skill.blend_weights``): forecasts at past
hours, against the actuals in ``history`` that had arrived by ``now``. A
provider that forecasts well keeps w ≈ 1; one that does worse than the
trace's own forecaster far ahead is weighed down there. Without ``blend`` the
latest forecast is taken as exact (the naive planner).

Causal by construction: issues after ``now`` are never read, own forecasts at
past hours see the history up to those hours, and only actuals up to ``now``
score them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import numpy as np

from greentrain.errors import ConfigError
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.blend import SKILL_WINDOW_H, HourlyForecaster, extend_last, forecast_values, past_actuals
from greentrain.signals.forecast.forecaster import floor_hour
from greentrain.signals.archive.issued import IssuedForecasts
from greentrain.signals.forecast.skill import blend_weights, combine

__all__ = ["ArchiveForecaster", "OwnForecaster", "SKILL_WINDOW_H", "hourly_points"]

_MIN_SKILL_H = 72
_HOUR = timedelta(hours=1)


OwnForecaster = HourlyForecaster
"""greentrain's own forecaster (``signals.forecast.forecaster.Forecaster`` or anything with its ``forecast``)."""


def hourly_points(values: Iterable[float], first: datetime, template: IntensityPoint,
                  labels: Sequence[str]) -> list[IntensityPoint]:
    """Hourly forecast points from ``first``, labelled per hour with the source they came from."""
    return [IntensityPoint(start=first + i * _HOUR, end=first + (i + 1) * _HOUR, intensity_g_per_kwh=float(v),
                           kind=Kind.FORECAST, provider=labels[i], zone=template.zone,
                           emission_factor=template.emission_factor, estimated=True)
            for i, v in enumerate(values)]


class ArchiveForecaster:
    """The latest archived forecast at each moment, extended (and, with ``blend``, weighted) by ``own``."""

    horizon_independent = True
    """The value h hours ahead does not depend on ``horizon_h`` (the skill is measured on a fixed span)."""

    def __init__(self, issued: IssuedForecasts, own: OwnForecaster, *, blend: bool = True,
                 max_age_h: float | None = None, skill_window_h: int = SKILL_WINDOW_H) -> None:
        if max_age_h is not None and not max_age_h > 0:
            raise ConfigError(f"--archive-max-age-hours: must be > 0, got {max_age_h:g}")
        if skill_window_h < 24:
            raise ConfigError(f"skill_window_h: need at least a day of past hours, got {skill_window_h}")
        self.issued, self.own, self.blend = issued, own, blend
        self.max_age_s = issued.default_max_age_s() if max_age_h is None else max_age_h * 3600.0
        self.skill_window_h = int(skill_window_h)
        self.skill_h = max(_MIN_SKILL_H, issued.horizon_h)
        self._own: dict[datetime, np.ndarray] = {}
        self._weights: dict[datetime, np.ndarray] = {}
        self._hours: set[datetime] = set()
        self._fallback: set[datetime] = set()
        self._extended: set[datetime] = set()

    @property
    def hours(self) -> int:
        """Distinct hours a forecast was asked for."""
        return len(self._hours)

    @property
    def fallback_hours(self) -> int:
        """Of ``hours``: those with no archived forecast within ``max_age_h`` (trace-only forecaster)."""
        return len(self._fallback)

    @property
    def extended_hours(self) -> int:
        """Of ``hours``: those whose horizon reached past the archived forecast (own forecaster after it)."""
        return len(self._extended)

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        """Hourly points for the ``horizon_h`` hours after the one containing ``now``; [] without history."""
        hour = floor_hour(now)
        stop = bisect_right(history, hour, key=lambda p: p.start)
        if stop == 0:
            return []
        template = history[stop - 1]
        own = self._own_at(history, hour, horizon_h)
        if own is None:
            own = np.full(horizon_h, np.nan)
        provider = self.issued.at(int(now.timestamp()), horizon_h, max_age_s=self.max_age_s)
        known = ~np.isnan(combine(provider, own, np.ones(horizon_h)))
        usable = horizon_h if known.all() else int(np.argmin(known))  # up to the first hour nobody forecast
        if usable == 0:
            return []
        self._hours.add(hour)
        provider, own = provider[:usable], own[:usable]
        if np.isnan(provider).all():
            self._fallback.add(hour)
            return hourly_points(own, hour + _HOUR, template, ["greentrain"] * usable)
        if np.isnan(provider).any():
            self._extended.add(hour)
        # Past the span skill is measured on (which covers the provider's horizon) only the own forecast is left.
        weight = extend_last(self._weights_at(history, hour), usable) if self.blend else np.ones(usable)
        weight = np.where(np.isnan(own), 1.0, weight)
        values = combine(provider, own, weight)
        name = self.issued.provider
        labels = ["greentrain" if np.isnan(p) else name if w >= 1.0 else f"{name}+greentrain"
                  for p, w in zip(provider, weight)]
        return hourly_points(values, hour + _HOUR, template, labels)

    def _own_at(self, history: Sequence[IntensityPoint], hour: datetime, horizon_h: int) -> np.ndarray | None:
        """greentrain's own forecast made at ``hour`` (cached; at least ``skill_h`` hours long)."""
        need = max(horizon_h, self.skill_h)
        cached = self._own.get(hour)
        if cached is None or cached.size < need:
            cached = forecast_values(self.own, history, hour, need)
            if cached is None:
                return None
            self._own[hour] = cached
        return cached[:horizon_h]

    def _weights_at(self, history: Sequence[IntensityPoint], hour: datetime) -> np.ndarray:
        """The provider's weight per hour ahead (``skill_h`` of them), from errors measured up to ``hour``."""
        cached = self._weights.get(hour)
        if cached is not None:
            return cached
        window = self.skill_window_h
        origins, actual = past_actuals(history, hour, window, self.skill_h)
        origins_s = np.array([int(o.timestamp()) for o in origins], dtype=np.int64)
        provider = self.issued.table(origins_s, self.skill_h, max_age_s=self.max_age_s)
        own = np.full((window, self.skill_h), np.nan)
        for row in np.flatnonzero(np.isfinite(provider).any(axis=1)):  # only hours the provider spoke at
            values = self._own_at(history, origins[row], self.skill_h)
            if values is not None:
                own[row] = values[: self.skill_h]
        weight = blend_weights(provider, own, actual)  # actuals: only what had arrived by `hour`
        self._weights[hour] = weight
        return weight

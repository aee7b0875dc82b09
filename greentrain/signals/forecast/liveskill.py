"""How wrong the forecast has been, by hours ahead, measured on this signal: its spread and its bias.

Each forecast the job used is remembered (per hour ahead); when the actual
value of an hour arrives, the signed error (forecast minus actual) of every
remembered forecast for it is kept for its horizon. Two summaries per horizon:

- ``errors_g_per_kwh``: the typical size of an error, the median absolute
  error of the last ``window`` (one surprise, such as the very spike a pause
  avoids, is no typical error);
- ``bias_g_per_kwh``: the systematic part, the mean signed error, kept only
  as far as it stands out of the noise (shrunk towards 0 by its own standard
  error, counting a day of hourly origins as one independent sample: errors a
  few hours apart share their weather), and only once a horizon has
  ``_MIN_BIAS_DAYS`` days of them: one day's errors all one way are that
  day's weather, not the forecaster's habit. A planner subtracts it from the
  forecast (``policies/calibrate.py``), so a zone whose forecasts run low at
  some horizons is planned on what its forecasts have meant there.

A horizon counts only once ``min_scored`` forecasts were scored there.
Nothing is assumed before anything is measured: an empty tuple. ``backfill``
scores a forecaster on the history before a job starts (the simulator's
start-of-job calibration).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from greentrain.hours import floor_hour as _hour
from greentrain.signals.base import IntensityPoint

__all__ = ["ForecastSkill"]

_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
_ORIGINS_PER_SAMPLE = 24
"""Scored forecasts that count as one independent sample of a horizon's error: errors persist for hours (a
windy spell), so a day of hourly forecasts says about as much about the bias as one of them."""

_MIN_BIAS_DAYS = 3
"""Days over which a horizon's scored forecasts were made before a bias is taken from it. Taken from
fewer, the bias an 8-hour job measured in its own first hours was a spell of weather, and correcting for it
cost 0.005-0.007 of the timing benchmark's saving (docs/benchmarks.md, issue 41)."""


class _Forecasts(Protocol):
    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        ...


class ForecastSkill:
    """Forecast error per hour ahead: its median size and its bias (``max_h`` horizons, ``keep`` forecasts
    remembered, the last ``window`` errors of each horizon kept)."""

    def __init__(self, max_h: int = 72, keep: int = 96, window: int = 168, min_scored: int = 6) -> None:
        self.max_h = max_h
        self.keep = keep
        self.min_scored = min_scored
        self._forecasts: dict[datetime, dict[datetime, float]] = {}
        """Hour the forecast was made -> {hour forecast: value}."""
        self._errors: list[deque[float]] = [deque(maxlen=window) for _ in range(max_h)]
        self._made: list[deque[datetime]] = [deque(maxlen=window) for _ in range(max_h)]
        """Per horizon, the hour each kept error's forecast was made (how many days of weather they span)."""
        self._seen: set[datetime] = set()

    def record(self, now: datetime, forecast: Iterable[IntensityPoint]) -> None:
        """The forecast used at ``now`` (the first one of each hour is kept)."""
        made = _hour(now)
        if made in self._forecasts:
            return
        self._forecasts[made] = {_hour(p.start): p.intensity_g_per_kwh for p in forecast if p.start > now}
        while len(self._forecasts) > self.keep:
            self._forecasts.pop(next(iter(self._forecasts)))

    def observe(self, actual: IntensityPoint) -> None:
        """The actual value of an interval: score every remembered forecast of its hour (once)."""
        hour = _hour(actual.start)
        if hour in self._seen:
            return
        self._seen.add(hour)
        for made, values in self._forecasts.items():
            predicted = values.get(hour)
            ahead = int((hour - made) / _HOUR) - 1
            if predicted is not None and 0 <= ahead < self.max_h:
                self._errors[ahead].append(predicted - actual.intensity_g_per_kwh)
                self._made[ahead].append(made)

    def errors_g_per_kwh(self) -> tuple[float, ...]:
        """Median absolute error by hours ahead (index 0: next hour), up to the last horizon scored
        ``min_scored`` times; a horizon short of that takes the nearest shorter one's."""
        measured = [i for i, errors in enumerate(self._errors) if len(errors) >= self.min_scored]
        if not measured:
            return ()
        out: list[float] = []
        last = statistics.median(abs(e) for e in self._errors[measured[0]])
        for i in range(measured[-1] + 1):
            if len(self._errors[i]) >= self.min_scored:
                last = statistics.median(abs(e) for e in self._errors[i])
            out.append(last)
        # Past the last horizon scored, an error that grows like a random walk's (sqrt of the hours ahead):
        # far forecasts are not as good as the nearest scored one, and an error taken too small there lets
        # a wait that keeps seeing a cleaner tomorrow through.
        top = len(out)
        out.extend(last * ((h + 1) / top) ** 0.5 for h in range(top, self.max_h))
        return tuple(out)

    def bias_g_per_kwh(self) -> tuple[float, ...]:
        """The forecast's bias by hours ahead (forecast minus actual; index 0: next hour), up to the last
        horizon scored ``min_scored`` times, 0 where a horizon is short of that.

        The mean signed error, shrunk towards 0 by its standard error (soft threshold): a bias smaller than
        the noise of its own estimate is taken as none, and only what stands out of it is corrected. The
        standard error counts one sample per ``_ORIGINS_PER_SAMPLE`` errors scored; a horizon whose scored
        forecasts were made over fewer than ``_MIN_BIAS_DAYS`` days has none."""
        measured = [i for i, errors in enumerate(self._errors) if len(errors) >= self.min_scored]
        if not measured:
            return ()
        out: list[float] = []
        for i in range(measured[-1] + 1):
            errors, made = self._errors[i], self._made[i]
            if len(errors) < self.min_scored or (max(made) - min(made)) / _DAY < _MIN_BIAS_DAYS:
                out.append(0.0)
                continue
            mean = statistics.fmean(errors)
            spread = statistics.pstdev(errors)
            samples = max(1.0, len(errors) / _ORIGINS_PER_SAMPLE)
            out.append(math.copysign(max(0.0, abs(mean) - spread / math.sqrt(samples)), mean))
        return tuple(out)

    def backfill(self, forecaster: _Forecasts, history: Sequence[IntensityPoint], now: datetime, *,
                 days: float = 7.0, every_h: int = 6, horizon_h: int = 72) -> None:
        """Score ``forecaster`` on ``history`` before ``now``: its forecasts made every ``every_h`` hours over
        the last ``days`` (from the history up to each origin only), against the actuals that followed.
        ``history`` is hourly, in time order; only points before the hour of ``now`` are used."""
        first = bisect_left(history, _hour(now) - timedelta(days=days), key=lambda p: p.start)
        stop = bisect_left(history, _hour(now), key=lambda p: p.start)
        for i in range(first, stop):
            self.observe(history[i])
            if (i - first) % every_h == 0:
                self.record(history[i].start, forecaster.forecast(history[: i + 1], history[i].start, horizon_h))

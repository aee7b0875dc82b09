"""How far forecasts turned out from what came: mean absolute error and bias at fixed hours ahead.

Measured by scoring the forecasts a replay actually planned on against the
trace they were made from (``greentrain simulate`` and ``greentrain fleet
simulate`` report it). It says how much of the gap to the oracle is the
forecast's, which no saving figure shows by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from dataclasses import dataclass

from greentrain.hours import floor_hour as _hour
from greentrain.signals.base import IntensityPoint

__all__ = ["LEAD_TIMES_H", "DeviationTally", "ForecastDeviation"]

LEAD_TIMES_H = (1, 6, 12, 24, 48, 72)
"""The hours ahead scored: the next hour, a quarter, half, one, two and three days."""

_HOUR = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ForecastDeviation:
    """How far a replay's forecasts were from the trace at one lead time, g/kWh (a dataclass, not a
    ``NamedTuple``, whose ``count`` field would hide ``tuple.count``)."""

    mae_g_per_kwh: float
    bias_g_per_kwh: float
    """Forecast minus actual, on average (< 0: too low)."""
    actual_mean_g_per_kwh: float
    """The mean of the hours forecast (for scale)."""
    count: int


class DeviationTally:
    """Sums of forecast minus actual at ``lead_times_h``, over every forecast scored (mergeable)."""

    def __init__(self, lead_times_h: Sequence[int] = LEAD_TIMES_H) -> None:
        self.lead_times_h = tuple(lead_times_h)
        self._sums = {ahead: [0.0, 0.0, 0.0, 0] for ahead in self.lead_times_h}
        """Hours ahead -> [sum of |error|, sum of error, sum of actuals, pairs scored]."""
        self.forecasts = 0
        """Forecasts scored (one per decision)."""

    def score(self, made: datetime, forecast: Sequence[IntensityPoint],
              actual_at: Callable[[datetime], float | None]) -> None:
        """One forecast made at ``made`` (hourly points, oldest first) against ``actual_at(hour start)``, which
        is None where the trace has no such hour."""
        self.forecasts += 1
        if not forecast:
            return
        base = _hour(made)
        first_ahead = round((forecast[0].start - base) / _HOUR)
        for ahead, sums in self._sums.items():
            i = ahead - first_ahead
            if not 0 <= i < len(forecast) or forecast[i].start != base + ahead * _HOUR:
                continue  # not hourly there (a gap in the forecast): that lead time is left out, not guessed
            came = actual_at(forecast[i].start)
            if came is None:
                continue
            error = forecast[i].intensity_g_per_kwh - came
            sums[0] += abs(error)
            sums[1] += error
            sums[2] += came
            sums[3] += 1

    def sums(self) -> dict[int, tuple[float, float, float, int]]:
        """Hours ahead -> (sum of |error|, sum of error, sum of actuals, pairs scored)."""
        return {ahead: (a, e, c, int(n)) for ahead, (a, e, c, n) in self._sums.items()}

    def merge(self, other: DeviationTally) -> None:
        """Add ``other``'s sums (the same lead times)."""
        if other.lead_times_h != self.lead_times_h:
            raise ValueError("tallies of different lead times")
        for ahead, added in other.sums().items():
            self._sums[ahead] = [mine + more for mine, more in zip(self._sums[ahead], added)]
        self.forecasts += other.forecasts

    def by_lead_time(self) -> dict[int, ForecastDeviation]:
        """Hours ahead -> the deviation there, for the lead times that were scored at least once."""
        return {ahead: ForecastDeviation(a / n, e / n, c / n, int(n))
                for ahead, (a, e, c, n) in self._sums.items() if n}

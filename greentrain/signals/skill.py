"""How wrong the forecast has been: mean absolute error by hours ahead, measured on this signal.

Each forecast the job used is remembered (per hour ahead); when the actual
value of an hour arrives, the error of every remembered forecast for it is
added to its horizon's running mean. A wait is worth planning only if it
saves more than this error over the energy it moves (``policies/worth.py``).
Nothing is assumed before anything is measured: an empty tuple.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from greentrain.signals.base import IntensityPoint

__all__ = ["ForecastSkill"]

_HOUR = timedelta(hours=1)


def _hour(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)


class ForecastSkill:
    """Running mean absolute forecast error per hour ahead (``max_h`` horizons, ``keep`` forecasts)."""

    def __init__(self, max_h: int = 72, keep: int = 96) -> None:
        self.max_h = max_h
        self.keep = keep
        self._forecasts: dict[datetime, dict[datetime, float]] = {}
        """Hour the forecast was made -> {hour forecast: value}."""
        self._sum = [0.0] * max_h
        self._count = [0] * max_h
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
                self._sum[ahead] += abs(predicted - actual.intensity_g_per_kwh)
                self._count[ahead] += 1

    def errors_g_per_kwh(self) -> tuple[float, ...]:
        """Mean absolute error by hours ahead (index 0: next hour), up to the last horizon measured; a
        horizon not measured yet takes the nearest shorter one's (errors grow with the horizon)."""
        measured = [i for i, n in enumerate(self._count) if n]
        if not measured:
            return ()
        out: list[float] = []
        last = self._sum[measured[0]] / self._count[measured[0]]
        for i in range(measured[-1] + 1):
            if self._count[i]:
                last = self._sum[i] / self._count[i]
            out.append(last)
        return tuple(out)

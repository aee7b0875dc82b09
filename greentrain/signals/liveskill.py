"""How wrong the forecast has been: mean absolute error by hours ahead, measured on this signal.

Each forecast the job used is remembered (per hour ahead); when the actual
value of an hour arrives, the error of every remembered forecast for it is
kept for its horizon. A wait is worth planning only if it saves more than
this error over the energy it moves (``policies/worth.py``). The typical
error is the median of the last ``window`` (one surprise, such as the very
spike a pause avoids, is no typical error), and a horizon counts only once
``min_scored`` forecasts were scored there. Nothing is assumed before
anything is measured: an empty tuple.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta

from greentrain.signals.base import IntensityPoint

__all__ = ["ForecastSkill"]

_HOUR = timedelta(hours=1)


def _hour(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)


class ForecastSkill:
    """Median absolute forecast error per hour ahead (``max_h`` horizons, ``keep`` forecasts remembered)."""

    def __init__(self, max_h: int = 72, keep: int = 96, window: int = 168, min_scored: int = 6) -> None:
        self.max_h = max_h
        self.keep = keep
        self.min_scored = min_scored
        self._forecasts: dict[datetime, dict[datetime, float]] = {}
        """Hour the forecast was made -> {hour forecast: value}."""
        self._errors: list[deque[float]] = [deque(maxlen=window) for _ in range(max_h)]
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
                self._errors[ahead].append(abs(predicted - actual.intensity_g_per_kwh))

    def errors_g_per_kwh(self) -> tuple[float, ...]:
        """Median absolute error by hours ahead (index 0: next hour), up to the last horizon scored
        ``min_scored`` times; a horizon short of that takes the nearest shorter one's."""
        measured = [i for i, errors in enumerate(self._errors) if len(errors) >= self.min_scored]
        if not measured:
            return ()
        out: list[float] = []
        last = statistics.median(self._errors[measured[0]])
        for i in range(measured[-1] + 1):
            if len(self._errors[i]) >= self.min_scored:
                last = statistics.median(self._errors[i])
            out.append(last)
        # Past the last horizon scored, an error that grows like a random walk's (sqrt of the hours ahead):
        # far forecasts are not as good as the nearest scored one, and an error taken too small there lets
        # a wait that keeps seeing a cleaner tomorrow through.
        top = len(out)
        out.extend(last * ((h + 1) / top) ** 0.5 for h in range(top, self.max_h))
        return tuple(out)

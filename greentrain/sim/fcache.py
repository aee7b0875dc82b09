"""One forecast per simulated hour, shared by every start of a ``simulate()`` call.

Within one call every start's decision at hour ``now`` sees the same history
(the trace up to ``now``), so a forecaster whose value for ``h`` hours ahead
does not depend on the horizon asked (it says so with
``horizon_independent = True``) can be asked once per hour, at the longest
horizon any start needs, and serve prefixes. Overlapping starts (every 24 h
with a 72 h deadline) then cost one forecast per hour instead of three.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

from greentrain.signals.base import IntensityPoint

__all__ = ["HourlyForecastCache", "shared_per_hour"]

_MAX_HOURS = 512
"""Hours kept: more than any deadline's worth of decisions, so overlapping starts hit."""


class HourlyForecastCache:
    """Wraps a horizon-independent forecaster; results are identical to calling it directly."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self._by_hour: OrderedDict[datetime, tuple[int, list[IntensityPoint]]] = OrderedDict()
        self._longest_h = 0

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        # Ask for the longest horizon seen so far: a later start reaches the same hour with more hours to go.
        self._longest_h = max(self._longest_h, horizon_h)
        cached = self._by_hour.get(now)
        if cached is None or cached[0] < horizon_h:
            cached = (self._longest_h, self.inner.forecast(history, now, self._longest_h))
            self._by_hour[now] = cached
            if len(self._by_hour) > _MAX_HOURS:
                self._by_hour.popitem(last=False)
        return cached[1][:horizon_h]


def shared_per_hour(forecaster):
    """``forecaster`` wrapped in a cache when it declares ``horizon_independent``; else itself."""
    return HourlyForecastCache(forecaster) if getattr(forecaster, "horizon_independent", False) else forecaster

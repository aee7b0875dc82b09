"""Replay an Electricity Maps CSV export as if it were a live provider.

For demos, tests and the simulator. "Trace now" is the trace instant that
corresponds to ``clock.now()``:

* with ``replay_start``: ``replay_start + speedup x (clock.now() - creation time)``;
  returned points are mapped back into clock time. Run a ``ReplayClock`` whose
  origin is ``replay_start`` (speedup 1 here, the clock runs fast) and trace
  time and clock time coincide — the easy path;
* without it: ``clock.now()`` itself when it falls inside the trace, else the
  same month/day/hour in the trace's year. Returned points are in trace time
  when the clock is inside the trace (then trace and clock time are the
  same); otherwise they are moved by whole years into the clock's year, so a
  wall clock replaying 2022 sees the 2022 values at today's date and hour.

``forecast()`` never peeks at future rows: it is the ``Forecaster``'s causal
forecast from rows up to trace-now, unless ``oracle=True`` (simulation
baselines only), which returns the real future values labelled provider
'csv:oracle'.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import ClassVar

from greentrain.clock import Clock, SystemClock, ensure_aware_utc
from greentrain.errors import ConfigError, SignalError
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace

__all__ = ["CSVTraceProvider", "shift_years"]


def shift_years(when: datetime, years: int) -> datetime:
    """``when`` moved by whole years (29 February to the 28th in a year without one)."""
    try:
        return when.replace(year=when.year + years)
    except ValueError:  # 29 February into a non-leap year
        return when.replace(year=when.year + years, day=28)


class CSVTraceProvider(CarbonIntensityProvider):
    """An hourly Electricity Maps data-portal CSV (direct or LCA column) replayed against a clock."""

    name: ClassVar[str] = "csv"
    uses_network: ClassVar[bool] = False
    issues_forecasts: ClassVar[bool] = False

    def __init__(
        self,
        path: str | Path,
        *,
        column: str = "direct",
        clock: Clock | None = None,
        replay_start: datetime | None = None,
        speedup: float = 1.0,
        oracle: bool = False,
        forecaster: Forecaster | None = None,
    ) -> None:
        if not (isinstance(speedup, int | float) and math.isfinite(speedup) and speedup > 0):
            raise ConfigError(f"speedup: must be a number > 0, got {speedup!r}")
        self.path = Path(path)
        self._points = load_trace(self.path, column, provider=self.name)
        self._starts = [p.start for p in self._points]
        self._clock = clock or SystemClock()
        self._created = self._clock.now()
        self._replay_start = None if replay_start is None else ensure_aware_utc(replay_start, "replay_start")
        if self._replay_start is not None and timedelta(0) <= self._created - self._replay_start < timedelta(hours=1):
            # replay_start was read from this same clock just before (``replay_start=clock.now()``): anchor
            # on it exactly, or the trace would lag by however long loading took x the clock's speed-up.
            self._created = self._replay_start
        self._speedup = float(speedup)
        self._oracle = oracle
        self._forecaster = forecaster or Forecaster()
        self.zone = self._points[0].zone

    # -- time mapping -------------------------------------------------------------
    def trace_now(self) -> datetime:
        """The trace instant that corresponds to ``clock.now()``."""
        now = self._clock.now()
        if self._replay_start is not None:
            return self._replay_start + (now - self._created) * self._speedup
        first, last = self._points[0].start, self._points[-1].end
        if first <= now < last:
            return now
        year = first.year
        try:
            return now.replace(year=year)
        except ValueError:  # 29 February mapped into a non-leap year
            return now.replace(year=year, day=28)

    def _year_offset(self) -> int:
        """Whole years from trace time to clock time (0 while the clock is inside the trace)."""
        now = self._clock.now()
        if self._points[0].start <= now < self._points[-1].end:
            return 0
        return now.year - self._points[0].start.year

    def _to_output(self, point: IntensityPoint) -> IntensityPoint:
        if self._replay_start is None:
            # A clock outside the trace (wall time replaying an old year) gets the points in its own
            # year, so a SignalChain comparing them with clock.now() sees the current interval.
            years = self._year_offset()
            if not years:
                return point
            return replace(point, start=shift_years(point.start, years), end=shift_years(point.end, years))
        start = self._created + (point.start - self._replay_start) / self._speedup
        end = self._created + (point.end - self._replay_start) / self._speedup
        return replace(point, start=start, end=end)

    def _to_trace(self, when: datetime) -> datetime:
        when = ensure_aware_utc(when, "time")
        if self._replay_start is None:
            inside = self._points[0].start <= when <= self._points[-1].end
            return when if inside else shift_years(when, -self._year_offset())
        return self._replay_start + (when - self._created) * self._speedup

    def zone_mismatch(self, zone: str) -> str | None:
        """None when this trace can answer for ``zone``; else why not, naming the zone it is for.

        The export's 'Zone Id' can be coarser than the zone the file was exported for (DE-LU_*.csv says 'DE'),
        so the file-name prefix is accepted too."""
        accepted = {self.zone.upper(), self.path.stem.split("_")[0].upper()}
        if zone.upper() in accepted:
            return None
        return f"trace {self.path.name} is for zone {self.zone!r}, not {zone!r}; give --zone {self.zone} or leave " \
               f"--zone out (the trace's zone is used)"

    def _check_zone(self, zone: str) -> None:
        why = self.zone_mismatch(zone)
        if why is not None:
            raise SignalError(f"csv {why}")

    def _index_at(self, when: datetime) -> int:
        index = bisect_right(self._starts, when) - 1
        if index < 0 or when >= self._points[index].end:
            span = f"{self._points[0].start.isoformat()} .. {self._points[-1].end.isoformat()}"
            raise SignalError(f"csv {self.path.name}: {when.isoformat()} is outside the trace ({span})")
        return index

    # -- provider API --------------------------------------------------------------
    def latest(self, zone: str) -> IntensityPoint:
        self._check_zone(zone)
        return self._to_output(self._points[self._index_at(self.trace_now())])

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        self._check_zone(zone)
        start_t, end_t = self._to_trace(start), min(self._to_trace(end), self.trace_now())
        lo = max(0, bisect_right(self._starts, start_t) - 1)
        hi = bisect_right(self._starts, end_t)
        return [self._to_output(p) for p in self._points[lo:hi] if p.end > start_t and p.start < end_t]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        self._check_zone(zone)
        now = self.trace_now()
        hours = max(1, math.ceil(horizon_h))
        if self._oracle:
            index = self._index_at(now)
            future = self._points[index + 1 : index + 1 + hours]
            points = [replace(p, kind=Kind.FORECAST, provider="csv:oracle") for p in future]
        else:
            # bisect inside the Forecaster keeps only rows starting at or before trace-now.
            points = self._forecaster.forecast(self._points, now, hours)
        return [self._to_output(p) for p in points]

    @property
    def points(self) -> list[IntensityPoint]:
        """Every row of the trace, in trace time (for simulators)."""
        return list(self._points)

    def time_offset(self) -> timedelta:
        """trace time - clock time right now."""
        return self.trace_now() - self._clock.now()

"""Carbon intensity over a past run's window, for ``greentrain whatif``.

A trace (an Electricity Maps CSV export) answers for its own zone. A run
outside the trace's span is priced at the same date and hour of the trace's
year, as the CSV provider replays a trace against today's clock; the offset
is reported with the run. Every other provider is asked for its history; one
that has only an annual average (``static``) gives a flat series, against
which no timing does better than run-now (only a lower power limit saves).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from greentrain.errors import SignalError
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind
from greentrain.signals.providers.csvtrace import shift_years
from greentrain.signals.forecast.forecaster import floor_hour
from greentrain.signals.trace import load_trace

__all__ = ["IntensityWindow", "IntensitySource", "TraceSource", "ProviderSource", "NoIntensity"]

_HISTORY = timedelta(days=28)
"""History asked of a provider before a run's start, for the forecaster behind the policy's decisions."""


class NoIntensity(Exception):
    """This run cannot be priced from this source (the reason is the message)."""


@dataclass(frozen=True, slots=True)
class IntensityWindow:
    """Points covering a run's window, and how far they are moved from the run's own calendar."""

    points: list[IntensityPoint]
    offset: timedelta
    """Source time - the run's time (whole years for a trace of another year; else zero)."""
    label: str


class IntensitySource(ABC):
    """Where a run's carbon intensity comes from."""

    name: str
    zone: str | None = None
    """The one zone this source answers for (a trace), or None (any zone)."""

    def accepts(self, zone: str) -> bool:
        """Whether this source can price runs in ``zone`` (a trace: only its own)."""
        return True

    @abstractmethod
    def window(self, zone: str, start: datetime, end: datetime) -> IntensityWindow:
        """Points covering [start, end) in ``zone``, with history before; NoIntensity otherwise."""


class TraceSource(IntensitySource):
    """An Electricity Maps CSV export (one zone)."""

    def __init__(self, path: str | Path, column: str = "direct") -> None:
        self.path = Path(path)
        self.points = load_trace(self.path, column)
        self.name = str(self.path)
        self.zone = self.points[0].zone
        # The export's 'Zone Id' can be coarser than the file's zone (DE-LU_*.csv says 'DE'): accept both.
        self._zones = {self.zone.upper(), self.path.stem.split("_")[0].upper()}

    def accepts(self, zone: str) -> bool:
        return zone.upper() in self._zones

    def window(self, zone: str, start: datetime, end: datetime) -> IntensityWindow:
        if not self.accepts(zone):
            raise NoIntensity(f"zone {zone}, but the trace is for {self.zone} (--zone {self.zone} prices every "
                              "run with it)")
        first, last = self.points[0].start, self.points[-1].end
        offset = timedelta(0)
        label = self.path.name
        if not first <= start < last:
            offset = shift_years(start, first.year - start.year) - start
            label = f"{self.path.name}, same date and hour in {first.year}"
        if not (first <= start + offset and end + offset <= last):
            raise NoIntensity(f"{self.path.name} covers {first:%Y-%m-%d} to {last:%Y-%m-%d}, not "
                              f"{start + offset:%Y-%m-%d %H:%M} to the deadline {end + offset:%Y-%m-%d %H:%M}")
        return IntensityWindow(self.points, offset, label)


class ProviderSource(IntensitySource):
    """A carbon provider's history, whichever provider (an annual average as a flat series)."""

    def __init__(self, provider: CarbonIntensityProvider, name: str) -> None:
        self.provider = provider
        self.name = name

    def window(self, zone: str, start: datetime, end: datetime) -> IntensityWindow:
        try:
            points = self.provider.history(zone, start - _HISTORY, end)
            if points and points[0].start <= start and points[-1].end >= end:
                return IntensityWindow(points, timedelta(0), f"{self.name} history")
            latest = self.provider.latest(zone)
        except SignalError as e:
            raise NoIntensity(f"{self.name}: {e}") from None
        if latest.kind != Kind.STATIC:
            raise NoIntensity(f"{self.name} has no history for {zone} from {start:%Y-%m-%d %H:%M} to "
                              f"{end:%Y-%m-%d %H:%M}")
        hour = timedelta(hours=1)
        first = floor_hour(start) - 2 * timedelta(days=1)
        count = int((end - first) / hour) + 2
        flat = [IntensityPoint(start=first + i * hour, end=first + (i + 1) * hour,
                               intensity_g_per_kwh=latest.intensity_g_per_kwh, kind=Kind.STATIC,
                               provider=latest.provider, zone=zone, emission_factor=latest.emission_factor,
                               estimated=True) for i in range(count)]
        return IntensityWindow(flat, timedelta(0), f"{self.name} annual average "
                                                   f"{latest.intensity_g_per_kwh:.0f} g/kWh (no hourly signal)")

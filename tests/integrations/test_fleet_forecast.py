"""The fleet controller's live carbon source: provider forecasts averaged into plan hours, and recorded into the
forecast archive as every signal chain does, so `greentrain fleet simulate --forecast-archive` can replay them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import greentrain.signals as signals
from greentrain.clock import FrozenClock
from greentrain.integrations.fleet_forecast import ProviderIntensity
from greentrain.signals.archive.store import ForecastArchive
from greentrain.signals.base import CarbonIntensityProvider, IntensityPoint, Kind

pytestmark = pytest.mark.timeout(60)

HOUR = timedelta(hours=1)
T0 = datetime(2022, 3, 1, tzinfo=UTC)


class HalfHourlyProvider(CarbonIntensityProvider):
    """Half-hourly values (as the GB API gives them), 100 + the half-hour's index; forecasts of the same."""

    uses_network = False

    def __init__(self, clock: FrozenClock) -> None:
        self.name = "halfhourly"  # type: ignore[misc]
        self._clock = clock
        self._points = [IntensityPoint(start=T0 + i * HOUR / 2, end=T0 + (i + 1) * HOUR / 2,
                                       intensity_g_per_kwh=100.0 + i, kind=Kind.ACTUAL, provider="halfhourly",
                                       zone="GB") for i in range(24 * 2 * 10)]

    def _index(self) -> int:
        return int((self._clock.now() - T0) / (HOUR / 2))

    def latest(self, zone: str) -> IntensityPoint:
        return self._points[self._index()]

    def forecast(self, zone: str, horizon_h: float = 72.0) -> list[IntensityPoint]:
        i = self._index()
        return [replace(p, kind=Kind.FORECAST) for p in self._points[i + 1: i + 1 + int(2 * horizon_h)]]

    def history(self, zone: str, start: datetime, end: datetime) -> list[IntensityPoint]:
        now = self._clock.now()
        return [p for p in self._points if p.end > start and p.start < end and p.end <= now]


def test_plan_hours_are_the_provider_means_and_the_forecast_is_recorded(tmp_path: Path, monkeypatch) -> None:
    archive_path = tmp_path / "forecasts.sqlite"
    monkeypatch.setenv("GREENTRAIN_FORECAST_ARCHIVE", str(archive_path))
    clock = FrozenClock(T0 + 48 * HOUR + timedelta(minutes=5))
    monkeypatch.setattr(signals, "make_provider", lambda spec, clock=None: HalfHourlyProvider(clock))
    source = ProviderIntensity("halfhourly", clock=clock, horizon_h=24)
    origin = T0 + 48 * HOUR
    values = source("GB", 0, 6, time_of=lambda hour: origin + hour * HOUR)
    source.close()
    # Plan hour k covers half-hours 96 + 2k and 97 + 2k: their mean is 100 + 96.5 + 2k.
    assert values == pytest.approx(np.array([196.5 + 2 * k for k in range(6)]))
    assert source.notes == []
    with ForecastArchive(archive_path, create=False) as archive:
        issued, target, value = archive.forecast_rows("halfhourly", "GB")
    assert issued.size and (issued == int(clock.now().timestamp())).all()
    # Hourly rows of the forecast: the hour from 49:00 is the mean of half-hours 98 and 99.
    first = int((origin + HOUR).timestamp())
    assert target.min() == first and value[target == first] == pytest.approx([100.0 + 98.5])

"""DeviationTally: forecasts scored against what came, at fixed lead times, by hand."""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta

import pytest

from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.deviation import DeviationTally, ForecastDeviation

T0 = datetime(2022, 3, 1, tzinfo=UTC)
H = timedelta(hours=1)


def points(first: datetime, values: list[float]) -> list[IntensityPoint]:
    return [IntensityPoint(start=first + i * H, end=first + (i + 1) * H, intensity_g_per_kwh=v, kind=Kind.FORECAST,
                           provider="test", zone="XX") for i, v in enumerate(values)]


def test_errors_at_each_lead_time_by_hand() -> None:
    actual = {T0 + i * H: 100.0 + i for i in range(40)}
    tally = DeviationTally(lead_times_h=(1, 2, 6))
    # Made at 00:20 (the hour counts from 00:00): hours 01:00.. forecast 98, 105, 100, 100, 100, 110.
    tally.score(T0 + timedelta(minutes=20), points(T0 + H, [98, 105, 100, 100, 100, 110]), actual.get)
    # Made at 01:00: hours 02:00.. forecast 102, 103, and nothing further.
    tally.score(T0 + H, points(T0 + 2 * H, [102, 103]), actual.get)
    got = tally.by_lead_time()
    # 1 h ahead: (98 - 101) and (102 - 102); 2 h: (105 - 102) and (103 - 103); 6 h: (110 - 106) only.
    assert astuple(got[1]) == pytest.approx(astuple(ForecastDeviation(1.5, -1.5, 101.5, 2)))
    assert astuple(got[2]) == pytest.approx(astuple(ForecastDeviation(1.5, 1.5, 102.5, 2)))
    assert astuple(got[6]) == pytest.approx(astuple(ForecastDeviation(4.0, 4.0, 106.0, 1)))
    assert tally.forecasts == 2


def test_gaps_in_the_forecast_or_the_trace_are_left_out_not_guessed() -> None:
    actual = {T0 + i * H: 50.0 for i in range(10) if i != 3}  # the trace has no 03:00
    tally = DeviationTally(lead_times_h=(1, 3, 4))
    forecast = points(T0 + H, [60, 60, 60]) + points(T0 + 5 * H, [70])  # no 04:00 in the forecast
    tally.score(T0, forecast, actual.get)
    got = tally.by_lead_time()
    assert set(got) == {1}  # 3 h: no actual; 4 h: the forecast has a gap there (index 3 is 05:00)
    assert got[1].mae_g_per_kwh == pytest.approx(10.0)


def test_merge_adds_the_sums_and_an_empty_forecast_still_counts_as_scored() -> None:
    actual = {T0 + i * H: 10.0 for i in range(5)}
    a, b = DeviationTally(lead_times_h=(1,)), DeviationTally(lead_times_h=(1,))
    a.score(T0, points(T0 + H, [14]), actual.get)
    b.score(T0 + H, points(T0 + 2 * H, [8]), actual.get)
    b.score(T0 + 2 * H, [], actual.get)
    a.merge(b)
    assert a.forecasts == 3
    assert astuple(a.by_lead_time()[1]) == pytest.approx(astuple(ForecastDeviation(3.0, 1.0, 10.0, 2)))
    with pytest.raises(ValueError):
        a.merge(DeviationTally(lead_times_h=(2,)))

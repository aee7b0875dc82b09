"""The forecast's measured error by hours ahead (signals/forecast/liveskill.py), against hand-computed values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.liveskill import ForecastSkill

T0 = datetime(2022, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _point(hour: int, value: float, kind: Kind = Kind.ACTUAL) -> IntensityPoint:
    return IntensityPoint(start=T0 + hour * HOUR, end=T0 + (hour + 1) * HOUR, intensity_g_per_kwh=value, kind=kind,
                          provider="test", zone="XX")


def test_errors_are_the_median_by_horizon_and_grow_past_the_last_scored() -> None:
    skill = ForecastSkill(max_h=8, min_scored=3)
    # Every hour a forecast 10 g/kWh too high one hour ahead and 20 too high two hours ahead.
    for hour in range(12):
        skill.observe(_point(hour, 100.0))
        skill.record(T0 + hour * HOUR, [_point(hour + 1, 110.0, Kind.FORECAST), _point(hour + 2, 120.0, Kind.FORECAST)])
    errors = skill.errors_g_per_kwh()
    assert errors[:2] == pytest.approx((10.0, 20.0))
    # Nothing scored three or more hours ahead: the error there grows from the last one like sqrt(hours).
    assert len(errors) == 8
    assert errors[2] == pytest.approx(20.0 * (3 / 2) ** 0.5)
    assert errors[7] == pytest.approx(20.0 * (8 / 2) ** 0.5)
    assert list(errors) == sorted(errors)


def test_nothing_is_assumed_before_enough_is_scored() -> None:
    skill = ForecastSkill(max_h=4, min_scored=6)
    for hour in range(3):
        skill.observe(_point(hour, 100.0))
        skill.record(T0 + hour * HOUR, [_point(hour + 1, 150.0, Kind.FORECAST)])
    assert skill.errors_g_per_kwh() == ()

"""The skill-weighted blend of two trace-only forecasters: weight goes to the source that was right, causally."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.blend import SkillBlendForecaster
from greentrain.signals.forecast.forecaster import SeasonalNaiveForecaster

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2022, 3, 1, tzinfo=UTC)
H = timedelta(hours=1)
DAY = np.array([120, 110, 100, 95, 90, 100, 140, 200, 260, 280, 250, 220,
                200, 190, 200, 230, 280, 320, 300, 260, 210, 180, 150, 130], dtype=float)


def _trace(days: int) -> list[IntensityPoint]:
    """An exactly daily-periodic grid: same-hour-yesterday is right at every horizon."""
    values = np.resize(DAY, days * 24)
    return [IntensityPoint(start=T0 + i * H, end=T0 + (i + 1) * H, intensity_g_per_kwh=float(v), kind=Kind.ACTUAL,
                           provider="test", zone="XX") for i, v in enumerate(values)]


class HighBy40(SeasonalNaiveForecaster):
    """Same-hour-yesterday with a standing bias of +40 g/kWh (a source that is consistently wrong)."""

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        return [IntensityPoint(start=p.start, end=p.end, intensity_g_per_kwh=p.intensity_g_per_kwh + 40.0,
                               kind=p.kind, provider=p.provider, zone=p.zone)
                for p in super().forecast(history, now, horizon_h)]


@pytest.mark.parametrize("biased_first", [True, False])
def test_the_weight_goes_to_the_source_that_was_right(biased_first: bool) -> None:
    points = _trace(12)
    sources = (HighBy40(), SeasonalNaiveForecaster())
    blend = SkillBlendForecaster(*(sources if biased_first else sources[::-1]), window_h=5 * 24, skill_h=24)
    now = T0 + 10 * 24 * H + 3 * H
    history = points[: 10 * 24 + 4]
    values = [p.intensity_g_per_kwh for p in blend.forecast(history, now, 36)]
    truth = np.resize(np.roll(DAY, -4), 36)  # the hours after 03:00
    assert values == pytest.approx(truth, abs=1e-6)
    assert blend.errors_g_per_kwh(history, now) == pytest.approx(np.zeros(24), abs=1e-6)


def test_a_single_source_keeps_its_values_and_reports_its_error() -> None:
    points = _trace(12)
    alone = SkillBlendForecaster(HighBy40(), None, window_h=5 * 24, skill_h=24)
    now = T0 + 10 * 24 * H
    history = points[: 10 * 24 + 1]
    values = [p.intensity_g_per_kwh for p in alone.forecast(history, now, 24)]
    assert values == pytest.approx(np.roll(DAY, -1) + 40.0)
    assert alone.errors_g_per_kwh(history, now) == pytest.approx(np.full(24, 40.0))


def test_the_blend_never_reads_past_now() -> None:
    points = _trace(12)
    cut = 10 * 24 + 6
    changed = points[:cut] + [IntensityPoint(start=p.start, end=p.end, intensity_g_per_kwh=999.0, kind=p.kind,
                                             provider=p.provider, zone=p.zone) for p in points[cut:]]
    now = T0 + (cut - 1) * H
    a = SkillBlendForecaster(HighBy40(), SeasonalNaiveForecaster(), window_h=5 * 24, skill_h=24)
    b = SkillBlendForecaster(HighBy40(), SeasonalNaiveForecaster(), window_h=5 * 24, skill_h=24)
    assert [p.intensity_g_per_kwh for p in a.forecast(points, now, 24)] == \
        [p.intensity_g_per_kwh for p in b.forecast(changed, now, 24)]
    assert np.array_equal(a.errors_g_per_kwh(points, now), b.errors_g_per_kwh(changed, now), equal_nan=True)


def test_the_fleet_feed_passes_on_the_measured_error_for_the_planner_to_hedge() -> None:
    from greentrain.fleet.feed import TraceFeed

    points = _trace(12)
    feed = TraceFeed(points, "periodic", SkillBlendForecaster(HighBy40(), None, window_h=5 * 24, skill_h=24))
    hour = 10 * 24 + 2
    errors = feed.errors(hour, 30)
    assert errors[0] == 0.0  # the current hour is known
    assert errors[1:] == pytest.approx(np.full(30, 40.0))  # measured to 24 h, the last one's beyond
    assert feed.view(hour, 30)[1:] == pytest.approx(np.resize(np.roll(DAY, -3), 30) + 40.0)
    assert TraceFeed(points, "perfect", None).errors(hour, 30).tolist() == [0.0] * 31

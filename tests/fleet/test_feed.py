"""What the fleet simulator's carbon feed says about its own forecasts."""

from __future__ import annotations

import numpy as np
import pytest
from gt_fleet import feed

from greentrain.fleet.feed import TraceFeed
from greentrain.signals.forecast.forecaster import SeasonalNaiveForecaster


def test_the_day_ahead_error_is_the_forecasts_made_against_the_trace() -> None:
    # 60 hours at 100 g/kWh, then 60 at 200. Same-hour-yesterday forecasts hour h + 24 as hour h's value,
    # so the 24 origins whose target is past the step (h = 36..59) are 100 too low, the others exact.
    values = [100.0] * 60 + [200.0] * 60
    points = feed(values).points
    replay = TraceFeed(points, "step", SeasonalNaiveForecaster())
    for hour in range(24, 90):
        replay.view(hour, 30)
    error = replay.realised_error(24)
    assert error is not None and error.count == 66
    assert error.mae_g_per_kwh == pytest.approx(100 * 24 / 66)
    assert error.bias_g_per_kwh == pytest.approx(-100 * 24 / 66)
    assert error.actual_mean_g_per_kwh == pytest.approx(np.mean(values[48:114]))
    # A forecast that did not reach 24 hours ahead, or one past the trace's end, is not scored.
    short = TraceFeed(points, "step", SeasonalNaiveForecaster())
    short.view(30, 12)
    short.view(100, 30)
    assert short.realised_error(24) is None


def test_perfect_foresight_has_no_forecast_error_to_report() -> None:
    perfect = feed([100.0] * 60)
    perfect.view(0, 30)
    assert perfect.realised_error(24) is None

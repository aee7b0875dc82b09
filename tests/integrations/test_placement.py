"""The pure planner behind ``greentrain submit``, checked against brute force on real traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.errors import ConfigError, DeadlineError
from greentrain.integrations.placement import Place, best_window, plan_placement, shift_points, window_mean
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.trace import load_trace

T0 = datetime(2022, 6, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def hourly(values: list[float], zone: str = "GB") -> list[IntensityPoint]:
    return [IntensityPoint(start=T0 + i * HOUR, end=T0 + (i + 1) * HOUR, intensity_g_per_kwh=v,
                           kind=Kind.FORECAST, provider="test", zone=zone) for i, v in enumerate(values)]


@pytest.fixture(scope="module")
def gb_june(carbon_trace) -> list[IntensityPoint]:
    points = load_trace(carbon_trace("GB_2022_hourly.csv"))
    return [p for p in points if T0 <= p.start < T0 + 96 * HOUR]


def test_window_mean_is_time_weighted_across_interval_boundaries() -> None:
    points = hourly([100, 300])
    window = window_mean(points, T0 + timedelta(minutes=30), T0 + timedelta(minutes=90))
    assert window.mean_intensity_g_per_kwh == pytest.approx(200) and window.coverage == 1.0
    window = window_mean(points, T0 + 90 * timedelta(minutes=1), T0 + 3 * HOUR)
    assert window.mean_intensity_g_per_kwh == pytest.approx(300) and window.coverage == pytest.approx(0.5 / 1.5)


def test_best_window_finds_the_clean_spell_and_prefers_the_earliest_tie() -> None:
    points = hourly([400, 100, 100, 400, 100, 100, 400])
    window = best_window(points, now=T0, deadline=T0 + 7 * HOUR, duration_s=2 * 3600)
    assert window.start == T0 + HOUR and window.mean_intensity_g_per_kwh == 100


def test_window_may_start_mid_interval_when_that_is_cleanest() -> None:
    # A 90-minute job: best is the clean hour plus half of the cleaner-than-average neighbour.
    points = hourly([500, 300, 50, 400, 500])
    window = best_window(points, now=T0, deadline=T0 + 5 * HOUR, duration_s=5400)
    assert window.start == T0 + timedelta(minutes=90) and window.end == T0 + 3 * HOUR


def test_deadline_too_close_is_a_deadline_error() -> None:
    with pytest.raises(DeadlineError, match="less than the 3.00 h estimate"):
        best_window(hourly([1] * 5), now=T0, deadline=T0 + 2 * HOUR, duration_s=3 * 3600)
    with pytest.raises(ConfigError, match="naive"):
        best_window(hourly([1] * 5), now=datetime(2022, 6, 1), deadline=T0 + 2 * HOUR, duration_s=60)


def test_no_forecast_means_start_now() -> None:
    window = best_window([], now=T0, deadline=T0 + 10 * HOUR, duration_s=3600)
    assert window.start == T0 and window.mean_intensity_g_per_kwh is None


@settings(max_examples=40, deadline=None)
@given(start_min=st.integers(0, 24 * 60), duration_min=st.integers(10, 12 * 60), slack_min=st.integers(0, 36 * 60))
def test_best_window_is_optimal_against_brute_force_on_a_real_trace(gb_june, start_min, duration_min,
                                                                    slack_min) -> None:
    now = T0 + timedelta(minutes=start_min)
    duration = timedelta(minutes=duration_min)
    deadline = now + duration + timedelta(minutes=slack_min)
    best = best_window(gb_june, now=now, deadline=deadline, duration_s=duration.total_seconds())
    assert now <= best.start and best.end <= deadline
    # Every minute-aligned start, evaluated directly: none is cleaner.
    candidate = now
    while candidate + duration <= deadline:
        brute = window_mean(gb_june, candidate, candidate + duration).mean_intensity_g_per_kwh
        assert best.mean_intensity_g_per_kwh <= brute + 1e-6
        candidate += timedelta(minutes=5)


def test_plan_placement_compares_places_and_reports_emissions() -> None:
    forecasts = {"GB": hourly([200] * 12, "GB"), "NO": hourly([500, 20, 20, 500] + [500] * 8, "NO")}
    places = [Place.parse("uk=GB"), Place.parse("nordic:oslo=NO")]
    plan = plan_placement(forecasts, places, now=T0, deadline=T0 + 12 * HOUR, duration_s=2 * 3600, power_kw=1.5)
    assert plan.place == Place(zone="NO", cluster="nordic", partition="oslo")
    assert plan.window.start == T0 + HOUR
    assert plan.expected_emissions_g == pytest.approx(20 * 1.5 * 2)
    assert plan.run_now.mean_intensity_g_per_kwh == pytest.approx(260)
    assert plan.place.sbatch_args() == ["--clusters=nordic", "--partition=oslo"]


def test_shift_points_replays_a_trace_as_a_forecast() -> None:
    shifted = shift_points(hourly([1, 2]), timedelta(days=3))
    assert shifted[0].start == T0 + timedelta(days=3) and shifted[1].kind is Kind.FORECAST

"""Forecaster: causality, shape and labels, what it learns, and accuracy against seasonal-naive."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greentrain.errors import ConfigError
from greentrain.signals.base import EmissionFactor, IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import (
    FULL_HISTORY_H,
    Forecaster,
    SeasonalNaiveForecaster,
    floor_hour,
    hourly_series,
    thin_history_note,
)
from greentrain.signals.trace import load_trace

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2024, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def series_points(values, start=T0, step=HOUR, zone="DE", provider="test") -> list[IntensityPoint]:
    return [
        IntensityPoint(
            start=start + i * step,
            end=start + (i + 1) * step,
            intensity_g_per_kwh=float(v),
            kind=Kind.ACTUAL,
            provider=provider,
            zone=zone,
            emission_factor=EmissionFactor.LIFECYCLE,
        )
        for i, v in enumerate(values)
    ]


def daily_cycle(hours: int, seed: int = 0, noise: float = 5.0, phi: float = 0.0, shock: float = 0.0) -> np.ndarray:
    """100 + 50 sin(daily) + AR(1) anomaly (phi, shock) + white noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(hours)
    anomaly = np.zeros(hours)
    for i in range(1, hours):
        anomaly[i] = phi * anomaly[i - 1] + shock * rng.standard_normal()
    return np.maximum(200 + 80 * np.sin(2 * np.pi * t / 24) + anomaly + noise * rng.standard_normal(hours), 0)


def values(points: list[IntensityPoint]) -> np.ndarray:
    return np.array([p.intensity_g_per_kwh for p in points])


def test_shape_times_and_labels() -> None:
    history = series_points(daily_cycle(24 * 30))
    now = history[500].start + timedelta(minutes=37)
    out = Forecaster().forecast(history, now, 72)
    assert len(out) == 72
    assert out[0].start == floor_hour(now) + HOUR
    assert all(b.start == a.end and a.end - a.start == HOUR for a, b in itertools.pairwise(out))
    assert {p.kind for p in out} == {Kind.FORECAST}
    assert {(p.zone, p.provider, p.emission_factor) for p in out} == {("DE", "test", EmissionFactor.LIFECYCLE)}
    assert all(math.isfinite(p.intensity_g_per_kwh) and p.intensity_g_per_kwh >= 0 for p in out)
    assert Forecaster(provider="greentrain").forecast(history, now, 3)[0].provider == "greentrain"


def test_changing_data_after_now_does_not_change_the_forecast() -> None:
    history = series_points(daily_cycle(24 * 70, seed=3, phi=0.9, shock=10))
    now = history[24 * 60 + 7].start + timedelta(minutes=59)
    cut = floor_hour(now)
    tampered = [
        p if p.start <= cut else replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh * 7 + 300) for p in history
    ]
    truncated = [p for p in history if p.start <= cut]
    for forecaster in (Forecaster(), Forecaster(select_online=True), SeasonalNaiveForecaster()):
        expected = values(forecaster.forecast(history, now))
        assert np.array_equal(values(forecaster.forecast(tampered, now)), expected)
        assert np.array_equal(values(forecaster.forecast(truncated, now)), expected)


def test_the_current_hour_is_used() -> None:
    history = series_points(daily_cycle(24 * 30, seed=4, phi=0.9, shock=10))
    now = history[600].start + timedelta(minutes=10)
    bumped = [
        replace(p, intensity_g_per_kwh=p.intensity_g_per_kwh + 100) if p.start == floor_hour(now) else p
        for p in history
    ]
    before, after = values(Forecaster().forecast(history, now, 6)), values(Forecaster().forecast(bumped, now, 6))
    # A higher value now means a higher value soon: anomalies persist.
    assert after[0] > before[0] + 10


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    length_h=st.integers(30, 24 * 40),
    cut_fraction=st.floats(0.1, 0.95),
    minute=st.integers(0, 59),
)
def test_causality_fuzzed(seed: int, length_h: int, cut_fraction: float, minute: int) -> None:
    rng = np.random.default_rng(seed)
    raw = np.abs(rng.normal(300, 120, length_h)) * rng.choice([1.0, 0.0], length_h, p=[0.97, 0.03])
    history = series_points(raw)
    now = history[int(cut_fraction * (length_h - 1))].start + timedelta(minutes=minute)
    future_junk = [
        replace(p, intensity_g_per_kwh=float(rng.uniform(0, 5000))) if p.start > floor_hour(now) else p for p in history
    ]
    expected = Forecaster().forecast(history, now, 48)
    assert expected == Forecaster().forecast(future_junk, now, 48)
    assert len(expected) == 48 and all(p.intensity_g_per_kwh >= 0 for p in expected)


def test_learns_the_daily_cycle_and_ranks_hours() -> None:
    history = series_points(daily_cycle(24 * 40, seed=5, noise=3))
    truth = daily_cycle(24 * 40, seed=5, noise=0)
    now = history[24 * 35 + 4].start
    forecast = values(Forecaster().forecast(history, now, 48))
    future = truth[24 * 35 + 5 : 24 * 35 + 5 + 48]
    assert np.mean(np.abs(forecast - future)) < 5
    assert np.argmin(forecast[:24]) == np.argmin(future[:24])
    assert np.argmax(forecast[:24]) == np.argmax(future[:24])


def test_persistent_anomalies_beat_seasonal_naive() -> None:
    raw = daily_cycle(24 * 120, seed=6, noise=4, phi=0.97, shock=12)
    history = series_points(raw)
    ours, naive = Forecaster(), SeasonalNaiveForecaster()
    errors = {"ours": [], "naive": []}
    for origin in range(24 * 60, 24 * 117, 13):
        now, truth = history[origin].start, raw[origin + 1 : origin + 73]
        errors["ours"].append(np.abs(values(ours.forecast(history, now)) - truth))
        errors["naive"].append(np.abs(values(naive.forecast(history, now)) - truth))
    mae_ours, mae_naive = np.mean(errors["ours"], axis=0), np.mean(errors["naive"], axis=0)
    assert np.all(mae_ours < mae_naive), (mae_ours / mae_naive).max()


@pytest.mark.timeout(120)
def test_beats_seasonal_naive_on_a_real_trace(carbon_trace) -> None:
    points = load_trace(carbon_trace("DE-LU_2021_hourly.csv"))
    truth = values(points)
    ours, naive = Forecaster(), SeasonalNaiveForecaster()
    errors = {"ours": [], "naive": []}
    for origin in range(24 * 56, 24 * 56 + 24 * 120, 17):
        now = points[origin].start
        errors["ours"].append(np.abs(values(ours.forecast(points, now)) - truth[origin + 1 : origin + 73]))
        errors["naive"].append(np.abs(values(naive.forecast(points, now)) - truth[origin + 1 : origin + 73]))
    ratio = np.mean(errors["ours"], axis=0) / np.mean(errors["naive"], axis=0)
    assert ratio[0] < 0.5  # one hour ahead, persistence of the anomaly dominates
    assert np.mean(ratio) < 0.95


def test_sub_hourly_points_are_averaged_and_gaps_are_nan() -> None:
    halves = series_points([100, 200, 300, 500], step=timedelta(minutes=30))
    hourly = hourly_series(halves, T0 + timedelta(hours=1, minutes=45), 3)
    # Only points starting by the top of the current hour count: 01:30 is not known yet at 01:00.
    assert np.isnan(hourly[0]) and hourly[1] == 150 and hourly[2] == 300
    gappy = [p for i, p in enumerate(series_points(daily_cycle(24 * 20))) if i % 7]
    series = hourly_series(gappy, gappy[-1].start, 24 * 20)
    assert np.isnan(series).sum() == 24 * 20 - len(gappy)
    out = Forecaster().forecast(gappy, gappy[-1].start, 24)
    assert len(out) == 24 and all(math.isfinite(p.intensity_g_per_kwh) for p in out)


def test_half_hourly_history_gives_hourly_forecast() -> None:
    raw = np.repeat(daily_cycle(24 * 20, seed=8, noise=0), 2)
    history = series_points(raw, step=timedelta(minutes=30))
    out = Forecaster().forecast(history, history[-1].start, 24)
    assert [p.end - p.start for p in out] == [HOUR] * 24
    future = daily_cycle(24 * 21, seed=8, noise=0)[24 * 20 : 24 * 21]
    assert np.mean(np.abs(values(out) - future)) < 10


def test_short_or_missing_history() -> None:
    assert Forecaster().forecast([], T0, 24) == []
    history = series_points([10, 20, 30, 40])
    assert Forecaster().forecast(history, T0 - HOUR, 24) == []  # nothing known yet
    short = values(Forecaster().forecast(history, history[-1].start, 5))
    assert np.allclose(short, 30)  # under two days: the recent level persists
    zeros = series_points(np.zeros(24 * 10))
    assert np.all(values(Forecaster().forecast(zeros, zeros[-1].start, 24)) == 0)


@pytest.mark.parametrize("length_h", [47, 48, 49, 24 * 30])
@pytest.mark.parametrize("horizon_h", [1, 24, 200])
def test_any_history_length_and_horizon(length_h: int, horizon_h: int) -> None:
    history = series_points(daily_cycle(length_h, seed=length_h, phi=0.9, shock=10))
    out = values(Forecaster().forecast(history, history[-1].start, horizon_h))
    assert out.shape == (horizon_h,) and np.all(np.isfinite(out)) and np.all(out >= 0)
    assert np.all(out < 1000)  # the series lives in ~[100, 300]: no blow-up at long horizons


def test_seasonal_naive_repeats_the_last_day() -> None:
    raw = np.arange(24 * 3, dtype=float)
    history = series_points(raw)
    out = values(SeasonalNaiveForecaster().forecast(history, history[-1].start, 50))
    assert np.array_equal(out[:24], raw[-24:])
    assert np.array_equal(out[24:48], raw[-24:]) and out[48] == raw[-24]


def test_bad_arguments_are_config_errors() -> None:
    history = series_points(daily_cycle(48))
    with pytest.raises(ConfigError, match="horizon_h"):
        Forecaster().forecast(history, history[-1].start, 0)
    with pytest.raises(ConfigError, match="naive"):
        Forecaster().forecast(history, datetime(2024, 3, 2), 3)
    with pytest.raises(ConfigError, match="lookback_days"):
        Forecaster(lookback_days=1)
    with pytest.raises(ConfigError, match="day_half_life_days"):
        Forecaster(day_half_life_days=0)


def test_a_horizon_gets_the_same_value_whatever_the_horizon_asked() -> None:
    # Callers (the simulator's cache, the engine) rely on shorter forecasts being prefixes of longer ones.
    raw = daily_cycle(24 * 60, seed=11, noise=6, phi=0.95, shock=15)
    for forecaster, cut_h in itertools.product((Forecaster(), Forecaster(select_online=True)), (24 * 20, 24 * 45, 1435)):
        long = forecaster.predict(raw[:cut_h], 72)
        for horizon_h in (1, 7, 30, 71):
            assert np.array_equal(forecaster.predict(raw[:cut_h], horizon_h), long[:horizon_h])


def test_online_selection_forecasts_the_expected_value_not_the_median() -> None:
    # Hourly values = daily shape × log-normal noise (sigma 0.8): the mean is 1.38× the median.
    # Emissions add up, so a planner needs the mean; a log-space model back-transformed with
    # plain exp() would forecast the median and make later hours look cheaper than they are.
    rng = np.random.default_rng(12)
    t = np.arange(24 * 60)
    shape = 100 + 40 * np.sin(2 * np.pi * t / 24)
    raw = shape * np.exp(0.8 * rng.standard_normal(t.size))
    forecast = Forecaster(select_online=True).predict(raw[: 24 * 50], 72)
    expected_mean = shape[24 * 50 : 24 * 50 + 72] * np.exp(0.8**2 / 2)
    ratio = forecast.mean() / expected_mean.mean()
    assert 0.95 < ratio < 1.05, ratio  # the default (mean averaged with the median) gives 0.90


def test_online_selection_relearns_a_changed_daily_shape_quickly() -> None:
    # The daily shape flips (clock change, a new solar fleet) 5 days before now, under persistent
    # weather noise: the candidate with the short profile half-life wins the out-of-sample comparison.
    # (The default forecaster, one-week half-life only, averages 39 g/kWh here; seeds fixed.)
    t = np.arange(24 * 50)
    shape = np.where(t < 24 * 45, np.sin(2 * np.pi * t / 24), -np.sin(2 * np.pi * t / 24))
    future = 300 - 100 * np.sin(2 * np.pi * np.arange(t.size, t.size + 48) / 24)
    errors = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        weather = np.zeros(t.size)
        for i in range(1, t.size):
            weather[i] = 0.9 * weather[i - 1] + 15 * rng.standard_normal()
        forecast = Forecaster(select_online=True).predict(300 + 100 * shape + weather, 48)
        errors.append(np.mean(np.abs(forecast - future)[12:]))
    assert np.mean(errors) < 35, errors


def test_a_replay_with_too_little_history_for_the_forecaster_gets_a_note_saying_so() -> None:
    points = series_points(daily_cycle(40 * 24))
    first = points[0].start
    flat = thin_history_note(points, first + timedelta(hours=10))
    assert flat is not None and "holds 10 h before 2024-03-01T10:00Z" in flat and "no daily profile and persists the latest level" in flat
    unchecked = thin_history_note(points, first + timedelta(days=5))
    assert unchecked is not None and "lacks its regression of each hour ahead" in unchecked
    assert thin_history_note(points, first + timedelta(hours=FULL_HISTORY_H)) is None
    assert thin_history_note(points, first - timedelta(hours=3)) is not None  # before the trace: 0 h
    assert thin_history_note([], first) is None

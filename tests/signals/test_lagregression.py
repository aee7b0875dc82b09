"""The direct lag-regression family: what it learns, its variance term and its history limits."""

from __future__ import annotations

import numpy as np

from greentrain.signals.forecast.lagregression import LAGS_H, MIN_FIT_ORIGINS, lag_regression


def ar1(n: int, phi: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(n)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + rng.standard_normal()
    return out


def test_recovers_an_ar1_decay_from_the_history() -> None:
    series = ar1(4000, 0.9)
    now = 2000 + int(np.argmax(np.abs(series[2000:])))  # forecast from a large anomaly
    anomaly = series[: now + 1]
    out = lag_regression(anomaly, 12)
    expected = anomaly[-1] * 0.9 ** np.arange(1, 13)  # the optimal forecast of an AR(1)
    # Estimation error and the ridge cost a few per cent (here 2-7 %); an off-by-one horizon adds 10 %.
    assert np.all(np.abs(out / expected - 1) < 0.08)


def test_lognormal_adds_half_the_residual_variance_per_horizon() -> None:
    anomaly = ar1(3000, 0.9, seed=1)
    extra = lag_regression(anomaly, 6, lognormal=True) - lag_regression(anomaly, 6)
    h = np.arange(1, 7)
    error_var = (1 - 0.9 ** (2 * h)) / (1 - 0.9**2)  # h-step error variance of a unit-shock AR(1)
    assert np.allclose(extra, 0.5 * error_var, rtol=0.15)
    assert np.all(np.diff(extra) > 0)


def test_horizons_without_a_week_of_examples_are_nan() -> None:
    anomaly = ar1(400, 0.5)
    shortest = LAGS_H + MIN_FIT_ORIGINS  # one horizon ahead needs this many hours
    assert np.isnan(lag_regression(anomaly[: shortest - 1], 1)).all()
    assert np.isfinite(lag_regression(anomaly[:shortest], 1)).all()
    out = lag_regression(anomaly[: shortest + 5], 10)
    assert np.isfinite(out[:6]).all() and np.isnan(out[6:]).all()

"""Forecast skill by hours ahead, measured against the actuals that arrived later, and the blend weights.

Every measurement here uses the same frame: at each past hour (an
*origin*), what a source forecast for 1, 2, ... hours ahead, against what
then happened. A source is a provider's forecasts as issued (the latest one
at each origin, ``IssuedForecasts.table``) or greentrain's own forecaster run
at each origin on the history up to it. Only targets whose actual is known
count, so at a decision time the skill uses nothing from its future.

``blend_weights`` turns two sources' paired errors into the weight of the
first at each hour ahead: the least-squares combination of two unbiased
forecasts, ``w = (σ₂² - c) / (σ₁² + σ₂² - 2c)`` with σ the error spreads
and c their covariance, clipped to [0, 1]. Neighbouring hours are pooled
(errors change smoothly with the horizon), and with too few pairs the
provider is trusted as issued.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["HorizonErrors", "MIN_PAIRS", "POOL_H", "actual_table", "blend_weights", "combine", "horizon_errors"]

MIN_PAIRS = 72
"""Fewer (pooled) forecast/actual pairs than three days of hourly origins: the provider is trusted as issued."""
POOL_H = 2
"""Hours pooled on each side of a horizon when estimating its error spreads."""


@dataclass(frozen=True, slots=True)
class HorizonErrors:
    """Errors of one source by hours ahead (index h - 1), in g/kWh; NaN where nothing was measured."""

    count: np.ndarray
    bias_g_per_kwh: np.ndarray
    """Mean of forecast minus actual (positive: forecast too high)."""
    mae_g_per_kwh: np.ndarray
    rmse_g_per_kwh: np.ndarray
    mape: np.ndarray
    """Mean absolute error as a fraction of the actual (hours with an actual of 0 left out)."""


def horizon_errors(forecast: np.ndarray, actual: np.ndarray) -> HorizonErrors:
    """Errors by column of (origins × hours ahead) tables; cells where either is NaN are left out."""
    error = forecast - actual
    known = ~np.isnan(error)
    count = known.sum(axis=0)
    safe = np.where(known, error, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        bias = safe.sum(axis=0) / count
        mae = np.abs(safe).sum(axis=0) / count
        rmse = np.sqrt((safe**2).sum(axis=0) / count)
        relative = known & (actual > 0)
        ape = np.where(relative, np.abs(safe) / np.where(relative, actual, 1.0), 0.0)
        mape = ape.sum(axis=0) / relative.sum(axis=0)
    return HorizonErrors(count, bias, mae, rmse, mape)


def actual_table(hourly: np.ndarray, first_hour_s: int, origins_s: np.ndarray, horizon_h: int) -> np.ndarray:
    """(origins × horizon_h) actuals: the value of the hour h hours after each origin's hour.

    ``hourly[i]`` is the hour starting ``first_hour_s + 3600 i`` (NaN unknown); hours outside it are NaN.
    """
    index = (np.asarray(origins_s, dtype=np.int64) // 3600 - first_hour_s // 3600)[:, None] \
        + np.arange(1, horizon_h + 1)[None, :]
    if hourly.size == 0:
        return np.full(index.shape, np.nan)
    inside = (index >= 0) & (index < hourly.size)
    return np.where(inside, hourly[np.clip(index, 0, hourly.size - 1)], np.nan)


def _pooled(per_h: np.ndarray, pool_h: int) -> np.ndarray:
    kernel = np.ones(2 * pool_h + 1)
    return np.convolve(per_h, kernel, mode="same")


def blend_weights(provider: np.ndarray, own: np.ndarray, actual: np.ndarray, *, min_pairs: int = MIN_PAIRS,
                  pool_h: int = POOL_H) -> np.ndarray:
    """The provider's weight at each hour ahead (own forecast: 1 - weight), from paired errors.

    Tables are (origins × hours ahead); only cells where all three are known count. Where fewer than
    ``min_pairs`` pooled pairs exist the weight is 1: the provider, as issued.
    """
    e_p, e_o = provider - actual, own - actual
    paired = ~(np.isnan(e_p) | np.isnan(e_o))
    e_p, e_o = np.where(paired, e_p, 0.0), np.where(paired, e_o, 0.0)
    n = _pooled(paired.sum(axis=0).astype(float), pool_h)
    s_pp = _pooled((e_p**2).sum(axis=0), pool_h)
    s_oo = _pooled((e_o**2).sum(axis=0), pool_h)
    s_po = _pooled((e_p * e_o).sum(axis=0), pool_h)
    denominator = s_pp + s_oo - 2.0 * s_po  # the squared spread of the difference: 0 only if they agree
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(denominator > 0, (s_oo - s_po) / denominator, 1.0)
    return np.where(n >= min_pairs, np.clip(weight, 0.0, 1.0), 1.0)


def combine(provider: np.ndarray, own: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """``weight`` × provider + (1 - ``weight``) × own per hour; own alone where the provider said nothing."""
    return np.where(np.isnan(provider), own, weight * provider + (1.0 - weight) * own)

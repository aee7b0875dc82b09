"""Direct multi-horizon regression of future anomalies on the last day of anomalies.

The forecaster's second model family. Where the autocovariance model
(``forecaster._anomaly_model``) predicts from five hand-picked lags under a
stationarity assumption, this one fits, by ridge least squares on the history
itself, one linear map from the last ``lags_h`` hourly anomalies to each of
the next ``horizon_h`` anomalies ("direct" forecasting: no recursion, so one
horizon's error does not feed the next). Twenty-four lags let every horizon
use the full shape of the last day: how a spike or a windy spell is
developing, not just its level. Averaging the two families gives better
schedules than either alone on every dev trace (docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["LAGS_H", "MIN_FIT_ORIGINS", "lag_regression"]

LAGS_H = 24
"""Regressors: the anomaly now and in each of the 23 hours before (one day)."""
MIN_FIT_ORIGINS = 7 * 24
"""Fewer complete (lags + horizon) examples than a week of hours: no fit."""
_RIDGE = 1e-2
"""Ridge penalty relative to the mean regressor variance: keeps 24 correlated lags well conditioned."""


def lag_regression(anomaly: np.ndarray, horizon_h: int, *, lognormal: bool = False) -> np.ndarray:
    """Forecast ``anomaly[n - 1 + h]`` for h = 1..``horizon_h``; NaN where history is too short.

    Every origin whose lags and target lie in ``anomaly`` is one example for
    that horizon (all weighted equally), so the value for horizon h does not
    depend on ``horizon_h``. Horizons with fewer than ``MIN_FIT_ORIGINS``
    examples are NaN. ``lognormal``: ``anomaly`` is on a log scale; add half
    the residual variance per horizon, so exp() of profile + result is the
    conditional mean (what emissions add up to), not the median.
    """
    n = anomaly.size
    out = np.full(horizon_h, np.nan)
    origins = np.arange(LAGS_H - 1, n - 1)
    # Horizon h (index h - 1) has origins.size - (h - 1) examples: the fitted ones are a prefix.
    fitted = int(np.clip(origins.size - MIN_FIT_ORIGINS + 1, 0, horizon_h))
    if fitted == 0:
        return out
    lags = np.arange(LAGS_H)
    x = anomaly[origins[:, None] - lags[None, :]]
    # Gram of all origins minus the outer products of the last h - 1, summed from the end so a
    # horizon's Gram (and so its forecast) is the same whatever horizon_h is asked.
    dropped = x[::-1][: fitted - 1]
    suffix = np.concatenate([np.zeros((1, LAGS_H, LAGS_H)),
                             np.cumsum(dropped[:, :, None] * dropped[:, None, :], axis=0)])
    grams = x.T @ x - suffix
    grams += np.eye(LAGS_H) * (_RIDGE * np.trace(grams, axis1=1, axis2=2) / LAGS_H + 1e-12)[:, None, None]
    now = anomaly[n - 1 - lags]
    # One horizon at a time: a batched product would round differently with the batch's size.
    for h_index in range(fitted):
        x_used = x[: origins.size - h_index]
        target = anomaly[origins[: origins.size - h_index] + h_index + 1]
        coef = np.linalg.solve(grams[h_index], x_used.T @ target)
        out[h_index] = now @ coef
        if lognormal:
            out[h_index] += 0.5 * float(np.mean((target - x_used @ coef) ** 2))
    return out

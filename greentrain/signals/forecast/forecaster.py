"""Causal carbon-intensity forecasts for providers (or plans) that give none.

``Forecaster`` models the next hours as *daily profile + persisting anomaly*:

* the profile is the mean intensity at each hour of day over recent days,
  weighted so recent days count more (exponential decay, half-life a week);
* the anomaly is how far each hour sits from that profile (a windy spell, a
  cold snap). Grid anomalies persist for hours to days and echo at the same
  hour a day or a week later, so the anomaly ``h`` hours ahead is predicted by
  least squares from the anomaly now and 2 h and 6 h ago, the latest one at
  the same hour of day and (given three weeks of data) the one a week before
  the target. The
  coefficients are re-fitted at every call from the history's own
  autocovariance: nothing is tuned to a particular grid.

The model is fitted twice, to the values (additive) and to their logarithm
(multiplicative, which suits spiky clean grids), and the two are averaged.
A second model family, ``lag_regression`` (greentrain/signals/forecast/lagregression),
maps the whole last day of anomalies to each future hour directly, also on
both scales; the forecast is the plain mean of the two families. On the dev
traces the mean schedules better than either family alone, and it lifts the
worst zone of the timing benchmark from 0.53 to 0.62 of the oracle's saving
(docs/benchmarks.md); no weight is fitted to those traces.

``Forecaster(select_online=True)`` instead weighs six variants of the first family: additive or
multiplicative (the latter converted back as the log-normal *mean*, the
expected value that emissions add up to, not the median), each with a profile
half-life of ½, 1 and 2 × ``day_half_life_days``. At every call each variant
is re-fitted to the history as it was two weeks earlier and scored on its
forecasts since (out of sample, causal); each horizon uses the variant with
the least squared error there. Which one wins differs between grids and
seasons, so it is chosen online, not tuned. It helps the timing policies on
the wind and hydro grids (docs/benchmarks.md) but is not the default
yet: it changes which day the demo documents (greentrain/demo).
Only points that start at or before the hour containing ``now`` are used, so
the forecast made at ``now`` cannot see the future. ``SeasonalNaiveForecaster``
(the value one day earlier) is the baseline it is measured against in
``benchmarks/forecast.py``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

import numpy as np

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.lagregression import LAGS_H, MIN_FIT_ORIGINS, lag_regression

__all__ = ["Forecaster", "SeasonalNaiveForecaster", "floor_hour", "hourly_series", "FULL_HISTORY_H",
           "thin_history_note"]

_HOUR = timedelta(hours=1)
_BACKTEST_H = 14 * 24
"""Hours of out-of-sample forecasts on which the candidate models are compared."""
_PROFILE_MIN_H = 48
"""Under this much history no daily profile is fitted: the forecast persists the recent level."""
_FULL_HORIZON_H = 72
FULL_HISTORY_H = MIN_FIT_ORIGINS + LAGS_H + _FULL_HORIZON_H
"""History at which the default ``Forecaster`` has its whole model ``_FULL_HORIZON_H`` ahead: the direct family
needs a week of complete (lags + horizon) examples (``signals/forecast/lagregression.py``); with less it is left out."""
_POOL_H = 2
"""Neighbouring horizons pooled (each side) when comparing the candidates at one horizon."""
_RECENT_LAGS_H = (0, 2, 6)
"""Hours back of the recent anomalies used as regressors (now, and two earlier for momentum)."""


def floor_hour(when: datetime) -> datetime:
    """The start of the UTC hour containing ``when``."""
    return ensure_aware_utc(when, "now").replace(minute=0, second=0, microsecond=0)


def hourly_series(history: Sequence[IntensityPoint], now: datetime, hours: int) -> np.ndarray:
    """Hourly means of ``history`` for the ``hours`` hours ending with the one containing ``now``.

    Sub-hourly points (GB half-hours, WattTime 5-minute values) are averaged
    into their hour; hours with no data are NaN. ``history`` must be in time
    order. Points starting after the hour containing ``now`` are ignored.
    """
    now_h = floor_hour(now)
    first_h = now_h - (hours - 1) * _HOUR
    stop = bisect_right(history, now_h, key=lambda p: p.start)
    lo = bisect_left(history, first_h, 0, stop, key=lambda p: p.start)
    window = history[lo:stop]
    out = np.full(hours, np.nan)
    if not window:
        return out
    last = hours - 1 - int((now_h - window[-1].start).total_seconds() // 3600)
    span_h = (window[-1].start - window[0].start).total_seconds() / 3600
    # Fast path (the simulator's case): one point per whole hour, no gaps.
    if len(window) == span_h + 1 and all(p.start.minute == p.start.second == p.start.microsecond == 0 for p in window):
        out[last - len(window) + 1 : last + 1] = [p.intensity_g_per_kwh for p in window]
        return out
    total, count = np.zeros(hours), np.zeros(hours)
    for point in window:
        # Floor division of a negative offset puts a half-hour into the hour it starts in.
        index = hours - 1 + int((point.start - now_h).total_seconds() // 3600)
        total[index] += point.intensity_g_per_kwh
        count[index] += 1
    known = count > 0
    out[known] = total[known] / count[known]
    return out


def _fill_gaps(values: np.ndarray) -> np.ndarray:
    """Carry the last known value forward (and the first one backward) over NaN gaps."""
    known = ~np.isnan(values)
    if known.all():
        return values
    index = np.where(known, np.arange(values.size), 0)
    np.maximum.accumulate(index, out=index)
    filled = values[index]
    first = int(np.argmax(known))
    filled[:first] = values[first]
    return filled


def _points(
    values: Iterable[float], now: datetime, template: IntensityPoint, provider: str | None
) -> list[IntensityPoint]:
    start = floor_hour(now) + _HOUR
    return [
        IntensityPoint(
            start=start + i * _HOUR,
            end=start + (i + 1) * _HOUR,
            intensity_g_per_kwh=float(v),
            kind=Kind.FORECAST,
            provider=provider or template.provider,
            zone=template.zone,
            emission_factor=template.emission_factor,
            estimated=True,
        )
        for i, v in enumerate(values)
    ]


def _check_horizon(horizon_h: int) -> int:
    """``horizon_h`` as an int >= 1 (numpy ints and whole floats accepted); ConfigError otherwise."""
    whole = isinstance(horizon_h, int | np.integer) or (isinstance(horizon_h, float) and horizon_h.is_integer())
    if isinstance(horizon_h, bool) or not whole or horizon_h < 1:
        raise ConfigError(f"horizon_h: must be a positive whole number of hours, got {horizon_h!r}")
    return int(horizon_h)


def _known_before(history: Sequence[IntensityPoint], now: datetime) -> IntensityPoint | None:
    stop = bisect_right(history, floor_hour(now), key=lambda p: p.start)
    return history[stop - 1] if stop else None


class Forecaster:
    """Seasonal profile + least-squares anomaly persistence; hourly, strictly causal."""

    horizon_independent = True
    """The value for h hours ahead does not depend on ``horizon_h`` (tested); simulators may share forecasts."""

    def __init__(
        self,
        *,
        lookback_days: int = 56,
        day_half_life_days: float = 7.0,
        provider: str | None = None,
        select_online: bool = False,
    ) -> None:
        """``lookback_days`` of history are used; profile day weights halve every ``day_half_life_days``.

        ``provider`` relabels output points (default: the history's provider).
        ``select_online``: per horizon, use the candidate model with the least
        out-of-sample error on the last two weeks (see ``_select``; about 10× the
        CPU time) instead of the fixed additive/multiplicative average.
        """
        if lookback_days < 2:
            raise ConfigError(f"lookback_days: need >= 2 days of history, got {lookback_days}")
        if day_half_life_days <= 0:
            raise ConfigError(f"day_half_life_days: must be > 0, got {day_half_life_days}")
        self.lookback_days = lookback_days
        self.day_half_life_days = day_half_life_days
        self.provider = provider
        self.select_online = select_online

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        """Hourly points for the ``horizon_h`` hours after the one containing ``now``.

        Uses only points with start <= floor_hour(now); ``history`` must be in
        time order. Returns [] when there is no usable history.
        """
        horizon_h = _check_horizon(horizon_h)
        template = _known_before(history, now)
        if template is None:
            return []
        values = self.predict(hourly_series(history, now, self.lookback_days * 24), horizon_h)
        if values is None:
            return []
        return _points(values, now, template, self.provider)

    def predict(self, series: np.ndarray, horizon_h: int) -> np.ndarray | None:
        """Forecast ``horizon_h`` values after the last element of an hourly ``series`` (NaN = gap).

        Default: the mean of the model fitted to the values (additive anomalies)
        and to their logarithm (multiplicative anomalies, which suit spiky,
        strictly positive grids; back-transformed as the median). With
        ``select_online`` each horizon takes the candidate (``_candidates``) with
        the least squared error on the last ``_BACKTEST_H`` hours of its own
        out-of-sample forecasts (``_select``); with too little history for that,
        the candidates' mean.
        """
        known = ~np.isnan(series)
        if not known.any():
            return None
        first = int(np.argmax(known))
        y = np.maximum(_fill_gaps(series[first:]), 0.0)
        if y.size < _PROFILE_MIN_H:
            # Under two days nothing seasonal can be estimated: persist the recent level.
            return np.full(horizon_h, float(np.mean(y[-3:])))
        offset_g_per_kwh = 0.1 * float(np.mean(y)) or 1.0  # keeps log() finite for zero-carbon hours
        if not self.select_online:
            logged = np.log(y + offset_g_per_kwh)
            origin = np.array([y.size - 1])
            additive = self._fit_apply(y, y.size, origin, horizon_h, self.day_half_life_days)[0]
            log_median = self._fit_apply(logged, y.size, origin, horizon_h, self.day_half_life_days)[0]
            autocov = 0.5 * (additive + np.exp(log_median) - offset_g_per_kwh)
            direct = 0.5 * (self._lag_apply(y, horizon_h)
                            + np.exp(self._lag_apply(logged, horizon_h, lognormal=True)) - offset_g_per_kwh)
            # Horizons the direct model could not fit for lack of history (NaN) use the first family alone.
            return np.maximum(np.where(np.isnan(direct), autocov, 0.5 * (autocov + direct)), 0.0)
        now = self._candidates(y, y.size, np.array([y.size - 1]), horizon_h, offset_g_per_kwh)[:, 0, :]
        # The error pooling reaches _POOL_H horizons further, so a horizon's choice does not depend on horizon_h.
        chosen = self._select(y, horizon_h + _POOL_H, offset_g_per_kwh)
        if chosen is None:
            return np.maximum(now.mean(axis=0), 0.0)
        return np.maximum(now[chosen[:horizon_h], np.arange(horizon_h)], 0.0)

    def _candidates(self, y: np.ndarray, fit_n: int, origins: np.ndarray, horizon_h: int,
                    offset_g_per_kwh: float) -> np.ndarray:
        """Forecasts (candidate × origin × horizon) of the models fitted to ``y[:fit_n]``.

        Candidates: profile half-life ½×, 1× and 2× ``day_half_life_days`` (how fast the
        daily shape drifts), each fitted to the values (additive anomalies) and to their
        logarithm (multiplicative anomalies, which suit spiky clean grids).
        """
        logged = np.log(y + offset_g_per_kwh)
        out = []
        for half_life_d in (self.day_half_life_days / 2, self.day_half_life_days, 2 * self.day_half_life_days):
            out.append(self._fit_apply(y, fit_n, origins, horizon_h, half_life_d))
            log_mean = self._fit_apply(logged, fit_n, origins, horizon_h, half_life_d, lognormal=True)
            out.append(np.exp(log_mean) - offset_g_per_kwh)
        return np.stack(out)

    def _select(self, y: np.ndarray, horizon_h: int, offset_g_per_kwh: float) -> np.ndarray | None:
        """Index of the best candidate per horizon, judged on its own out-of-sample forecasts.

        Every candidate is re-fitted to the history as it was ``_BACKTEST_H`` hours ago
        and applied at each hour since; its squared errors at each horizon (pooled with
        ``_POOL_H`` neighbours each side) rank it. Causal: only the history is used.
        None when the history is too short to leave a meaningful fit.
        """
        fit_n = y.size - _BACKTEST_H
        if fit_n < 14 * 24:
            return None
        origins = np.arange(fit_n - 1, y.size - 1)
        past = self._candidates(y, fit_n, origins, horizon_h, offset_g_per_kwh)
        target = origins[:, None] + np.arange(1, horizon_h + 1)[None, :]
        actual = y[np.minimum(target, y.size - 1)]
        squared = np.where(target < y.size, (past - actual) ** 2, 0.0).sum(axis=1)  # candidate × horizon
        kernel = np.ones(2 * _POOL_H + 1)
        pooled = np.stack([np.convolve(row, kernel, mode="same") for row in squared])
        return np.argmin(pooled, axis=0)

    def _fit_apply(self, y: np.ndarray, fit_n: int, origins: np.ndarray, horizon_h: int,
                   half_life_d: float, *, lognormal: bool = False) -> np.ndarray:
        """Profile + least-squares anomaly model fitted to ``y[:fit_n]``: forecasts (origin × horizon)
        from each index in ``origins`` (all >= fit_n - 1, so the profile and coefficients are
        out of sample there). ``lognormal``: ``y`` is a logarithm; add half the model's error
        variance so exp() of the result is the conditional mean, not the median."""
        daily = self._daily_profile(y[:fit_n], half_life_d)
        anomaly = y - daily[(np.arange(y.size) - fit_n) % 24]
        coef, lag, error_var = _anomaly_model(anomaly[:fit_n], horizon_h)
        h = np.arange(1, horizon_h + 1)
        out = daily[(origins[:, None] + h[None, :] - fit_n) % 24] + (0.5 * error_var if lognormal else 0.0)
        if coef is None:
            return out
        lagged = anomaly[origins[:, None, None] - lag[None, :, :]]
        return out + (coef[None] * lagged).sum(axis=2)

    def _lag_apply(self, y: np.ndarray, horizon_h: int, *, lognormal: bool = False) -> np.ndarray:
        """Profile + ``lag_regression`` of the anomalies (the direct family); NaN where history is too short."""
        daily = self._daily_profile(y, self.day_half_life_days)
        anomaly = y - daily[(np.arange(y.size) - y.size) % 24]
        return daily[np.arange(horizon_h) % 24] + lag_regression(anomaly, horizon_h, lognormal=lognormal)

    @staticmethod
    def _daily_profile(y: np.ndarray, half_life_d: float) -> np.ndarray:
        """Mean by hour of day, day weights halving every ``half_life_d``; column k is the hour of y[-24 + k]."""
        days = y.size // 24
        recent = y[y.size - days * 24 :].reshape(days, 24)
        ages_d = np.arange(days - 1, -1, -1, dtype=float)
        weights = 0.5 ** (ages_d / half_life_d)
        return weights @ recent / weights.sum()


def _autocovariance(a: np.ndarray, max_lag: int) -> np.ndarray:
    """r[k] = sum_t a[t] a[t + k] / n for k = 0..max_lag (FFT, zero-padded: no wrap-around)."""
    n = a.size
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(a, size)
    r = np.fft.irfft(spectrum * np.conj(spectrum), size)[: max_lag + 1] / n
    return np.concatenate([r, np.zeros(max(0, max_lag + 1 - r.size))])


def _anomaly_model(anomaly: np.ndarray, horizon_h: int) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Least-squares coefficients (horizon × regressor) and lags predicting anomaly[n - 1 + h].

    Regressors per horizon: the anomaly now and 2 h and 6 h ago (level and
    momentum: is the wind picking up or dying down?), the latest anomaly at
    the target's hour of day, and (with >= 3 weeks of data) the one a week
    before the target. Coefficients solve the normal equations built from the
    history's autocovariance (Yule-Walker style), one small system per horizon.
    """
    n = anomaly.size
    h = np.arange(1, horizon_h + 1)
    lags = [np.full(horizon_h, lag_h) for lag_h in _RECENT_LAGS_H] + [24 * np.ceil(h / 24).astype(int) - h]
    if n >= 3 * 168 + horizon_h:
        lags.append(168 * np.ceil(h / 168).astype(int) - h)
    lag = np.stack(lags, axis=1)  # (H, k): regressor i for horizon h is anomaly[n - 1 - lag[h, i]]
    r = _autocovariance(anomaly, int(lag.max() + horizon_h))
    if r[0] <= 0:
        return None, lag, np.zeros(horizon_h)
    gram = r[np.abs(lag[:, :, None] - lag[:, None, :])]
    # A small ridge keeps the system solvable when two regressors coincide (h = 24, 48, ...).
    gram += np.eye(lag.shape[1]) * (1e-3 * r[0])
    target = r[h[:, None] + lag]
    coef = np.linalg.solve(gram, target[..., None])[..., 0]
    error_var = np.maximum(r[0] - (coef * target).sum(axis=1), 0.0)
    return coef, lag, error_var


class SeasonalNaiveForecaster:
    """Baseline: each hour's value is the latest known value at the same hour of day."""

    horizon_independent = True

    def __init__(self, *, provider: str | None = None) -> None:
        self.provider = provider

    def forecast(self, history: Sequence[IntensityPoint], now: datetime, horizon_h: int = 72) -> list[IntensityPoint]:
        """Value 24 h earlier (48 h, 72 h ... where that is still in the future)."""
        horizon_h = _check_horizon(horizon_h)
        template = _known_before(history, now)
        if template is None:
            return []
        values = self.predict(hourly_series(history, now, 24), horizon_h)
        return [] if values is None else _points(values, now, template, self.provider)

    @staticmethod
    def predict(series: np.ndarray, horizon_h: int) -> np.ndarray | None:
        """The last 24 values of ``series`` repeated over the horizon (gaps filled)."""
        if not (~np.isnan(series)).any():
            return None
        day = _fill_gaps(series[-24:])
        if day.size < 24:
            day = np.concatenate([np.full(24 - day.size, day[0]), day])
        return np.resize(day, horizon_h)


def thin_history_note(history: Sequence[IntensityPoint], at: datetime) -> str | None:
    """One line for the user when ``history`` holds less before ``at`` than the default ``Forecaster`` needs
    for its whole model (``FULL_HISTORY_H``), else None. A replay that starts at a trace's first hours otherwise plans
    on a flat or unchecked forecast and reports a small saving with no reason given."""
    if not history:
        return None
    have_h = max(0.0, (ensure_aware_utc(at) - history[0].start).total_seconds() / 3600.0)
    if have_h >= FULL_HISTORY_H:
        return None
    if have_h < _PROFILE_MIN_H:
        what = "under 2 days it has no daily profile and persists the latest level, so the first plans run at once"
    else:
        what = "before that it lacks its regression of each hour ahead on the last day, so the first plans use less"
    return (f"the trace holds {have_h:.0f} h before {ensure_aware_utc(at):%Y-%m-%dT%H:%MZ}; greentrain's forecaster "
            f"has its whole model with {FULL_HISTORY_H // 24} days of history ({what}); "
            "a trace that begins earlier gives the full forecast")

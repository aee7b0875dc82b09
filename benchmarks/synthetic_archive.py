"""Synthetic forecast archives with a known skill, built from a real carbon trace (benchmarks only).

No archive of real provider forecasts is available here, so one is made
from the trace itself: at every hour t a forecast is "issued" for the next
72 hours, value = actual × exp(E[t, h]). The error E follows the martingale
model of forecast evolution: a forecast for a fixed target hour is revised a
little at each issue, so

    E[t, h] = E[t + 1, h - 1] + η_t[h],   E[·, 0] = 0,

with η_t independent between issues and an AR(1) process along the target
hours (coefficient ``RHO_PER_HOUR``: a forecast that misses a windy evening
misses the hours around it too). Hence:

* the error grows with the horizon, variance ∝ h (σ(h) = σ₂₄ √(h / 24));
* it is autocorrelated in time: the forecasts issued an hour apart share all
  but one revision of their error, and neighbouring target hours move
  together;
* σ₂₄ is set so the mean absolute percentage error 24 h ahead is ``scale`` ×
  7 % (the published GB day-ahead figure: an independent scraper of the
  Carbon Intensity API found MAE 13.7 g/kWh, about 7 %, over 2017-2023).

The errors do not depend on the trace (only their seed does), so 0.5×, 1×
and 2× archives of one trace share one error pattern, scaled: their columns
differ by skill alone. Seeds: ``numpy.random.default_rng([seed, crc32(trace
name)])``, ``seed`` = ``DEFAULT_SEED`` unless given.
"""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np

from greentrain.signals.archive.store import ForecastArchive

__all__ = ["DEFAULT_SEED", "MAPE_DAY_AHEAD", "RHO_PER_HOUR", "log_errors", "sigma_for_mape", "write_archive"]

MAPE_DAY_AHEAD = 0.07
RHO_PER_HOUR = 0.9
HORIZON_H = 72
DEFAULT_SEED = 26


def _mape_of_sigma(sigma: float) -> float:
    """E|exp(X) - 1| for X ~ N(0, σ²) = exp(σ²/2) (2Φ(σ) - 1)."""
    return math.exp(sigma**2 / 2) * math.erf(sigma / math.sqrt(2))


def sigma_for_mape(mape: float) -> float:
    """The log-error spread whose mean absolute percentage error is ``mape`` (bisection)."""
    lo, hi = 0.0, 3.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _mape_of_sigma(mid) < mape else (lo, mid)
    return (lo + hi) / 2


def log_errors(n_issues: int, *, sigma_24h: float, rng: np.random.Generator, horizon_h: int = HORIZON_H,
               rho: float = RHO_PER_HOUR) -> np.ndarray:
    """(issues × horizon_h) log-errors E[t, h - 1] of the forecast issued at t for t + h (see module doc)."""
    step = sigma_24h / math.sqrt(24.0)  # each revision's spread: var E[t, h] = h × step²
    shocks = rng.standard_normal((n_issues, horizon_h))
    revisions = np.empty_like(shocks)
    revisions[:, 0] = shocks[:, 0]
    for h in range(1, horizon_h):
        revisions[:, h] = rho * revisions[:, h - 1] + math.sqrt(1.0 - rho**2) * shocks[:, h]
    revisions *= step
    errors = np.zeros((n_issues, horizon_h))
    for t in range(n_issues - 1, -1, -1):  # backwards: issue t revises what issue t + 1 will say
        if t + 1 < n_issues:
            errors[t, 1:] = errors[t + 1, :-1]
        errors[t] += revisions[t]
    return errors


def forecast_table(actual: np.ndarray, scale: float, *, trace_name: str,
                   seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """(forecast, truth): (hours × 72) forecasts issued at each hour of ``actual`` for the next 72 hours, with
    ``scale`` × the day-ahead error, and the actual values they aim at (NaN past the trace's end)."""
    rng = np.random.default_rng([seed, zlib.crc32(trace_name.encode())])
    base = log_errors(actual.size, sigma_24h=sigma_for_mape(MAPE_DAY_AHEAD), rng=rng)
    target = np.arange(actual.size)[:, None] + np.arange(1, HORIZON_H + 1)[None, :]
    truth = np.where(target < actual.size, actual[np.minimum(target, actual.size - 1)], np.nan)
    return truth * np.exp(base * (sigma_for_mape(scale * MAPE_DAY_AHEAD) / sigma_for_mape(MAPE_DAY_AHEAD))), truth


def mape_24h(forecast: np.ndarray, truth: np.ndarray) -> float:
    """The measured mean absolute percentage error 24 h ahead (a check on the generator)."""
    day = truth[:, 23] > 0
    return float(np.mean(np.abs(forecast[day, 23] / truth[day, 23] - 1.0)))


def write_archive(actual: np.ndarray, hour0_s: int, path: Path, zone: str, scales: dict[str, float], *,
                  trace_name: str, seed: int = DEFAULT_SEED) -> dict[str, float]:
    """Write one series per ``scales`` entry (provider name → error scale) into the archive at ``path``;
    returns each series' measured MAPE 24 h ahead."""
    measured = {}
    with ForecastArchive(path) as archive:
        for name, scale in scales.items():
            values, truth = forecast_table(actual, scale, trace_name=trace_name, seed=seed)
            rows = [(hour0_s + 3600 * t, hour0_s + 3600 * (t + k + 1), float(values[t, k]))
                    for t, k in zip(*np.nonzero(~np.isnan(truth)))]
            archive.write(name, zone, forecasts=rows)
            measured[name] = mape_24h(values, truth)
    return measured


def main() -> None:
    """Write a synthetic archive of one trace window in the long CSV format (e.g. the example the package ships)."""
    import argparse
    from datetime import datetime

    from greentrain.clock import ensure_aware_utc
    from greentrain.signals.archive.longcsv import write_forecast_csv
    from greentrain.signals.trace import load_trace

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--trace", type=Path, required=True, help="Electricity Maps hourly CSV export")
    parser.add_argument("--start", required=True, help="first issue time, ISO-8601 UTC")
    parser.add_argument("--days", type=float, required=True, help="days of issues")
    parser.add_argument("--every-hours", type=int, default=1, help="one issue every this many hours")
    parser.add_argument("--horizon-hours", type=int, default=HORIZON_H)
    parser.add_argument("--scale", type=float, default=1.0, help="error as a multiple of the 7 %% day-ahead MAPE")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--csv", type=Path, required=True, help="file to write")
    args = parser.parse_args()
    points = load_trace(args.trace)
    actual = np.array([p.intensity_g_per_kwh for p in points])
    values, truth = forecast_table(actual, args.scale, trace_name=args.trace.stem, seed=args.seed)
    first = ensure_aware_utc(datetime.fromisoformat(args.start.replace("Z", "+00:00")), "--start")
    t0 = next(i for i, p in enumerate(points) if p.start >= first)
    hour0_s = int(points[0].start.timestamp())
    rows = [(hour0_s + 3600 * t, hour0_s + 3600 * (t + k + 1), float(values[t, k]))
            for t in range(t0, min(t0 + int(args.days * 24), actual.size), args.every_hours)
            for k in range(min(args.horizon_hours, HORIZON_H)) if not np.isnan(truth[t, k])]
    with open(args.csv, "w", encoding="utf-8", newline="") as handle:
        written = write_forecast_csv(rows, handle)
    print(f"{written} rows; MAPE 24 h ahead over the trace: {mape_24h(values, truth):.3f}")


if __name__ == "__main__":
    main()

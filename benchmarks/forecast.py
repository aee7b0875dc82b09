"""Forecast accuracy and usefulness on real traces: greentrain's Forecaster vs. seasonal-naive.

For each Electricity Maps trace, forecasts are made every ``--step-h`` hours
(after a warm-up of ``lookback`` days) from the history known at that hour
only, then compared with what really happened:

* MAE and MAPE by horizon (1..72 h), both methods, and their ratio;
* scheduling value: pick the k lowest-forecast hours in the next D hours and
  report the saving vs. running now as a fraction of a perfect-foresight
  oracle's saving (what a timing policy gets out of the forecast);
* time per ``Forecaster.forecast`` call with 4 weeks of history.

Run: ``python benchmarks/forecast.py [--data ../shared/data/carbon] [--step-h 5]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from greentrain.signals.forecast import Forecaster, SeasonalNaiveForecaster
from greentrain.signals.trace import load_trace

HORIZON_H = 72
REPORT_H = (1, 3, 6, 12, 24, 36, 48, 72)
JOBS = ((6, 24), (12, 48), (24, 72))  # (hours of work, hours to choose them in)


def evaluate(path: Path, step_h: int) -> dict:
    points = load_trace(path)
    actual = np.array([p.intensity_g_per_kwh for p in points])
    ours, naive = Forecaster(), SeasonalNaiveForecaster()
    warmup = ours.lookback_days * 24
    errors = {"ours": [], "naive": []}
    apes = {"ours": [], "naive": []}
    savings = {name: {job: [0.0, 0.0] for job in JOBS} for name in errors}
    elapsed_s, calls = 0.0, 0
    for origin in range(warmup, len(points) - HORIZON_H, step_h):
        now = points[origin].start
        truth = actual[origin + 1 : origin + 1 + HORIZON_H]
        t0 = time.perf_counter()
        mine = ours.forecast(points, now, HORIZON_H)
        elapsed_s += time.perf_counter() - t0
        calls += 1
        base = naive.forecast(points, now, HORIZON_H)
        for name, fc in (("ours", mine), ("naive", base)):
            predicted = np.array([p.intensity_g_per_kwh for p in fc])
            errors[name].append(np.abs(predicted - truth))
            apes[name].append(np.abs(predicted - truth) / np.maximum(truth, 1e-9))
            for hours, window in JOBS:
                future, guess = truth[:window], predicted[:window]
                run_now = future[:hours].mean()
                chosen = future[np.argsort(guess, kind="stable")[:hours]].mean()
                best = np.sort(future)[:hours].mean()
                savings[name][(hours, window)][0] += run_now - chosen
                savings[name][(hours, window)][1] += run_now - best
    return {
        "mae": {k: np.mean(v, axis=0) for k, v in errors.items()},
        "mape": {k: 100 * np.mean(v, axis=0) for k, v in apes.items()},
        "savings": {k: {j: s[0] / s[1] if s[1] else float("nan") for j, s in v.items()} for k, v in savings.items()},
        "ms_per_call": 1000 * elapsed_s / max(calls, 1),
        "origins": calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared/data/carbon")
    # 5 is coprime with 24, so every hour of the day is a forecast origin.
    parser.add_argument("--step-h", type=int, default=5, help="hours between forecast origins")
    args = parser.parse_args()
    all_ratio = []
    print(f"MAE g/kWh by horizon, ours / seasonal-naive (ratio < 1 = better); origins every {args.step_h} h\n")
    header = "| trace | " + " | ".join(f"{h} h" for h in REPORT_H) + " | worst ratio (1-72 h) | ms/call |"
    print(header)
    print("|" + "---|" * (len(REPORT_H) + 4))
    results = {}
    for path in sorted(args.data.glob("*.csv")):
        r = results[path.stem] = evaluate(path, args.step_h)
        ratio = r["mae"]["ours"] / r["mae"]["naive"]
        all_ratio.append(ratio)
        cells = " | ".join(
            f"{r['mae']['ours'][h - 1]:.1f} / {r['mae']['naive'][h - 1]:.1f}" for h in REPORT_H
        )
        print(f"| {path.stem} | {cells} | {ratio.max():.3f} | {r['ms_per_call']:.2f} |")
    print("\nMAPE % at 1 / 24 / 72 h, ours vs seasonal-naive\n")
    print("| trace | ours | seasonal-naive |\n|---|---|---|")
    for name, r in results.items():
        fmt = lambda v: " / ".join(f"{v[h - 1]:.1f}" for h in (1, 24, 72))  # noqa: E731
        print(f"| {name} | {fmt(r['mape']['ours'])} | {fmt(r['mape']['naive'])} |")
    print("\nScheduling value: saving of the k lowest-forecast hours in the next D h, as a fraction of the oracle's\n")
    print("| trace | " + " | ".join(f"k={k}, D={d}: ours / naive" for k, d in JOBS) + " |")
    print("|" + "---|" * (len(JOBS) + 1))
    for name, r in results.items():
        print(f"| {name} | " + " | ".join(
            f"{r['savings']['ours'][j]:.3f} / {r['savings']['naive'][j]:.3f}" for j in JOBS) + " |")
    worst = float(np.max(all_ratio))
    print(f"\nWorst MAE ratio over all traces and horizons: {worst:.3f} ({'beats' if worst < 1 else 'does NOT beat'} "
          "seasonal-naive everywhere)")


if __name__ == "__main__":
    main()

"""Forecast accuracy and usefulness on real traces: greentrain's Forecaster vs. seasonal-naive.

For each Electricity Maps trace, forecasts are made every ``--step-h`` hours
(after a warm-up of ``lookback`` days) from the history known at that hour
only, then compared with what really happened:

* MAE and MAPE by horizon (1..72 h), both methods, and their ratio;
* scheduling value: pick the k lowest-forecast hours in the next D hours and
  report the saving vs. running now as a fraction of a perfect-foresight
  oracle's saving (what a timing policy gets out of the forecast);
* time per ``Forecaster.forecast`` call with 8 weeks of history;
* end to end: the carbon-aware timing policy replayed through ``greentrain.sim``
  with each forecaster, as a fraction of the perfect-foresight oracle's saving.

Run: ``python benchmarks/forecast.py [--data ../shared/data/carbon] [--step-h 5]``
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster
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


def policy_fraction(path: Path, forecaster, starts_n: int, work_h: float, deadline_h: float) -> float:
    """Fraction of the oracle's saving the carbon-aware policy reaches with ``forecaster`` (greentrain.sim)."""
    from greentrain.policies import load_policy
    from greentrain.sim import SimJob, TraceIndex, summarize
    from greentrain.sim import simulate as run_simulation

    points = load_trace(path)
    trace = TraceIndex(points, path.stem)
    first, last = points[0].start + timedelta(days=56), points[-1].end - timedelta(hours=deadline_h + 1)
    every = (last - first) / starts_n
    starts = [(first + i * every).replace(minute=0, second=0, microsecond=0) for i in range(starts_n)]
    job = SimJob.constant_power(power_kw=1.0, work_h=work_h, deadline_h=deadline_h, resume_overhead_min=5.0)
    results = run_simulation(trace, starts, job, load_policy("carbon-aware"), forecaster)
    return float(summarize(results, "carbon-aware")["fraction_of_oracle_saving"])


def print_policy_table(paths: list[Path], starts_n: int) -> None:
    jobs = ((6.0, 24.0), (12.0, 48.0))
    print(
        f"\nEnd to end: carbon-aware policy in greentrain.sim, fraction of the oracle's saving "
        f"({starts_n} starts per trace, 1 kW job)\n"
    )
    print("| trace | " + " | ".join(f"{w:g} h work in {d:g} h: ours / naive" for w, d in jobs) + " |")
    print("|" + "---|" * (len(jobs) + 1))
    for path in paths:
        cells = []
        for work_h, deadline_h in jobs:
            ours = policy_fraction(path, Forecaster(), starts_n, work_h, deadline_h)
            naive = policy_fraction(path, SeasonalNaiveForecaster(), starts_n, work_h, deadline_h)
            cells.append(f"{ours:.3f} / {naive:.3f}")
        print(f"| {path.stem} | " + " | ".join(cells) + " |")


def print_accuracy_tables(results: dict[str, dict], step_h: int) -> float:
    """MAE, MAPE and scheduling-value tables; returns the worst MAE ratio (ours / naive)."""
    print(f"MAE g/kWh by horizon, ours / seasonal-naive (ratio < 1 = better); origins every {step_h} h\n")
    print("| trace | " + " | ".join(f"{h} h" for h in REPORT_H) + " | worst ratio (1-72 h) | ms/call |")
    print("|" + "---|" * (len(REPORT_H) + 3))
    worst = 0.0
    for name, r in results.items():
        ratio = r["mae"]["ours"] / r["mae"]["naive"]
        worst = max(worst, float(ratio.max()))
        cells = " | ".join(f"{r['mae']['ours'][h - 1]:.1f} / {r['mae']['naive'][h - 1]:.1f}" for h in REPORT_H)
        print(f"| {name} | {cells} | {ratio.max():.3f} | {r['ms_per_call']:.2f} |")
    print("\nMAPE % at 1 / 24 / 72 h, ours vs seasonal-naive\n")
    print("| trace | ours | seasonal-naive |\n|---|---|---|")
    for name, r in results.items():
        ours, naive = (" / ".join(f"{r['mape'][k][h - 1]:.1f}" for h in (1, 24, 72)) for k in ("ours", "naive"))
        print(f"| {name} | {ours} | {naive} |")
    print("\nScheduling value: saving of the k lowest-forecast hours in the next D h, as a fraction of the oracle's\n")
    print("| trace | " + " | ".join(f"k={k}, D={d}: ours / naive" for k, d in JOBS) + " |")
    print("|" + "---|" * (len(JOBS) + 1))
    for name, r in results.items():
        cells = " | ".join(f"{r['savings']['ours'][j]:.3f} / {r['savings']['naive'][j]:.3f}" for j in JOBS)
        print(f"| {name} | {cells} |")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared/data/carbon")
    # 5 is coprime with 24, so every hour of the day is a forecast origin.
    parser.add_argument("--step-h", type=int, default=5, help="hours between forecast origins")
    parser.add_argument("--policy-starts", type=int, default=60, help="starts per trace in the policy replay (0: skip)")
    args = parser.parse_args()
    paths = sorted(args.data.glob("*.csv"))
    if not paths:
        raise SystemExit(f"--data: no *.csv traces in {args.data}")
    results = {path.stem: evaluate(path, args.step_h) for path in paths}
    worst = print_accuracy_tables(results, args.step_h)
    if args.policy_starts > 0:
        print_policy_table(paths, args.policy_starts)
    verdict = "beats" if worst < 1 else "does NOT beat"
    print(f"\nWorst MAE ratio over all traces and horizons: {worst:.3f} ({verdict} seasonal-naive everywhere)")


if __name__ == "__main__":
    main()

"""Forecast-optimal's net timing under variants of its forecast use, on cached causal forecasts.

The default ``Forecaster`` is run once per trace hour (72 h ahead, from the
trace up to that hour only) and cached as .npy; every variant then replays the
same jobs as ``benchmarks/timing.py`` (same start times, same simulator, same
idle-aware oracle) with the forecast post-processed causally, so variants cost
no forecasting and differ only in what is named. With the ``base`` variant
this reproduces ``timing.py``'s ``forecast-optimal (real)`` column exactly.

Variants (each uses only the trace up to the decision):

* ``base``: the forecast as is.
* ``margin=M``: ``min_pause_saving`` M instead of the preset's.
* ``persist-tail``: hours beyond 24 h ahead = the last 24 h of actuals (seasonal naive).
* ``clim-tail=W``: hours beyond 24 h ahead = (1 - W) × forecast + W × the 28-day hour-of-day mean.
* ``sigma=L``: each hour h ahead + L × the forecast's RMSE at h over the last 28 days
  (L > 0: pessimistic about waiting; L < 0: optimistic).
* ``perfect-first=N``: the actual values for the first N hours (diagnostic, not causal).
* ``no-pause``: a started job never pauses (delay of the first start only).
* ``analog=K``: hours beyond 24 h ahead = the mean of an analog ensemble: the K past
  moments (same hour of day, ≥ 72 h and ≤ 26 weeks back) whose last 48 h, less their
  mean, best match the last 48 h, each followed for 72 h and shifted by the difference of
  the two 48 h means.
* ``analog-w=K``: forecast and that ensemble mean blended per hour ahead with weights
  inverse to each one's squared error there over the last 28 days.
* ``analog-saa=K``: planning over scenarios: K scenarios = the forecast plus each analog
  member's deviation from the ensemble mean; each first action (run / pause or wait this
  hour) is scored by its mean, over the scenarios, of the best continuation's net emissions
  (the planner's first-slot saving per scenario), and the job pauses or waits only if that
  mean saving beats the margin.
* ``analog-q=K,Q``: the same, with the Q-quantile of the scenarios' savings instead of their
  mean (Q < 0.5: wait only if it pays in most scenarios; corrects the scenarios' hindsight).
* ``analog-risk=L``: each hour + L × the spread (standard deviation) of a 20-member
  ensemble there: a state-dependent penalty (L > 0) or bonus (L < 0) on uncertain hours.

    python benchmarks/timing_variants.py --cache /tmp/gt-fc --every-days 10 --jobs 24 \\
        --variants base margin=0 margin=0.06 persist-tail clim-tail=1 clim-tail=0.5 sigma=-0.25
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from greentrain.jobstats import JobState
from greentrain.policies import load_policy
from greentrain.policies.base import Action
from greentrain.policies import slot_planner
from greentrain.policies.slot_planner import Mode
from greentrain.policies.window import pause_decision
from greentrain.signals.base import IntensityPoint, Kind
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim import SimJob, TraceIndex, oracle, run_now, simulate_run

sys.path.insert(0, str(Path(__file__).parent))
from timing import DATA, HISTORY_DAYS, starts_for  # noqa: E402

HORIZON_H = 72
WINDOW_H = 28 * 24
"""Past hours over which a variant measures errors or a climatology (causal)."""


def forecast_cache(path: Path, cache_dir: Path) -> np.ndarray:
    """(trace hours × 72) forecasts made at every hour after the history warm-up; NaN before it."""
    target = cache_dir / f"{path.stem}.npy"
    if target.exists():
        return np.load(target)
    points = load_trace(path)
    forecaster = Forecaster()
    table = np.full((len(points), HORIZON_H), np.nan)
    for t in range(24 * (HISTORY_DAYS - 1), len(points) - 1):
        made = forecaster.forecast(points[: t + 1], points[t].start, HORIZON_H)
        table[t, : len(made)] = [p.intensity_g_per_kwh for p in made]
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(target, table)
    return table


Post = Callable[[np.ndarray, np.ndarray, int, np.ndarray], np.ndarray]
"""(forecast table, actuals, hour index, forecast values) -> values the policy sees."""


def _past_errors(table: np.ndarray, actual: np.ndarray, t: int, horizon: int) -> np.ndarray:
    """Forecast minus actual for origins in the last WINDOW_H hours whose target is already known."""
    lo = max(0, t - WINDOW_H)
    h = np.arange(1, horizon + 1)
    target = np.arange(lo, t)[:, None] + h[None, :]
    known = target <= t
    return np.where(known, table[lo:t, :horizon] - actual[np.minimum(target, t)], np.nan)


def _seasonal_naive(actual: np.ndarray, t: int, horizon: int) -> np.ndarray:
    h = np.arange(1, horizon + 1)
    return actual[t + h - 24 * np.ceil(h / 24).astype(int)]


def _climatology(actual: np.ndarray, t: int, horizon: int, days: int = 28) -> np.ndarray:
    by_hour = actual[t + 1 - 24 * days : t + 1].reshape(days, 24).mean(axis=0)  # column k: hour of actual[t-23+k]
    return by_hour[(np.arange(1, horizon + 1) - 1) % 24]


ANALOG_MATCH_H = 48
ANALOG_DAYS = 182
_ANALOG_TABLES: dict[tuple[int, int], np.ndarray] = {}


def _analog_members(actual: np.ndarray, t: int, k: int, horizon: int = HORIZON_H) -> np.ndarray:
    """(k × horizon) scenarios from the k best-matching past moments; only actual[: t + 1] is read."""
    lag = np.arange(-ANALOG_MATCH_H + 1, 1)
    past = t - 24 * np.arange(-(-horizon // 24), ANALOG_DAYS + 1)  # their next `horizon` hours are known at t
    past = past[past + lag[0] >= 0]
    current = actual[t + lag]
    if past.size == 0 or t + lag[0] < 0:
        return np.full((1, horizon), np.nan)
    windows = actual[past[:, None] + lag[None, :]]
    shape = (windows - windows.mean(axis=1, keepdims=True)) - (current - current.mean())
    best = past[np.argsort(np.mean(shape**2, axis=1))[:k]]
    level = current.mean() - actual[best[:, None] + lag[None, :]].mean(axis=1, keepdims=True)
    return actual[best[:, None] + np.arange(1, horizon + 1)[None, :]] + level


def _analog_table(actual: np.ndarray, k: int) -> np.ndarray:
    """The ensemble mean made at every hour (row t uses actual[: t + 1] only), memoised per trace."""
    key = (hash(actual.tobytes()), k)
    if key not in _ANALOG_TABLES:
        table = np.full((actual.size, HORIZON_H), np.nan)
        for t in range(ANALOG_MATCH_H, actual.size - 1):
            table[t] = _analog_members(actual, t, k).mean(axis=0)
        _ANALOG_TABLES[key] = table
    return _ANALOG_TABLES[key]


def _analog_weighted(tab: np.ndarray, act: np.ndarray, t: int, v: np.ndarray, k: int) -> np.ndarray:
    analog = _analog_table(act, k)
    with warnings.catch_warnings():  # a horizon with no known target yet: NaN, the forecast alone
        warnings.simplefilter("ignore", RuntimeWarning)
        mse_fc = np.nanmean(_past_errors(tab, act, t, v.size) ** 2, axis=0)
        mse_an = np.nanmean(_past_errors(analog, act, t, v.size) ** 2, axis=0)
    w = np.nan_to_num(mse_fc / (mse_fc + mse_an), nan=0.0)
    return np.where(np.isnan(analog[t, : v.size]), v, (1 - w) * v + w * analog[t, : v.size])


def post_for(variant: str) -> Post | None:
    name, _, arg = variant.partition("=")
    beyond_day = lambda n: np.arange(1, n + 1) > 24  # noqa: E731
    if name == "persist-tail":
        return lambda tab, act, t, v: np.where(beyond_day(v.size), _seasonal_naive(act, t, v.size), v)
    if name == "clim-tail":
        w = float(arg)
        return lambda tab, act, t, v: np.where(beyond_day(v.size), (1 - w) * v + w * _climatology(act, t, v.size), v)
    if name == "sigma":
        lam = float(arg)

        def pessimism(tab: np.ndarray, act: np.ndarray, t: int, v: np.ndarray) -> np.ndarray:
            with warnings.catch_warnings():  # a horizon with no known target yet: NaN, filled below
                warnings.simplefilter("ignore", RuntimeWarning)
                rmse = np.sqrt(np.nanmean(_past_errors(tab, act, t, v.size) ** 2, axis=0))
            return v + lam * np.nan_to_num(rmse, nan=float(np.nanmax(rmse, initial=0.0)))
        return pessimism
    if name == "analog":
        k = int(arg)
        return lambda tab, act, t, v: np.where(beyond_day(v.size) & ~np.isnan(_analog_table(act, k)[t, : v.size]),
                                               _analog_table(act, k)[t, : v.size], v)
    if name == "analog-w":
        return lambda tab, act, t, v: _analog_weighted(tab, act, t, v, int(arg))
    if name == "analog-risk":
        lam = float(arg)
        return lambda tab, act, t, v: v + lam * np.nan_to_num(_analog_members(act, t, 20, v.size).std(axis=0))
    if name == "perfect-first":
        n = int(arg)
        return lambda tab, act, t, v: np.concatenate([act[t + 1 : t + 1 + min(n, v.size)], v[min(n, v.size):]])
    return None


class CachedForecaster:
    """Serves the cached forecast made at the decision's hour (post-processed)."""

    def __init__(self, points: list[IntensityPoint], table: np.ndarray, post: Post | None) -> None:
        self.points, self.table, self.post = points, table, post
        self.index = {p.start: i for i, p in enumerate(points)}
        self.actual = np.array([p.intensity_g_per_kwh for p in points])

    def forecast(self, history, now, horizon_h: int = HORIZON_H) -> list[IntensityPoint]:
        t = self.index[now]
        values = self.table[t, :horizon_h]
        if self.post is not None:
            values = self.post(self.table, self.actual, t, values)
        last = self.points[t]
        return [IntensityPoint(start=last.end + timedelta(hours=i), end=last.end + timedelta(hours=i + 1),
                               intensity_g_per_kwh=float(v), kind=Kind.FORECAST, provider=last.provider,
                               zone=last.zone, emission_factor=last.emission_factor, estimated=True)
                for i, v in enumerate(values)]


class NoPausePolicy:
    """forecast-optimal whose started job never pauses (only the first start is chosen)."""

    def __init__(self) -> None:
        self.inner = load_policy("forecast-optimal")

    def decide(self, snapshot, now):
        decision = self.inner.decide(snapshot, now)
        if snapshot.state != JobState.WAITING and decision.action != Action.RUN:
            return replace(decision, action=Action.RUN, until=None)
        return decision


class ScenarioPolicy:
    """forecast-optimal whose first action minimises the mean net emissions over analog scenarios."""

    def __init__(self, forecaster: CachedForecaster, k: int, quantile: float | None = None) -> None:
        self.inner, self.forecaster, self.k = load_policy("forecast-optimal"), forecaster, k
        self.quantile = quantile

    def _first_saving_g(self, snapshot, now) -> float:
        """The planner's saving of pausing over running in the first slot (signed), via its own choice."""
        seen: list[float] = []
        choose = slot_planner._choice_costs

        def spy(problem, tables, slots, t, *rest):
            costs = choose(problem, tables, slots, t, *rest)
            if t == 0 and not seen:
                seen.append(min(costs[:-1]) - costs[-1])  # best run minus the pause
            return costs
        slot_planner._choice_costs = spy
        try:
            self.inner.decide(snapshot, now)
        finally:
            slot_planner._choice_costs = choose
        return seen[0] if seen else float("nan")

    def decide(self, snapshot, now):
        decision = self.inner.decide(snapshot, now)
        if decision.action not in (Action.RUN, Action.PAUSE, Action.DELAY_START) or not snapshot.forecast:
            return decision
        f = self.forecaster
        t = f.index[now]
        members = _analog_members(f.actual, t, self.k)
        if np.isnan(members).any():
            return decision
        base = np.array([p.intensity_g_per_kwh for p in snapshot.forecast])
        devs = (members - members.mean(axis=0))[:, : base.size]
        savings = [self._first_saving_g(replace(snapshot, forecast=tuple(
            replace(p, intensity_g_per_kwh=float(max(v, 0.0))) for p, v in zip(snapshot.forecast, base + d))), now)
            for d in devs]
        if np.isnan(savings).all():
            return decision
        mean_g = float(np.nanmean(savings) if self.quantile is None else np.nanquantile(savings, self.quantile))
        margin = 0.02 if snapshot.state != JobState.WAITING else 0.0
        run_g = float(f.actual[t])  # g of one hour at 1 kW (the simulated job)
        wait = mean_g > margin * run_g and mean_g > 0
        if wait and decision.action == Action.RUN:
            return pause_decision(snapshot, snapshot.forecast[0].start, "scenario mean says wait")
        if not wait and decision.action != Action.RUN:
            return replace(decision, action=Action.RUN, until=None)
        return decision


def make_policy(variant: str, forecaster: CachedForecaster | None = None):
    name, _, arg = variant.partition("=")
    if name == "no-pause":
        return NoPausePolicy()
    if name == "analog-saa":
        return ScenarioPolicy(forecaster, int(arg))
    if name == "analog-q":
        k, q = arg.split(",")
        return ScenarioPolicy(forecaster, int(k), float(q))
    policy = load_policy("forecast-optimal")
    if name == "margin":
        policy.config = replace(policy.config, min_pause_saving=float(arg))
    return policy


def evaluate(path: Path, table: np.ndarray, variant: str, every_days: float, work_h: float, deadline_h: float,
             idle: float) -> tuple[float, float, float, int, int]:
    """Σ policy g, Σ run-now g, Σ oracle g, runs worse than run-now, deadlines missed."""
    points = load_trace(path)
    trace = TraceIndex(points, path.name)
    forecaster = CachedForecaster(points, table, post_for(variant))
    job = SimJob(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=(Mode(1.0, 1000.0),),
                 resume_overhead_s=300.0, waiting_power_w=1000.0 * idle)
    policy_g = now_g = best_g = 0.0
    worse = missed = 0
    for start in starts_for(trace, every_days, deadline_h):
        run = simulate_run(trace, start, job, make_policy(variant, forecaster), forecaster)
        base = run_now(trace, start, job).emissions_g
        policy_g, now_g = policy_g + run.ledger.emissions_g, now_g + base
        best_g += oracle(trace, start, job).emissions_g
        worse += run.ledger.emissions_g > base + 1e-9
        missed += run.ledger.finished_at is None or run.ledger.finished_at > run.deadline
    return policy_g, now_g, best_g, worse, missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="directory for the cached forecasts (.npy)")
    parser.add_argument("--every-days", type=float, default=10.0)
    parser.add_argument("--jobs", nargs="*", choices=["8", "24"], default=["24"], help="8: 8 h/24 h; 24: 24 h/72 h")
    parser.add_argument("--idle", type=float, default=0.15)
    parser.add_argument("--variants", nargs="*", default=["base"])
    args = parser.parse_args()
    t0 = time.perf_counter()
    paths = sorted(DATA.glob("*.csv"))
    tables = {p: forecast_cache(p, args.cache) for p in paths}
    print("| variant | job | mean (all) | min | runs worse than run-now | missed | 2021 mean | 2022 mean |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in args.variants:
        for work_h, deadline_h in [(8.0, 24.0) if j == "8" else (24.0, 72.0) for j in args.jobs]:
            rows = {p.stem.removesuffix("_hourly"): evaluate(p, tables[p], variant, args.every_days, work_h,
                                                             deadline_h, args.idle) for p in paths}
            frac = {k: (r[1] - r[0]) / (r[1] - r[2]) if r[1] - r[2] > 1e-9 else float("nan") for k, r in rows.items()}
            worst = min(frac, key=frac.get)
            by_year = [statistics.fmean(v for k, v in frac.items() if k.endswith(y)) for y in ("2021", "2022")]
            print(f"| {variant} | {work_h:g}h/{deadline_h:g}h | {statistics.fmean(frac.values()):.3f} | "
                  f"{frac[worst]:.3f} ({worst}) | {sum(r[3] for r in rows.values())} | "
                  f"{sum(r[4] for r in rows.values())} | {by_year[0]:.3f} | {by_year[1]:.3f} |", flush=True)
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

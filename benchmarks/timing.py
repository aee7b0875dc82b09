"""Timing policies on every dev carbon trace: net saving vs run-now as a fraction of the oracle's.

For each trace in ../shared/data/carbon, jobs of 8 h (24 h deadline) and 24 h
(72 h deadline) start at times spread over the year (every ``--every-days``
days, at a start hour that rotates through the day, after 28 days of history
for the forecaster). Each built-in timing policy is replayed through the
simulator twice: with the real forecaster (``greentrain.signals.forecast.forecaster``)
and with perfect forecasts, so policy quality and forecast quality are
separated. Baselines come from the same cost model. Everything is net:
for each ``--idle`` level (kW drawn per kW of running draw while paused after
the first start; 0 = hardware released) the job, every policy, run-now and
the idle-aware oracle are charged the waiting draw. ``gross-plan`` is
forecast-optimal as it was before waiting had a cost (it plans as if pauses
were free, no margin), scored net. Also times one ``decide()`` call with a
72-point forecast.

With ``--rate-noise SPEC ...`` (``greentrain simulate --rate-noise``) every job is also replayed with
the job's work rate changing under it (e.g. ``steps:0.5:4h``: ±50 % held for hours); the policies
measure the rate as they run, and run-now, best-window and the oracle are scored on the same realised
rate (the oracle knows it in advance). ``--estimate-error`` is the room a wait keeps before the rate is
measured.

The policy ``carbon-aware gate off`` is carbon-aware with the engine's wait gate bypassed (the deadline guard
kept): what the gate costs. ``--calibrate-days N`` scores the forecaster on the N days before each start
(``simulate_run(calibrate_days=...)``; default: the simulator's, off). Each table ends with a pooled row
(Σ saving ÷ Σ oracle saving over the traces).

    python benchmarks/timing.py [--every-days 7] [--policies forecast-optimal ...]
                                [--forecasts real selected perfect] [--perfect-first-hours 6 12 24]
                                [--idle 0.12 0 0.15] [--rate-noise none steps:0.5:4h] [--estimate-error 0]
                                [--jobs 8/24 24/72] [--no-latency]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from greentrain.policies import Policy, load_policy
from greentrain.policies.forecast_optimal import ForecastOptimalConfig, ForecastOptimalPolicy
from greentrain.policies.slot_planner import Mode
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim.noise import parse_rate_noise
from greentrain.sim import (
    PerfectForecaster,
    SimJob,
    TraceIndex,
    best_window,
    oracle,
    run_now,
    simulate_run,
)
from greentrain.sim.fcache import HourlyForecastCache
from greentrain.sim.replay import CALIBRATE_DAYS

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "carbon"
POLICIES = ("run-now", "threshold", "best-window", "gross-plan", "forecast-optimal", "carbon-aware",
            "carbon-aware gate off")
GATE_OFF = "carbon-aware gate off"
"""Column: carbon-aware with the engine's wait gate bypassed (deadline guard kept): what the gate costs."""
DEFAULT_POLICIES = ("run-now", "threshold", "best-window", "gross-plan", "forecast-optimal")
IDLE_LEVELS = (0.12, 0.0, 0.15)
JOBS = ((8.0, 24.0), (24.0, 72.0))
HISTORY_DAYS = 28


class GrossPlanPolicy(ForecastOptimalPolicy):
    """forecast-optimal as before issue 15: plans as if a pause drew nothing, no pause margin."""

    name = "gross-plan"

    def __init__(self) -> None:
        super().__init__(ForecastOptimalConfig(min_pause_saving=0.0))

    def decide(self, snapshot, now):
        from dataclasses import replace

        return super().decide(replace(snapshot, waiting_power_w=0.0), now)


MIN_PAUSE_SAVING: float | None = None
"""--min-pause-saving: overrides the presets' margin for forecast-optimal and carbon-aware (sensitivity)."""


def make_policy(name: str) -> Policy:
    if name == "gross-plan":
        return GrossPlanPolicy()
    policy = load_policy(name)
    if MIN_PAUSE_SAVING is not None and name in ("forecast-optimal", "carbon-aware"):
        from dataclasses import replace

        policy.config = replace(policy.config, min_pause_saving=MIN_PAUSE_SAVING)
    return policy


class PerfectPrefixForecaster:
    """Diagnostic: the trace's actual values for the first ``hours`` hours ahead, ``inner``'s forecast after.

    Shows how far ahead forecasts must be right for a policy to reach a given
    fraction of the oracle's saving (``--perfect-first-hours``).
    """

    def __init__(self, points, hours: int, inner) -> None:
        self.perfect, self.hours, self.inner = PerfectForecaster(points), hours, inner

    def forecast(self, history, now, horizon_h=72):
        known = self.perfect.forecast(history, now, min(self.hours, horizon_h))
        return known + self.inner.forecast(history, now, horizon_h)[len(known):]


def starts_for(trace: TraceIndex, every_days: float, deadline_h: float) -> list:
    first = trace.points[0].start + timedelta(days=HISTORY_DAYS)
    last = trace.points[-1].end - timedelta(hours=deadline_h)
    starts, i = [], 0
    while True:
        when = first + timedelta(days=every_days * i, hours=(7 * i) % 24)
        if when > last:
            return starts
        starts.append(when)
        i += 1


def evaluate(path: Path, every_days: float, policies: tuple[str, ...] = DEFAULT_POLICIES,
             kinds: tuple[str, ...] = ("real", "perfect"), perfect_first: tuple[int, ...] = (),
             idle_levels: tuple[float, ...] = IDLE_LEVELS, noises: tuple[str, ...] = ("none",),
             estimate_error: float = 0.0, jobs: tuple[tuple[float, float], ...] = (),
             calibrate_days: float = CALIBRATE_DAYS) -> dict:
    """{(job @ idle, policy, forecaster): [policy_g, run_now_g, oracle_g, best_window_g, missed, runs,
    worse_than_run_now]}, all net of the waiting draw at that idle level.

    Forecaster kinds: "real" (the default ``Forecaster``), "selected" (``Forecaster(select_online=True)``),
    "perfect" (the trace's actual future); plus "perfect Nh" for each N in ``perfect_first``
    (actual values N hours ahead, the default forecaster after)."""
    points = load_trace(path)
    trace = TraceIndex(points, path.name)
    real = HourlyForecastCache(Forecaster())  # one forecast per hour, shared by policies, jobs and starts
    forecasters = {"real": real, "perfect": PerfectForecaster(points),
                   "selected": HourlyForecastCache(Forecaster(select_online=True))}
    forecasters = {k: v for k, v in forecasters.items() if k in kinds}
    forecasters.update({f"perfect {h}h": PerfectPrefixForecaster(points, h, real) for h in perfect_first})
    totals: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0, 0, 0])
    for (work_h, deadline_h), idle, spec in ((j, i, n) for j in (jobs or JOBS) for i in idle_levels for n in noises):
        job = SimJob(work_s=work_h * 3600, deadline_s=deadline_h * 3600, modes=(Mode(1.0, 1000.0),),
                     resume_overhead_s=300.0, waiting_power_w=1000.0 * idle)
        noise = parse_rate_noise(spec)
        label = f"{work_h:g}h/{deadline_h:g}h @ idle {idle:g}" + ("" if noise.kind == "none" else f", noise {spec}")
        for start in starts_for(trace, every_days, deadline_h):
            rates = None if noise.kind == "none" else noise.profile(start, 2 * deadline_h * 3600 + 3600)
            base = (run_now(trace, start, job, rates).emissions_g, oracle(trace, start, job, rates=rates).emissions_g,
                    best_window(trace, start, job, rates)[0].emissions_g)
            for name in ("run-now", *(p for p in policies if p != "run-now")):
                policy = make_policy("carbon-aware" if name == GATE_OFF else name)
                for fc_name, forecaster in forecasters.items():
                    if name == "run-now" and fc_name != next(iter(forecasters)):
                        continue
                    run = simulate_run(trace, start, job, policy, forecaster, rates, estimate_error=estimate_error,
                                       wait_gate=name != GATE_OFF, calibrate_days=calibrate_days)
                    ledger = run.ledger
                    row = totals[(label, name, fc_name)]
                    row[0] += ledger.emissions_g
                    row[1] += base[0]
                    row[2] += base[1]
                    row[3] += base[2]
                    row[4] += ledger.finished_at is None or ledger.finished_at > run.deadline
                    row[5] += 1
                    row[6] += ledger.emissions_g > base[0] + 1e-9
    return totals


def fraction(row) -> float:
    return (row[1] - row[0]) / (row[1] - row[2]) if row[1] - row[2] > 1e-9 else float("nan")


def decide_latency_ms(points) -> dict:
    """CPU ms of one decide() with a 72-point forecast: a fresh plan, and a re-plan within the same
    interval (what the engine does at later step boundaries; the tail of the DP is cached)."""
    from dataclasses import replace

    from greentrain.jobstats import JobState
    from greentrain.policies import OperatingPoint, Snapshot
    from greentrain.signals.base import Kind

    now = points[100].start
    forecast = tuple(replace(p, kind=Kind.FORECAST) for p in points[101:173])
    ops = tuple(OperatingPoint(power_limit_w=300 - 25 * i, relative_speed=1 - 0.05 * i ** 1.3,
                               power_w=300 - 22 * i) for i in range(9))
    out = {}
    for label, kind, extra in (("forecast-optimal, timing only", "forecast-optimal", {}),
                               ("carbon-aware, 9 operating points", "carbon-aware", {"operating_points": ops})):
        def snap(i, extra=extra):
            return Snapshot(work_remaining_s=24 * 3600 - 30 * i, carbon_now=points[100], forecast=forecast,
                            deadline=now + timedelta(hours=72), resume_overhead_s=300, power_w=300,
                            state=JobState.RUNNING, **extra)
        fresh = [type(load_policy(kind))() for _ in range(10)]  # loading (TOML, entry points) not timed
        t0 = time.process_time()
        for i, policy in enumerate(fresh):
            policy.decide(snap(i), now + timedelta(seconds=30 * i))
        cold = (time.process_time() - t0) / 10 * 1000
        policy = load_policy(kind)
        policy.decide(snap(0), now)
        t0 = time.process_time()
        for i in range(1, 41):
            policy.decide(snap(i), now + timedelta(seconds=30 * i))
        out[label] = (cold, (time.process_time() - t0) / 40 * 1000)
    return out


def forecaster_version() -> str:
    """sha256 prefix of the forecaster's source (both model families): the 'real' columns depend on it."""
    import hashlib
    import inspect

    import greentrain.signals.forecast.forecaster as autocov
    import greentrain.signals.forecast.lagregression as direct

    source = inspect.getsource(autocov) + inspect.getsource(direct)
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every-days", type=float, default=7.0)
    parser.add_argument("--traces", nargs="*", help="CSV files (default: every file in ../shared/data/carbon)")
    parser.add_argument("--idle", nargs="*", type=float, default=list(IDLE_LEVELS), metavar="KW_PER_KW",
                        help="waiting draw per kW of running draw (0 = hardware released)")
    parser.add_argument("--policies", nargs="*", default=list(DEFAULT_POLICIES), choices=POLICIES,
                        help="policies to replay (run-now, the reference, always runs)")
    parser.add_argument("--forecasts", nargs="*", default=["real", "perfect"], choices=["real", "selected", "perfect"],
                        help="forecast kinds to replay with (selected: Forecaster(select_online=True))")
    parser.add_argument("--perfect-first-hours", nargs="*", type=int, default=[], metavar="H",
                        help="diagnostic: also replay with the actual values H hours ahead, the forecaster after")
    parser.add_argument("--no-latency", action="store_true", help="skip the decide() timing")
    parser.add_argument("--rate-noise", nargs="*", default=["none"], metavar="SPEC",
                        help="work-rate noise to replay each job with ('none', steps:A:HOLD[:SEED], runlog:PATH)")
    parser.add_argument("--estimate-error", type=float, default=0.0,
                        help="room a wait keeps before the rate is measured (fraction of the work)")
    parser.add_argument("--jobs", nargs="*", default=[], metavar="WORK/DEADLINE",
                        help="jobs as hours of work/hours to the deadline (default: 8/24 and 24/72)")
    parser.add_argument("--calibrate-days", type=float, default=CALIBRATE_DAYS,
                        help="days of the forecaster's record scored before each start (0: none; the default is "
                             "the simulator's)")
    parser.add_argument("--min-pause-saving", type=float, default=None,
                        help="sensitivity: the pause margin of forecast-optimal/carbon-aware (default: preset's)")
    args = parser.parse_args()
    global MIN_PAUSE_SAVING
    MIN_PAUSE_SAVING = args.min_pause_saving
    paths = [Path(p) for p in args.traces] if args.traces else sorted(DATA.glob("*.csv"))
    version = forecaster_version()  # now: the source may change on disk while this runs
    t0 = time.perf_counter()
    per_trace = {}
    for path in paths:
        jobs = tuple(tuple(float(x) for x in j.split("/")) for j in args.jobs)
        per_trace[path.stem.removesuffix("_hourly")] = evaluate(path, args.every_days, tuple(args.policies),
                                                           tuple(args.forecasts), tuple(args.perfect_first_hours),
                                                           tuple(args.idle), tuple(args.rate_noise),
                                                           args.estimate_error, jobs, args.calibrate_days)
        print(f"# {path.name} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print_tables(per_trace)
    if args.no_latency:
        print(f"\nforecaster source sha256 {version}; wall time {time.perf_counter() - t0:.0f} s")
        return
    latency = decide_latency_ms(load_trace(paths[0]))
    print("\ndecide() CPU time with a 72-point forecast, 24 h of work, 72 h deadline:")
    for label, (cold, warm) in latency.items():
        print(f"- {label}: {cold:.2f} ms fresh plan, {warm:.2f} ms re-plan within the interval")
    print(f"\nforecaster source sha256 {version}; wall time {time.perf_counter() - t0:.0f} s")


def _forecast_order(kind: str) -> tuple:
    """Columns: named forecasts first, then "perfect Nh" by N."""
    return (1, int(kind.split()[1][:-1]), "") if kind.startswith("perfect ") else (0, 0, kind)


def print_tables(per_trace: dict) -> None:
    keys = sorted({k for totals in per_trace.values() for k in totals})
    for job in sorted({k[0] for k in keys}, key=lambda j: (float(j.split("h")[0]), j)):
        # one table per job, idle level and noise
        print(f"\n### job {job}: net saving vs run-now as a fraction of the idle-aware oracle's "
              "(runs worse than run-now)\n")
        columns = [(p, f) for (j, p, f) in keys if j == job and p != "run-now"]
        columns = sorted(set(columns), key=lambda c: (POLICIES.index(c[0]), _forecast_order(c[1])))
        header = ["trace", "oracle saving", "best-window saving"] + [f"{p} ({f})" for p, f in columns]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        means = defaultdict(list)
        for trace, totals in per_trace.items():
            ref = next(v for k, v in totals.items() if k[:2] == (job, "run-now"))
            cells = [trace, f"{(ref[1] - ref[2]) / ref[1]:.1%}", f"{(ref[1] - ref[3]) / ref[1]:.1%}"]
            for p, f in columns:
                row = totals[(job, p, f)]
                means[(p, f)].append(fraction(row))
                missed = f", {row[4]} missed" if row[4] else ""
                cells.append(f"{fraction(row):.3f} ({row[6]}{missed})")
            print("| " + " | ".join(cells) + " |")
        worse = {c: sum(t[(job, *c)][6] for t in per_trace.values()) for c in columns}
        cells = ["**mean**", "", ""] + [f"**{statistics.fmean(means[c]):.3f}** (min {min(means[c]):.3f}; "
                                         f"{worse[c]} worse)" for c in columns]
        print("| " + " | ".join(cells) + " |")
        pooled = [sum(t[(job, *c)][i] for t in per_trace.values()) for c in columns for i in range(3)]
        cells = ["pooled", "", ""] + [f"{fraction(pooled[3 * k:3 * k + 3]):.3f}" for k in range(len(columns))]
        print("| " + " | ".join(cells) + " |")
        runs = sum(v[5] for t in per_trace.values() for k, v in t.items() if k[:2] == (job, "run-now"))
        missed = {c: sum(t[(job, *c)][4] for t in per_trace.values()) for c in columns}
        print(f"\nruns per policy: {runs}; deadlines missed: "
              + ", ".join(f"{p} ({f}) {m}" for (p, f), m in missed.items()))


if __name__ == "__main__":
    main()

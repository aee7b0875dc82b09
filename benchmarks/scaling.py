"""Carbon scaling on every dev carbon trace and scaling profile: net saving as a fraction of the scaling oracle's.

An elastic job needs 8 h of running at N = 4 replicas within 24 h; each change
of replica count (and each resume after a pause) costs ``--overhead-min``
minutes at the new count's power without progress; unused replicas are
released (0 W). Starts are spread over the year (every ``--every-days`` days,
at an hour that rotates through the day, after 28 days of history for the
forecaster). For each trace × profile:

* ``run-now``: 4 replicas from the start, flat out (the reference);
* ``timing-only``: the perfect-foresight best timing at a fixed 4 replicas;
* ``oracle``: the perfect-foresight scaling optimum (pause or any count per
  hour, every change paying its overhead) — the denominator of the goal;
* ``carbon-aware (real)``: the policy with the causal forecaster (the trace up
  to each decision only) — the number the goal is about; ``(perfect)``: with
  the actual future, which separates policy quality from forecast quality;
* ``forecast-optimal (real)``: the causal timing policy at a fixed 4 replicas.

Fractions are Σ(run-now − policy) ÷ Σ(run-now − oracle) over the starts of one
trace × profile. Profiles: every CSV in ../shared/data/scaling plus the
runtime's own measured CPU profile (benchmarks/data/). Also: what the restart
overhead costs (oracle and policy savings at 0, 5 and 15 minutes), and the CPU
time of one ``decide()`` with 8 replica options.

    python benchmarks/scaling.py [--every-days 7] [--traces A.csv ...] [--profiles P.csv ...]
                                 [--overheads 0 5 15] [--jobs 2] [--no-latency]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from greentrain.policies import load_policy
from greentrain.policies.scaling_profile import ScalingProfile, load_scaling_profile
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim import PerfectForecaster, SimJob, TraceIndex, run_now, scaling_oracle, simulate_run, timing_only
from greentrain.sim.fcache import HourlyForecastCache

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[0].parent / "shared" / "data"
WORK_H, DEADLINE_H, REPLICAS, HISTORY_DAYS = 8.0, 24.0, 4, 28
RUNS = (("carbon-aware", "real"), ("carbon-aware", "perfect"), ("forecast-optimal", "real"))


def profile_paths(given: list[str] | None) -> list[Path]:
    if given:
        return [Path(p) for p in given]
    return sorted((SHARED / "scaling").glob("*.csv")) + sorted((HERE / "data").glob("*scaling*.csv"))


def starts_for(trace: TraceIndex, every_days: float) -> list:
    first = trace.points[0].start + timedelta(days=HISTORY_DAYS)
    last = trace.points[-1].end - timedelta(hours=DEADLINE_H)
    starts, i = [], 0
    while (when := first + timedelta(days=every_days * i, hours=(7 * i) % 24)) <= last:
        starts.append(when)
        i += 1
    return starts


def make_job(profile: ScalingProfile, overhead_min: float) -> SimJob:
    return SimJob.from_scaling_profile(profile, REPLICAS, work_h=WORK_H, deadline_h=DEADLINE_H,
                                       resume_overhead_min=overhead_min, idle_power_kw=0.0)


def evaluate(args: tuple[str, list[str], float, tuple[float, ...], bool]) -> dict:
    """{(profile, overhead_min, column): [emissions_g, run_now_g, missed, runs, rescales]} for one trace."""
    trace_path, profiles, every_days, overheads, policy_runs = args
    points = load_trace(trace_path)
    trace = TraceIndex(points, Path(trace_path).name)
    forecasters = {"real": HourlyForecastCache(Forecaster()), "perfect": PerfectForecaster(points)}
    totals: dict = defaultdict(lambda: [0.0, 0.0, 0, 0, 0])
    policies = {name: load_policy(name) for name, _ in RUNS}  # loading is slow; decide() is pure
    for profile_path in profiles:
        profile = load_scaling_profile(profile_path)
        name = Path(profile_path).stem
        for overhead_min in overheads:
            job = make_job(profile, overhead_min)
            for start in starts_for(trace, every_days):
                reference = run_now(trace, start, job).emissions_g
                deadline = start + timedelta(hours=DEADLINE_H)
                ledgers = {"timing-only": timing_only(trace, start, job), "oracle": scaling_oracle(trace, start, job)}
                for policy, forecast in (RUNS if policy_runs or overhead_min == 5.0 else RUNS[:1]):
                    run = simulate_run(trace, start, job, policies[policy], forecasters[forecast])
                    ledgers[f"{policy} ({forecast})"] = run.ledger
                for column, ledger in ledgers.items():
                    row = totals[(name, overhead_min, column)]
                    row[0] += ledger.emissions_g
                    row[1] += reference
                    row[2] += ledger.finished_at is None or ledger.finished_at > deadline
                    row[3] += 1
                    row[4] += ledger.rescales + ledger.resumes
    return dict(totals)


def fraction(row: list, oracle: list) -> float:
    return (row[1] - row[0]) / (oracle[1] - oracle[0]) if oracle[1] - oracle[0] > 1e-9 else float("nan")


def print_main_table(per_trace: dict, overhead_min: float) -> dict:
    """Per trace × profile; returns {(trace, profile): fraction of carbon-aware (real)}."""
    columns = ["timing-only", "forecast-optimal (real)", "carbon-aware (real)", "carbon-aware (perfect)"]
    print(f"\n### 8 h at 4 replicas, 24 h deadline, {overhead_min:g} min per change: saving vs run-now "
          "(fraction of the scaling oracle's saving)\n")
    print("| trace | profile | oracle saving | " + " | ".join(columns) + " | changes (real) |")
    print("|---|---|---|" + "---|" * len(columns) + "---|")
    fractions = {}
    for trace, totals in per_trace.items():
        for profile in sorted({k[0] for k in totals}):
            oracle = totals[(profile, overhead_min, "oracle")]
            cells = [trace, profile, f"{(oracle[1] - oracle[0]) / oracle[1]:.1%}"]
            for column in columns:
                row = totals.get((profile, overhead_min, column))
                if row is None:
                    cells.append("-")
                    continue
                missed = f", **{row[2]} missed**" if row[2] else ""
                cells.append(f"{(row[1] - row[0]) / row[1]:.1%} ({fraction(row, oracle):.3f}{missed})")
            real = totals[(profile, overhead_min, "carbon-aware (real)")]
            cells.append(f"{real[4] / real[3]:.1f}/run")
            fractions[(trace, profile)] = fraction(real, oracle)
            print("| " + " | ".join(cells) + " |")
    return fractions


def print_goal(fractions: dict, per_trace: dict) -> None:
    values = [v for v in fractions.values() if v == v]
    low_key = min(fractions, key=lambda k: fractions[k])
    missed = sum(row[2] for totals in per_trace.values() for key, row in totals.items()
                 if key[2] == "carbon-aware (real)")
    by_profile = defaultdict(list)
    by_zone = defaultdict(list)
    for (trace, profile), value in fractions.items():
        by_profile[profile].append(value)
        by_zone[trace.split("_")[0]].append(value)
    print(f"\n**Goal (carbon-aware, causal forecasts, 5 min per change)**: mean fraction of the scaling oracle's "
          f"saving over {len(values)} trace × profile cells **{statistics.fmean(values):.3f}** (goal ≥ 0.85); "
          f"lowest {fractions[low_key]:.3f} ({low_key[0]} × {low_key[1]}; goal ≥ 0.6); deadlines missed {missed}.")
    print("\nmean by profile: " + ", ".join(f"{p} {statistics.fmean(v):.3f}" for p, v in sorted(by_profile.items())))
    print("mean by zone: " + ", ".join(f"{z} {statistics.fmean(v):.3f}" for z, v in sorted(by_zone.items())))


def print_overhead_table(per_trace: dict, overheads: tuple[float, ...]) -> None:
    print("\n### What the restart overhead costs: saving vs run-now summed over traces, per profile\n")
    header = ["profile"] + [f"{o:g} min: oracle / carbon-aware (real) / changes per run" for o in overheads]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    profiles = sorted({k[0] for totals in per_trace.values() for k in totals})
    for profile in profiles:
        cells = [profile]
        for overhead in overheads:
            sums = {}
            for column in ("oracle", "carbon-aware (real)"):
                rows = [t[(profile, overhead, column)] for t in per_trace.values()]
                sums[column] = [sum(r[i] for r in rows) for i in range(5)]
            o, p = sums["oracle"], sums["carbon-aware (real)"]
            cells.append(f"{(o[1] - o[0]) / o[1]:.1%} / {(p[1] - p[0]) / p[1]:.1%} / {p[4] / p[3]:.1f}")
        print("| " + " | ".join(cells) + " |")


def decide_latency_ms(points, profile: ScalingProfile) -> tuple[float, float]:
    """CPU ms of one carbon-aware decide() for an elastic job with 8 replica options, 24 h to the deadline:
    a fresh policy each call, and repeated calls within one interval (what the engine does per step)."""
    from dataclasses import replace

    from greentrain.jobstats import JobState
    from greentrain.policies import Snapshot
    from greentrain.signals.base import Kind

    now = points[100].start
    forecast = tuple(replace(p, kind=Kind.FORECAST) for p in points[101:124])

    def snap(i: int) -> Snapshot:
        return Snapshot(work_remaining_s=8 * 3600 - 30 * i, carbon_now=points[100], forecast=forecast,
                        deadline=now + timedelta(hours=24), resume_overhead_s=300, state=JobState.RUNNING,
                        scaling=profile, replicas=4, work_replicas=4)

    fresh = [type(load_policy("carbon-aware"))() for _ in range(20)]
    t0 = time.process_time()
    for i, policy in enumerate(fresh):
        policy.decide(snap(i), now + timedelta(seconds=30 * i))
    cold = (time.process_time() - t0) / len(fresh) * 1000
    policy = load_policy("carbon-aware")
    policy.decide(snap(0), now)
    t0 = time.process_time()
    for i in range(1, 41):
        policy.decide(snap(i), now + timedelta(seconds=30 * i))
    return cold, (time.process_time() - t0) / 40 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every-days", type=float, default=7.0)
    parser.add_argument("--traces", nargs="*", help="CSV files (default: every file in ../shared/data/carbon)")
    parser.add_argument("--profiles", nargs="*", help="scaling-profile CSVs (default: shared + benchmarks/data)")
    parser.add_argument("--overheads", nargs="*", type=float, default=[5.0, 0.0, 15.0], metavar="MIN")
    parser.add_argument("--jobs", type=int, default=2, help="processes (one trace each)")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    traces = [str(p) for p in (args.traces or sorted((SHARED / "carbon").glob("*.csv")))]
    profiles = [str(p) for p in profile_paths(args.profiles)]
    overheads = tuple(args.overheads)
    t0 = time.perf_counter()
    work = [(t, profiles, args.every_days, overheads, False) for t in traces]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(evaluate, work))
    per_trace = {Path(t).stem.removesuffix("_hourly"): r for t, r in zip(traces, results)}
    print(f"profiles: {', '.join(Path(p).stem for p in profiles)}; starts every {args.every_days:g} days")
    fractions = print_main_table(per_trace, 5.0 if 5.0 in overheads else overheads[0])
    print_goal(fractions, per_trace)
    print_overhead_table(per_trace, tuple(sorted(overheads)))
    if not args.no_latency:
        points = load_trace(traces[0])
        eight = next((load_scaling_profile(p) for p in profiles if len(load_scaling_profile(p).points) == 8), None)
        if eight is not None:
            cold, warm = decide_latency_ms(points, eight)
            print(f"\ndecide() CPU time, 8 replica options, 23-point forecast, 8 h of work, 24 h deadline: "
                  f"{cold:.2f} ms fresh policy, {warm:.2f} ms re-decided within the interval")
    print(f"\nwall time {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

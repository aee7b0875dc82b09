"""Power × timing on measured GPU profiles: saving vs run-now-at-max as a fraction of the oracle's.

For every dev carbon trace and every workload of the dev profiles (v100, a40,
rtx6000; default batch size), a job of ``--work-hours`` at the maximum power
limit must finish within 1.025×, 1.1× and 2× its work. ``carbon-aware``
(run/pause × power limit, one DP) is replayed with the real forecaster and
with perfect forecasts; ``forecast-optimal`` (timing only) and
``energy-optimal`` (power only, never pauses) show what each dimension gives
alone. The oracle is the perfect-foresight optimum over pause and every limit.
Net: a paused job draws ``--idle`` × its full-power draw (0 = hardware released)
between its first start and its finish, in every variant and the oracle; each
cell also counts the runs that emitted more than run-now.

    python benchmarks/power_timing.py [--starts-per-year 8] [--work-hours 8] [--idle 0.12]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import DATA, HISTORY_DAYS, forecaster_version

from greentrain.device.profiles import BUILTIN_GPUS, load_gpu_profile
from greentrain.policies import load_policy
from greentrain.signals.forecast.forecaster import Forecaster
from greentrain.signals.trace import load_trace
from greentrain.sim.fcache import HourlyForecastCache
from greentrain.sim import (
    PerfectForecaster,
    SimJob,
    TraceIndex,
    oracle,
    run_now,
    simulate_run,
)

FACTORS = (1.025, 1.1, 2.0)
VARIANTS = (("carbon-aware", "perfect"), ("carbon-aware", "real"), ("carbon-aware gate off", "real"),
            ("forecast-optimal", "real"), ("energy-optimal", "real"))
GATE_OFF = " gate off"
"""A variant named so replays the policy with the engine's wait gate bypassed (deadline guard kept)."""


def starts_for(trace: TraceIndex, per_year: int, deadline_h: float) -> list:
    first = trace.points[0].start + timedelta(days=HISTORY_DAYS)
    span = trace.points[-1].end - timedelta(hours=deadline_h + 25) - first
    hours = int(span.total_seconds() // 3600)
    return [first + timedelta(hours=hours * i // per_year + (5 * i) % 24) for i in range(per_year)]


def evaluate(path: Path, jobs: list, per_year: int) -> dict:
    """{(factor, variant): [policy_g, run_now_g, oracle_g, missed, runs, worse_than_run_now]} for one trace."""
    points = load_trace(path)
    trace = TraceIndex(points, path.name)
    forecasters = {"real": HourlyForecastCache(Forecaster()), "perfect": PerfectForecaster(points)}
    policies = {name: load_policy(name.removesuffix(GATE_OFF)) for name, _ in VARIANTS}
    totals: dict = defaultdict(lambda: [0.0, 0.0, 0.0, 0, 0, 0])
    for factor, job in jobs:
        for start in starts_for(trace, per_year, job.deadline_s / 3600):
            base = (run_now(trace, start, job).emissions_g, oracle(trace, start, job).emissions_g)
            for name, fc in VARIANTS:
                run = simulate_run(trace, start, job, policies[name], forecasters[fc],
                                   wait_gate=not name.endswith(GATE_OFF))
                row = totals[(factor, name, fc)]
                row[0] += run.ledger.emissions_g
                row[1] += base[0]
                row[2] += base[1]
                row[3] += run.ledger.finished_at is None or run.ledger.finished_at > run.deadline
                row[4] += 1
                row[5] += run.ledger.emissions_g > base[0] + 1e-9
    return totals


def build_jobs(work_h: float, idle: float = 0.0) -> list:
    from dataclasses import replace

    jobs = []
    for gpu in BUILTIN_GPUS:
        profile = load_gpu_profile(gpu)
        for workload in profile.workloads():
            for factor in FACTORS:
                job = SimJob.from_profile(profile, workload, work_h=work_h, deadline_h=work_h * factor)
                jobs.append((factor, replace(job, waiting_power_w=idle * job.full.power_w)))
    return jobs


def fraction(row) -> float:
    return (row[1] - row[0]) / (row[1] - row[2]) if row[1] - row[2] > 1e-9 else float("nan")


def _mean_cell(values: list) -> str:
    if any(math.isnan(v) for v in values):  # some trace missed deadlines
        return "—"
    return f"**{statistics.fmean(values):.3f}** (min {min(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts-per-year", type=int, default=8)
    parser.add_argument("--work-hours", type=float, default=8.0)
    parser.add_argument("--traces", nargs="*")
    parser.add_argument("--idle", type=float, default=0.12, help="waiting draw per unit of full-power draw")
    args = parser.parse_args()
    paths = [Path(p) for p in args.traces] if args.traces else sorted(DATA.glob("*.csv"))
    jobs = build_jobs(args.work_hours, args.idle)
    version = forecaster_version()  # now: the source may change on disk while this runs
    t0 = time.perf_counter()
    per_trace = {}
    for path in paths:
        per_trace[path.stem.removesuffix("_hourly")] = evaluate(path, jobs, args.starts_per_year)
        print(f"# {path.name} done ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print(f"\n### {args.work_hours:g} h of work at max power; {len(jobs) // len(FACTORS)} GPU×workload profiles; "
          f"{args.starts_per_year} starts per trace; idle {args.idle:g} × full power while paused "
          "(net; runs worse than run-now in brackets)\n")
    header = ["trace", "deadline"] + ["oracle saving"] + [f"{n} ({f})" for n, f in VARIANTS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    means = defaultdict(list)
    for trace, totals in per_trace.items():
        for factor in FACTORS:
            ref = totals[(factor, *VARIANTS[0])]
            cells = [trace, f"{factor:g}×", f"{(ref[1] - ref[2]) / ref[1]:.1%}"]
            for variant in VARIANTS:
                row = totals[(factor, *variant)]
                means[(factor, variant)].append(float("nan") if row[3] else fraction(row))
                # A variant that misses deadlines is not comparable with the oracle: show only the misses.
                cells.append(f"— ({row[3]} missed)" if row[3] else f"{fraction(row):.3f} ({row[5]})")
            print("| " + " | ".join(cells) + " |")
    for factor in FACTORS:
        cells = ["**mean**", f"{factor:g}×", ""] + [_mean_cell(means[(factor, v)]) for v in VARIANTS]
        print("| " + " | ".join(cells) + " |")
    missed = {v: sum(t[(f, *v)][3] for t in per_trace.values() for f in FACTORS) for v in VARIANTS}
    runs = sum(t[(f, *VARIANTS[0])][4] for t in per_trace.values() for f in FACTORS)
    print(f"\nruns per variant: {runs}; deadlines missed: " + ", ".join(f"{n} ({f}) {m}" for (n, f), m in missed.items()))
    print(f"\nforecaster source sha256 {version}; wall time {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""Fleet planner CPU time: one plan of N queued jobs (300 and 3,000 by default).

A job set is drawn from the PAI trace's distributions (``fleet_jobs.py``) on a
cluster sized for the set (64 GPUs per 300 jobs, 55 % load over a week); every
job is then known at once at the start of the week, with all of its work
left and its deadline where it falls in the week (its submit time plus its
deadline hours). That is larger than any model the planner meets while the
week runs (then only the jobs submitted so far and not finished are in it): a
rolling plan with every job's window. Reported: process CPU time of ``plan_fleet`` (HiGHS included),
the solve method and the GPUs the plan starts now. Above ``PlannerConfig.relax_above_jobs`` (1,000) queued
jobs the plan is rounded from the LP relaxation alone (HiGHS interior point, no crossover) on wider
slots after the first six hours ('rolling-lp'); below it, relax and fix ('rolling'). HiGHS's time limit is raised to 600 s here (the default
10 s is wall-clock, and on a loaded machine a solve this size can run out of
it; the CPU time it needs is what is measured).

    python benchmarks/fleet_planner_cpu.py PAI.csv TRACE.csv [--jobs 300,3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_jobs import job_set, read_pai  # noqa: E402

from greentrain.fleet import JobStatus, Partition, PlannerConfig, RunOption, plan_fleet  # noqa: E402
from greentrain.fleet.feed import TraceFeed  # noqa: E402
from greentrain.signals.trace import load_trace  # noqa: E402


def one(pai: Path, trace: Path, jobs: int, seed: int, power_kw_per_gpu: float) -> tuple[float, str]:
    capacity = max(64, round(64 * jobs / 300))
    rows = job_set(read_pai(pai), datetime(2022, 3, 7, tzinfo=UTC), jobs=jobs, seed=seed, capacity_gpus=capacity)
    feed = TraceFeed(load_trace(trace), trace.name, None)
    start = int(feed.hour_of(datetime(2022, 3, 7, tzinfo=UTC)))
    week = datetime(2022, 3, 7, tzinfo=UTC)
    statuses = [JobStatus(job_id=r["id"], options=(RunOption(int(r["gpus"]), 1.0, int(r["gpus"]) * power_kw_per_gpu),),
                          remaining_h=float(r["work_hours"]),
                          deadline_h=(datetime.fromisoformat(r["submit"].replace("Z", "+00:00")) - week).total_seconds()
                          / 3600 + float(r["deadline_hours"]))
                for r in rows]
    values = feed.actual[start:start + 24 * 10]
    began = time.process_time()
    plan = plan_fleet(statuses, now_h=0.0, partitions={"default": Partition("default", capacity, feed.zone)},
                      intensity={feed.zone: values}, resume_overhead_h=5 / 60, config=PlannerConfig(time_limit_s=600.0))
    started = sum(st.options[0].gpus for st in statuses if plan.jobs[st.job_id].option is not None)
    return time.process_time() - began, f"{plan.method} on {capacity} GPUs, {started} started now"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pai", type=Path)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--jobs", default="300,3000")
    parser.add_argument("--repeat", type=int, default=3, help="Job sets (seeds) per size.")
    parser.add_argument("--power-kw-per-gpu", type=float, default=0.7)
    args = parser.parse_args()
    print("| queued jobs | cluster | plan CPU s (median) | min | max |")
    print("|---|---|---|---|---|")
    for n in (int(x) for x in args.jobs.split(",")):
        runs = [one(args.pai, args.trace, n, seed, args.power_kw_per_gpu) for seed in range(1, args.repeat + 1)]
        cpu = [c for c, _ in runs]
        print(f"| {n} | {'; '.join(r[1] for r in runs)} | {statistics.median(cpu):.2f} | {min(cpu):.2f} | {max(cpu):.2f} |", flush=True)


if __name__ == "__main__":
    main()

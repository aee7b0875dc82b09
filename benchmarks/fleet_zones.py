"""Fleet benchmark, where as well as when: three partitions on three grids (issue 39).

Each case is three zones' traces; the first is meant to be the cleanest and
gets the smallest partition (``--gpus``, default 16,24,24: 64 GPUs, the
cleanest too small to take all the work). A job set is drawn from the PAI
trace's distributions (``fleet_jobs.py``, 55 % load of the 64 GPUs); each job's
home is one of the partitions (by their GPUs), and about a fifth are pinned
there (``--pinned``); the rest may run anywhere. Resumes cost
``--resume-overhead-min`` (5), migrations ``--migration-overhead-min`` (15).

Replayed per case: FIFO at home, greenest-now (each job at submission to its
greenest partition with room), the time-only plan (every job at home), the
fleet plan on causal forecasts (greentrain's ``Forecaster`` fed each trace up
to each decision, ``benchmarks/fleet.py``'s cache) and on the traces' own
future (perfect foresight), and the offline spatio-temporal bound. Reported:
emissions, late jobs, migrations, each policy's fraction of the bound's saving
over FIFO at home, and the fleet plan's planner CPU per plan.

    python benchmarks/fleet_zones.py PAI.csv --case NO,GB,DE-LU --case US-CAL-CISO,DE-LU,GB \\
        --carbon-dir DIR [--year 2022] [--weeks 10] [--jobs 300] [--days 7] [--workers 2]
    python benchmarks/fleet_zones.py PAI.csv --case NO,GB,DE-LU --carbon-dir DIR --planner-cpu 300
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import random
import statistics
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import CachedFeed, Case, _forecast_table  # noqa: E402
from fleet_jobs import job_set, read_pai  # noqa: E402

from greentrain.fleet import Partition, PlannerConfig, plan_fleet  # noqa: E402
from greentrain.fleet.bound import offline_bound  # noqa: E402
from greentrain.fleet.feed import TraceFeed  # noqa: E402
from greentrain.fleet.jobs import load_jobs  # noqa: E402
from greentrain.fleet.policies import CarbonAware, GreenestNow, RunNowFIFO  # noqa: E402
from greentrain.fleet.simulate import Cluster, RunState, simulate_fleet  # noqa: E402
from greentrain.signals.trace import load_trace  # noqa: E402

ROLLING = PlannerConfig(exact_max_binaries=0)


@dataclass(frozen=True, slots=True)
class ZoneCase:
    zones: tuple[str, ...]
    gpus: tuple[int, ...]
    year: int
    week: int
    seed: int
    jobs: int
    days: float
    pinned: float
    resume_min: float
    migration_min: float
    power_kw_per_gpu: float
    carbon_dir: Path
    pai: Path
    cache: Path
    policies: tuple[str, ...]
    """Which of POLICIES to run (FIFO at home always: it is the ratios' reference)."""

    def trace(self, zone: str) -> Path:
        return self.carbon_dir / f"{zone}_{self.year}_hourly.csv"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(z.lower() for z in self.zones)


def _jobs(case: ZoneCase, start: datetime) -> Path:
    """The job set with a home per job (by partition GPUs) and about ``pinned`` of them pinned there."""
    rows = job_set(read_pai(case.pai), start, jobs=case.jobs, seed=case.seed, capacity_gpus=sum(case.gpus),
                   days=case.days)
    rng = random.Random(case.seed * 7919 + case.week)
    for row in rows:
        home = rng.choices(case.names, weights=case.gpus)[0]
        row["partition"] = home
        row["places"] = home if rng.random() < case.pinned else ""
    path = case.cache / (f"zones-{'-'.join(case.names)}-{case.year}-w{case.week}-s{case.seed}-{case.jobs}-"
                         f"{case.days:g}-{case.pinned:g}.csv")
    case.cache.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _setup(case: ZoneCase):
    start = datetime(case.year, 1, 1, tzinfo=UTC) + timedelta(weeks=case.week)
    start -= timedelta(days=start.weekday())  # a Monday
    parts = [Partition(n, g, z) for n, g, z in zip(case.names, case.gpus, case.zones, strict=True)]
    points = {z: load_trace(case.trace(z)) for z in case.zones}
    actual = {z: TraceFeed(p, case.trace(z).name, None) for z, p in points.items()}
    jobs = load_jobs(_jobs(case, start), partitions={p.name: p.capacity_gpus for p in parts},
                     power_kw_per_gpu=case.power_kw_per_gpu)
    return start, parts, points, actual, jobs


def run_case(case: ZoneCase) -> dict:
    start, parts, points, actual, jobs = _setup(case)
    first = actual[case.zones[0]]
    lo = int(first.hour_of(min(j.submit for j in jobs)))
    hi = min(first.hours, int(first.hour_of(max(j.deadline for j in jobs))) + 24)
    causal = {}
    for z in case.zones:
        fc = Case(case.trace(z), case.week, case.seed, case.jobs, sum(case.gpus), case.power_kw_per_gpu,
                  case.resume_min, case.cache, case.pai, "causal", 0.0, case.cache / "archives", 1.0)
        causal[z] = CachedFeed(points[z], case.trace(z).name, _forecast_table(fc, points[z], actual[z], lo, hi))
    cluster = Cluster.of(parts, case.resume_min / 60.0, case.migration_min / 60.0)
    out: dict = {"zones": ",".join(case.zones), "week": start.strftime("%Y-%m-%d"), "jobs": len(jobs),
                 "pinned": sum(1 for j in jobs if j.places == (j.partition,))}
    runs = {"fifo": RunNowFIFO(), "greenest": GreenestNow(actual),
            "time_only": CarbonAware(causal[case.zones[0]], 0, zones=causal, config=ROLLING, home_only=True),
            "plan": CarbonAware(causal[case.zones[0]], 0, zones=causal, config=ROLLING),
            "plan_perfect": CarbonAware(first, 0, zones=actual, config=ROLLING)}
    runs = {name: policy for name, policy in runs.items() if name == "fifo" or name in case.policies}
    for name, policy in runs.items():
        began = time.process_time()
        result = simulate_fleet(jobs, first, policy, cluster, zones=actual)
        out[f"{name}_g"], out[f"{name}_late"] = result.emissions_g, len(result.late)
        out[f"{name}_migrations"], out[f"{name}_exceeded"] = result.migrations, result.capacity_exceeded
        out[f"{name}_cpu_s"] = time.process_time() - began
        out[f"{name}_places_kept"] = _places_kept(result.runs, parts)
        if isinstance(policy, CarbonAware):
            out[f"{name}_plans"], out[f"{name}_plan_cpu_s"] = policy.plans, policy.cpu_s
    bound = offline_bound(jobs, first.hour_of, first.actual, cluster.capacity_gpus,
                          partitions={p.name: p for p in parts}, zones={z: f.actual for z, f in actual.items()})
    out["bound_g"], out["bound_relaxed"] = bound.emissions_g, bound.deadlines_relaxed
    room = out["fifo_g"] - bound.emissions_g
    for name in runs:
        out[f"{name}_ratio"] = (out["fifo_g"] - out[f"{name}_g"]) / room if room > 0 else float("nan")
    return out


def _places_kept(runs: list[RunState], parts: list[Partition]) -> bool:
    names = [p.name for p in parts]
    return all(set(r.segment_partitions) <= set(r.job.places or names) for r in runs)


def planner_cpu(case: ZoneCase, repeat: int) -> list[float]:
    """CPU of one plan with every job of the set queued at once at the week's start (all work left); HiGHS's
    time limit (wall-clock) raised to 600 s, as ``fleet_planner_cpu.py`` does, so a loaded machine measures
    the CPU the plan needs rather than a fallback."""
    from greentrain.fleet import JobStatus

    start, parts, _, actual, jobs = _setup(case)
    first = actual[case.zones[0]]
    now_h = first.hour_of(start)
    capacity = {p.name: p.capacity_gpus for p in parts}
    statuses = [JobStatus(job_id=j.id, options=j.placed_options(capacity), remaining_h=j.work_h,
                          deadline_h=first.hour_of(j.deadline), partition=j.partition,
                          migration_overhead_h=case.migration_min / 60.0) for j in jobs]
    horizon = int(max(s.deadline_h for s in statuses) - now_h) + 2
    intensity = {z: f.actual[int(now_h):int(now_h) + horizon] for z, f in actual.items()}
    times = []
    for _ in range(repeat):
        began = time.process_time()
        plan = plan_fleet(statuses, now_h=now_h, partitions={p.name: p for p in parts}, intensity=intensity,
                          resume_overhead_h=case.resume_min / 60.0, config=replace(ROLLING, time_limit_s=600.0))
        times.append(time.process_time() - began)
        print(f"{len(statuses)} jobs on {len(parts)} partitions: {times[-1]:.1f} s CPU, {plan.method}, "
              f"{len(plan.running())} jobs start now", flush=True)
    return times


POLICIES = (("fifo", "FIFO at home"), ("greenest", "greenest-now"), ("time_only", "time-only plan"),
            ("plan", "fleet plan"), ("plan_perfect", "fleet plan, perfect foresight"))


def table(results: list[dict]) -> str:
    names = [(k, label) for k, label in POLICIES if all(f"{k}_g" in r for r in results)]
    head = "| zones | week | jobs (pinned) | " + " | ".join(f"{label} kg (late, moves)" for _, label in names)
    head += " | bound kg | " + " | ".join(f"{label} / bound saving" for k, label in names if k != "fifo")
    head += " | capacity or places broken | plan CPU s per plan |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        cells = [r["zones"], r["week"], f"{r['jobs']} ({r['pinned']})"]
        cells += [f"{r[k + '_g'] / 1e3:.1f} ({r[k + '_late']}, {r[k + '_migrations']})" for k, _ in names]
        cells.append(f"{r['bound_g'] / 1e3:.1f}{'*' if r['bound_relaxed'] else ''}")
        cells += [f"{r[k + '_ratio']:.2f}" for k, _ in names if k != "fifo"]
        cells.append(str(sum(1 for k, _ in names if r[f"{k}_exceeded"] or not r[f"{k}_places_kept"])))
        planned = next((k for k in ("plan", "plan_perfect") if f"{k}_plans" in r), None)  # whichever ran
        cells.append(f"{r[planned + '_plan_cpu_s'] / max(1, r[planned + '_plans']):.2f}" if planned else "-")
        lines.append("| " + " | ".join(cells) + " |")
    for k, label in names:
        if k == "fifo":
            continue
        ratios = [r[f"{k}_ratio"] for r in results if np.isfinite(r[f"{k}_ratio"])]
        late = sum(r[f"{k}_late"] for r in results)
        kept = all(r[f"{k}_places_kept"] and not r[f"{k}_exceeded"] for r in results)
        lines.append(f"\n{label}: mean {statistics.mean(ratios):.3f} of the bound's saving over FIFO at home; "
                     f"late jobs {late}; capacity and places kept: {kept}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pai", type=Path)
    parser.add_argument("--case", action="append", required=True, help="Three zones, the cleanest first.")
    parser.add_argument("--carbon-dir", type=Path, required=True, help="Where ZONE_YEAR_hourly.csv lie.")
    parser.add_argument("--gpus", default="16,24,24")
    parser.add_argument("--year", type=int, default=2022)
    parser.add_argument("--weeks", default="10")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--pinned", type=float, default=0.2)
    parser.add_argument("--resume-overhead-min", type=float, default=5.0)
    parser.add_argument("--migration-overhead-min", type=float, default=15.0)
    parser.add_argument("--power-kw-per-gpu", type=float, default=0.7)
    parser.add_argument("--policies", default=",".join(k for k, _ in POLICIES),
                        help="Policies to run, comma-separated (FIFO at home always runs); "
                             "e.g. fifo,greenest,time_only,plan to leave out the perfect-foresight plan.")
    parser.add_argument("--planner-cpu", type=int, default=0, help="Measure one plan of this many queued jobs.")
    parser.add_argument("--repeat", type=int, default=3, help="--planner-cpu: plans to time.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(".fleet-bench-cache"))
    args = parser.parse_args()
    gpus = tuple(int(g) for g in args.gpus.split(","))
    policies = tuple(args.policies.split(","))
    unknown = sorted(set(policies) - {k for k, _ in POLICIES})
    if unknown:
        parser.error(f"--policies: unknown {', '.join(unknown)}; choose from {', '.join(k for k, _ in POLICIES)}")
    cases = [ZoneCase(tuple(c.split(",")), gpus, args.year, int(w), int(s), args.planner_cpu or args.jobs,
                      args.days, args.pinned, args.resume_overhead_min, args.migration_overhead_min,
                      args.power_kw_per_gpu, args.carbon_dir, args.pai, args.cache, policies)
             for c in args.case for w in args.weeks.split(",") for s in args.seeds.split(",")]
    if args.planner_cpu:
        times = planner_cpu(cases[0], args.repeat)
        print(f"median {statistics.median(times):.1f} s CPU per plan")
        return
    results = []
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        for result in pool.imap_unordered(run_case, cases, chunksize=1):
            results.append(result)
            print(table([result]).splitlines()[2], flush=True)
    results.sort(key=lambda r: (r["zones"], r["week"]))
    print(table(results))


if __name__ == "__main__":
    main()

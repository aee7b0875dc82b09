"""Fleet benchmark: the fleet plan against FIFO run-now, per-job windows and the offline bound.

For every trace given and every week start, a job set of ``--jobs`` jobs on
``--capacity-gpus`` GPUs is drawn from the PAI trace's distributions
(``benchmarks/fleet_jobs.py``) and replayed under each policy with causal
forecasts fed the trace up to each decision: ``--forecast causal``
greentrain's ``Forecaster`` (what ``greentrain fleet simulate`` plans on),
``blend`` it and same-hour-yesterday weighed by their measured skill at each
hour ahead (``fleet.feed.blend_forecaster``), ``seasonal-naive``
same-hour-yesterday alone, ``perfect`` the trace's own future.
``archive`` a provider-grade forecast: issue 26's synthetic archive of the
trace (``benchmarks/synthetic_archive.py``: errors growing with the horizon,
7 % MAPE a day ahead at ``--archive-scale 1``, built once into
``--archive-dir``), weighed against ``Forecaster`` by its measured skill as
``greentrain simulate --forecast-archive`` does (``ArchiveForecaster``).
``--hedge K`` plans each later hour at its forecast plus K times the
forecast's measured error at that horizon.
Reported per case: emissions of each policy, late jobs, peak GPUs, the
fleet plan's fraction of the bound's saving over FIFO
(``(FIFO - plan) / (FIFO - bound)``), resumes and the planner's CPU time.

    python benchmarks/fleet.py PAI.csv TRACE.csv [TRACE.csv ...] [--weeks 10,36] [--workers 2]
        [--forecast causal|blend|seasonal-naive|archive|perfect] [--archive-dir DIR] [--archive-scale S]
        [--hedge K]
    python benchmarks/fleet.py zones PAI.csv --case NO,GB,DE-LU --case US-CAL-CISO,DE-LU,GB --carbon-dir DIR

The multi-zone cases (three partitions on three grids, every baseline, the
bound, migrations and late jobs) are ``fleet.py zones``, which runs
``benchmarks/fleet_zones.py`` with the arguments that follow.

Forecasts are computed once per case and hour and kept in ``--cache`` (they
depend only on the trace), so a second run of the same cases is faster.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from archive_timing import archive_for  # noqa: E402
from fleet_jobs import job_set, read_pai, write_jobs  # noqa: E402
from synthetic_archive import DEFAULT_SEED  # noqa: E402

from greentrain.fleet.bound import offline_bound  # noqa: E402
from greentrain.fleet.feed import TraceFeed, blend_forecaster  # noqa: E402
from greentrain.fleet.jobs import load_jobs  # noqa: E402
from greentrain.fleet.model import PlannerConfig  # noqa: E402
from greentrain.fleet.policies import DEFAULT_HEDGE, CarbonAware, PerJobWindow, RunNowFIFO  # noqa: E402
from greentrain.fleet.simulate import Cluster, simulate_fleet  # noqa: E402
from greentrain.signals.archive.store import ForecastArchive  # noqa: E402
from greentrain.signals.archive.replay import ArchiveForecaster  # noqa: E402
from greentrain.signals.forecast.blend import SkillBlendForecaster  # noqa: E402
from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster  # noqa: E402
from greentrain.signals.archive.issued import IssuedForecasts  # noqa: E402
from greentrain.signals.trace import load_trace  # noqa: E402

HORIZON_H = 128


@dataclass(frozen=True, slots=True)
class Case:
    trace: Path
    week: int
    seed: int
    jobs: int
    capacity_gpus: int
    power_kw_per_gpu: float
    overhead_min: float
    cache: Path
    pai: Path
    forecast: str
    hedge: float
    archive_dir: Path
    """Where ``--forecast archive`` keeps the synthetic archives."""
    archive_scale: float

    @property
    def forecast_label(self) -> str:
        return f"archive-{self.archive_scale:g}x-seed{DEFAULT_SEED}" if self.forecast == "archive" else self.forecast


class CachedFeed(TraceFeed):
    """A TraceFeed whose causal forecasts come from a table computed once per case."""

    def __init__(self, points, name, table: dict[int, np.ndarray]) -> None:
        super().__init__(points, name, forecaster=None)
        self._table = table

    def view(self, hour: int, horizon_h: int) -> np.ndarray:
        return np.concatenate([[self.actual[hour]], self._table[hour][0, :horizon_h]])

    def errors(self, hour: int, horizon_h: int) -> np.ndarray:
        return np.concatenate([[0.0], self._table[hour][1, :horizon_h]])


FORECASTS = {"causal": lambda: SkillBlendForecaster(Forecaster(), None),
             "blend": blend_forecaster,
             "seasonal-naive": lambda: SkillBlendForecaster(SeasonalNaiveForecaster(), None)}
"""causal: greentrain's Forecaster (what ``greentrain fleet simulate`` plans on); blend: it and same-hour-yesterday
weighed by their measured skill; seasonal-naive: same-hour-yesterday alone. Each with its measured errors (for
``--hedge``)."""


def _archive_forecaster(case: Case, points) -> ArchiveForecaster:
    """The trace's synthetic provider archive at ``case.archive_scale``, skill-weighted against Forecaster."""
    path, _ = archive_for(case.trace, points, case.archive_dir, [case.archive_scale], DEFAULT_SEED)
    name, zone = f"synthetic-{case.archive_scale:g}x", points[0].zone
    with ForecastArchive(path, create=False) as archive:
        issued = IssuedForecasts(*archive.forecast_rows(name, zone), provider=name, zone=zone)
    return ArchiveForecaster(issued, Forecaster(), blend=True)


def _forecast_table(case: Case, points, feed: TraceFeed, first: int, last: int) -> dict[int, np.ndarray]:
    label = f"{case.trace.name}:{case.forecast_label}:{first}:{last}:{HORIZON_H}:v2"
    key = hashlib.sha1(label.encode()).hexdigest()[:16]
    path = case.cache / f"{case.trace.stem}-{key}.npy"
    if path.exists():
        values = np.load(path)
    else:
        forecaster = _archive_forecaster(case, points) if case.forecast == "archive" else FORECASTS[case.forecast]()
        live = TraceFeed(points, case.trace.name, forecaster)
        values = np.stack([np.stack([live.view(h, HORIZON_H)[1:], live.errors(h, HORIZON_H)[1:]])
                           for h in range(first, last)])
        case.cache.mkdir(parents=True, exist_ok=True)
        np.save(path, values)
    return {first + i: row for i, row in enumerate(values)}


def run_case(case: Case) -> dict:
    points = load_trace(case.trace)
    year = points[0].start.year
    start = datetime(year, 1, 1, tzinfo=UTC) + timedelta(weeks=case.week)
    start -= timedelta(days=start.weekday())  # a Monday
    rows = job_set(read_pai(case.pai), start, jobs=case.jobs, seed=case.seed, capacity_gpus=case.capacity_gpus)
    jobs_csv = case.cache / f"jobs-{year}-w{case.week}-s{case.seed}-{case.jobs}-{case.capacity_gpus}.csv"
    case.cache.mkdir(parents=True, exist_ok=True)
    write_jobs(rows, jobs_csv)
    jobs = load_jobs(jobs_csv, capacity_gpus=case.capacity_gpus, power_kw_per_gpu=case.power_kw_per_gpu)
    perfect = TraceFeed(points, case.trace.name, None)
    first = int(perfect.hour_of(min(j.submit for j in jobs)))
    last = int(perfect.hour_of(max(j.deadline for j in jobs))) + 24 * 7
    if case.forecast == "perfect":
        feed: TraceFeed = perfect
    else:
        feed = CachedFeed(points, case.trace.name, _forecast_table(case, points, perfect, first, min(last, perfect.hours)))
    cluster = Cluster(case.capacity_gpus, case.overhead_min / 60.0)
    fifo = simulate_fleet(jobs, perfect, RunNowFIFO(), cluster)
    per_job = simulate_fleet(jobs, feed, PerJobWindow(feed), cluster)
    bound = offline_bound(jobs, perfect.hour_of, perfect.actual, case.capacity_gpus)
    planner = CarbonAware(feed, case.capacity_gpus, config=PlannerConfig(exact_max_binaries=0), hedge=case.hedge)
    began = time.process_time()
    plan = simulate_fleet(jobs, feed, planner, cluster)
    sim_cpu_s = time.process_time() - began
    saving = fifo.emissions_g - bound.emissions_g
    return {
        "zone": points[0].zone, "year": year, "week": start.strftime("%Y-%m-%d"), "seed": case.seed,
        "jobs": len(jobs), "fifo_g": fifo.emissions_g, "per_job_g": per_job.emissions_g,
        "plan_g": plan.emissions_g, "bound_g": bound.emissions_g, "bound_relaxed": bound.deadlines_relaxed,
        "late_fifo": len(fifo.late), "late_per_job": len(per_job.late), "late_plan": len(plan.late),
        "peak_plan": plan.peak_gpus, "exceeded": plan.capacity_exceeded or fifo.capacity_exceeded,
        "ratio_plan": (fifo.emissions_g - plan.emissions_g) / saving if saving > 0 else float("nan"),
        "ratio_per_job": (fifo.emissions_g - per_job.emissions_g) / saving if saving > 0 else float("nan"),
        "bound_saving": saving / fifo.emissions_g, "resumes": sum(r.resumes for r in plan.runs),
        "plans": planner.plans, "plan_cpu_s": planner.cpu_s, "sim_cpu_s": sim_cpu_s,
    }


def table(results: list[dict]) -> str:
    head = ("| zone | week | FIFO kg | per-job kg (late) | fleet plan kg (late) | bound kg | bound saving "
            "| plan / bound saving | per-job / bound saving | peak GPUs | resumes | plans | planner CPU s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        lines.append(
            f"| {r['zone']} | {r['week']} | {r['fifo_g'] / 1e3:.1f} | {r['per_job_g'] / 1e3:.1f} ({r['late_per_job']}) "
            f"| {r['plan_g'] / 1e3:.1f} ({r['late_plan']}) | {r['bound_g'] / 1e3:.1f}{'*' if r['bound_relaxed'] else ''} "
            f"| {r['bound_saving']:.1%} | {r['ratio_plan']:.2f} | {r['ratio_per_job']:.2f} | {r['peak_plan']} "
            f"| {r['resumes']} | {r['plans']} | {r['plan_cpu_s']:.0f} |")
    ratios = [r["ratio_plan"] for r in results if np.isfinite(r["ratio_plan"])]
    lines.append(f"\nmean plan / bound saving {statistics.mean(ratios):.3f} over {len(ratios)} cases; "
                 f"late jobs (plan) {sum(r['late_plan'] for r in results)}; "
                 f"capacity exceeded in {sum(r['exceeded'] for r in results)} cases")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["zones"]:  # the multi-zone cases: their own script and flags
        from fleet_zones import main as zones_main

        sys.argv = [f"{sys.argv[0]} zones", *sys.argv[2:]]
        zones_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pai", type=Path)
    parser.add_argument("traces", type=Path, nargs="+")
    parser.add_argument("--weeks", default="10,36", help="Week numbers of the year to start on (Mondays).")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--capacity-gpus", type=int, default=64)
    parser.add_argument("--power-kw-per-gpu", type=float, default=0.7)
    parser.add_argument("--resume-overhead-min", type=float, default=5.0)
    parser.add_argument("--forecast", choices=(*FORECASTS, "archive", "perfect"), default="causal",
                        help="causal: greentrain's Forecaster; blend: it and same-hour-yesterday, skill-weighted; "
                             "archive: a synthetic provider archive (issue 26's), skill-weighted against Forecaster.")
    parser.add_argument("--archive-dir", type=Path, default=None,
                        help="Where --forecast archive keeps the synthetic archives (default: CACHE/archives).")
    parser.add_argument("--archive-scale", type=float, default=1.0,
                        help="--forecast archive: its error as a multiple of 7 %% MAPE a day ahead.")
    parser.add_argument("--hedge", type=float, default=DEFAULT_HEDGE,
                        help="Multiples of the forecast's measured error added to later hours.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(".fleet-bench-cache"))
    args = parser.parse_args()
    cases = [Case(t, int(w), int(s), args.jobs, args.capacity_gpus, args.power_kw_per_gpu, args.resume_overhead_min,
                  args.cache, args.pai, args.forecast, args.hedge, args.archive_dir or args.cache / "archives",
                  args.archive_scale)
             for t in args.traces for w in args.weeks.split(",") for s in args.seeds.split(",")]
    results = []
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
        for result in pool.imap_unordered(run_case, cases, chunksize=1):  # each case as it ends
            results.append(result)
            print(table([result]).splitlines()[2], flush=True)
    results.sort(key=lambda r: (r["zone"], r["week"], r["seed"]))
    print(table(results))


if __name__ == "__main__":
    main()

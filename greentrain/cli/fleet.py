"""``greentrain fleet``: plan many jobs on one cluster's capacity.

``greentrain fleet simulate`` replays a jobs file against a recorded carbon
trace under the fleet plan, FIFO run-now or per-job windows, with the offline
bound beside them; ``greentrain fleet run`` drives a real Slurm cluster
(see ``greentrain/cli/fleet_run.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from greentrain.cli.archiveflags import archive_flags, archive_forecaster, archive_line, archive_summary
from greentrain.errors import ConfigError
from greentrain.userfile import JSONObject, JSONValue

if TYPE_CHECKING:
    from greentrain.cli.archiveflags import Archived
    from greentrain.cli.fleet_partitions import FleetSites
    from greentrain.fleet.bound import Bound
    from greentrain.fleet.feed import TraceFeed
    from greentrain.fleet.jobs import FleetJob
    from greentrain.fleet.policies import CarbonAware
    from greentrain.fleet.simulate import Cluster, SimResult

__all__ = ["fleet", "simulate"]

POLICIES = ("carbon-aware", "run-now", "per-job", "greenest-now", "time-only")
_EPILOG = """\b
Example (ships with greentrain):
  greentrain fleet simulate --jobs greentrain/data/fleet/example-jobs.csv \\
      --trace greentrain/data/carbon/GB_2022_hourly.csv --capacity-gpus 16
\b
Partitions on several grids (a job moves when it pays): repeat --partition NAME=ZONE:GPUS:TRACE
(e.g. north=NO:16:NO_2022_hourly.csv, your own Electricity Maps export) instead of --trace.
"""


@click.group("fleet")
def fleet() -> None:
    """Plan many jobs on one cluster: least total emissions, capacity and deadlines kept."""


def _number_problems(power_kw_per_gpu: float, resume_overhead_min: float, migration_overhead_min: float) -> list[str]:
    problems = []
    if not 0 < power_kw_per_gpu < float("inf"):
        problems.append(f"--power-kw-per-gpu: must be a number > 0, got {power_kw_per_gpu:g}")
    if not 0 <= resume_overhead_min < float("inf"):
        problems.append(f"--resume-overhead-min: must be a number >= 0, got {resume_overhead_min:g}")
    if not 0 <= migration_overhead_min < float("inf"):
        problems.append(f"--migration-overhead-min: must be a number >= 0, got {migration_overhead_min:g}")
    return problems


@fleet.command("simulate", epilog=_EPILOG)
@click.option("--jobs", "jobs_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="CSV: id,submit,gpus,work_hours,deadline_hours (submit ISO-8601 UTC; deadline = submit + "
                   "deadline_hours); optional scaling_profile,replicas columns, and partition (home) and places "
                   "(semicolon-separated) with --partition.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Electricity Maps hourly CSV export covering the jobs (and weeks before, for the forecaster); "
                   "one partition, with --capacity-gpus.")
@click.option("--capacity-gpus", type=int, default=None, help="GPUs in the cluster (with --trace).")
@click.option("--partition", "partition_specs", multiple=True, metavar="NAME=ZONE:GPUS:TRACE",
              help="A partition on a grid zone, its GPUs and its zone's hourly trace (repeat; the trace once per "
                   "zone). Instead of --trace/--capacity-gpus.")
@click.option("--power-kw-per-gpu", type=float, default=0.7, show_default=True,
              help="Draw of one running GPU with its share of the host, kW (an H100 trains at 0.55-0.69 kW).")
@click.option("--resume-overhead-min", type=float, default=5.0, show_default=True,
              help="Minutes of running without progress at every resume after a job's first start.")
@click.option("--migration-overhead-min", type=float, default=15.0, show_default=True,
              help="Minutes of running without progress when a started job resumes on another partition.")
@click.option("--policy", type=click.Choice(POLICIES), default="carbon-aware", show_default=True,
              help="carbon-aware: the fleet plan; run-now: FIFO at submission, at home; per-job: each job's own "
                   "best window (one zone); greenest-now: the greenest partition with room at submission; "
                   "time-only: the fleet plan with every job at home.")
@click.option("--forecast", type=click.Choice(["causal", "perfect"]), default="causal", show_default=True,
              help="causal: greentrain's forecaster fed the trace up to each decision; perfect: the trace's own "
                   "future (evaluation only).")
@archive_flags
@click.option("--column", type=click.Choice(["direct", "lca"]), default="direct", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {input, jobs, summary}.")
def simulate(jobs_path: Path, trace_path: Path | None, capacity_gpus: int | None, partition_specs: tuple[str, ...],
             power_kw_per_gpu: float, resume_overhead_min: float, migration_overhead_min: float, policy: str,
             forecast: str, column: str, as_json: bool, **archive_opts: Any) -> None:
    """Replay a jobs file on a cluster's partitions against carbon traces; compare with the baselines and the bound."""
    from greentrain.cli.common import history_notes
    from greentrain.cli.fleet_partitions import load_sites
    from greentrain.fleet.jobs import load_jobs
    from greentrain.fleet.simulate import Cluster

    sites = load_sites(partition_specs, trace_path, capacity_gpus, column)
    problems = sites.problems + _number_problems(power_kw_per_gpu, resume_overhead_min, migration_overhead_min)
    several = len(sites.partitions) > 1 or bool(partition_specs)
    if several and archive_opts.get("archive_path") is not None:
        problems.append("--forecast-archive: one zone only (not with --partition)")
    if several and policy == "per-job":
        problems.append("--policy per-job: one zone only (with --partition: greenest-now, time-only, run-now)")
    jobs = []
    if sites.partitions and 0 < power_kw_per_gpu < float("inf"):
        try:
            jobs = load_jobs(jobs_path, partitions=sites.names_for_jobs(), power_kw_per_gpu=power_kw_per_gpu)
        except ConfigError as e:
            problems += str(e).splitlines()
    if problems:
        raise ConfigError("\n".join(problems))
    cluster = Cluster.of(list(sites.partitions.values()), resume_overhead_min / 60.0, migration_overhead_min / 60.0)
    points = sites.traces[sites.first_zone]
    notes = history_notes(points, min(j.submit for j in jobs)) if forecast == "causal" else []
    results, planner, bound, (actual, feed), archived = _replay(jobs, sites, cluster, policy, forecast, several,
                                                                archive_opts)
    report = _report(results, policy, bound, actual, planner, cluster.capacity_gpus)
    report["input"] = {"jobs": str(jobs_path), "trace": sites.trace_paths[sites.first_zone], "zone": actual.zone,
                       "column": column, "capacity_gpus": cluster.capacity_gpus, "power_kw_per_gpu": power_kw_per_gpu,
                       "resume_overhead_min": resume_overhead_min, "policy": policy, "forecast": forecast}
    if several:
        report["input"]["partitions"] = [{"name": p.name, "zone": p.zone, "gpus": p.capacity_gpus,
                                          "trace": sites.trace_paths[p.zone]} for p in sites.partitions.values()]
        report["input"]["migration_overhead_min"] = migration_overhead_min
    report["summary"]["notes"] = notes
    report["summary"]["forecast"] = _forecast_summary(feed, forecast)
    if archived is not None:
        report["input"]["forecast_archive"] = str(archive_opts["archive_path"])
        report["summary"]["forecast"]["kind"] = f"archive ({archive_opts['forecast_blend']}) + causal"
        report["summary"]["forecast_archive"] = archive_summary(archived, archive_opts["forecast_blend"])
    if as_json:
        click.echo(json.dumps(report))
    else:
        _print(report, results)


def _replay(jobs: list[FleetJob], sites: FleetSites, cluster: Cluster, policy: str, forecast: str, several: bool,
            archive_opts: dict[str, Any]) -> tuple[dict[str, SimResult], CarbonAware | None, Bound,
                                                   tuple[TraceFeed, TraceFeed], Archived | None]:
    """Every policy's replay, the plan's planner, the bound, the first zone's (actual, planned-on) feeds and the
    archive forecaster (None without one)."""
    from greentrain.fleet.bound import offline_bound
    from greentrain.fleet.feed import TraceFeed
    from greentrain.fleet.policies import CarbonAware, GreenestNow, PerJobWindow, RunNowFIFO
    from greentrain.fleet.simulate import simulate_fleet
    from greentrain.signals.forecast.forecaster import Forecaster

    actual = {zone: TraceFeed(points, sites.trace_paths[zone], None) for zone, points in sites.traces.items()}
    first = actual[sites.first_zone]
    own = Forecaster()
    archived = archive_forecaster(archive_opts, first.zone, own, forecast == "perfect")
    planned_on = own if archived is None else archived[1]
    feeds = actual if forecast == "perfect" else {
        zone: TraceFeed(points, sites.trace_paths[zone], planned_on if zone == sites.first_zone else Forecaster())
        for zone, points in sites.traces.items()}
    feed = feeds[sites.first_zone]
    results = {"run-now": simulate_fleet(jobs, first, RunNowFIFO(), cluster, zones=actual)}
    if not several:
        results["per-job"] = simulate_fleet(jobs, feed, PerJobWindow(feed), cluster, zones=actual)
    if several or policy == "greenest-now":
        results["greenest-now"] = simulate_fleet(jobs, first, GreenestNow(actual), cluster, zones=actual)
    if several or policy == "time-only":
        time_only = CarbonAware(feed, cluster.capacity_gpus, jobs=jobs, zones=feeds, home_only=True)
        results["time-only"] = simulate_fleet(jobs, first, time_only, cluster, zones=actual)
    planner = None
    if policy == "carbon-aware":
        planner = CarbonAware(feed, cluster.capacity_gpus, jobs=jobs, zones=feeds)
        results["carbon-aware"] = simulate_fleet(jobs, first, planner, cluster, zones=actual)
    bound = offline_bound(jobs, first.hour_of, first.actual, cluster.capacity_gpus,
                          partitions=cluster.parts(first.zone), zones={z: f.actual for z, f in actual.items()})
    return results, planner, bound, (first, feed), archived


def _report(results: dict[str, SimResult], policy: str, bound: Bound, actual: TraceFeed, planner: CarbonAware | None,
            capacity_gpus: int) -> dict:
    from greentrain.fleet.report import fraction_of_bound, jobs_json, summary_json

    chosen = results[policy]
    run_now_g = results["run-now"].emissions_g
    summary = summary_json(chosen, capacity_gpus)
    summary["saving_vs_run_now_g"] = round(run_now_g - chosen.emissions_g, 3)
    summary["fraction_of_bound_saving"] = fraction_of_bound(run_now_g, chosen.emissions_g, bound)
    baselines: JSONObject = {name: summary_json(r, capacity_gpus) for name, r in results.items() if name != policy}
    summary["baselines"] = baselines
    baselines["offline-bound"] = {"emissions_g": round(bound.emissions_g, 3),
                                             "deadlines_relaxed": bound.deadlines_relaxed,
                                             "note": "LP lower bound: all jobs and the trace known, no restart "
                                                     "or migration overhead, fractional GPU-hours"}
    if planner is not None:
        summary["planner"] = {"plans": planner.plans, "cpu_s": round(planner.cpu_s, 3), "methods": dict[str, JSONValue](planner.methods)}
    return {"jobs": jobs_json(chosen, actual), "summary": summary}


def _forecast_summary(feed: TraceFeed, forecast: str) -> dict:
    """What the plans were made on, and how far off a causal forecast turned out a day ahead (measured:
    the replay's own forecasts against the trace)."""
    out: dict[str, object] = {"kind": forecast}
    error = feed.realised_error(24) if forecast == "causal" else None
    if error is not None:
        out |= {"day_ahead_mae_g_per_kwh": round(error.mae_g_per_kwh, 1),
                "day_ahead_bias_g_per_kwh": round(error.bias_g_per_kwh, 1),
                "day_ahead_actual_mean_g_per_kwh": round(error.actual_mean_g_per_kwh, 1),
                "day_ahead_forecasts": error.count}
    return out


def _print(report: dict, results: dict) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table
    from greentrain.units import format_mass_g

    summary = report["summary"]
    rows = []
    for name, result in results.items():
        s = summary if name == summary["policy"] else summary["baselines"][name]
        rows.append([name, format_mass_g(result.emissions_g, suffix=""), f"{s['late_jobs']}",
                     f"{s['peak_gpus_in_use']}/{s['capacity_gpus']}", f"{s['resumes']}", f"{s['migrations']}"])
    bound = summary["baselines"]["offline-bound"]
    rows.append(["offline bound", format_mass_g(bound["emissions_g"], suffix=""), "-", "-", "-", "-"])
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    where = report["input"]["trace"]
    if "partitions" in report["input"]:
        where = ", ".join(f"{p['name']} ({p['zone']}, {p['gpus']})" for p in report["input"]["partitions"])
    columns = ("policy", "CO2eq", "late jobs", "peak GPUs", "resumes", "migrations")
    print_table(console, f"{summary['jobs']} jobs on {report['input']['capacity_gpus']} GPUs, {where}", columns,
                rows, right=columns[1:])
    fraction = summary["fraction_of_bound_saving"]
    saving_g = summary["saving_vs_run_now_g"]
    versus = f"{format_mass_g(abs(saving_g))} {'less' if saving_g >= 0 else 'more'} than FIFO run-now"
    console.print(f"{summary['policy']}: {versus}; "
                  f"fraction of the bound's saving: {'n/a' if fraction is None else f'{fraction:.2f}'}; "
                  f"late jobs: {summary['late_jobs']}; emissions estimated (per-GPU power x trace intensity)",
                  markup=False, highlight=False)
    forecast = summary["forecast"]
    if "day_ahead_mae_g_per_kwh" in forecast:
        bias = forecast["day_ahead_bias_g_per_kwh"]
        direction = "too low" if bias < 0 else "too high"
        whose = "greentrain's" if forecast["kind"] == "causal" else forecast["kind"]
        console.print(f"forecast: {whose}, off by {forecast['day_ahead_mae_g_per_kwh']:g} g/kWh on average a "
                      f"day ahead in this replay ({abs(bias):g} {direction} on average, on hours that averaged "
                      f"{forecast['day_ahead_actual_mean_g_per_kwh']:g}); --forecast perfect plans with the carbon "
                      "known", markup=False, highlight=False)
    if "forecast_archive" in summary:
        console.print(archive_line(summary["forecast_archive"]), markup=False, highlight=False)


def _run_command() -> click.Command:
    from greentrain.cli.fleet_run import run

    return run


fleet.add_command(_run_command(), "run")

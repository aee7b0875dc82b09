"""``greentrain fleet``: plan many jobs on one cluster's capacity.

``greentrain fleet simulate`` replays a jobs file against a recorded carbon
trace under the fleet plan, FIFO run-now or per-job windows, with the offline
bound beside them; ``greentrain fleet run`` drives a real Slurm cluster
(see ``greentrain/cli/fleet_run.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from greentrain.cli.archiveflags import archive_flags, archive_forecaster, archive_line, archive_summary
from greentrain.errors import ConfigError

__all__ = ["fleet", "simulate"]

POLICIES = ("carbon-aware", "run-now", "per-job")
_EPILOG = """\b
Example (ships with greentrain):
  greentrain fleet simulate --jobs greentrain/data/fleet/example-jobs.csv \\
      --trace greentrain/data/carbon/GB_2022_hourly.csv --capacity-gpus 16
"""


@click.group("fleet")
def fleet() -> None:
    """Plan many jobs on one cluster: least total emissions, capacity and deadlines kept."""


def _check_numbers(capacity_gpus: int, power_kw_per_gpu: float, resume_overhead_min: float) -> None:
    problems = []
    if capacity_gpus < 1:
        problems.append(f"--capacity-gpus: must be >= 1, got {capacity_gpus}")
    if not 0 < power_kw_per_gpu < float("inf"):
        problems.append(f"--power-kw-per-gpu: must be a number > 0, got {power_kw_per_gpu:g}")
    if not 0 <= resume_overhead_min < float("inf"):
        problems.append(f"--resume-overhead-min: must be a number >= 0, got {resume_overhead_min:g}")
    if problems:
        raise ConfigError("\n".join(problems))


@fleet.command("simulate", epilog=_EPILOG)
@click.option("--jobs", "jobs_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="CSV: id,submit,gpus,work_hours,deadline_hours (submit ISO-8601 UTC; deadline = submit + "
                   "deadline_hours); optional scaling_profile,replicas columns.")
@click.option("--trace", "trace_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Electricity Maps hourly CSV export covering the jobs (and weeks before, for the forecaster).")
@click.option("--capacity-gpus", type=int, required=True, help="GPUs in the cluster.")
@click.option("--power-kw-per-gpu", type=float, default=0.7, show_default=True,
              help="Draw of one running GPU with its share of the host, kW (an H100 trains at 0.55-0.69 kW).")
@click.option("--resume-overhead-min", type=float, default=5.0, show_default=True,
              help="Minutes of running without progress at every resume after a job's first start.")
@click.option("--policy", type=click.Choice(POLICIES), default="carbon-aware", show_default=True,
              help="carbon-aware: the fleet plan; run-now: FIFO at submission; per-job: each job's own best window.")
@click.option("--forecast", type=click.Choice(["causal", "perfect"]), default="causal", show_default=True,
              help="causal: greentrain's forecaster fed the trace up to each decision; perfect: the trace's own "
                   "future (evaluation only).")
@archive_flags
@click.option("--column", type=click.Choice(["direct", "lca"]), default="direct", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {input, jobs, summary}.")
def simulate(jobs_path: Path, trace_path: Path, capacity_gpus: int, power_kw_per_gpu: float,
             resume_overhead_min: float, policy: str, forecast: str, column: str, as_json: bool,
             **archive_opts: Any) -> None:
    """Replay a jobs file on one cluster against a carbon trace; compare with FIFO, per-job and the bound."""
    from greentrain.cli.common import history_notes
    from greentrain.fleet.bound import offline_bound
    from greentrain.fleet.feed import TraceFeed
    from greentrain.fleet.jobs import load_jobs
    from greentrain.fleet.policies import CarbonAware, PerJobWindow, RunNowFIFO
    from greentrain.fleet.simulate import Cluster, simulate_fleet
    from greentrain.signals.forecast import Forecaster
    from greentrain.signals.trace import load_trace

    _check_numbers(capacity_gpus, power_kw_per_gpu, resume_overhead_min)
    jobs = load_jobs(jobs_path, capacity_gpus=capacity_gpus, power_kw_per_gpu=power_kw_per_gpu)
    points = load_trace(trace_path, column)
    actual = TraceFeed(points, str(trace_path), None)
    own = Forecaster()
    archived = archive_forecaster(archive_opts, actual.zone, own, forecast == "perfect")
    planned_on = own if archived is None else archived[1]
    feed = actual if forecast == "perfect" else TraceFeed(points, str(trace_path), planned_on)
    cluster = Cluster(capacity_gpus, resume_overhead_min / 60.0)
    notes = history_notes(points, min(j.submit for j in jobs)) if forecast == "causal" else []
    results = {"run-now": simulate_fleet(jobs, actual, RunNowFIFO(), cluster),
               "per-job": simulate_fleet(jobs, feed, PerJobWindow(feed), cluster)}
    planner = None
    if policy == "carbon-aware":
        planner = CarbonAware(feed, capacity_gpus, jobs=jobs)
        results["carbon-aware"] = simulate_fleet(jobs, feed, planner, cluster)
    bound = offline_bound(jobs, actual.hour_of, actual.actual, capacity_gpus)
    report = _report(results, policy, bound, actual, planner, capacity_gpus)
    report["input"] = {"jobs": str(jobs_path), "trace": str(trace_path), "zone": actual.zone, "column": column,
                       "capacity_gpus": capacity_gpus, "power_kw_per_gpu": power_kw_per_gpu,
                       "resume_overhead_min": resume_overhead_min, "policy": policy, "forecast": forecast}
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


def _report(results: dict, policy: str, bound: Any, actual: Any, planner: Any, capacity_gpus: int) -> dict:
    from greentrain.fleet.report import fraction_of_bound, jobs_json, summary_json

    chosen = results[policy]
    run_now_g = results["run-now"].emissions_g
    summary = summary_json(chosen, capacity_gpus)
    summary["saving_vs_run_now_g"] = round(run_now_g - chosen.emissions_g, 3)
    summary["fraction_of_bound_saving"] = fraction_of_bound(run_now_g, chosen.emissions_g, bound)
    summary["baselines"] = {name: summary_json(r, capacity_gpus) for name, r in results.items() if name != policy}
    summary["baselines"]["offline-bound"] = {"emissions_g": round(bound.emissions_g, 3),
                                             "deadlines_relaxed": bound.deadlines_relaxed,
                                             "note": "LP lower bound: all jobs and the trace known, no restart "
                                                     "overhead, fractional GPU-hours"}
    if planner is not None:
        summary["planner"] = {"plans": planner.plans, "cpu_s": round(planner.cpu_s, 3), "methods": planner.methods}
    return {"jobs": jobs_json(chosen, actual), "summary": summary}


def _forecast_summary(feed: Any, forecast: str) -> dict:
    """What the plans were made on, and how far off a causal forecast turned out a day ahead (measured:
    the replay's own forecasts against the trace)."""
    out: dict[str, Any] = {"kind": forecast}
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
                     f"{s['peak_gpus_in_use']}/{s['capacity_gpus']}", f"{s['resumes']}"])
    bound = summary["baselines"]["offline-bound"]
    rows.append(["offline bound", format_mass_g(bound["emissions_g"], suffix=""), "-", "-", "-"])
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    print_table(console, f"{summary['jobs']} jobs on {report['input']['capacity_gpus']} GPUs, "
                f"{report['input']['trace']}", ("policy", "CO2eq", "late jobs", "peak GPUs", "resumes"), rows,
                right=("CO2eq", "late jobs", "peak GPUs", "resumes"))
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

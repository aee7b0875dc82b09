"""``greentrain simulate``: replay a real carbon trace through a policy and compare with baselines."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import click

from greentrain.cli.archiveflags import archive_flags, archive_forecaster, archive_line, archive_summary
from greentrain.cli.common import history_notes
from greentrain.cli.jobflags import job_flags, job_options, take_settings
from greentrain.job.options import JobOptions
from greentrain.cli.simulate_zones import TraceSpec, check_cover, load_zone_traces, parse_trace_specs, zones_output
from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError, DeadlineError
from greentrain.policies import Policy, RunNowPolicy, load_policy
from greentrain.signals.trace import load_trace
from greentrain.sim import (PerfectForecaster, SimJob, TraceIndex, forecast_summary, parse_rate_noise, run_to_json,
                            summarize)
from greentrain.sim import simulate as run_simulation

__all__ = ["make_forecaster", "parse_starts", "parse_time", "simulate"]

FORECASTERS = ("default", "seasonal-naive", "perfect")
_NOTES = {
    "deadline_policy": "Here: 'best-effort' runs now (with a warning) if --deadline-hours is shorter than the work.",
    "scaling_profile": "Here: an elastic job (with --replicas N); carbon-aware picks a count per hour.",
    "min_replicas": "Here: needs --scaling-profile.",
    "max_replicas": "Here: needs --scaling-profile.",
}
IDLE_TO_RUNNING = 0.12
"""Default idle/running draw ratio: 71 W at rest over 548-690 W training, one H100 (measured 2026-11-23)."""


def parse_time(text: str, option: str) -> datetime:
    """An aware ISO-8601 time; ConfigError naming ``option`` otherwise (naive times are refused)."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"{option}: {text!r} is not ISO-8601 (e.g. 2022-03-01T00:00Z)") from None
    return ensure_aware_utc(parsed, option)


def parse_starts(text: str) -> list[datetime]:
    """``FROM,TO,EVERY_HOURS`` -> start times FROM, FROM+EVERY, ... <= TO."""
    parts = text.split(",")
    if len(parts) != 3:
        raise ConfigError(f"--starts: {text!r} is not FROM,TO,EVERY_HOURS (e.g. 2022-01-01T00Z,2022-12-01T00Z,168)")
    first, last = parse_time(parts[0], "--starts FROM"), parse_time(parts[1], "--starts TO")
    try:
        every_h = float(parts[2])
    except ValueError:
        raise ConfigError(f"--starts: EVERY_HOURS {parts[2]!r} is not a number") from None
    if every_h <= 0:
        raise ConfigError(f"--starts: EVERY_HOURS must be > 0, got {every_h:g}")
    if last < first:
        raise ConfigError("--starts: TO is before FROM")
    count = int((last - first).total_seconds() // (every_h * 3600)) + 1
    if count > 100_000:
        raise ConfigError(f"--starts: {count} starts is too many; use a larger EVERY_HOURS")
    return [first + timedelta(hours=every_h * i) for i in range(count)]


def make_forecaster(name: str, trace: list) -> Any:
    """The forecaster named on the command line; imported lazily."""
    if name == "perfect":
        return PerfectForecaster(trace)
    from greentrain.signals.forecast.forecaster import Forecaster, SeasonalNaiveForecaster

    return SeasonalNaiveForecaster() if name == "seasonal-naive" else Forecaster()


def _build_job(opts: dict[str, Any], settings: JobOptions, given: Mapping[str, object]) -> SimJob:
    """The simulated job from the command's own flags and the job settings (``given``: those on the command
    line)."""
    idle_kw = opts["idle_power_kw"]
    if idle_kw is not None and not 0 <= idle_kw < float("inf"):
        raise ConfigError(f"--idle-power-kw: must be a number >= 0 (0 = hardware released), got {idle_kw:g}")
    common = {"work_h": opts["work_hours"], "deadline_h": opts["deadline_hours"],
              "resume_overhead_min": opts["resume_overhead_min"]}
    if settings.scaling_profile is not None or opts["replicas"] is not None:
        return _scaling_job(opts, settings, common)
    if "min_replicas" in given or "max_replicas" in given:
        raise ConfigError("--min-replicas/--max-replicas: need --scaling-profile FILE and --replicas N")
    if opts["profile"] is None:
        if opts["workload"] is not None or opts["batch_size"] is not None:
            raise ConfigError("--workload/--batch-size: need --profile CSV|v100|a40|rtx6000")
        idle = IDLE_TO_RUNNING * opts["power_kw"] if idle_kw is None else idle_kw
        return SimJob.constant_power(power_kw=opts["power_kw"], idle_power_kw=idle, **common)
    from greentrain.device.profiles import load_gpu_profile

    profile = load_gpu_profile(opts["profile"])
    if opts["workload"] is None:
        raise ConfigError(f"--workload: required with --profile; valid: {', '.join(profile.workloads())}")
    job = SimJob.from_profile(profile, opts["workload"], batch_size=opts["batch_size"], gpus=opts["gpus"],
                              **common)
    idle_w = IDLE_TO_RUNNING * job.full.power_w if idle_kw is None else idle_kw * 1000.0
    return replace(job, waiting_power_w=idle_w)


def _scaling_job(opts: dict[str, Any], settings: JobOptions, common: dict[str, Any]) -> SimJob:
    """An elastic job: work counted at --replicas N; unused replicas (and a paused job's) released, 0 W."""
    from greentrain.policies.scaling_profile import load_scaling_profile

    if settings.scaling_profile is None or opts["replicas"] is None:
        raise ConfigError("--scaling-profile FILE and --replicas N go together (N: the count the job runs at "
                          "without greentrain)")
    if opts["profile"] is not None or opts["workload"] is not None:
        raise ConfigError("--profile/--workload: not with --scaling-profile (its power_w is the job's draw)")
    profile = load_scaling_profile(settings.scaling_profile)
    idle_kw = opts["idle_power_kw"] if opts["idle_power_kw"] is not None else 0.0
    return SimJob.from_scaling_profile(profile, opts["replicas"], idle_power_kw=idle_kw,
                                       min_replicas=settings.min_replicas, max_replicas=settings.max_replicas,
                                       **common)


def _choose_policy(spec: str, deadline_policy: str | None, job: SimJob) -> tuple[Policy, str]:
    policy = load_policy(spec)
    mode = deadline_policy or policy.settings.deadline_policy
    if job.deadline_s >= job.work_s:
        return policy, policy.name
    message = (f"--deadline-hours: {job.deadline_s / 3600:g} h is shorter than the work "
               f"({job.work_s / 3600:g} h at full speed)")
    if mode != "best-effort":
        raise DeadlineError(f"{message}; give a later deadline or --deadline-policy best-effort")
    click.echo(f"greentrain: warning: {message}; best-effort: running now at full speed", err=True)
    return RunNowPolicy(), "run-now"


@click.command("simulate")
@click.option("--trace", "trace_specs", required=True, multiple=True, metavar="FILE|ZONE=FILE",
              help="Electricity Maps hourly CSV export. Repeat as ZONE=FILE for a job that may run in several "
                   "zones (the first is its home): it may start in another and move at its pauses.")
@click.option("--migration-overhead-min", type=float, default=15.0, show_default=True,
              help="With several zones: minutes at full power without progress when a paused job resumes in "
                   "another zone (checkpoint transfer and restart), in place of --resume-overhead-min.")
@click.option("--column", type=click.Choice(["direct", "lca"]), default="direct", show_default=True)
@click.option("--start", "start_text", help="One start time, ISO-8601 with timezone.")
@click.option("--starts", "starts_text", help="Many starts: FROM,TO,EVERY_HOURS.")
@click.option("--work-hours", type=float, required=True, help="Running time needed at full speed.")
@click.option("--deadline-hours", type=float, required=True, help="Must finish within this many hours of its start.")
@click.option("--power-kw", type=float, default=1.0, show_default=True, help="Draw while running (no --profile).")
@click.option("--resume-overhead-min", type=float, default=5.0, show_default=True,
              help="Minutes at full power without progress per resume after a pause.")
@click.option("--idle-power-kw", type=float, default=None,
              help="Draw while paused between the first start and the finish (hardware held idle); "
                   "default 0.12 x the running draw (H100 measured), 0 = hardware released "
                   "(the default with --scaling-profile). A delayed first start draws nothing.")
@click.option("--policy", "policy_spec", default="carbon-aware", show_default=True, help="Preset name or TOML file.")
@click.option("--profile", default=None, help="GPU profile: v100, a40, rtx6000 or a Zeus summary CSV.")
@click.option("--workload", default=None, help="DATASET/NETWORK from the profile, e.g. imagenet/resnet50.")
@click.option("--batch-size", type=int, default=None, help="Batch size (default: least energy per epoch).")
@click.option("--gpus", type=int, default=1, show_default=True, help="GPUs the job uses (power × gpus).")
@click.option("--replicas", type=int, default=None,
              help="With --scaling-profile: the count the job runs at without greentrain; --work-hours are at it.")
@click.option("--forecaster", type=click.Choice(FORECASTERS), default="default", show_default=True,
              help="'perfect' uses the trace's actual future (evaluation only).")
@click.option("--rate-noise", "rate_noise", default="none", show_default=True,
              help="Changes of the job's work rate that the policy faces (the oracle is scored on the same "
                   "realised rate): 'none'; 'steps:AMPLITUDE:HOLD[:SEED]', random step changes to a rate in "
                   "[1-AMPLITUDE, 1+AMPLITUDE] each held HOLD/2 to 3·HOLD/2 (e.g. steps:0.5:4h); or 'runlog:PATH', "
                   "the measured step times of a run log that greentrain wrote.")
@job_flags("simulate", notes=_NOTES)
@archive_flags
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {runs, summary}.")
def simulate(trace_specs: tuple[str, ...], column: str, start_text: str | None, starts_text: str | None,
             policy_spec: str, forecaster: str, rate_noise: str, as_json: bool, migration_overhead_min: float,
             **opts: Any) -> None:
    """Replay a carbon trace through a policy; compare with run-now, best-window and the oracle.

    With several --trace ZONE=FILE: one job that may run in any of the zones, moving at its pauses when the
    move pays for its overhead; compared with stay-home and greenest-at-start."""
    specs, problems = parse_trace_specs(trace_specs)
    if problems or len(trace_specs) > 1:
        _simulate_zones(specs, problems, column, start_text, starts_text, policy_spec, forecaster, rate_noise,
                        as_json, migration_overhead_min, opts)
        return
    trace_path = specs[0].path
    given = take_settings(opts, "simulate")
    waits = job_options(given)  # the engine's own settings, checked as the engine does
    if (start_text is None) == (starts_text is None):
        raise ConfigError("give exactly one of --start ISO or --starts FROM,TO,EVERY_HOURS")
    starts = [parse_time(start_text, "--start")] if start_text is not None else parse_starts(starts_text or "")
    if opts["deadline_hours"] <= 0:
        raise DeadlineError(f"--deadline-hours: must be > 0 (a deadline in the past), got {opts['deadline_hours']:g}")
    noise = parse_rate_noise(rate_noise)  # a bad SPEC or run log fails before the trace is read
    if noise.kind != "none" and waits.scaling_profile is not None:
        raise ConfigError("--rate-noise: not with --scaling-profile (the scaling oracle has no realised rate yet)")
    job = _build_job(opts, waits, given)
    policy, policy_name = _choose_policy(policy_spec, waits.deadline_policy, job)
    points = load_trace(trace_path, column)
    trace = TraceIndex(points, str(trace_path))
    horizon = timedelta(seconds=max(job.deadline_s, job.work_s))  # best-effort runs past the deadline
    for start in starts:
        trace.index(start, "--start")
        trace.require_cover(start, start + horizon, "the deadline")
    chosen = make_forecaster(forecaster, points)
    notes = history_notes(points, min(starts)) if forecaster == "default" else []
    archived = archive_forecaster(opts, points[0].zone, chosen, forecaster == "perfect")
    results = run_simulation(trace, starts, job, policy, chosen if archived is None else archived[1], noise=noise,
                             estimate_error=waits.estimate_error, min_wait_saving=waits.min_wait_saving)
    summary = summarize(results, policy_name)
    summary.update(trace=str(trace_path), column=column, forecaster=forecaster, work_hours=opts["work_hours"],
                   deadline_hours=opts["deadline_hours"], resume_overhead_min=opts["resume_overhead_min"],
                   idle_power_kw=round(job.waiting_power_w / 1000.0, 9), rate_noise=noise.spec,
                   estimate_error=waits.estimate_error, min_wait_saving=waits.min_wait_saving, notes=list(notes))
    if job.scaling is not None:
        summary.update(scaling_profile=str(waits.scaling_profile), replicas=job.replicas)
    summary["forecast"] = forecast_summary(results, _forecast_kind(forecaster, archived, opts["forecast_blend"]))
    if archived is not None:
        summary["forecast_archive"] = archive_summary(archived, opts["forecast_blend"])
    if as_json:
        runs = [run_to_json(r, power=job.profiled) for r in results]
        click.echo(json.dumps({"runs": runs, "summary": summary}))
    else:
        _print_table(results, summary)


def _simulate_zones(specs: list[TraceSpec], problems: list[str], column: str, start_text: str | None,
                    starts_text: str | None, policy_spec: str, forecaster: str, rate_noise: str, as_json: bool,
                    migration_overhead_min: float, opts: dict[str, Any]) -> None:
    """One job across the zones of several ``--trace ZONE=FILE`` (``cli/simulate_zones.py``)."""
    from greentrain.sim.zones import simulate_zones

    given = take_settings(opts, "simulate")
    waits = job_options(given)
    if waits.scaling_profile is not None:
        problems.append("--scaling-profile: one zone only (not with several --trace ZONE=FILE)")
    if opts.get("archive_path") is not None:
        problems.append("--forecast-archive: one zone only (not with several --trace ZONE=FILE)")
    traces = load_zone_traces(specs, column, problems)
    if (start_text is None) == (starts_text is None):
        raise ConfigError("\n".join([*problems, "give exactly one of --start ISO or --starts FROM,TO,EVERY_HOURS"]))
    starts = [parse_time(start_text, "--start")] if start_text is not None else parse_starts(starts_text or "")
    if opts["deadline_hours"] <= 0:
        problems.append(f"--deadline-hours: must be > 0 (a deadline in the past), got {opts['deadline_hours']:g}")
    check_cover(traces, starts, timedelta(hours=max(opts["deadline_hours"], opts["work_hours"])), problems)
    if problems:
        raise ConfigError("\n".join(problems))
    noise = parse_rate_noise(rate_noise)
    job = replace(_build_job(opts, waits, given), migration_overhead_s=migration_overhead_min * 60.0)
    policy, policy_name = _choose_policy(policy_spec, waits.deadline_policy, job)
    forecasters = {zone: make_forecaster(forecaster, trace.points) for zone, trace in traces.items()}
    results = simulate_zones(traces, starts, job, policy, forecasters, noise=noise,
                             estimate_error=waits.estimate_error, min_wait_saving=waits.min_wait_saving)
    extra: dict[str, Any] = {
        "traces": {zone: trace.name for zone, trace in traces.items()}, "column": column,
        "forecaster": forecaster, "work_hours": opts["work_hours"], "deadline_hours": opts["deadline_hours"],
        "resume_overhead_min": opts["resume_overhead_min"], "migration_overhead_min": migration_overhead_min,
        "idle_power_kw": round(job.waiting_power_w / 1000.0, 9), "rate_noise": noise.spec}
    zones_output(results, policy_name, list(traces), extra, as_json)


def _forecast_kind(forecaster: str, archived: Any, blend: str) -> str:
    """What the decisions planned on, in the words of the flags that chose it."""
    own = {"default": "greentrain", "seasonal-naive": "seasonal-naive", "perfect": "perfect"}[forecaster]
    return own if archived is None else f"archive ({blend}) + {own}"


def _forecast_line(forecast: dict[str, Any]) -> str | None:
    """One line: how far off the forecasts the decisions used turned out, the next hour and the furthest lead
    time scored."""
    if forecast["kind"] == "perfect":
        return "forecast: the trace's own future (--forecaster perfect: evaluation only, no forecast error)"
    leads = forecast["by_hours_ahead"]
    if not leads:
        return None
    far = max(leads, key=int)
    near = leads.get("1")
    d = leads[far]
    errors = (f"{near['mae_g_per_kwh']:g} g/kWh 1 h ahead, {d['mae_g_per_kwh']:g} at {far} h"
              if near is not None and far != "1" else f"{d['mae_g_per_kwh']:g} g/kWh {far} h ahead")
    return (f"forecast ({forecast['kind']}): MAE {errors} (bias {d['bias_g_per_kwh']:+g}, actual mean "
            f"{d['actual_mean_g_per_kwh']:g}); {forecast['forecasts']} forecasts")


def _print_table(results: list, summary: dict[str, Any]) -> None:
    from rich.console import Console

    from greentrain.cli.tables import print_table
    from greentrain.units import format_mass_g

    def grams(value: float) -> str:
        return format_mass_g(value, suffix="")

    scaled = bool(results) and results[0].timing_only is not None
    columns = ("start", "finished", "met", "policy CO2eq", "run-now", "window",
               *(("timing-only",) if scaled else ()), "oracle", "resumes", *(("rescales",) if scaled else ()))
    rows = []
    for r in results:
        timing = [grams(r.timing_only.emissions_g)] if r.timing_only is not None else []
        rescales = [str(r.policy.rescales)] if scaled else []
        rows.append([r.start.strftime("%m-%d %H:%M"),
                     r.policy.finished_at.strftime("%m-%d %H:%M") if r.policy.finished_at else "-",
                     "yes" if r.deadline_met else "NO", grams(r.policy.emissions_g), grams(r.run_now.emissions_g),
                     grams(r.best_window.emissions_g), *timing, grams(r.oracle.emissions_g), str(r.policy.resumes),
                     *rescales])
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # piped output: do not squeeze the table into 80 columns
    print_table(console, f"policy {summary['policy']} on {summary['trace']}", columns, rows,
                right=columns[3:])
    if scaled:
        console.print(f"elastic job at {summary['replicas']} replicas without greentrain; timing-only (best timing "
                      f"at that count) saves {100 * (summary['timing_only_saving_vs_run_now'] or 0):.1f} %; "
                      f"the oracle is the scaling oracle")
    frac = summary["fraction_of_oracle_saving"]
    console.print(
        f"saving vs run-now: {100 * (summary['saving_vs_run_now'] or 0):.1f} % "
        f"(oracle {100 * (summary['oracle_saving_vs_run_now'] or 0):.1f} %, "
        f"best-window {100 * (summary['best_window_saving_vs_run_now'] or 0):.1f} %); "
        f"fraction of oracle saving: {'n/a' if frac is None else f'{frac:.2f}'}; "
        f"deadlines missed: {summary['deadlines_missed']}/{summary['runs']}; "
        f"worse than run-now: {summary['runs_worse_than_run_now']}; "
        f"net of {summary['idle_power_kw']:g} kW while paused ({summary['waiting_energy_kwh']:.2f} kWh waiting)"
    )
    line = _forecast_line(summary["forecast"])
    if line is not None:
        console.print(line, markup=False, highlight=False)
    archived = summary.get("forecast_archive")
    if archived is not None:
        console.print(archive_line(archived), markup=False)

"""``greentrain submit``: queue a Slurm job at its lowest-carbon start (and place) within a deadline."""

from __future__ import annotations

import shlex
from datetime import datetime

import click

from greentrain.cli.common import parse_deadline
from greentrain.cli.jobflags import job_flags, job_options, take_settings
from greentrain.clock import SystemClock
from greentrain.integrations.forecasts import ProviderForecasts, TraceForecasts
from greentrain.integrations.placement import Place
from greentrain.integrations.slurm import SlurmClient
from greentrain.integrations.slurm_plan import SubmitRequest, reschedule
from greentrain.integrations.slurm_plan import estimate_hours as job_hours
from greentrain.integrations.slurm_plan import submit as submit_job

__all__ = ["submit"]

_EPILOG = """\b
Examples (on a Slurm login node):
  greentrain submit --zone GB --deadline +24 --estimate-hours 4 -- --gres=gpu:1 train.sh  # [needs cluster]
  greentrain submit --place gpu-uk=GB --place gpu-de=DE-LU --deadline +12 -- -t 3:00:00 train.sh  # [needs cluster]
  greentrain submit --reschedule 4242  # [needs cluster]
"""


def _forecasts(provider: str | None, traces: tuple[str, ...], replay_start: str | None, now: datetime):
    if traces:
        if replay_start is None:
            raise click.BadParameter("needed with --replay-trace (the trace time that stands for now)",
                                     param_hint="--replay-start")
        start = parse_deadline(replay_start, now, "--replay-start")
        return TraceForecasts(traces, replay_start=start, now=now)
    return ProviderForecasts(provider or "electricitymaps", clock=SystemClock())


@click.command(epilog=_EPILOG, context_settings={"ignore_unknown_options": True})
@job_flags("submit", defaults={"deadline": "+24"}, notes={
    "zone": "Here: the zone of the default partition (or give --place).",
    "provider": "Here: the live forecast's source (default: electricitymaps).",
    "deadline": "Here: '+H' counts from now."})
@click.option("--place", "places", multiple=True, metavar="[CLUSTER:]PARTITION=ZONE",
              help="A place the job may run and its grid zone; repeat to let greentrain choose.")
@click.option("--estimate-hours", type=float, help="Expected running time (default: the job's --time).")
@click.option("--power-kw", type=float, help="Job power draw, to report expected emissions in grams.")
@click.option("--power-limit-w", type=click.IntRange(min=1), help="GPU power cap the Slurm prolog applies, W.")
@click.option("--enforce-deadline", is_flag=True, help="Also pass --deadline to sbatch (Slurm cancels late jobs).")
@click.option("--replay-trace", "traces", multiple=True, type=click.Path(dir_okay=False),
              help="Plan on a recorded Electricity Maps CSV instead of a live forecast (repeat per zone).")
@click.option("--replay-start", help="Trace time that stands for now (ISO-8601 with zone).")
@click.option("--reschedule", "job_id", metavar="JOBID",
              help="Re-plan a pending job (a requeued one too) and move its start, and its partition among the "
                   "--place it was submitted with when another is cleaner (unless --zone is given).")
@click.option("--dry-run", is_flag=True, help="Print the plan; do not submit.")
@click.argument("sbatch_args", nargs=-1, type=click.UNPROCESSED)
def submit(places: tuple[str, ...], estimate_hours: float | None, power_kw: float | None,
           power_limit_w: int | None, enforce_deadline: bool, job_id: str | None, dry_run: bool,
           sbatch_args: tuple[str, ...], traces: tuple[str, ...], replay_start: str | None,
           **settings: object) -> None:
    """Submit SBATCH_ARGS (options, script, script args) at the lowest-carbon start before the deadline."""
    options = job_options(take_settings(settings, "submit"))  # --zone, --provider, --deadline: the job's checks
    zone, deadline = options.zone, str(options.deadline)
    provider = str(options.provider) if options.provider is not None else None
    now = SystemClock().now()
    forecasts = _forecasts(provider, traces, replay_start, now)
    try:
        if job_id is not None:
            if sbatch_args:
                raise click.UsageError("--reschedule takes no SBATCH_ARGS")
            explicit_deadline = parse_deadline(deadline, now) if _given("deadline") else None
            _reschedule(job_id, forecasts, now, zone, explicit_deadline, estimate_hours)
            return
        place_list = [Place.parse(p) for p in places] or ([Place(zone=zone)] if zone else [])
        if not place_list:
            raise click.UsageError("give --zone ZONE or one or more --place [CLUSTER:]PARTITION=ZONE")
        request = SubmitRequest(
            sbatch_args=tuple(sbatch_args), places=tuple(place_list), deadline=parse_deadline(deadline, now),
            estimate_h=job_hours(sbatch_args, estimate_hours), enforce_deadline=enforce_deadline,
            power_kw=power_kw, power_limit_w=power_limit_w,
        )
        result = submit_job(None if dry_run else SlurmClient(), _by_zone(forecasts, place_list), request, now=now)
        _notes(forecasts)
        _report(result, dry_run)
    finally:
        close = getattr(forecasts, "close", None)
        if callable(close):
            close()


def _reschedule(job_id: str, forecasts, now: datetime, zone: str | None, deadline: datetime | None,
                estimate_h: float | None) -> None:
    result = reschedule(SlurmClient(), job_id, forecasts, now=now, zone=zone, deadline=deadline,
                        estimate_h=estimate_h)
    _notes(forecasts)
    old = result.old_start.isoformat() if result.old_start else "unknown"
    verb = "moved" if result.moved else "kept"
    where = f" to {result.new_place.label}" if result.new_place is not None else ""
    click.echo(f"job {job_id}: {verb}{where} start {old} -> {result.new_start.isoformat()} "
               f"(forecast mean {_g(result.mean_intensity_g_per_kwh)})")
    for note in result.notes:
        click.echo(f"  {note}")


def _given(name: str) -> bool:
    ctx = click.get_current_context()
    return ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT


def _by_zone(forecasts, places: list[Place]) -> dict:
    return {place.zone: forecasts(place.zone) for place in places}


def _notes(forecasts) -> None:
    for note in getattr(forecasts, "notes", []):
        click.echo(f"greentrain: warning: {note}", err=True)


def _g(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} g/kWh"


def _report(result, dry_run: bool) -> None:
    plan = result.plan
    saving = plan.saving_fraction
    vs_now = f", {saving:.0%} below starting now ({_g(plan.run_now.mean_intensity_g_per_kwh)})" if saving else ""
    grams = f", ~{plan.expected_emissions_g:.0f} gCO2e" if plan.expected_emissions_g is not None else ""
    click.echo(f"plan: {plan.place.label} start {result.begin.isoformat()} "
               f"forecast mean {_g(plan.window.mean_intensity_g_per_kwh)}{vs_now}{grams}")
    if dry_run:
        click.echo("dry run: " + shlex.join(["sbatch", *result.sbatch_args]))
    else:
        click.echo(f"submitted job {result.job_id}")

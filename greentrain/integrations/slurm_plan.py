"""What ``greentrain submit`` does, as functions: plan, submit, reschedule.

Forecasts come in as a mapping zone -> points (from a live provider or a
replayed trace, see :mod:`greentrain.integrations.forecasts`), the clock's
``now`` is an argument, and Slurm is reached only through ``SlurmClient``, so
every step is testable on its own and against a real cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from greentrain.clock import ensure_aware_utc
from greentrain.errors import ConfigError
from greentrain.integrations.placement import Place, PlacementPlan, best_window, plan_placement, window_mean
from greentrain.integrations.slurm import (
    JobTag,
    SlurmClient,
    find_option,
    format_slurm_time,
    parse_slurm_time,
    parse_time_limit_s,
    round_up_to_second,
    split_sbatch_args,
)
from greentrain.signals.base import IntensityPoint

__all__ = ["SubmitRequest", "Submission", "Reschedule", "estimate_hours", "submit", "reschedule"]

_RESERVED = ("--begin", "-b", "--parsable")
_MOVE_THRESHOLD_S = 60.0
"""Forecast noise below a minute is not worth touching the scheduler for."""

Forecasts = Mapping[str, Sequence[IntensityPoint]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmitRequest:
    """A user's ``greentrain submit`` call."""

    sbatch_args: tuple[str, ...]
    """sbatch options, then the batch script and its arguments."""
    places: tuple[Place, ...]
    deadline: datetime
    estimate_h: float
    enforce_deadline: bool = False
    """Also pass ``--deadline`` so Slurm cancels the job if it cannot finish in time."""
    power_kw: float | None = None
    power_limit_w: int | None = None
    """Ask the Slurm prolog to cap the job's GPUs at this many watts."""

    def __post_init__(self) -> None:
        options, script = split_sbatch_args(self.sbatch_args)
        if not script or script[0] == "--":
            raise ConfigError("SBATCH_ARGS: name the batch script after '--', e.g. -- --gres=gpu:1 train.sh")
        for arg in options:
            if arg.split("=", 1)[0] in _RESERVED or (arg.startswith("-b") and not arg.startswith("--")):
                raise ConfigError(f"SBATCH_ARGS: {arg!r} is set by greentrain submit; remove it")
        if self.power_limit_w is not None and self.power_limit_w <= 0:
            raise ConfigError(f"--power-limit-w: must be > 0 W, got {self.power_limit_w}")
        if self.estimate_h <= 0:
            raise ConfigError(f"--estimate-hours: must be > 0, got {self.estimate_h}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """The plan and, unless it was a dry run, the job id."""

    plan: PlacementPlan
    begin: datetime
    sbatch_args: list[str]
    job_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reschedule:
    """A re-plan of a pending job."""

    job_id: str
    old_start: datetime | None
    new_start: datetime
    moved: bool
    mean_intensity_g_per_kwh: float | None
    notes: list[str] = field(default_factory=list)
    new_place: Place | None = None
    """The place it was moved to (another partition among those it was submitted with), or None: it stays."""


def estimate_hours(sbatch_args: Sequence[str], given_h: float | None) -> float:
    """``--estimate-hours`` if given, else the job's ``--time`` limit, else a ConfigError naming both."""
    if given_h is not None:
        return given_h
    limit = find_option(sbatch_args, "--time", "-t")
    if limit is None:
        raise ConfigError("--estimate-hours: give the expected running time, or pass --time in SBATCH_ARGS")
    return parse_time_limit_s(limit) / 3600.0


def submit(
    client: SlurmClient | None, forecasts: Forecasts, request: SubmitRequest, *, now: datetime
) -> Submission:
    """Plan the lowest-emission place and start, then ``sbatch --begin`` (``client=None``: dry run)."""
    now = ensure_aware_utc(now, "now")
    plan = plan_placement(
        forecasts,
        request.places,
        now=now,
        deadline=request.deadline,
        duration_s=request.estimate_h * 3600.0,
        power_kw=request.power_kw,
    )
    begin = round_up_to_second(plan.window.start)
    tag = JobTag(zone=plan.place.zone, deadline=request.deadline, estimate_h=request.estimate_h,
                 power_limit_w=request.power_limit_w, places=tuple(p.spec for p in request.places))
    args = _sbatch_args(request, plan.place, begin, tag)
    job_id = client.submit(args) if client is not None else None
    return Submission(plan=plan, begin=begin, sbatch_args=args, job_id=job_id)


def _sbatch_args(request: SubmitRequest, place: Place, begin: datetime, tag: JobTag) -> list[str]:
    options, script = split_sbatch_args(request.sbatch_args)
    ours = [f"--begin={format_slurm_time(begin)}", *place.sbatch_args()]
    if request.enforce_deadline:
        ours.append(f"--deadline={format_slurm_time(request.deadline)}")
    user_comment = find_option(options, "--comment")
    # sbatch keeps the last value of a repeated option: ours go last so the tag survives.
    ours.append(f"--comment={user_comment + ' ' if user_comment else ''}{tag.render()}")
    return [*options, *ours, *script]


def reschedule(
    client: SlurmClient,
    job_id: str,
    forecast_for: Callable[[str], Sequence[IntensityPoint]],
    *,
    now: datetime,
    zone: str | None = None,
    deadline: datetime | None = None,
    estimate_h: float | None = None,
) -> Reschedule:
    """Re-plan a pending job (one requeued after a pause is pending too) against the current forecast and move
    it if the best start changed; a job submitted with several ``--place`` on one cluster (and no ``zone``
    given here) may also move to another of those partitions, when its window there is cleaner."""
    now = ensure_aware_utc(now, "now")
    record = client.job(job_id)
    state = record.get("JobState", "UNKNOWN")
    if state != "PENDING":
        raise ConfigError(f"job {job_id}: is {state}; only a PENDING job can be rescheduled")
    tag: JobTag | None = None
    if zone is None or deadline is None or estimate_h is None:
        tag = JobTag.find(record.get("Comment", ""), job_id)
        deadline, estimate_h = deadline or tag.deadline, estimate_h or tag.estimate_h
    duration_s = estimate_h * 3600.0
    places = _movable_places(tag, record) if zone is None else []
    new_place = None
    if places:
        forecasts = {p.zone: forecast_for(p.zone) for p in places}
        plan = plan_placement(forecasts, places, now=now, deadline=deadline, duration_s=duration_s)
        points, window = forecasts[plan.place.zone], plan.window
        if plan.place.partition != record.get("Partition"):
            new_place = plan.place
    else:
        points = forecast_for(zone or (tag.zone if tag else ""))
        window = best_window(points, now=now, deadline=deadline, duration_s=duration_s)
    new_start = round_up_to_second(window.start)
    if new_place is not None and new_place.partition is not None and tag is not None:
        client.set_partition(job_id, new_place.partition)
        comment = record.get("Comment", "")
        client.set_comment(job_id, comment.replace(tag.render(), replace(tag, zone=new_place.zone).render()))
    old_start = parse_slurm_time(record.get("StartTime", "")) or parse_slurm_time(record.get("EligibleTime", ""))
    moved = old_start is None or abs((new_start - old_start).total_seconds()) >= _MOVE_THRESHOLD_S
    if moved or new_place is not None:
        client.set_start(job_id, new_start)
    notes = []
    if old_start is not None:
        old_mean = window_mean(points, old_start, old_start.astimezone(UTC) + (window.end - window.start))
        if old_mean.mean_intensity_g_per_kwh is not None and moved:
            notes.append(f"old start forecast mean {old_mean.mean_intensity_g_per_kwh:.0f} g/kWh")
    return Reschedule(
        job_id=job_id,
        old_start=old_start,
        new_start=new_start,
        moved=moved or new_place is not None,
        mean_intensity_g_per_kwh=window.mean_intensity_g_per_kwh,
        notes=notes,
        new_place=new_place,
    )


def _movable_places(tag: JobTag | None, record: Mapping[str, str]) -> list[Place]:
    """The places of ``tag`` a pending job can be moved among: partitions of the cluster it is queued on
    (``scontrol update`` cannot move a job between clusters); [] when fewer than two."""
    if tag is None or len(tag.places) < 2:
        return []
    places = [Place.parse(spec) for spec in tag.places]
    current = next((p for p in places if p.partition == record.get("Partition")), None)
    if current is None:
        return []
    same = [p for p in places if p.cluster == current.cluster and p.partition is not None]
    return same if len(same) > 1 else []

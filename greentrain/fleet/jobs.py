"""The jobs of a fleet: what each needs (GPUs, work, deadline) and the ways it can run.

A jobs file is a CSV with the header ``id,submit,gpus,work_hours,deadline_hours``:
``submit`` is ISO-8601 UTC, ``work_hours`` the running time at ``gpus`` GPUs, and
the deadline is ``submit + deadline_hours``. Two optional columns let a job
change its width: ``scaling_profile`` names a scaling-profile CSV (relative to
the jobs file; read by :mod:`greentrain.policies.scaling_profile`) and
``replicas`` says at which of its replica counts the job uses ``gpus`` GPUs
(default: the profile's smallest count). Two more say where a job may run when
the fleet has partitions on several grids: ``partition`` is its home (where its
data is; default: the first partition) and ``places`` the partitions it may run
on, semicolon-separated (default: all of them; ``places`` = its home pins it).
Every bad row is reported at once, one line each.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from greentrain.errors import ConfigError
from greentrain.policies.scaling_profile import ScalingProfile, load_scaling_profile
from greentrain.provenance import Source
from greentrain.userfile import CONFIG_MAX_BYTES, Problems, read_text

__all__ = ["RunOption", "FleetJob", "JOB_COLUMNS", "DEFAULT_PARTITION", "load_jobs", "parse_jobs", "run_options"]

JOB_COLUMNS = ("id", "submit", "gpus", "work_hours", "deadline_hours")
_JOBS_MAX_BYTES = 16 * CONFIG_MAX_BYTES  # a hundred thousand jobs
DEFAULT_PARTITION = "default"
"""The one partition of a fleet given as a single trace and capacity."""


@dataclass(frozen=True, slots=True)
class RunOption:
    """One way to run a job: its width, its speed relative to the nominal width, and its draw."""

    gpus: int
    speed: float
    """Work-hours done per hour of running (1.0 at the nominal width)."""
    power_kw: float
    """The whole job's draw while running at this width, kW."""
    source: Source = Source.ESTIMATED
    """Where ``speed`` and ``power_kw`` come from (a measured scaling profile, or the per-GPU estimate)."""
    partition: str | None = None
    """The partition this option runs on; None: wherever the job is (a fleet of one partition)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetJob:
    """One managed job; ``options[0]`` is its nominal width."""

    id: str
    submit: datetime
    work_h: float
    """Running hours at the nominal width, restart overheads not included."""
    deadline: datetime
    options: tuple[RunOption, ...]
    partition: str = DEFAULT_PARTITION
    """Home: where its data is, and where FIFO and the time-only plan run it."""
    places: tuple[str, ...] = ()
    """The partitions it may run on (empty: every partition of the fleet)."""

    def allowed(self, partitions: Sequence[str]) -> tuple[str, ...]:
        """Its places among ``partitions``, home first (every partition when it names none)."""
        places = self.places or tuple(partitions)
        return tuple(dict.fromkeys([p for p in (self.partition, *places) if p in places and p in partitions]))

    def placed_options(self, capacity: Mapping[str, int], *, home_only: bool = False) -> tuple[RunOption, ...]:
        """Every (place, width) it may run at, each option tagged with its partition: home first, then its
        other places in order; widths a partition cannot hold are left out. ``options[0]`` of the result is
        the nominal width at home (or at its first place where home is not allowed)."""
        places = self.allowed(list(capacity))
        if home_only and self.partition in places:
            places = (self.partition,)
        return tuple(replace(o, partition=p) for p in places for o in self.options if o.gpus <= capacity[p])

    @property
    def gpus(self) -> int:
        """GPUs at the nominal width."""
        return self.options[0].gpus

    @property
    def min_run_h(self) -> float:
        """Shortest possible running time (at the fastest option)."""
        return self.work_h / max(o.speed for o in self.options)


def run_options(gpus: int, power_kw_per_gpu: float, capacity_gpus: int,
                profile: ScalingProfile | None = None, replicas: int | None = None) -> tuple[RunOption, ...]:
    """The job's options: the nominal width first, then every other profile count that fits the cluster.

    Without a profile there is one option, ``gpus`` GPUs at ``power_kw_per_gpu`` each. With
    one, each replica takes ``gpus / replicas`` GPUs; speed and draw at another count scale
    as the profile's measured throughput and power do relative to the nominal count.
    """
    nominal = RunOption(gpus, 1.0, gpus * power_kw_per_gpu, Source.ESTIMATED)
    if profile is None:
        return (nominal,)
    nominal_replicas = replicas if replicas is not None else profile.replica_counts[0]
    per_replica, rest = divmod(gpus, nominal_replicas)
    if rest:
        raise ConfigError(f"gpus {gpus} is not a multiple of replicas {nominal_replicas}")
    base = profile.point(nominal_replicas)
    options = [RunOption(gpus, 1.0, gpus * power_kw_per_gpu, base.source)]
    for point in profile.points:
        width = point.replicas * per_replica
        if point.replicas == nominal_replicas or width > capacity_gpus:
            continue
        options.append(RunOption(width, point.throughput / base.throughput,
                                 gpus * power_kw_per_gpu * point.power_w / base.power_w, point.source))
    return tuple(options)


def _parse_submit(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    # The column is defined as UTC: a time without an offset is read as UTC, one with an offset is converted.
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _number(cells: dict[str, str], key: str, problems: list[str], whole: bool = False) -> float | None:
    text = cells.get(key, "")
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        problems.append(f"{key} {text!r} is not {'a whole number' if whole else 'a number'}")
        return None
    if not math.isfinite(value) or value <= 0:
        problems.append(f"{key} must be > 0, got {text}")
        return None
    return value


@dataclass(frozen=True, slots=True)
class _Row:
    number: int
    cells: dict[str, str]


def _places(cells: dict[str, str], partitions: Mapping[str, int], why: list[str]) -> tuple[str, tuple[str, ...]]:
    """(home, places) from the optional ``partition`` and ``places`` cells; unknown names go to ``why``."""
    known = ", ".join(partitions)
    home = cells.get("partition", "") or next(iter(partitions))
    if home not in partitions:
        why.append(f"partition {home!r} is not a known partition ({known})")
    places = tuple(dict.fromkeys(p.strip() for p in cells.get("places", "").split(";") if p.strip()))
    unknown = [p for p in places if p not in partitions]
    if unknown:
        why.append(f"places names no known partition: {', '.join(unknown)} (known: {known})")
    return home, places


def _widest(gpus: int, home: str, places: tuple[str, ...], partitions: Mapping[str, int]) -> tuple[int, str | None]:
    """The widest partition the job may run on, and the reason it fits none (None when it fits one)."""
    allowed = [p for p in (places or partitions) if p in partitions] or [home] * (home in partitions)
    widest = max((partitions[p] for p in allowed), default=0)
    if gpus <= widest or not allowed:
        return widest, None
    if len(partitions) == 1:
        return widest, f"gpus {gpus} is wider than the cluster ({widest} GPUs)"
    sizes = ", ".join(f"{p}: {partitions[p]}" for p in allowed)
    return widest, f"gpus {gpus} is wider than every partition it may run on ({sizes} GPUs)"


def _job_from_row(row: _Row, *, base_dir: Path | None, power_kw_per_gpu: float, partitions: Mapping[str, int],
                  profiles: dict[str, ScalingProfile]) -> tuple[FleetJob | None, list[str]]:
    cells, why = row.cells, []
    try:
        submit = _parse_submit(cells["submit"])
    except ValueError:
        submit = None
        why.append(f"submit {cells['submit']!r} is not ISO-8601 UTC (e.g. 2022-03-01T09:30:00Z)")
    gpus = _number(cells, "gpus", why, whole=True)
    work_h = _number(cells, "work_hours", why)
    deadline_h = _number(cells, "deadline_hours", why)
    home, places = _places(cells, partitions, why)
    capacity_gpus, too_wide = _widest(int(gpus or 0), home, places, partitions)
    if too_wide and gpus is not None:
        why.append(too_wide)
    if work_h is not None and deadline_h is not None and deadline_h < work_h:
        why.append(f"deadline_hours {deadline_h:g} is shorter than work_hours {work_h:g}")
    profile, replicas = _profile(cells, base_dir, profiles, why)
    if why or submit is None or gpus is None or work_h is None or deadline_h is None:
        return None, why
    try:
        options = run_options(int(gpus), power_kw_per_gpu, capacity_gpus, profile, replicas)
    except ConfigError as e:
        return None, [str(e)]
    return FleetJob(id=cells["id"], submit=submit, work_h=work_h, deadline=submit + timedelta(hours=deadline_h),
                    options=options, partition=home, places=places), []


def _profile(cells: dict[str, str], base_dir: Path | None, profiles: dict[str, ScalingProfile],
             why: list[str]) -> tuple[ScalingProfile | None, int | None]:
    name, replicas_text = cells.get("scaling_profile", ""), cells.get("replicas", "")
    if not name:
        if replicas_text:
            why.append("replicas needs a scaling_profile")
        return None, None
    path = Path(name) if base_dir is None or Path(name).is_absolute() else base_dir / name
    if name not in profiles:
        try:
            profiles[name] = load_scaling_profile(path)
        except ConfigError as e:
            why.append(f"scaling_profile: {str(e).splitlines()[0]}")
            return None, None
    profile = profiles[name]
    if not replicas_text:
        return profile, None
    if not replicas_text.isdigit() or int(replicas_text) not in profile.replica_counts:
        valid = ", ".join(map(str, profile.replica_counts))
        why.append(f"replicas {replicas_text!r} is not a replica count of {name} ({valid})")
        return profile, None
    return profile, int(replicas_text)


def parse_jobs(text: str, source: str, *, capacity_gpus: int | None = None, power_kw_per_gpu: float,
               base_dir: Path | None = None, partitions: Mapping[str, int] | None = None) -> list[FleetJob]:
    """Jobs from CSV ``text``, in file order; one ConfigError line per problem, all at once.

    ``partitions``: name -> GPUs of each partition (home and places must name them); without it, one
    partition of ``capacity_gpus`` GPUs."""
    partitions = _partitions(capacity_gpus, partitions)
    problems = Problems(source)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in JOB_COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"{source}: missing column(s) {', '.join(missing)}; the header is {','.join(JOB_COLUMNS)}")
    reader.fieldnames = header
    jobs: list[FleetJob] = []
    first_row: dict[str, int] = {}
    profiles: dict[str, ScalingProfile] = {}
    for number, raw in enumerate(reader, start=2):
        cells = {k: (v or "").strip() for k, v in raw.items() if k is not None and isinstance(v, str | None)}
        if not any(cells.values()):
            continue
        job_id = cells.get("id", "")
        if not job_id:
            problems.add(f"row {number}", "id is empty")
            continue
        if job_id in first_row:
            problems.add(f"row {number}", f"duplicate id {job_id!r} (first on row {first_row[job_id]})")
            continue
        first_row[job_id] = number
        job, why = _job_from_row(_Row(number, cells), base_dir=base_dir, power_kw_per_gpu=power_kw_per_gpu,
                                 partitions=partitions, profiles=profiles)
        for reason in why:
            problems.add(f"row {number} (id {job_id})", reason)
        if job is not None:
            jobs.append(job)
    problems.raise_if_any()
    if not jobs:
        raise ConfigError(f"{source}: no jobs (only a header)")
    return jobs


def _partitions(capacity_gpus: int | None, partitions: Mapping[str, int] | None) -> dict[str, int]:
    if partitions:
        return dict(partitions)
    if capacity_gpus is None:
        raise ConfigError("jobs: give capacity_gpus or partitions")
    return {DEFAULT_PARTITION: capacity_gpus}


def load_jobs(path: str | Path, *, capacity_gpus: int | None = None, power_kw_per_gpu: float,
              partitions: Mapping[str, int] | None = None) -> list[FleetJob]:
    """Read a jobs CSV (see the module docstring); profiles are found relative to its folder."""
    path = Path(path)
    text = read_text(path, what="jobs file", max_bytes=_JOBS_MAX_BYTES)
    return parse_jobs(text, str(path), capacity_gpus=capacity_gpus, power_kw_per_gpu=power_kw_per_gpu,
                      base_dir=path.parent, partitions=partitions)

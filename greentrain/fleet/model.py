"""What the fleet planner is given and what it returns, in plan hours.

Times inside the planner are plain floats: hours since an epoch the caller
chooses (the simulator: its trace's first hour; the Slurm controller: its
first start, where an "hour" may be compressed for tests). Slot boundaries
sit on whole hours, the unit in which carbon intensity is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from greentrain.errors import ConfigError
from greentrain.fleet.jobs import RunOption

__all__ = ["Partition", "JobStatus", "JobPlan", "FleetPlan", "PlannerConfig", "intensity_for"]


@dataclass(frozen=True, slots=True)
class Partition:
    """A pool of GPUs on one grid zone."""

    name: str
    capacity_gpus: int
    zone: str

    def __post_init__(self) -> None:
        if self.capacity_gpus < 1:
            raise ConfigError(f"partition {self.name}: capacity must be >= 1 GPU, got {self.capacity_gpus}")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobStatus:
    """One unfinished job as the planner sees it at ``now``."""

    job_id: str
    options: tuple[RunOption, ...]
    """Its ways to run; an option that names a partition runs there (the places of a job that may move),
    one that does not runs on ``partition``."""
    remaining_h: float
    """Work left, in hours at the nominal width."""
    deadline_h: float
    partition: str = "default"
    """Where the job is: where it runs, else where its checkpoint is, else (never started) its home."""
    running: int | None = None
    """Index of the option it runs with now; None when it waits or is paused."""
    started: bool = False
    """It has run before, so (re)starting it costs the resume overhead."""
    overhead_left_h: float = 0.0
    """Running jobs: the part of the current resume overhead not yet spent."""
    can_pause: bool = True
    """False for a running job the controller may not stop (Slurm cannot requeue it)."""
    migration_overhead_h: float | None = None
    """Running time without progress when a started job resumes on another partition (checkpoint transfer
    and restart); None: the same as a resume in place. A job's first start costs nothing anywhere."""

    def part(self, option: int) -> str:
        """The partition ``option`` runs on."""
        return self.options[option].partition or self.partition

    def moves(self, option: int) -> bool:
        """Running on ``option`` would take the job's state to another partition (a migration)."""
        return self.started and self.part(option) != self.partition

    @property
    def local_option(self) -> int:
        """The option it runs with now, else the first one where it is (0 where it has none there)."""
        if self.running is not None:
            return self.running
        return next((o for o in range(len(self.options)) if self.part(o) == self.partition), 0)

    def overhead_h(self, option: int, resume_overhead_h: float) -> float:
        """Running time without progress before this job makes progress on ``option`` from now."""
        if self.running == option:
            return self.overhead_left_h
        if self.moves(option) and self.migration_overhead_h is not None:
            return self.migration_overhead_h
        return resume_overhead_h if self.started else 0.0

    def needed_h(self, option: int, resume_overhead_h: float) -> float:
        """Running time to finish on ``option`` starting now, overhead included."""
        return self.overhead_h(option, resume_overhead_h) + self.remaining_h / self.options[option].speed


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    """How the planner solves; the defaults are what ``greentrain fleet`` uses."""

    margin_h: float = 1.0
    """Plan to finish this long before each deadline where the job's slack allows (one slot: the
    plan is continuous in the future but whole slots are run, so rounding needs room)."""
    exact_max_binaries: int = 120
    """Solve the whole horizon with a run/wait decision per job and slot when that needs at most
    this many binary variables; above it only the current slot is binary and the rest an LP."""
    time_limit_s: float = 10.0
    """HiGHS time limit per solve; the best solution found by then is used."""
    mip_rel_gap: float = 1e-4
    relax_above_jobs: int = 1000
    """More jobs than this in one plan: slot 0 is rounded from the LP relaxation alone (as ``rounding='lp'``;
    branching on thousands of binaries does not end in minutes) and the coarse slots after the first
    six hours are twice as wide. Capacity and deadlines are kept the same way (packing check, guard)."""
    rounding: str = "fix"
    """Rolling form, slot 0 in whole jobs: 'fix' solves the LP relaxation, keeps its whole decisions
    and branches on the split ones only (relax and fix); 'milp' branches on all; 'lp' rounds the
    relaxation greedily (deadline-urgent jobs first, then by the LP's share, while they fit). With jobs wider
    than half a partition (``wide_whole_slots``) 'fix' first branches on the wide jobs' binaries alone, the
    other jobs relaxed, and fixes those: the relaxation's whole decisions are the ones the wide jobs'
    binaries exist to correct."""
    stretch_places_above_jobs: int = 50
    """More jobs than this in one plan, some of which may run on several partitions: the coarse slots after
    the first six hours are twice as wide (each place multiplies the model's columns; the far slots are a
    sketch re-planned every hour)."""
    restarts_ahead_h: float = 6.0
    """Stretched plans (``stretch_places_above_jobs``, ``relax_above_jobs``): restarts are priced only in the
    slots starting within this many hours (the hourly ones); further out the sketch may fragment for free. The
    slot-to-slot rows of the restart count are what makes such a model slow (a 300-job plan on three
    partitions: 53 s CPU with them on every slot, 5 s with them on six hours, the same jobs' objective within
    0.4 %); a started job paused now still pays its one whole restart."""
    wide_whole_slots: bool = True
    """A job wider than half its partition holds its GPUs for whole later slots (a binary per slot), as it
    does when run: jobs pause only on the hour, so small jobs beside it keep it out of the hour. Counted
    in GPU-hours instead, the plan starts small jobs in the clean hours meant for the wide one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobPlan:
    """The plan for one job."""

    job_id: str
    option: int | None
    """Option to run with from now until the next decision; None = wait (or pause)."""
    next_start_h: float | None
    """When the plan next runs it (now if ``option`` is set); None when nothing is planned."""
    finish_h: float | None
    """Planned finish."""
    planned_emissions_g: float
    late: bool = False
    """The plan cannot meet this job's deadline (capacity or time): it runs as soon as it can."""
    infeasible_alone: bool = False
    """Not even alone on the cluster, starting now, could it meet its deadline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetPlan:
    """Every job's plan, and how it was found."""

    now_h: float
    jobs: dict[str, JobPlan]
    planned_emissions_g: float
    method: str
    """'exact' (binary per job and slot), 'rolling' (binary now, LP later), or '+late' when deadlines slip."""
    solve_s: float
    planned_gpus: dict[str, np.ndarray] = field(default_factory=dict)
    """Per partition: GPUs the plan uses in each slot (slot 0 = now)."""

    def running(self) -> dict[str, int]:
        """Job id -> option, for the jobs to run now."""
        return {j: p.option for j, p in self.jobs.items() if p.option is not None}


def intensity_for(values: np.ndarray, slots: int) -> np.ndarray:
    """``values`` (g/kWh, slot 0 = the current hour) over ``slots`` slots: past its end, its mean.

    The mean of what is known is the honest guess where no forecast reaches (as the single-job
    planners do, greentrain/policies/window.py).
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0 or not np.isfinite(values).all():
        raise ConfigError("carbon intensity: no usable values for the plan")
    if values.size >= slots:
        return values[:slots]
    return np.concatenate([values, np.full(slots - values.size, float(values.mean()))])

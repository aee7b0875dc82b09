"""Where a fleet job may run, and its moves between partitions as the controller sees them in Slurm.

A cluster's partitions sit on grid zones with their own carbon signal, so the
plan decides where as well as when: each job gets one run option per
partition it may use (its tag's ``places``, else every managed partition),
and the plan's option says where it runs now. The controller moves a pending
job with ``scontrol update JobId=N Partition=P`` before it releases it; a
running job planned elsewhere is paused first (checkpoint, requeue) and moved
once it is pending again.

A move is written to the journal (``JobEntry.moving_to``) before Slurm is
asked, and booked (``moves``, ``FleetJournal.migrations``) when Slurm says it
was made; :func:`settle_move` reconciles the two after a restart, so a move is
neither lost nor made twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from greentrain.fleet import JobPlan, JobStatus, RunOption
from greentrain.integrations.fleet_journal import FleetJournal, JobEntry

__all__ = ["place_options", "likely_place", "settle_move", "book_move"]

_BETTER = 0.99
"""Move a job that waits only where its planned hours are at least 1% cleaner (no flip-flop on noise)."""


def place_options(partition: str, gpus: int, power_kw: float, places: Sequence[str], capacity: Mapping[str, int],
                  *, running: bool) -> tuple[RunOption, ...]:
    """One option per place that holds ``gpus`` GPUs, where the job is first; ``places`` empty: every
    partition of ``capacity``. A running job keeps an option where it runs, even outside its places."""
    allowed = [p for p in (places or tuple(capacity)) if p in capacity]
    ordered = list(dict.fromkeys(([partition] if partition in allowed or running else []) + allowed))
    return tuple(RunOption(gpus, 1.0, power_kw, partition=p) for p in ordered
                 if gpus <= capacity.get(p, 0) or (running and p == partition))


def likely_place(status: JobStatus, planned: JobPlan, zone_of: Mapping[str, str], values: Mapping[str, np.ndarray],
                 first_hour: int) -> str:
    """Where a job the plan starts later should wait: the place of its options whose zone is cleanest over
    its planned hours (where it is, unless another is clearly cleaner).

    The plan says where a job runs now, not where it will start; a job left in a dirty partition with a
    StartTime would be started there by Slurm at that time, before the controller's next round moves it.
    """
    if planned.next_start_h is None:
        return status.partition
    start = max(0, int(math.floor(planned.next_start_h)) - first_hour)
    end_h = planned.finish_h if planned.finish_h is not None else planned.next_start_h + status.remaining_h
    end = max(start + 1, int(math.ceil(end_h)) - first_hour)

    def mean(partition: str) -> float:
        series = values.get(zone_of.get(partition, ""), np.array([]))
        window = series[start:end] if series.size > start else series[-1:]
        return float(window.mean()) if window.size else math.inf

    places = list(dict.fromkeys(status.part(o) for o in range(len(status.options))))
    if not places:
        return status.partition
    best = min(places, key=mean)
    here = mean(status.partition) if status.partition in places else math.inf
    return best if mean(best) < _BETTER * here else status.partition


def settle_move(entry: JobEntry, journal: FleetJournal, partition: str, now: datetime) -> str | None:
    """Reconcile a move the journal says was asked with where Slurm has the job; a line for the report.

    In the new partition: the move is booked (once). Still in the old one: the command was never made
    (a controller stopped between the journal and Slurm; Slurm moves no running job, so one that started
    meanwhile was not moved either): forgotten, the plan decides again.
    """
    if entry.home is None:
        entry.home = partition
    if entry.moving_to is None:
        return None
    target = entry.moving_to
    if partition == target:
        book_move(entry, journal, target, now)
        return f"move to {target} found made in Slurm; booked once"
    entry.moving_to = None
    entry.note(now, f"move to {target} not made by Slurm (still in {partition}); planned again")
    return f"move to {target} not made (still in {partition}); planned again"


def book_move(entry: JobEntry, journal: FleetJournal, target: str, now: datetime) -> None:
    """Count one move made by Slurm."""
    entry.moving_to = None
    entry.moves += 1
    journal.migrations += 1
    entry.note(now, f"moved to partition {target}")

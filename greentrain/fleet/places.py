"""A job that may run on several partitions, seen one partition at a time.

The fleet plan decides where as well as when: a job's options carry the
partition each runs on (``RunOption.partition``), so one model holds every
place. The checks around the plan (latest starts, the deadline guard, the
fallback without a solver) are list schedules on one partition's whole GPUs;
they see a job through :func:`view_at`: its options on that partition only,
with the overhead of getting there (a migration for a started job held
elsewhere) kept, and map what they decide back with the view's indices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from greentrain.fleet.model import JobStatus

__all__ = ["View", "view_at", "group_by_partition", "spans_partitions"]


@dataclass(frozen=True, slots=True)
class View:
    """``status`` restricted to one partition; ``indices[i]`` is view option ``i`` in the full status."""

    status: JobStatus
    indices: tuple[int, ...]

    def full(self, option: int) -> int:
        """The full status's index of view option ``option``."""
        return self.indices[option]


def view_at(st: JobStatus, partition: str) -> View | None:
    """``st`` with only its options on ``partition`` (None when it has none there).

    The view keeps the job's own ``partition`` (where it is), so an option elsewhere still costs the
    migration (``JobStatus.overhead_h``); ``running`` is dropped when the job runs on another partition.
    """
    indices = tuple(o for o in range(len(st.options)) if st.part(o) == partition)
    if not indices:
        return None
    if len(indices) == len(st.options) and st.partition == partition:
        return View(st, indices)
    options = tuple(replace(st.options[o], partition=partition) for o in indices)
    running = indices.index(st.running) if st.running in indices else None
    return View(replace(st, options=options, running=running,
                        can_pause=st.can_pause or running is None), indices)


def group_by_partition(statuses: Iterable[JobStatus], partitions: Sequence[str],
                       chosen: Mapping[str, int] | None = None) -> dict[str, list[View]]:
    """Each job viewed at one partition: where ``chosen`` (job id -> option) runs it, else where it is."""
    groups: dict[str, list[View]] = {p: [] for p in partitions}
    for st in statuses:
        option = (chosen or {}).get(st.job_id)
        where = st.part(option) if option is not None else st.partition
        view = view_at(st, where)
        if view is None:  # it cannot run where it is (its home is not one of its places)
            where = st.part(st.local_option)
            view = view_at(st, where)
        if view is not None:
            groups.setdefault(where, []).append(view)
    return groups


def spans_partitions(statuses: Iterable[JobStatus]) -> bool:
    """Some job may run on more than one partition."""
    return any(len({st.part(o) for o in range(len(st.options))}) > 1 for st in statuses)
